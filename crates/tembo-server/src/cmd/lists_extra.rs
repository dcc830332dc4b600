//! More list commands: LPOS LINSERT LMOVE RPOPLPUSH LMPOP, and the pop and
//! push steps the blocking list commands share with them.
//!
//! Lists are stored as in `lists`: element `i` at absolute index `head + i`.
//! LINSERT shifts the shorter side of the list by one (O(n) like Redis's).

use std::ops::Bound;

use super::args::{int, is};
use super::lists::{check_sizes, Walk};
use super::{CmdError, CmdResult, Spec};
use crate::encoding::{be64, sub_key, Kind, Meta, SUB};
use crate::exec::Ctx;
use crate::keyspace::Res;
use crate::keyspace::SubRange;
use crate::resp::Reply;

pub const COMMANDS: &[Spec] = &[
    Spec {
        name: "lpos",
        arity: -3,
        flags: &["readonly"],
        keys: (1, 1, 1),
        group: "list",
        summary: "LPOS key element [RANK rank] [COUNT num] [MAXLEN len]: indexes of matching elements.",
        run: lpos,
    },
    Spec {
        name: "linsert",
        arity: 5,
        flags: &["write", "denyoom"],
        keys: (1, 1, 1),
        group: "list",
        summary: "LINSERT key BEFORE|AFTER pivot element: inserts an element next to another.",
        run: linsert,
    },
    Spec {
        name: "lmove",
        arity: 5,
        flags: &["write", "denyoom"],
        keys: (1, 2, 1),
        group: "list",
        summary: "LMOVE source destination LEFT|RIGHT LEFT|RIGHT: pops an element and pushes it onto another list.",
        run: lmove,
    },
    Spec {
        name: "rpoplpush",
        arity: 3,
        flags: &["write", "denyoom"],
        keys: (1, 2, 1),
        group: "list",
        summary: "Pops the last element of a list and pushes it onto the head of another (LMOVE RIGHT LEFT).",
        run: rpoplpush,
    },
    Spec {
        name: "lmpop",
        arity: -4,
        flags: &["write", "movablekeys"],
        keys: (0, 0, 0),
        group: "list",
        summary: "LMPOP numkeys key... LEFT|RIGHT [COUNT count]: pops elements from the first non-empty list.",
        run: lmpop,
    },
];

/// The field of absolute index `idx`.
fn at(idx: u64) -> Vec<u8> {
    idx.to_be_bytes().to_vec()
}

/// `LEFT` (true) or `RIGHT` (false); anything else is a syntax error.
pub(super) fn side(arg: &[u8]) -> Res<bool> {
    if is(arg, "left") {
        Ok(true)
    } else if is(arg, "right") {
        Ok(false)
    } else {
        Err(CmdError::syntax())
    }
}

/// Pops up to `n` elements (n >= 1) from the list `key` whose metadata is
/// `old`, from the head if `left`, in pop order.
pub(super) fn pop_n(cx: &mut Ctx, key: &[u8], old: &Meta, left: bool, n: u64) -> Res<Vec<Vec<u8>>> {
    let n = n.min(old.size);
    if n == 0 {
        return Ok(Vec::new());
    }
    let (lo, hi) = if left { (old.head, old.head + n - 1) } else { (old.head + old.size - n, old.head + old.size - 1) };
    let items = cx.sub_range(SUB, key, old, Bound::Included(&at(lo)), Bound::Included(&at(hi)), !left, n as usize)?;
    if items.len() as u64 != n {
        return Err(CmdError::corrupt(key));
    }
    let mut m = old.clone();
    for (f, _) in &items {
        cx.sub_del(key, &m, f);
    }
    m.size -= n;
    if left {
        m.head += n;
    }
    cx.save_shrunk(key, old, &m)?;
    Ok(items.into_iter().map(|(_, v)| v).collect())
}

/// Pushes `value` onto the list `key` (created if missing; the caller has
/// checked its type), at the head if `left`.
pub(super) fn push_one(cx: &mut Ctx, key: &[u8], value: Vec<u8>, left: bool) -> Res<()> {
    let old = cx.lookup_kind(key, Kind::List)?;
    let mut m = match &old {
        Some(m) => m.clone(),
        None => cx.new_collection(Kind::List),
    };
    check_sizes(cx, sub_key(cx.db(), key, 0, &at(0)).len(), value.len())?;
    let idx = if left {
        if m.head == 0 {
            return Err(CmdError::err("list index space exhausted"));
        }
        m.head -= 1;
        m.head
    } else {
        if m.head + m.size == u64::MAX {
            return Err(CmdError::err("list index space exhausted"));
        }
        m.head + m.size
    };
    cx.sub_put(key, &m, &at(idx), value)?;
    m.size += 1;
    cx.save_collection(key, old.as_ref(), &m)
}

