//! Sorted-set commands: ZADD ZINCRBY ZREM ZSCORE ZMSCORE ZCARD ZCOUNT
//! ZLEXCOUNT ZRANK ZREVRANK ZRANGE ZRANGEBYSCORE ZREVRANGEBYSCORE
//! ZRANGEBYLEX ZREVRANGEBYLEX ZREVRANGE ZREMRANGEBYSCORE ZREMRANGEBYRANK
//! ZREMRANGEBYLEX ZPOPMIN ZPOPMAX ZSCAN, and the storage steps the other
//! sorted-set modules share (`zsets_multi`: set algebra, ZRANGESTORE,
//! ZRANDMEMBER; `zsets_pop`: ZMPOP and the blocking pops; `zparse`: scores
//! and ranges).
//!
//! Each member is stored twice: its sub-key `member -> score` (lookups by
//! member) and a score-index entry `score_bytes member -> ""` (ZIDX), which
//! orders the set by score, then member bytes, as Redis's skiplist does.
//! Every change updates both in the same commit group. Ranges by score or
//! by lex read the index from the range's start; ranks are counted through
//! the index from whichever end is nearer.

use std::ops::Bound;

use super::args::{glob, int, is, range};
use super::keys::{parse_cursor, scan_opts};
use super::lists::{check_sizes, positive, Walk};
use super::zparse::{parse_lex_range, parse_score, parse_score_range, LexRange, ScoreRange};
use super::zranks;
use super::{CmdError, CmdResult, Spec};
use crate::encoding::{
    normalize_zero, score_bytes, score_from_bytes, score_of_value, score_value, sub_prefix, zidx_key, Kind, Meta, SUB,
    ZIDX,
};
use crate::exec::Ctx;
use crate::keyspace::Res;
use crate::keyspace::SubRange;
use crate::resp::{format_d2string, format_double, Reply};

const WF: &[&str] = &["write", "denyoom", "fast"];
const RF: &[&str] = &["readonly", "fast"];
const R: &[&str] = &["readonly"];

