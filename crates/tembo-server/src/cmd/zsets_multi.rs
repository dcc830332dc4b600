//! Sorted-set commands that read whole sets or build a new one: ZUNION
//! ZINTER ZDIFF ZUNIONSTORE ZINTERSTORE ZDIFFSTORE ZINTERCARD ZRANGESTORE
//! ZRANDMEMBER.
//!
//! They live apart from `zsets` (the single-key commands and the storage
//! steps, which they reuse) because their work is different in kind: they
//! gather members in memory, combine them as Redis 7.0's
//! `zunionInterDiffGenericCommand` does — in the same order, so that sums
//! of floating-point scores round the same way — and write the result as a
//! fresh set ([`store_new`]), replacing the destination whatever it held.
//! Plain sets are accepted as inputs, every member scored 1, as in Redis.

use std::cmp::Ordering;
use std::collections::HashMap;

use super::args::{int, is};
use super::lists::check_sizes;
use super::random::{random_elements, RandomCount};
use super::sets::{read_lookup, read_lookup_any};
use super::zparse::parse_score;
use super::zsets::{parse_range, put_member, score_of, scored_reply, select_range, By};
use super::{CmdError, CmdResult, Spec};
use crate::encoding::{score_of_value, zidx_key, Kind, Meta};
use crate::exec::Ctx;
use crate::keyspace::Res;
use crate::resp::Reply;

const RM: &[&str] = &["readonly", "movablekeys"];
const WM: &[&str] = &["write", "denyoom", "movablekeys"];

pub const COMMANDS: &[Spec] = &[
    Spec {
        name: "zunion",
        arity: -3,
        flags: RM,
        keys: (0, 0, 0),
        group: "sorted-set",
        summary: "ZUNION numkeys key... [WEIGHTS w...] [AGGREGATE SUM|MIN|MAX] [WITHSCORES]: union of sorted sets.",
        run: zunion,
    },
    Spec {
        name: "zinter",
        arity: -3,
        flags: RM,
        keys: (0, 0, 0),
        group: "sorted-set",
        summary: "ZINTER numkeys key... [WEIGHTS w...] [AGGREGATE SUM|MIN|MAX] [WITHSCORES]: intersection.",
        run: zinter,
    },
    Spec {
        name: "zdiff",
        arity: -3,
        flags: RM,
        keys: (0, 0, 0),
        group: "sorted-set",
        summary: "ZDIFF numkeys key... [WITHSCORES]: members of the first set in none of the others.",
        run: zdiff,
    },
    Spec {
        name: "zunionstore",
        arity: -4,
        flags: WM,
        keys: (1, 1, 1),
        group: "sorted-set",
        summary: "ZUNIONSTORE destination numkeys key... [WEIGHTS w...] [AGGREGATE SUM|MIN|MAX]: stores a union.",
        run: zunionstore,
    },
    Spec {
        name: "zinterstore",
        arity: -4,
        flags: WM,
        keys: (1, 1, 1),
        group: "sorted-set",
        summary:
            "ZINTERSTORE destination numkeys key... [WEIGHTS w...] [AGGREGATE SUM|MIN|MAX]: stores an intersection.",
        run: zinterstore,
    },
    Spec {
        name: "zdiffstore",
        arity: -4,
        flags: WM,
        keys: (1, 1, 1),
        group: "sorted-set",
        summary: "ZDIFFSTORE destination numkeys key...: stores a difference.",
        run: zdiffstore,
    },
    Spec {
        name: "zintercard",
        arity: -3,
        flags: RM,
        keys: (0, 0, 0),
        group: "sorted-set",
        summary: "ZINTERCARD numkeys key... [LIMIT limit]: the size of an intersection.",
        run: zintercard,
    },
    Spec {
        name: "zrangestore",
        arity: -5,
        flags: &["write", "denyoom"],
        keys: (1, 2, 1),
        group: "sorted-set",
        summary: "ZRANGESTORE dst src min max [BYSCORE|BYLEX] [REV] [LIMIT offset count]: stores a range.",
        run: zrangestore,
    },
    Spec {
        name: "zrandmember",
        arity: -2,
        flags: &["readonly"],
        keys: (1, 1, 1),
        group: "sorted-set",
        summary: "ZRANDMEMBER key [count [WITHSCORES]]: random members (negative count: with repetition).",
        run: zrandmember,
    },
];