/// LMOVE once the source is known to be a non-empty list: checks the
/// destination's type, then pops and pushes. Returns the element.
pub(super) fn move_one(
    cx: &mut Ctx,
    src: &[u8],
    src_meta: &Meta,
    dst: &[u8],
    from_left: bool,
    to_left: bool,
) -> CmdResult {
    cx.lookup_kind(dst, Kind::List)?;
    if src == dst && src_meta.size == 1 {
        // Popping a list's only element and pushing it back leaves it as it
        // was: Redis keeps the key, and its TTL, and signals the change.
        let v = cx.sub_get(src, src_meta, &at(src_meta.head))?.ok_or_else(|| CmdError::corrupt(src))?;
        let seen = cx.client.db;
        cx.st.touch(seen, src, Some(&mut *cx.client));
        return Ok(Reply::Bulk(v));
    }
    let v = pop_n(cx, src, src_meta, from_left, 1)?.pop().ok_or_else(|| CmdError::corrupt(src))?;
    push_one(cx, dst, v.clone(), to_left)?;
    Ok(Reply::Bulk(v))
}

fn lmove_impl(cx: &mut Ctx, src: &[u8], dst: &[u8], from_left: bool, to_left: bool) -> CmdResult {
    let Some(m) = cx.lookup_kind(src, Kind::List)? else { return Ok(Reply::Nil) };
    move_one(cx, src, &m, dst, from_left, to_left)
}

fn lmove(cx: &mut Ctx, a: &[Vec<u8>]) -> CmdResult {
    let (from_left, to_left) = (side(&a[3])?, side(&a[4])?);
    lmove_impl(cx, &a[1], &a[2], from_left, to_left)
}

fn rpoplpush(cx: &mut Ctx, a: &[Vec<u8>]) -> CmdResult {
    lmove_impl(cx, &a[1], &a[2], false, true)
}

/// LMPOP's and BLMPOP's arguments from `numkeys` on: (keys, left, count);
/// ZMPOP's and BZMPOP's too, with their MIN|MAX read by `which` instead of
/// [`side`].
pub(super) fn parse_mpop(
    a: &[Vec<u8>],
    numkeys_at: usize,
    which: fn(&[u8]) -> Res<bool>,
) -> Res<(Vec<Vec<u8>>, bool, u64)> {
    let numkeys = match int(&a[numkeys_at]) {
        Ok(n) if n >= 1 => n as u64,
        _ => return Err(CmdError::err("numkeys should be greater than 0")),
    };
    let where_at = (numkeys_at as u64).checked_add(numkeys + 1).filter(|&w| w < a.len() as u64);
    let Some(where_at) = where_at.map(|w| w as usize) else { return Err(CmdError::syntax()) };
    let left = which(&a[where_at])?;
    let mut count = None;
    let mut j = where_at + 1;
    while j < a.len() {
        if count.is_none() && is(&a[j], "count") && j + 1 < a.len() {
            count = Some(match int(&a[j + 1]) {
                Ok(n) if n >= 1 => n as u64,
                _ => return Err(CmdError::err("count should be greater than 0")),
            });
            j += 2;
        } else {
            return Err(CmdError::syntax());
        }
    }
    Ok((a[numkeys_at + 1..where_at].to_vec(), left, count.unwrap_or(1)))
}

/// Pops from the first non-empty list of `keys`: `[key, [elements]]`, or
/// `None` if all are empty (WRONGTYPE for a key of another type on the way).
pub(super) fn mpop_first(cx: &mut Ctx, keys: &[Vec<u8>], left: bool, count: u64) -> Res<Option<Reply>> {
    for key in keys {
        if let Some(m) = cx.lookup_kind(key, Kind::List)? {
            let items = pop_n(cx, key, &m, left, count)?;
            return Ok(Some(Reply::Array(vec![Reply::bulk(key), Reply::bulks(items)])));
        }
    }
    Ok(None)
}

fn lmpop(cx: &mut Ctx, a: &[Vec<u8>]) -> CmdResult {
    let (keys, left, count) = parse_mpop(a, 1, side)?;
    Ok(mpop_first(cx, &keys, left, count)?.unwrap_or(Reply::NilArray))
}

/// LPOS's COUNT or MAXLEN number: Redis gives one text for a negative
/// number and for none.
fn non_negative(arg: &[u8], what: &str) -> Res<i64> {
    int(arg).ok().filter(|n| *n >= 0).ok_or_else(|| CmdError::err(format!("{what} can't be negative")))
}