pub const COMMANDS: &[Spec] = &[
    Spec {
        name: "zadd",
        arity: -4,
        flags: WF,
        keys: (1, 1, 1),
        group: "sorted-set",
        summary: "ZADD key [NX|XX] [GT|LT] [CH] [INCR] score member [score member ...].",
        run: zadd,
    },
    Spec {
        name: "zincrby",
        arity: 4,
        flags: WF,
        keys: (1, 1, 1),
        group: "sorted-set",
        summary: "Increments the score of a member of a sorted set.",
        run: zincrby,
    },
    Spec {
        name: "zrem",
        arity: -3,
        flags: &["write", "fast"],
        keys: (1, 1, 1),
        group: "sorted-set",
        summary: "Removes members from a sorted set.",
        run: zrem,
    },
    Spec {
        name: "zscore",
        arity: 3,
        flags: RF,
        keys: (1, 1, 1),
        group: "sorted-set",
        summary: "Returns the score of a member of a sorted set.",
        run: zscore,
    },
    Spec {
        name: "zmscore",
        arity: -3,
        flags: RF,
        keys: (1, 1, 1),
        group: "sorted-set",
        summary: "Returns the scores of members of a sorted set.",
        run: zmscore,
    },
    Spec {
        name: "zcard",
        arity: 2,
        flags: RF,
        keys: (1, 1, 1),
        group: "sorted-set",
        summary: "Returns the number of members of a sorted set.",
        run: zcard,
    },
    Spec {
        name: "zcount",
        arity: 4,
        flags: RF,
        keys: (1, 1, 1),
        group: "sorted-set",
        summary: "Counts the members of a sorted set with scores in a range.",
        run: zcount,
    },
    Spec {
        name: "zlexcount",
        arity: 4,
        flags: RF,
        keys: (1, 1, 1),
        group: "sorted-set",
        summary: "Counts the members of a sorted set in a lexicographical range.",
        run: zlexcount,
    },
    Spec {
        name: "zrank",
        arity: 3,
        flags: RF,
        keys: (1, 1, 1),
        group: "sorted-set",
        summary: "Returns the rank of a member, by ascending score.",
        run: zrank,
    },
    Spec {
        name: "zrevrank",
        arity: 3,
        flags: RF,
        keys: (1, 1, 1),
        group: "sorted-set",
        summary: "Returns the rank of a member, by descending score.",
        run: zrevrank,
    },
    Spec {
        name: "zrange",
        arity: -4,
        flags: R,
        keys: (1, 1, 1),
        group: "sorted-set",
        summary: "ZRANGE key start stop [BYSCORE|BYLEX] [REV] [LIMIT offset count] [WITHSCORES].",
        run: zrange,
    },
    Spec {
        name: "zrangebyscore",
        arity: -4,
        flags: R,
        keys: (1, 1, 1),
        group: "sorted-set",
        summary: "ZRANGEBYSCORE key min max [WITHSCORES] [LIMIT offset count].",
        run: zrangebyscore,
    },
    Spec {
        name: "zrevrangebyscore",
        arity: -4,
        flags: R,
        keys: (1, 1, 1),
        group: "sorted-set",
        summary: "ZREVRANGEBYSCORE key max min [WITHSCORES] [LIMIT offset count].",
        run: zrevrangebyscore,
    },
    Spec {
        name: "zrangebylex",
        arity: -4,
        flags: R,
        keys: (1, 1, 1),
        group: "sorted-set",
        summary: "ZRANGEBYLEX key min max [LIMIT offset count].",
        run: zrangebylex,
    },
    Spec {
        name: "zrevrangebylex",
        arity: -4,
        flags: R,
        keys: (1, 1, 1),
        group: "sorted-set",
        summary: "ZREVRANGEBYLEX key max min [LIMIT offset count].",
        run: zrevrangebylex,
    },
    Spec {
        name: "zrevrange",
        arity: -4,
        flags: R,
        keys: (1, 1, 1),
        group: "sorted-set",
        summary: "ZREVRANGE key start stop [WITHSCORES]: members by rank, highest score first.",
        run: zrevrange,
    },
    Spec {
        name: "zremrangebyscore",
        arity: 4,
        flags: &["write"],
        keys: (1, 1, 1),
        group: "sorted-set",
        summary: "Removes the members of a sorted set with scores in a range.",
        run: zremrangebyscore,
    },
    Spec {
        name: "zremrangebyrank",
        arity: 4,
        flags: &["write"],
        keys: (1, 1, 1),
        group: "sorted-set",
        summary: "Removes the members of a sorted set in a range of ranks.",
        run: zremrangebyrank,
    },
    Spec {
        name: "zremrangebylex",
        arity: 4,
        flags: &["write"],
        keys: (1, 1, 1),
        group: "sorted-set",
        summary: "Removes the members of a sorted set in a lexicographical range.",
        run: zremrangebylex,
    },
    Spec {
        name: "zpopmin",
        arity: -2,
        flags: &["write", "fast"],
        keys: (1, 1, 1),
        group: "sorted-set",
        summary: "ZPOPMIN key [count]: removes and returns the members with the lowest scores.",
        run: zpopmin,
    },
    Spec {
        name: "zpopmax",
        arity: -2,
        flags: &["write", "fast"],
        keys: (1, 1, 1),
        group: "sorted-set",
        summary: "ZPOPMAX key [count]: removes and returns the members with the highest scores.",
        run: zpopmax,
    },
    Spec {
        name: "zscan",
        arity: -3,
        flags: R,
        keys: (1, 1, 1),
        group: "sorted-set",
        summary: "ZSCAN key cursor [MATCH pattern] [COUNT count]: iterates members and scores.",
        run: zscan,
    },
];

// ---------------------------------------------------------------------------
// storage helpers
// ---------------------------------------------------------------------------

/// The sorted set at `key`, or `None`; WRONGTYPE for other types.
pub(super) fn zset(cx: &mut Ctx, key: &[u8]) -> Res<Option<Meta>> {
    cx.lookup_kind(key, Kind::ZSet)
}

/// The score of `member`, if it is one.
pub(super) fn score_of(cx: &Ctx, key: &[u8], m: &Meta, member: &[u8]) -> Res<Option<f64>> {
    match cx.sub_get(key, m, member)? {
        None => Ok(None),
        Some(v) => score_of_value(&v).map(Some).ok_or_else(|| CmdError::corrupt(key)),
    }
}

/// Gives `member` (whose score was `old`, if a member) the score `score`:
/// its sub-key and its index entry.
pub(super) fn put_member(cx: &mut Ctx, key: &[u8], m: &Meta, member: &[u8], old: Option<f64>, score: f64) -> Res<()> {
    let db = cx.db();
    if let Some(old) = old {
        cx.st.store.delete(zidx_key(db, key, m.version, old, member));
    }
    cx.sub_put(key, m, member, score_value(score))?;
    cx.st.store.put(zidx_key(db, key, m.version, score, member), Vec::new())?;
    Ok(())
}