/// A set operation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Op {
    Union,
    Inter,
    Diff,
}

/// How the scores of a member found in several inputs combine.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Aggregate {
    Sum,
    Min,
    Max,
}

/// Redis's `zunionInterAggregate`: a sum that is NaN (inf + -inf) is 0.
fn aggregate(target: &mut f64, v: f64, how: Aggregate) {
    match how {
        Aggregate::Sum => {
            *target += v;
            if target.is_nan() {
                *target = 0.0;
            }
        }
        Aggregate::Min => *target = if v < *target { v } else { *target },
        Aggregate::Max => *target = if v > *target { v } else { *target },
    }
}

/// One input: a sorted set or a set (`None`: the key does not exist).
struct Source<'a> {
    key: &'a [u8],
    meta: Option<Meta>,
    weight: f64,
}

impl Source<'_> {
    fn len(&self) -> u64 {
        self.meta.as_ref().map_or(0, |m| m.size)
    }

    /// Every (member, score); a set's members score 1.
    fn members(&self, cx: &Ctx) -> Res<Vec<(Vec<u8>, f64)>> {
        let Some(m) = &self.meta else { return Ok(Vec::new()) };
        let all = cx.sub_all(self.key, m)?;
        if m.kind == Kind::Set {
            return Ok(all.into_iter().map(|(f, _)| (f, 1.0)).collect());
        }
        all.into_iter()
            .map(|(f, v)| score_of_value(&v).map(|s| (f, s)).ok_or_else(|| CmdError::corrupt(self.key)))
            .collect()
    }

    /// The score of `member`, if it is one.
    fn find(&self, cx: &Ctx, member: &[u8]) -> Res<Option<f64>> {
        match &self.meta {
            None => Ok(None),
            Some(m) if m.kind == Kind::Set => Ok(cx.sub_get(self.key, m, member)?.map(|_| 1.0)),
            Some(m) => score_of(cx, self.key, m, member),
        }
    }
}

/// What a command of the family asked for.
struct Request<'a> {
    sources: Vec<Source<'a>>,
    how: Aggregate,
    withscores: bool,
    /// ZINTERCARD's LIMIT (0: none).
    limit: u64,
}

/// Parses the family's arguments from `numkeys` (at `a[at]`) on, looking
/// the inputs up before the options as Redis does (so WRONGTYPE comes
/// first). `store`: a *STORE command (no WITHSCORES); `card`: ZINTERCARD
/// (LIMIT, and neither WEIGHTS nor AGGREGATE).
fn parse<'a>(cx: &mut Ctx, a: &'a [Vec<u8>], at: usize, op: Op, store: bool, card: bool) -> Res<Request<'a>> {
    let n = int(&a[at])?;
    if n < 1 {
        let name = String::from_utf8_lossy(&a[0]).to_ascii_lowercase();
        return Err(CmdError::err(format!("at least 1 input key is needed for '{name}' command")));
    }
    if n > (a.len() - at - 1) as i64 {
        return Err(CmdError::syntax());
    }
    let n = n as usize;
    let mut sources = Vec::with_capacity(n);
    for key in &a[at + 1..at + 1 + n] {
        let meta = read_lookup_any(cx, key)?;
        if meta.as_ref().is_some_and(|m| m.kind != Kind::ZSet && m.kind != Kind::Set) {
            return Err(CmdError::wrongtype());
        }
        sources.push(Source { key, meta, weight: 1.0 });
    }
    let mut req = Request { sources, how: Aggregate::Sum, withscores: false, limit: 0 };
    let mut j = at + 1 + n;
    while j < a.len() {
        let left = a.len() - j;
        if op != Op::Diff && !card && left > n && is(&a[j], "WEIGHTS") {
            for (i, s) in req.sources.iter_mut().enumerate() {
                s.weight = parse_score(&a[j + 1 + i]).map_err(|_| CmdError::err("weight value is not a float"))?;
            }
            j += 1 + n;
        } else if op != Op::Diff && !card && left >= 2 && is(&a[j], "AGGREGATE") {
            let w = &a[j + 1];
            req.how = if is(w, "SUM") {
                Aggregate::Sum
            } else if is(w, "MIN") {
                Aggregate::Min
            } else if is(w, "MAX") {
                Aggregate::Max
            } else {
                return Err(CmdError::syntax());
            };
            j += 2;
        } else if !store && !card && is(&a[j], "WITHSCORES") {
            req.withscores = true;
            j += 1;
        } else if card && left >= 2 && is(&a[j], "LIMIT") {
            req.limit = match int(&a[j + 1]) {
                Ok(l) if l >= 0 => l as u64,
                _ => return Err(CmdError::err("LIMIT can't be negative")),
            };
            j += 2;
        } else {
            return Err(CmdError::syntax());
        }
    }
    Ok(req)
}