fn lpos(cx: &mut Ctx, a: &[Vec<u8>]) -> CmdResult {
    let (mut rank, mut count, mut maxlen) = (1i64, None::<u64>, 0u64);
    let mut j = 3;
    while j < a.len() {
        let more = j + 1 < a.len();
        if is(&a[j], "rank") && more {
            rank = int(&a[j + 1])?;
            if rank == 0 {
                return Err(CmdError::err(
                    "RANK can't be zero: use 1 to start from the first match, 2 from the second ... or use negative to start from the end of the list",
                ));
            }
        } else if is(&a[j], "count") && more {
            let n = non_negative(&a[j + 1], "COUNT")?;
            count = Some(n as u64);
        } else if is(&a[j], "maxlen") && more {
            let n = non_negative(&a[j + 1], "MAXLEN")?;
            maxlen = n as u64;
        } else {
            return Err(CmdError::syntax());
        }
        j += 2;
    }
    let key = &a[1];
    let none = || if count.is_some() { Reply::Array(Vec::new()) } else { Reply::Nil };
    let Some(m) = cx.lookup_kind(key, Kind::List)? else { return Ok(none()) };
    let rev = rank < 0;
    // Redis 7.0 negates a negative rank in a C long: LONG_MIN stays
    // negative and then matches at once, like -1.
    let mut skip = if rank == i64::MIN { 0 } else { rank.unsigned_abs() - 1 };
    let want = match count {
        // With RANK LONG_MIN, Redis 7.0's `matches - rank + 1` overflows
        // and never reaches COUNT: every match is returned.
        Some(_) if rank == i64::MIN => u64::MAX,
        Some(0) => u64::MAX,
        Some(n) => n,
        None => 1,
    };
    let mut walk = Walk::new(SUB, key, &m, Bound::Included(at(m.head)), Bound::Included(at(m.head + m.size - 1)), rev);
    let (mut seen, mut found) = (0u64, Vec::new());
    while let Some((f, v)) = walk.next(cx)? {
        if maxlen != 0 && seen >= maxlen {
            break;
        }
        seen += 1;
        if v == a[2] {
            if skip > 0 {
                skip -= 1;
                continue;
            }
            found.push(Reply::Int((be64(&f) - m.head) as i64));
            if found.len() as u64 >= want {
                break;
            }
        }
    }
    Ok(match count {
        Some(_) => Reply::Array(found),
        None => found.pop().unwrap_or(Reply::Nil),
    })
}

fn linsert(cx: &mut Ctx, a: &[Vec<u8>]) -> CmdResult {
    let after = if is(&a[2], "after") {
        true
    } else if is(&a[2], "before") {
        false
    } else {
        return Err(CmdError::syntax());
    };
    let key = &a[1];
    let Some(old) = cx.lookup_kind(key, Kind::List)? else { return Ok(Reply::Int(0)) };
    let (head, size) = (old.head, old.size);
    // The pivot's position.
    let mut walk = Walk::new(SUB, key, &old, Bound::Included(at(head)), Bound::Included(at(head + size - 1)), false);
    let mut pivot = None;
    while let Some((f, v)) = walk.next(cx)? {
        if v == a[3] {
            pivot = Some(be64(&f) - head);
            break;
        }
    }
    let Some(p) = pivot else { return Ok(Reply::Int(-1)) };
    check_sizes(cx, sub_key(cx.db(), key, 0, &at(0)).len(), a[4].len())?;
    // The new element's position; elements from there on (or before it) shift.
    let q = if after { p + 1 } else { p };
    let mut m = old.clone();
    if q <= size - q && head > 0 {
        // Elements [0, q) move one toward the head.
        if q > 0 {
            let mut walk = Walk::new(SUB, key, &old, Bound::Included(at(head)), Bound::Excluded(at(head + q)), false);
            while let Some((f, v)) = walk.next(cx)? {
                cx.sub_put(key, &m, &at(be64(&f) - 1), v)?;
            }
        }
        m.head -= 1;
        cx.sub_put(key, &m, &at(head - 1 + q), a[4].clone())?;
    } else {
        if head + size == u64::MAX {
            return Err(CmdError::err("list index space exhausted"));
        }
        // Elements [q, size) move one toward the tail.
        if q < size {
            let mut walk =
                Walk::new(SUB, key, &old, Bound::Included(at(head + q)), Bound::Included(at(head + size - 1)), true);
            while let Some((f, v)) = walk.next(cx)? {
                cx.sub_put(key, &m, &at(be64(&f) + 1), v)?;
            }
        }
        cx.sub_put(key, &m, &at(head + q), a[4].clone())?;
    }
    m.size += 1;
    cx.save_collection(key, Some(&old), &m)?;
    Ok(Reply::Int(m.size as i64))
}