/// Removes `member` (of score `score`): its sub-key and its index entry.
pub(super) fn del_member(cx: &mut Ctx, key: &[u8], m: &Meta, member: &[u8], score: f64) {
    let db = cx.db();
    cx.sub_del(key, m, member);
    cx.st.store.delete(zidx_key(db, key, m.version, score, member));
}

/// An index field's (member, score).
pub(super) fn entry(key: &[u8], field: Vec<u8>) -> Res<(Vec<u8>, f64)> {
    if field.len() < 8 {
        return Err(CmdError::corrupt(key));
    }
    let score = score_from_bytes(&field[..8]);
    Ok((field[8..].to_vec(), score))
}

/// The first (or last, `rev`) index field.
fn end_field(cx: &Ctx, key: &[u8], m: &Meta, rev: bool) -> Res<Option<Vec<u8>>> {
    let got = cx.sub_range(ZIDX, key, m, Bound::Unbounded, Bound::Unbounded, rev, 1)?;
    Ok(got.into_iter().next().map(|(f, _)| f))
}

/// From `first` (if any) then `walk`: skips `offset` entries, then takes up
/// to `limit` (all if negative) while `keep` holds for the member.
fn take_walk(
    cx: &Ctx,
    key: &[u8],
    first: Option<Vec<u8>>,
    mut walk: Walk,
    offset: i64,
    limit: i64,
    keep: impl Fn(&[u8]) -> bool,
) -> Res<Vec<(Vec<u8>, f64)>> {
    let mut out = Vec::new();
    if offset < 0 {
        return Ok(out);
    }
    let mut skip = offset as u64;
    let mut left = if limit < 0 { u64::MAX } else { limit as u64 };
    let mut pending = first;
    while left > 0 {
        let field = match pending.take() {
            Some(f) => f,
            None => match walk.next(cx)? {
                Some((f, _)) => f,
                None => break,
            },
        };
        if skip > 0 {
            skip -= 1;
            continue;
        }
        let (member, score) = entry(key, field)?;
        if !keep(&member) {
            break;
        }
        out.push((member, score));
        left -= 1;
    }
    Ok(out)
}

/// What a range command selects.
#[derive(Debug, Clone)]
pub(super) enum Sel {
    Rank(i64, i64),
    Score(ScoreRange),
    Lex(LexRange),
}

/// The first chunk a walk needs for `offset` + `limit` entries.
fn hint(offset: i64, limit: i64) -> usize {
    if limit < 0 {
        4096
    } else {
        offset.max(0).saturating_add(limit).saturating_add(1).min(4096) as usize
    }
}