/// (member, score) pairs.
type Scored = Vec<(Vec<u8>, f64)>;

/// The result of `op` in Redis's order (score, then member bytes), or for
/// ZINTERCARD only its size (`card`, the members left empty).
fn combine(cx: &Ctx, req: &mut Request, op: Op, card: bool) -> Res<(Scored, u64)> {
    let mut out = Vec::new();
    let mut count = 0u64;
    let srcs = &mut req.sources;
    match op {
        Op::Inter => {
            // Smallest input first (a stable sort, as glibc's qsort is for
            // this size), so an empty input ends it at once; the scores
            // aggregate in this order.
            srcs.sort_by_key(Source::len);
            if srcs[0].len() > 0 {
                'member: for (member, s) in srcs[0].members(cx)? {
                    let mut score = srcs[0].weight * s;
                    if score.is_nan() {
                        score = 0.0;
                    }
                    for other in &srcs[1..] {
                        let Some(v) = other.find(cx, &member)? else { continue 'member };
                        aggregate(&mut score, v * other.weight, req.how);
                    }
                    count += 1;
                    if card {
                        if req.limit > 0 && count >= req.limit {
                            break;
                        }
                    } else {
                        out.push((member, score));
                    }
                }
            }
        }
        Op::Union => {
            srcs.sort_by_key(Source::len);
            let mut acc: HashMap<Vec<u8>, f64> = HashMap::new();
            for src in srcs.iter() {
                for (member, s) in src.members(cx)? {
                    let mut score = src.weight * s;
                    if score.is_nan() {
                        score = 0.0;
                    }
                    match acc.get_mut(&member) {
                        Some(cur) => aggregate(cur, score, req.how),
                        None => {
                            acc.insert(member, score);
                        }
                    }
                }
            }
            out.extend(acc);
        }
        Op::Diff => {
            // A set minus itself is empty (Redis checks this first too).
            if srcs[0].len() > 0 && !srcs[1..].iter().any(|s| s.key == srcs[0].key) {
                'member: for (member, s) in srcs[0].members(cx)? {
                    for other in &srcs[1..] {
                        if other.find(cx, &member)?.is_some() {
                            continue 'member;
                        }
                    }
                    out.push((member, s));
                }
            }
        }
    }
    out.sort_by(|x, y| x.1.partial_cmp(&y.1).unwrap_or(Ordering::Equal).then_with(|| x.0.cmp(&y.0)));
    Ok((out, count))
}

/// Replaces `dst` (whatever its type and expiry) with a new sorted set of
/// `items` (distinct members), or deletes it when there are none. Replies
/// with the new set's size, as every *STORE command does.
pub(super) fn store_new(cx: &mut Ctx, dst: &[u8], items: Vec<(Vec<u8>, f64)>) -> CmdResult {
    let old = cx.lookup(dst)?;
    if items.is_empty() {
        if let Some(old) = old {
            cx.remove(dst, &old);
        }
        return Ok(Reply::Int(0));
    }
    let longest = items.iter().map(|(m, _)| m.len()).max().unwrap_or(0);
    check_sizes(cx, zidx_key(cx.db(), dst, 0, 0.0, b"").len() + longest, 8)?;
    let mut m = cx.new_collection(Kind::ZSet);
    m.size = items.len() as u64;
    for (member, score) in &items {
        put_member(cx, dst, &m, member, None, *score)?;
    }
    cx.write_meta(dst, old.as_ref(), &m)?;
    Ok(Reply::Int(items.len() as i64))
}