/// The (member, score) pairs `sel` picks, in reply order (descending if
/// `rev`), after skipping `offset` and at most `limit` (negative: all);
/// offset and limit apply to score and lex ranges.
fn select(cx: &Ctx, key: &[u8], m: &Meta, sel: &Sel, rev: bool, offset: i64, limit: i64) -> Res<Vec<(Vec<u8>, f64)>> {
    match sel {
        Sel::Rank(start, stop) => {
            let size = m.size as i64;
            let Some((s, e)) = range(*start, *stop, size) else { return Ok(Vec::new()) };
            // Ranks counted from the tail for REV; as positions from the head:
            let (fs, fe) = if rev { (size - 1 - e, size - 1 - s) } else { (s, e) };
            let n = fe - fs + 1;
            let from_tail = size - 1 - fe;
            if zranks::worth_it(cx, key, m, fs.min(from_tail) as u64) {
                if let Some(first) = zranks::nth(cx, key, m, fs as u64)? {
                    let Some(first) = first else { return Ok(Vec::new()) };
                    let walk = Walk::new(ZIDX, key, m, Bound::Included(first), Bound::Unbounded, false)
                        .first_chunk(hint(0, n));
                    let mut items = take_walk(cx, key, None, walk, 0, n, |_| true)?;
                    if rev {
                        items.reverse();
                    }
                    return Ok(items);
                }
            }
            let mut items = if fs <= from_tail {
                let walk = Walk::new(ZIDX, key, m, Bound::Unbounded, Bound::Unbounded, false).first_chunk(hint(fs, n));
                take_walk(cx, key, None, walk, fs, n, |_| true)?
            } else {
                let walk =
                    Walk::new(ZIDX, key, m, Bound::Unbounded, Bound::Unbounded, true).first_chunk(hint(from_tail, n));
                let mut v = take_walk(cx, key, None, walk, from_tail, n, |_| true)?;
                v.reverse();
                v
            };
            if rev {
                items.reverse();
            }
            Ok(items)
        }
        Sel::Score(r) => {
            let Some((lo, hi)) = r.bounds() else { return Ok(Vec::new()) };
            if offset > 0 && zranks::worth_it(cx, key, m, offset as u64) {
                if let Some(items) = score_page(cx, key, m, (&lo, &hi), rev, offset, limit)? {
                    return Ok(items);
                }
            }
            let walk = Walk::new(ZIDX, key, m, lo, hi, rev).first_chunk(hint(offset, limit));
            take_walk(cx, key, None, walk, offset, limit, |_| true)
        }
        Sel::Lex(r) => {
            if r.is_empty() || offset < 0 {
                return Ok(Vec::new());
            }
            let (Some(first), Some(last)) = (end_field(cx, key, m, false)?, end_field(cx, key, m, true)?) else {
                return Ok(Vec::new());
            };
            if first.len() < 8 || last.len() < 8 {
                return Err(CmdError::corrupt(key));
            }
            if first[..8] == last[..8] {
                // One score throughout (the case lex ranges are meant for): a seek.
                let Some((lo, hi)) = r.bounds_at(&first[..8]) else { return Ok(Vec::new()) };
                let walk = Walk::new(ZIDX, key, m, lo, hi, rev).first_chunk(hint(offset, limit));
                return take_walk(cx, key, None, walk, offset, limit, |_| true);
            }
            // Mixed scores: what Redis's small encoding does, walking in score
            // order from the first member past the start bound.
            if !r.gte_min(&last[8..]) || !r.lte_max(&first[8..]) {
                return Ok(Vec::new());
            }
            let mut walk = Walk::new(ZIDX, key, m, Bound::Unbounded, Bound::Unbounded, rev);
            let start = loop {
                let Some((f, _)) = walk.next(cx)? else { return Ok(Vec::new()) };
                let member = &f[8..];
                let (past_start, within_end) =
                    if rev { (r.lte_max(member), r.gte_min(member)) } else { (r.gte_min(member), r.lte_max(member)) };
                if past_start {
                    if !within_end {
                        return Ok(Vec::new());
                    }
                    break f;
                }
            };
            take_walk(
                cx,
                key,
                Some(start),
                walk,
                offset,
                limit,
                |mem| if rev { r.gte_min(mem) } else { r.lte_max(mem) },
            )
        }
    }
}

/// Members with their scores.
type Scored = Vec<(Vec<u8>, f64)>;

/// A LIMIT page of a score range `[lo, hi]` far from its start: the
/// rank index finds where the page starts, the walk reads only the page;
/// `None` when there is no index (the caller walks from the start). A
/// negative offset is an empty page, as in Redis.
fn score_page(
    cx: &Ctx,
    key: &[u8],
    m: &Meta,
    (lo, hi): (&Bound<Vec<u8>>, &Bound<Vec<u8>>),
    rev: bool,
    offset: i64,
    limit: i64,
) -> Res<Option<Scored>> {
    if offset < 0 {
        return Ok(Some(Vec::new()));
    }
    let pos = if rev {
        let Some(n) = zranks::count(cx, key, m, &Bound::Unbounded, hi)? else { return Ok(None) };
        n as i64 - 1 - offset
    } else {
        let Some(n) = zranks::before(cx, key, m, lo)? else { return Ok(None) };
        (n as i64).saturating_add(offset)
    };
    if pos < 0 {
        return Ok(Some(Vec::new()));
    }
    let Some(first) = zranks::nth(cx, key, m, pos as u64)? else { return Ok(None) };
    let Some(first) = first else { return Ok(Some(Vec::new())) };
    let walk = if rev {
        Walk::new(ZIDX, key, m, lo.clone(), Bound::Included(first), true)
    } else {
        Walk::new(ZIDX, key, m, Bound::Included(first), hi.clone(), false)
    };
    Ok(Some(take_walk(cx, key, None, walk.first_chunk(hint(0, limit)), 0, limit, |_| true)?))
}

/// A list of members, with scores if asked: RESP3 pairs `[member, score]`,
/// RESP2 a flat array with the scores as bulk strings.
pub(super) fn scored_reply(cx: &Ctx, items: Vec<(Vec<u8>, f64)>, withscores: bool) -> Reply {
    if !withscores {
        return Reply::Array(items.into_iter().map(|(m, _)| Reply::Bulk(m)).collect());
    }
    if cx.client.proto >= 3 {
        return Reply::Array(
            items.into_iter().map(|(m, s)| Reply::Array(vec![Reply::Bulk(m), Reply::Double(s)])).collect(),
        );
    }
    Reply::Array(items.into_iter().flat_map(|(m, s)| [Reply::Bulk(m), Reply::Double(s)]).collect())
}

// ---------------------------------------------------------------------------
// commands
// ---------------------------------------------------------------------------

fn zadd(cx: &mut Ctx, a: &[Vec<u8>]) -> CmdResult {
    zadd_generic(cx, a, false)
}

fn zincrby(cx: &mut Ctx, a: &[Vec<u8>]) -> CmdResult {
    zadd_generic(cx, a, true)
}

/// ZADD, and ZINCRBY as ZADD INCR (as in Redis, options are parsed for both).
pub(super) fn zadd_generic(cx: &mut Ctx, a: &[Vec<u8>], mut incr: bool) -> CmdResult {
    let (mut nx, mut xx, mut gt, mut lt, mut ch) = (false, false, false, false, false);
    let mut i = 2;
    while i < a.len() {
        let o = &a[i];
        if is(o, "NX") {
            nx = true;
        } else if is(o, "XX") {
            xx = true;
        } else if is(o, "CH") {
            ch = true;
        } else if is(o, "INCR") {
            incr = true;
        } else if is(o, "GT") {
            gt = true;
        } else if is(o, "LT") {
            lt = true;
        } else {
            break;
        }
        i += 1;
    }
    let pairs = &a[i..];
    if pairs.is_empty() || pairs.len() % 2 != 0 {
        return Err(CmdError::syntax());
    }
    if nx && xx {
        return Err(CmdError::err("XX and NX options at the same time are not compatible"));
    }
    if (nx && (gt || lt)) || (gt && lt) {
        return Err(CmdError::err("GT, LT, and/or NX options at the same time are not compatible"));
    }
    if incr && pairs.len() > 2 {
        return Err(CmdError::err("INCR option supports a single increment-element pair"));
    }
    let scores = pairs.chunks(2).map(|p| parse_score(&p[0])).collect::<Res<Vec<f64>>>()?;
    let key = &a[1];
    let old = zset(cx, key)?;
    let mut m = match &old {
        Some(m) => m.clone(),
        None if xx => return Ok(if incr { Reply::Nil } else { Reply::Int(0) }),
        None => cx.new_collection(Kind::ZSet),
    };
    let longest = pairs.chunks(2).map(|p| p[1].len()).max().unwrap_or(0);
    check_sizes(cx, zidx_key(cx.db(), key, 0, 0.0, b"").len() + longest, 8)?;
    let (mut added, mut updated, mut processed) = (0i64, 0i64, 0i64);
    let mut result = 0.0;
    for (p, &score) in pairs.chunks(2).zip(&scores) {
        let member = &p[1];
        match score_of(cx, key, &m, member)? {
            Some(_) if nx => {}
            Some(cur) => {
                let new = if incr { score + cur } else { score };
                if new.is_nan() {
                    return Err(CmdError::err("resulting score is not a number (NaN)"));
                }
                if (lt && new >= cur) || (gt && new <= cur) {
                    continue;
                }
                processed += 1;
                result = new;
                if new != cur {
                    put_member(cx, key, &m, member, Some(cur), new)?;
                    updated += 1;
                }
            }
            None if xx => {}
            None => {
                put_member(cx, key, &m, member, None, score)?;
                m.size += 1;
                added += 1;
                processed += 1;
                result = score;
            }
        }
    }
    if added > 0 {
        cx.save_collection(key, old.as_ref(), &m)?;
    }
    if incr {
        return Ok(if processed > 0 { Reply::Double(result) } else { Reply::Nil });
    }
    Ok(Reply::Int(if ch { added + updated } else { added }))
}

fn zrem(cx: &mut Ctx, a: &[Vec<u8>]) -> CmdResult {
    let key = &a[1];
    let Some(old) = zset(cx, key)? else { return Ok(Reply::Int(0)) };
    let mut m = old.clone();
    let mut deleted = 0;
    for member in &a[2..] {
        if let Some(score) = score_of(cx, key, &m, member)? {
            del_member(cx, key, &m, member, score);
            // Past the last member, none is found: a count that reaches
            // zero first is damage, refused rather than the rest dropped.
            m.size = CmdError::shrink(key, m.size, 1)?;
            deleted += 1;
        }
    }
    if deleted > 0 {
        cx.save_shrunk(key, &old, &m)?;
    }
    Ok(Reply::Int(deleted))
}

fn zscore(cx: &mut Ctx, a: &[Vec<u8>]) -> CmdResult {
    let Some(m) = zset(cx, &a[1])? else { return Ok(Reply::Nil) };
    Ok(score_of(cx, &a[1], &m, &a[2])?.map_or(Reply::Nil, Reply::Double))
}