/// ZUNION / ZINTER / ZDIFF (numkeys at `a[1]`).
fn read_op(cx: &mut Ctx, a: &[Vec<u8>], op: Op) -> CmdResult {
    let mut req = parse(cx, a, 1, op, false, false)?;
    let (items, _) = combine(cx, &mut req, op, false)?;
    Ok(scored_reply(cx, items, req.withscores))
}

/// The *STORE forms (destination `a[1]`, numkeys at `a[2]`).
fn store_op(cx: &mut Ctx, a: &[Vec<u8>], op: Op) -> CmdResult {
    let mut req = parse(cx, a, 2, op, true, false)?;
    let (items, _) = combine(cx, &mut req, op, false)?;
    store_new(cx, &a[1], items)
}

fn zunion(cx: &mut Ctx, a: &[Vec<u8>]) -> CmdResult {
    read_op(cx, a, Op::Union)
}

fn zinter(cx: &mut Ctx, a: &[Vec<u8>]) -> CmdResult {
    read_op(cx, a, Op::Inter)
}

fn zdiff(cx: &mut Ctx, a: &[Vec<u8>]) -> CmdResult {
    read_op(cx, a, Op::Diff)
}

fn zunionstore(cx: &mut Ctx, a: &[Vec<u8>]) -> CmdResult {
    store_op(cx, a, Op::Union)
}

fn zinterstore(cx: &mut Ctx, a: &[Vec<u8>]) -> CmdResult {
    store_op(cx, a, Op::Inter)
}

fn zdiffstore(cx: &mut Ctx, a: &[Vec<u8>]) -> CmdResult {
    store_op(cx, a, Op::Diff)
}

fn zintercard(cx: &mut Ctx, a: &[Vec<u8>]) -> CmdResult {
    let mut req = parse(cx, a, 1, Op::Inter, false, true)?;
    let (_, count) = combine(cx, &mut req, Op::Inter, true)?;
    Ok(Reply::Int(count as i64))
}

fn zrangestore(cx: &mut Ctx, a: &[Vec<u8>]) -> CmdResult {
    let r = parse_range(a, 2, By::Auto, None, true)?;
    let items = match read_lookup(cx, &a[2], Kind::ZSet)? {
        Some(m) => select_range(cx, &a[2], &m, &r)?,
        None => Vec::new(),
    };
    store_new(cx, &a[1], items)
}

/// ZRANDMEMBER: HRANDFIELD's rules (and helper), scores for values.
fn zrandmember(cx: &mut Ctx, a: &[Vec<u8>]) -> CmdResult {
    let key = &a[1];
    if a.len() == 2 {
        let Some(m) = read_lookup(cx, key, Kind::ZSet)? else { return Ok(Reply::Nil) };
        let one = random_elements(cx, key, &m, RandomCount::Distinct(1))?;
        return Ok(one.into_iter().next().map_or(Reply::Nil, |(f, _)| Reply::Bulk(f)));
    }
    let count = RandomCount::parse(&a[2])?;
    let withscores = a.len() == 4 && is(&a[3], "WITHSCORES");
    if a.len() > 4 || (a.len() == 4 && !withscores) {
        return Err(CmdError::syntax());
    }
    if withscores && count.out_of_half_range() {
        return Err(CmdError::err("value is out of range"));
    }
    let Some(m) = read_lookup(cx, key, Kind::ZSet)? else { return Ok(Reply::Array(Vec::new())) };
    let picked = random_elements(cx, key, &m, count)?;
    let items = picked
        .into_iter()
        .map(|(f, v)| score_of_value(&v).map(|s| (f, s)).ok_or_else(|| CmdError::corrupt(key)))
        .collect::<Res<Vec<_>>>()?;
    Ok(scored_reply(cx, items, withscores))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn aggregates_like_redis() {
        let mut t = f64::INFINITY;
        aggregate(&mut t, f64::NEG_INFINITY, Aggregate::Sum);
        assert_eq!(t, 0.0);
        let mut t = 1.0;
        aggregate(&mut t, f64::NAN, Aggregate::Min);
        assert_eq!(t, 1.0);
        aggregate(&mut t, f64::NAN, Aggregate::Max);
        assert_eq!(t, 1.0);
        aggregate(&mut t, -2.0, Aggregate::Min);
        assert_eq!(t, -2.0);
        aggregate(&mut t, 5.0, Aggregate::Max);
        assert_eq!(t, 5.0);
    }
}