fn zmscore(cx: &mut Ctx, a: &[Vec<u8>]) -> CmdResult {
    let m = zset(cx, &a[1])?;
    let mut out = Vec::with_capacity(a.len() - 2);
    for member in &a[2..] {
        let s = match &m {
            Some(m) => score_of(cx, &a[1], m, member)?,
            None => None,
        };
        out.push(s.map_or(Reply::Nil, Reply::Double));
    }
    Ok(Reply::Array(out))
}

fn zcard(cx: &mut Ctx, a: &[Vec<u8>]) -> CmdResult {
    Ok(Reply::Int(zset(cx, &a[1])?.map_or(0, |m| m.size as i64)))
}

fn zcount(cx: &mut Ctx, a: &[Vec<u8>]) -> CmdResult {
    let r = parse_score_range(&a[2], &a[3])?;
    let Some(m) = zset(cx, &a[1])? else { return Ok(Reply::Int(0)) };
    let Some((lo, hi)) = r.bounds() else { return Ok(Reply::Int(0)) };
    Ok(Reply::Int(zranks::count_in(cx, &a[1], &m, lo, hi)? as i64))
}

fn zlexcount(cx: &mut Ctx, a: &[Vec<u8>]) -> CmdResult {
    let r = parse_lex_range(&a[2], &a[3])?;
    let key = &a[1];
    let Some(m) = zset(cx, key)? else { return Ok(Reply::Int(0)) };
    if r.is_empty() {
        return Ok(Reply::Int(0));
    }
    let (first, last) = (end_field(cx, key, &m, false)?, end_field(cx, key, &m, true)?);
    if let (Some(f), Some(l)) = (&first, &last) {
        if f.len() >= 8 && l.len() >= 8 && f[..8] == l[..8] {
            let Some((lo, hi)) = r.bounds_at(&f[..8]) else { return Ok(Reply::Int(0)) };
            return Ok(Reply::Int(zranks::count_in(cx, key, &m, lo, hi)? as i64));
        }
    }
    Ok(Reply::Int(select(cx, key, &m, &Sel::Lex(r), false, 0, -1)?.len() as i64))
}

fn rank(cx: &mut Ctx, a: &[Vec<u8>], rev: bool) -> CmdResult {
    let key = &a[1];
    let Some(m) = zset(cx, key)? else { return Ok(Reply::Nil) };
    let Some(score) = score_of(cx, key, &m, &a[2])? else { return Ok(Reply::Nil) };
    let field = [&score_bytes(normalize_zero(score))[..], &a[2]].concat();
    let below = zranks::count_in(cx, key, &m, Bound::Unbounded, Bound::Excluded(field))?;
    Ok(Reply::Int(if rev { m.size - 1 - below } else { below } as i64))
}

fn zrank(cx: &mut Ctx, a: &[Vec<u8>]) -> CmdResult {
    rank(cx, a, false)
}

fn zrevrank(cx: &mut Ctx, a: &[Vec<u8>]) -> CmdResult {
    rank(cx, a, true)
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) enum By {
    Auto,
    Rank,
    Score,
    Lex,
}

/// A parsed ZRANGE-family request.
#[derive(Debug, Clone)]
pub(super) struct RangeReq {
    pub(super) sel: Sel,
    pub(super) rev: bool,
    pub(super) withscores: bool,
    pub(super) offset: i64,
    pub(super) limit: i64,
}

/// Parses a ZRANGE-family command whose source key is `a[at]` (its range
/// follows; options after that), as Redis's `zrangeGenericCommand`: `by`
/// and `rev` fixed by the command, or `Auto`/`None` where the options
/// choose them; `store` (ZRANGESTORE) refuses WITHSCORES.
pub(super) fn parse_range(a: &[Vec<u8>], at: usize, mut by: By, rev: Option<bool>, store: bool) -> Res<RangeReq> {
    // ZRANGE takes each of REV, BYSCORE|BYLEX once (a second is a syntax error).
    let mut may_choose_rev = rev.is_none();
    let mut rev = rev.unwrap_or(false);
    let (mut withscores, mut offset, mut limit) = (false, 0i64, -1i64);
    let mut j = at + 3;
    while j < a.len() {
        let left = a.len() - j - 1;
        if !store && is(&a[j], "WITHSCORES") {
            withscores = true;
        } else if is(&a[j], "LIMIT") && left >= 2 {
            offset = int(&a[j + 1])?;
            limit = int(&a[j + 2])?;
            j += 2;
        } else if may_choose_rev && is(&a[j], "REV") {
            rev = true;
            may_choose_rev = false;
        } else if by == By::Auto && is(&a[j], "BYLEX") {
            by = By::Lex;
        } else if by == By::Auto && is(&a[j], "BYSCORE") {
            by = By::Score;
        } else {
            return Err(CmdError::syntax());
        }
        j += 1;
    }
    if by == By::Auto {
        by = By::Rank;
    }
    if limit != -1 && by == By::Rank {
        return Err(CmdError::err("syntax error, LIMIT is only supported in combination with either BYSCORE or BYLEX"));
    }
    if withscores && by == By::Lex {
        return Err(CmdError::err("syntax error, WITHSCORES not supported in combination with BYLEX"));
    }
    // Score and lex ranges are given as max, min when reversed.
    let (lo, hi) = if rev && by != By::Rank { (&a[at + 2], &a[at + 1]) } else { (&a[at + 1], &a[at + 2]) };
    let sel = match by {
        By::Score => Sel::Score(parse_score_range(lo, hi)?),
        By::Lex => Sel::Lex(parse_lex_range(lo, hi)?),
        _ => Sel::Rank(int(lo)?, int(hi)?),
    };
    Ok(RangeReq { sel, rev, withscores, offset, limit })
}

/// The (member, score) pairs a parsed range picks from the set `m` at `key`.
pub(super) fn select_range(cx: &Ctx, key: &[u8], m: &Meta, r: &RangeReq) -> Res<Vec<(Vec<u8>, f64)>> {
    select(cx, key, m, &r.sel, r.rev, r.offset, r.limit)
}

/// The ZRANGE family: see [`parse_range`].
fn zrange_generic(cx: &mut Ctx, a: &[Vec<u8>], by: By, rev: Option<bool>) -> CmdResult {
    let r = parse_range(a, 1, by, rev, false)?;
    let Some(m) = zset(cx, &a[1])? else { return Ok(Reply::Array(Vec::new())) };
    let items = select_range(cx, &a[1], &m, &r)?;
    Ok(scored_reply(cx, items, r.withscores))
}

fn zrange(cx: &mut Ctx, a: &[Vec<u8>]) -> CmdResult {
    zrange_generic(cx, a, By::Auto, None)
}

fn zrangebyscore(cx: &mut Ctx, a: &[Vec<u8>]) -> CmdResult {
    zrange_generic(cx, a, By::Score, Some(false))
}

fn zrevrangebyscore(cx: &mut Ctx, a: &[Vec<u8>]) -> CmdResult {
    zrange_generic(cx, a, By::Score, Some(true))
}

fn zrangebylex(cx: &mut Ctx, a: &[Vec<u8>]) -> CmdResult {
    zrange_generic(cx, a, By::Lex, Some(false))
}

fn zrevrangebylex(cx: &mut Ctx, a: &[Vec<u8>]) -> CmdResult {
    zrange_generic(cx, a, By::Lex, Some(true))
}

fn zrevrange(cx: &mut Ctx, a: &[Vec<u8>]) -> CmdResult {
    zrange_generic(cx, a, By::Rank, Some(true))
}

/// Removes what `sel` picks (already parsed, so parse errors come first).
fn zremrange(cx: &mut Ctx, key: &[u8], sel: Sel) -> CmdResult {
    let Some(old) = zset(cx, key)? else { return Ok(Reply::Int(0)) };
    let items = select(cx, key, &old, &sel, false, 0, -1)?;
    if items.is_empty() {
        return Ok(Reply::Int(0));
    }
    let mut m = old.clone();
    for (member, score) in &items {
        del_member(cx, key, &m, member, *score);
    }
    m.size = CmdError::shrink(key, m.size, items.len() as u64)?;
    cx.save_shrunk(key, &old, &m)?;
    Ok(Reply::Int(items.len() as i64))
}

fn zremrangebyscore(cx: &mut Ctx, a: &[Vec<u8>]) -> CmdResult {
    let r = parse_score_range(&a[2], &a[3])?;
    zremrange(cx, &a[1], Sel::Score(r))
}

fn zremrangebyrank(cx: &mut Ctx, a: &[Vec<u8>]) -> CmdResult {
    let (start, stop) = (int(&a[2])?, int(&a[3])?);
    zremrange(cx, &a[1], Sel::Rank(start, stop))
}

fn zremrangebylex(cx: &mut Ctx, a: &[Vec<u8>]) -> CmdResult {
    let r = parse_lex_range(&a[2], &a[3])?;
    zremrange(cx, &a[1], Sel::Lex(r))
}

/// Removes up to `n` members with the lowest (highest if `max`) scores from
/// the set `old` at `key`, deleting the key if it empties: the popped
/// (member, score) pairs in pop order.
pub(super) fn pop_members(cx: &mut Ctx, key: &[u8], old: &Meta, max: bool, n: u64) -> Res<Vec<(Vec<u8>, f64)>> {
    let n = n.min(old.size) as usize;
    let fields = cx.sub_range(ZIDX, key, old, Bound::Unbounded, Bound::Unbounded, max, n)?;
    let mut m = old.clone();
    let mut items = Vec::with_capacity(fields.len());
    for (f, _) in fields {
        let (member, score) = entry(key, f)?;
        del_member(cx, key, &m, &member, score);
        items.push((member, score));
    }
    m.size -= items.len() as u64;
    cx.save_shrunk(key, old, &m)?;
    Ok(items)
}

fn zpop(cx: &mut Ctx, a: &[Vec<u8>], max: bool) -> CmdResult {
    if a.len() > 3 {
        return Err(CmdError::syntax());
    }
    let count = if a.len() == 3 { Some(positive(&a[2])?) } else { None };
    let key = &a[1];
    let Some(old) = zset(cx, key)? else { return Ok(Reply::Array(Vec::new())) };
    if count == Some(0) {
        return Ok(Reply::Array(Vec::new()));
    }
    let items = pop_members(cx, key, &old, max, count.unwrap_or(1))?;
    if count.is_some() && cx.client.proto >= 3 {
        return Ok(scored_reply(cx, items, true));
    }
    Ok(Reply::Array(items.into_iter().flat_map(|(m, s)| [Reply::Bulk(m), Reply::Double(s)]).collect()))
}

fn zpopmin(cx: &mut Ctx, a: &[Vec<u8>]) -> CmdResult {
    zpop(cx, a, false)
}

fn zpopmax(cx: &mut Ctx, a: &[Vec<u8>]) -> CmdResult {
    zpop(cx, a, true)
}

/// Up to this many members, ZSCAN returns everything in one reply (in score
/// order, cursor 0), as Redis does for its small encoding.
const SCAN_ALL_AT_ONCE: u64 = 128;

fn zscan(cx: &mut Ctx, a: &[Vec<u8>]) -> CmdResult {
    let cursor = parse_cursor(&a[2])?;
    let key = &a[1];
    let empty = || Reply::Array(vec![Reply::bulk("0"), Reply::Array(Vec::new())]);
    let Some(m) = zset(cx, key)? else { return Ok(empty()) };
    let o = scan_opts(&a[3..], false)?;
    let wanted = |member: &[u8]| o.pattern.as_ref().map_or(true, |p| glob(p, member, false));
    let mut out = Vec::new();
    // Redis returns a listpack's stored score text (`d2string`) for a small
    // set, `%.17g` for a skiplist; OBJECT ENCODING draws the line at 128.
    let small = m.size <= 128;
    let mut push = |member: Vec<u8>, score: f64| {
        if wanted(&member) {
            out.push(Reply::Bulk(member));
            out.push(Reply::bulk(if small { format_d2string(score) } else { format_double(score) }));
        }
    };
    if m.size <= SCAN_ALL_AT_ONCE {
        for (f, _) in cx.sub_range(ZIDX, key, &m, Bound::Unbounded, Bound::Unbounded, false, usize::MAX)? {
            let (member, score) = entry(key, f)?;
            push(member, score);
        }
        return Ok(Reply::Array(vec![Reply::bulk("0"), Reply::Array(out)]));
    }
    // Larger sets: pages in member order; the cursor stands for the full
    // sub-key of the first member not yet returned.
    let prefix = sub_prefix(SUB, cx.db(), key, m.version);
    let resume = if cursor == 0 { None } else { cx.st.cursors.take(cursor) };
    let from = match resume {
        Some(k) if k.starts_with(&prefix) => Bound::Included(k[prefix.len()..].to_vec()),
        _ => Bound::Unbounded,
    };
    let mut items =
        cx.sub_range(SUB, key, &m, from.as_ref().map(|v| v.as_slice()), Bound::Unbounded, false, o.count + 1)?;
    let next = if items.len() > o.count {
        let (f, _) = items.pop().ok_or_else(|| CmdError::corrupt(key))?;
        cx.st.cursors.save([prefix.as_slice(), &f].concat())
    } else {
        0
    };
    for (member, v) in items {
        let score = score_of_value(&v).ok_or_else(|| CmdError::corrupt(key))?;
        push(member, score);
    }
    Ok(Reply::Array(vec![Reply::bulk(next.to_string()), Reply::Array(out)]))
}
