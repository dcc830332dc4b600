//! Set commands: SADD SREM SMEMBERS SISMEMBER SMISMEMBER SCARD SPOP
//! SRANDMEMBER SSCAN SMOVE SINTER SUNION SDIFF SINTERSTORE SUNIONSTORE
//! SDIFFSTORE SINTERCARD.
//!
//! A set is a metadata record (its `size` is the member count) plus one
//! sub-key per member with an empty value. Members come back in byte order,
//! where Redis would use its hash table's order.
//!
//! This module also holds what the hash commands share with it: the
//! SCAN-family page ([`scan_elements`]) and the counted read lookup
//! ([`read_lookup`]). Random selection is in `random`.

use std::collections::BTreeSet;
use std::ops::Bound;

use super::args::{glob, int, is};
use super::keys::{parse_cursor, scan_opts};
use super::random::{random_elements, RandomCount};
use super::{CmdError, CmdResult, Spec};
use crate::encoding::{sub_prefix, Kind, Meta, SUB};
use crate::exec::Ctx;
use crate::keyspace::Res;
use crate::keyspace::SubRange;
use crate::resp::Reply;

const WF: &[&str] = &["write", "denyoom", "fast"];
const WDF: &[&str] = &["write", "fast"];
const W: &[&str] = &["write", "denyoom"];
const RF: &[&str] = &["readonly", "fast"];
const R: &[&str] = &["readonly"];

pub const COMMANDS: &[Spec] = &[
    Spec {
        name: "sadd",
        arity: -3,
        flags: WF,
        keys: (1, 1, 1),
        group: "set",
        summary: "Adds members to a set; returns how many were new.",
        run: sadd,
    },
    Spec {
        name: "srem",
        arity: -3,
        flags: WDF,
        keys: (1, 1, 1),
        group: "set",
        summary: "Removes members from a set; the set goes when its last member does.",
        run: srem,
    },
    Spec {
        name: "smembers",
        arity: 2,
        flags: R,
        keys: (1, 1, 1),
        group: "set",
        summary: "Returns every member of a set.",
        run: smembers,
    },
    Spec {
        name: "sismember",
        arity: 3,
        flags: RF,
        keys: (1, 1, 1),
        group: "set",
        summary: "Whether a member belongs to a set.",
        run: sismember,
    },
    Spec {
        name: "smismember",
        arity: -3,
        flags: RF,
        keys: (1, 1, 1),
        group: "set",
        summary: "Whether each of several members belongs to a set.",
        run: smismember,
    },
    Spec {
        name: "scard",
        arity: 2,
        flags: RF,
        keys: (1, 1, 1),
        group: "set",
        summary: "Returns the number of members of a set.",
        run: scard,
    },
    Spec {
        name: "spop",
        arity: -2,
        flags: WDF,
        keys: (1, 1, 1),
        group: "set",
        summary: "SPOP key [count]: removes and returns random members.",
        run: spop,
    },
    Spec {
        name: "srandmember",
        arity: -2,
        flags: R,
        keys: (1, 1, 1),
        group: "set",
        summary: "SRANDMEMBER key [count]: returns random members (negative count: with repetition).",
        run: srandmember,
    },
    Spec {
        name: "sscan",
        arity: -3,
        flags: R,
        keys: (1, 1, 1),
        group: "set",
        summary: "SSCAN key cursor [MATCH p] [COUNT n]: iterates the members.",
        run: sscan,
    },
    Spec {
        name: "smove",
        arity: 4,
        flags: WDF,
        keys: (1, 2, 1),
        group: "set",
        summary: "Moves a member from one set to another.",
        run: smove,
    },
    Spec {
        name: "sinter",
        arity: -2,
        flags: R,
        keys: (1, -1, 1),
        group: "set",
        summary: "Returns the intersection of sets.",
        run: sinter,
    },
    Spec {
        name: "sunion",
        arity: -2,
        flags: R,
        keys: (1, -1, 1),
        group: "set",
        summary: "Returns the union of sets.",
        run: sunion,
    },
    Spec {
        name: "sdiff",
        arity: -2,
        flags: R,
        keys: (1, -1, 1),
        group: "set",
        summary: "Returns the members of the first set not in the others.",
        run: sdiff,
    },
    Spec {
        name: "sinterstore",
        arity: -3,
        flags: W,
        keys: (1, -1, 1),
        group: "set",
        summary: "Stores the intersection of sets in a key.",
        run: sinterstore,
    },
    Spec {
        name: "sunionstore",
        arity: -3,
        flags: W,
        keys: (1, -1, 1),
        group: "set",
        summary: "Stores the union of sets in a key.",
        run: sunionstore,
    },
    Spec {
        name: "sdiffstore",
        arity: -3,
        flags: W,
        keys: (1, -1, 1),
        group: "set",
        summary: "Stores the difference of sets in a key.",
        run: sdiffstore,
    },
    Spec {
        name: "sintercard",
        arity: -3,
        flags: &["readonly", "movablekeys"],
        keys: (0, 0, 0),
        group: "set",
        summary: "SINTERCARD numkeys key... [LIMIT n]: the size of the intersection of sets.",
        run: sintercard,
    },
];

// ----------------------------------------------------------------------------
// shared with the hash commands
// ----------------------------------------------------------------------------

/// Looks `key` up for a read command: counts a keyspace hit or miss (as
/// Redis's `lookupKeyRead` does), then WRONGTYPE if it is not a `kind`.
pub(super) fn read_lookup(cx: &mut Ctx, key: &[u8], kind: Kind) -> Res<Option<Meta>> {
    match read_lookup_any(cx, key)? {
        Some(m) if m.kind != kind => Err(CmdError::wrongtype()),
        other => Ok(other),
    }
}

/// [`read_lookup`] of a key of any type (the caller checks it).
pub(super) fn read_lookup_any(cx: &mut Ctx, key: &[u8]) -> Res<Option<Meta>> {
    let m = cx.lookup(key)?;
    if m.is_some() {
        cx.st.stats.hits += 1;
    } else {
        cx.st.stats.misses += 1;
    }
    Ok(m)
}

/// Collections up to this size return every element in one HSCAN/SSCAN
/// call whatever COUNT says, as Redis's compact encodings do.
const SMALL_SCAN: u64 = 128;

/// HSCAN / SSCAN `key cursor [MATCH p] [COUNT n]` (`a` as the command has
/// it): one page of elements, fields and values when `with_values`.
///
/// The cursor stands for the full sub-key of the first element not yet
/// returned; a page resumes there, inclusive. A cursor saved for another
/// collection (or an older incarnation of this key) starts over.
pub(super) fn scan_elements(cx: &mut Ctx, a: &[Vec<u8>], kind: Kind, with_values: bool) -> CmdResult {
    let empty = || Ok(Reply::Array(vec![Reply::bulk("0"), Reply::Array(Vec::new())]));
    // Redis's order: the cursor, then the key, then the options.
    let cursor = parse_cursor(&a[2])?;
    let key = &a[1];
    let Some(m) = read_lookup(cx, key, kind)? else { return empty() };
    let o = scan_opts(&a[3..], false)?;
    if let Some(all) = compact_elements(cx, key, &m)? {
        // Redis returns a listpack or an intset whole, in its order, whatever the cursor.
        return Ok(Reply::Array(vec![Reply::bulk("0"), Reply::Array(page_reply(all, &o.pattern, with_values))]));
    }
    let prefix = sub_prefix(SUB, cx.db(), key, m.version);
    let resume = if cursor == 0 { None } else { cx.st.cursors.take(cursor) };
    let from = resume.as_deref().and_then(|r| r.strip_prefix(prefix.as_slice()));
    let count = if m.size <= SMALL_SCAN { usize::MAX } else { o.count };
    let lo = from.map_or(Bound::Unbounded, Bound::Included);
    let mut page = cx.sub_range(SUB, key, &m, lo, Bound::Unbounded, false, count.saturating_add(1))?;
    let next = if page.len() > count {
        let (stop, _) = page.pop().unwrap_or_default();
        let mut full = prefix;
        full.extend_from_slice(&stop);
        cx.st.cursors.save(full)
    } else {
        0
    };
    Ok(Reply::Array(vec![Reply::bulk(next.to_string()), Reply::Array(page_reply(page, &o.pattern, with_values))]))
}

/// The elements of a page that match `pattern`, flat (fields and values
/// when `with_values`).
fn page_reply(page: Vec<(Vec<u8>, Vec<u8>)>, pattern: &Option<Vec<u8>>, with_values: bool) -> Vec<Reply> {
    let mut out = Vec::new();
    for (field, value) in page {
        if pattern.as_ref().map_or(true, |p| glob(p, &field, false)) {
            out.push(Reply::Bulk(field));
            if with_values {
                out.push(Reply::Bulk(value));
            }
        }
    }
    out
}

/// Every element of a hash Redis would keep as a listpack, or of a set it
/// would keep as an intset, in Redis's order (insertion; numeric); `None`
/// for a collection Redis would keep in a hash table.
fn compact_elements(cx: &mut Ctx, key: &[u8], m: &Meta) -> Res<Option<crate::rdb_value::Pairs>> {
    match m.kind {
        Kind::Hash if super::hash_order::is_ordered(m) => {
            let mut all = cx.sub_all(key, m)?;
            super::hash_order::sort(m, &mut all);
            Ok(Some(all))
        }
        Kind::Set if m.size <= super::keys::intset_limit(cx) => {
            let mut members: Vec<Vec<u8>> = cx.sub_all(key, m)?.into_iter().map(|(member, _)| member).collect();
            let intset = intset_sort(&mut members);
            Ok(intset.then(|| members.into_iter().map(|member| (member, Vec::new())).collect()))
        }
        _ => Ok(None),
    }
}

/// Sorts `members` in numeric order when every one is an integer in
/// canonical form (an intset's members, as Redis walks them); whether it
/// did.
fn intset_sort(members: &mut [Vec<u8>]) -> bool {
    if !members.iter().all(|m| crate::rdb::canonical_i64(m).is_some()) {
        return false;
    }
    members.sort_by_cached_key(|m| crate::rdb::canonical_i64(m).unwrap_or_default());
    true
}

// ----------------------------------------------------------------------------
// set commands
// ----------------------------------------------------------------------------

/// The set at `key` for a write, or `None`; WRONGTYPE for other types.
fn set(cx: &mut Ctx, key: &[u8]) -> Res<Option<Meta>> {
    cx.lookup_kind(key, Kind::Set)
}

/// Writes `meta` back unless nothing about it changed.
fn save(cx: &mut Ctx, key: &[u8], old: Option<&Meta>, meta: &Meta) -> Res<()> {
    if old == Some(meta) {
        return Ok(());
    }
    cx.save_collection(key, old, meta)
}

fn sadd(cx: &mut Ctx, a: &[Vec<u8>]) -> CmdResult {
    let old = set(cx, &a[1])?;
    let mut m = match &old {
        Some(m) => m.clone(),
        None => cx.new_collection(Kind::Set),
    };
    let mut added = 0;
    for member in &a[2..] {
        if !cx.sub_exists(&a[1], &m, member)? {
            cx.sub_put(&a[1], &m, member, Vec::new())?;
            added += 1;
        }
    }
    m.size += added as u64;
    save(cx, &a[1], old.as_ref(), &m)?;
    Ok(Reply::Int(added))
}

fn srem(cx: &mut Ctx, a: &[Vec<u8>]) -> CmdResult {
    let Some(old) = set(cx, &a[1])? else { return Ok(Reply::Int(0)) };
    let mut m = old.clone();
    let mut removed = 0;
    for member in &a[2..] {
        if cx.sub_exists(&a[1], &m, member)? {
            cx.sub_del(&a[1], &m, member);
            removed += 1;
        }
    }
    m.size = CmdError::shrink(&a[1], m.size, removed as u64)?;
    if removed > 0 {
        cx.save_shrunk(&a[1], &old, &m)?;
    }
    Ok(Reply::Int(removed))
}

fn smembers(cx: &mut Ctx, a: &[Vec<u8>]) -> CmdResult {
    let members = match read_lookup(cx, &a[1], Kind::Set)? {
        Some(m) => cx.sub_all(&a[1], &m)?,
        None => Vec::new(),
    };
    Ok(set_reply(cx, members.into_iter().map(|(f, _)| f).collect()))
}

fn sismember(cx: &mut Ctx, a: &[Vec<u8>]) -> CmdResult {
    let Some(m) = read_lookup(cx, &a[1], Kind::Set)? else { return Ok(Reply::Int(0)) };
    Ok(Reply::Int(cx.sub_exists(&a[1], &m, &a[2])? as i64))
}

fn smismember(cx: &mut Ctx, a: &[Vec<u8>]) -> CmdResult {
    let m = read_lookup(cx, &a[1], Kind::Set)?;
    let mut out = Vec::with_capacity(a.len() - 2);
    for member in &a[2..] {
        let there = match &m {
            Some(m) => cx.sub_exists(&a[1], m, member)?,
            None => false,
        };
        out.push(Reply::Int(there as i64));
    }
    Ok(Reply::Array(out))
}

fn scard(cx: &mut Ctx, a: &[Vec<u8>]) -> CmdResult {
    Ok(Reply::Int(read_lookup(cx, &a[1], Kind::Set)?.map_or(0, |m| m.size as i64)))
}

fn spop(cx: &mut Ctx, a: &[Vec<u8>]) -> CmdResult {
    if a.len() > 3 {
        return Err(CmdError::syntax());
    }
    let count = match a.get(2) {
        None => None,
        Some(arg) => match int(arg) {
            Ok(n) if n >= 0 => Some(n as u64),
            _ => return Err(CmdError::err("value is out of range, must be positive")),
        },
    };
    let Some(old) = set(cx, &a[1])? else {
        return Ok(if count.is_some() { Reply::Set(Vec::new()) } else { Reply::Nil });
    };
    let Some(count) = count else {
        let one = random_elements(cx, &a[1], &old, RandomCount::Distinct(1))?;
        let Some((member, _)) = one.into_iter().next() else { return Ok(Reply::Nil) };
        cx.sub_del(&a[1], &old, &member);
        let m = Meta { size: old.size - 1, ..old.clone() };
        cx.save_shrunk(&a[1], &old, &m)?;
        return Ok(Reply::Bulk(member));
    };
    if count == 0 {
        return Ok(Reply::Set(Vec::new()));
    }
    if count >= old.size {
        let all = cx.sub_all(&a[1], &old)?;
        cx.remove(&a[1], &old);
        return Ok(Reply::Set(all.into_iter().map(|(f, _)| Reply::Bulk(f)).collect()));
    }
    let picked = random_elements(cx, &a[1], &old, RandomCount::Distinct(count))?;
    for (member, _) in &picked {
        cx.sub_del(&a[1], &old, member);
    }
    let m = Meta { size: old.size - picked.len() as u64, ..old.clone() };
    cx.save_collection(&a[1], Some(&old), &m)?;
    Ok(Reply::Set(picked.into_iter().map(|(f, _)| Reply::Bulk(f)).collect()))
}

fn srandmember(cx: &mut Ctx, a: &[Vec<u8>]) -> CmdResult {
    if a.len() > 3 {
        return Err(CmdError::syntax());
    }
    if a.len() == 2 {
        let Some(m) = read_lookup(cx, &a[1], Kind::Set)? else { return Ok(Reply::Nil) };
        let one = random_elements(cx, &a[1], &m, RandomCount::Distinct(1))?;
        return Ok(one.into_iter().next().map_or(Reply::Nil, |(f, _)| Reply::Bulk(f)));
    }
    let count = RandomCount::parse(&a[2])?;
    let Some(m) = read_lookup(cx, &a[1], Kind::Set)? else { return Ok(Reply::Array(Vec::new())) };
    let picked = random_elements(cx, &a[1], &m, count)?;
    Ok(Reply::Array(picked.into_iter().map(|(f, _)| Reply::Bulk(f)).collect()))
}

fn sscan(cx: &mut Ctx, a: &[Vec<u8>]) -> CmdResult {
    scan_elements(cx, a, Kind::Set, false)
}

fn smove(cx: &mut Ctx, a: &[Vec<u8>]) -> CmdResult {
    let (src_key, dst_key, member) = (&a[1], &a[2], &a[3]);
    let src = cx.lookup(src_key)?;
    let dst = cx.lookup(dst_key)?;
    let Some(src) = src else { return Ok(Reply::Int(0)) };
    if src.kind != Kind::Set || dst.as_ref().is_some_and(|d| d.kind != Kind::Set) {
        return Err(CmdError::wrongtype());
    }
    let there = cx.sub_exists(src_key, &src, member)?;
    if src_key == dst_key || !there {
        return Ok(Reply::Int(there as i64));
    }
    cx.sub_del(src_key, &src, member);
    let m = Meta { size: src.size - 1, ..src.clone() };
    cx.save_shrunk(src_key, &src, &m)?;
    let mut d = match &dst {
        Some(d) => d.clone(),
        None => cx.new_collection(Kind::Set),
    };
    if !cx.sub_exists(dst_key, &d, member)? {
        cx.sub_put(dst_key, &d, member, Vec::new())?;
        d.size += 1;
    }
    save(cx, dst_key, dst.as_ref(), &d)?;
    Ok(Reply::Int(1))
}

/// A set operation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Op {
    Inter,
    Union,
    Diff,
}

/// The members of the sets at `keys` combined by `op`, in byte order; a
/// missing key is an empty set, any other type WRONGTYPE (every key is
/// checked, as Redis 7 does). An intersection stops at `limit` members.
fn combine(cx: &mut Ctx, keys: &[Vec<u8>], op: Op, limit: usize) -> Res<Vec<Vec<u8>>> {
    let mut sets = Vec::with_capacity(keys.len());
    for key in keys {
        sets.push(read_lookup(cx, key, Kind::Set)?);
    }
    let mut out = Vec::new();
    match op {
        Op::Inter => {
            let Some(mut present) =
                sets.into_iter().zip(keys).map(|(m, k)| m.map(|m| (k, m))).collect::<Option<Vec<_>>>()
            else {
                return Ok(out);
            };
            // Walk the smallest set, probing the others (as Redis does).
            present.sort_by_key(|(_, m)| m.size);
            let (first, rest) = present.split_first().ok_or_else(CmdError::syntax)?;
            'member: for (member, _) in cx.sub_all(first.0, &first.1)? {
                if out.len() >= limit {
                    break;
                }
                for (k, m) in rest {
                    if !cx.sub_exists(k, m, &member)? {
                        continue 'member;
                    }
                }
                out.push(member);
            }
        }
        Op::Union => {
            let mut all = BTreeSet::new();
            for (key, m) in keys.iter().zip(&sets) {
                if let Some(m) = m {
                    all.extend(cx.sub_all(key, m)?.into_iter().map(|(f, _)| f));
                }
            }
            out.extend(all);
        }
        Op::Diff => {
            let Some(first) = &sets[0] else { return Ok(out) };
            'member: for (member, _) in cx.sub_all(&keys[0], first)? {
                for (key, m) in keys[1..].iter().zip(&sets[1..]) {
                    if let Some(m) = m {
                        if cx.sub_exists(key, m, &member)? {
                            continue 'member;
                        }
                    }
                }
                out.push(member);
            }
        }
    }
    Ok(out)
}

/// `members` (in byte order) as a reply; a set Redis would hold as an
/// intset (every member a canonical integer, at most
/// `set-max-intset-entries` of them) comes in numeric order, as Redis
/// walks an intset.
fn set_reply(cx: &Ctx, mut members: Vec<Vec<u8>>) -> Reply {
    if members.len() as u64 <= super::keys::intset_limit(cx) {
        intset_sort(&mut members);
    }
    Reply::Set(members.into_iter().map(Reply::Bulk).collect())
}

fn sinter(cx: &mut Ctx, a: &[Vec<u8>]) -> CmdResult {
    let members = combine(cx, &a[1..], Op::Inter, usize::MAX)?;
    Ok(set_reply(cx, members))
}

fn sunion(cx: &mut Ctx, a: &[Vec<u8>]) -> CmdResult {
    let members = combine(cx, &a[1..], Op::Union, usize::MAX)?;
    Ok(set_reply(cx, members))
}

fn sdiff(cx: &mut Ctx, a: &[Vec<u8>]) -> CmdResult {
    let members = combine(cx, &a[1..], Op::Diff, usize::MAX)?;
    Ok(set_reply(cx, members))
}

/// The *STORE commands: replaces `a[1]` (whatever its type and expiry) with
/// the result as a new set, or deletes it when the result is empty.
fn store(cx: &mut Ctx, a: &[Vec<u8>], op: Op) -> CmdResult {
    let members = combine(cx, &a[2..], op, usize::MAX)?;
    let dst = &a[1];
    let old = cx.lookup(dst)?;
    if members.is_empty() {
        if let Some(old) = old {
            cx.remove(dst, &old);
        }
        return Ok(Reply::Int(0));
    }
    let mut m = cx.new_collection(Kind::Set);
    m.size = members.len() as u64;
    for member in &members {
        cx.sub_put(dst, &m, member, Vec::new())?;
    }
    cx.write_meta(dst, old.as_ref(), &m)?;
    Ok(Reply::Int(members.len() as i64))
}

fn sinterstore(cx: &mut Ctx, a: &[Vec<u8>]) -> CmdResult {
    store(cx, a, Op::Inter)
}

fn sunionstore(cx: &mut Ctx, a: &[Vec<u8>]) -> CmdResult {
    store(cx, a, Op::Union)
}

fn sdiffstore(cx: &mut Ctx, a: &[Vec<u8>]) -> CmdResult {
    store(cx, a, Op::Diff)
}

fn sintercard(cx: &mut Ctx, a: &[Vec<u8>]) -> CmdResult {
    let numkeys = match int(&a[1]) {
        Ok(n) if n > 0 => n as usize,
        _ => return Err(CmdError::err("numkeys should be greater than 0")),
    };
    if numkeys > a.len() - 2 {
        return Err(CmdError::err("Number of keys can't be greater than number of args"));
    }
    let mut limit = 0;
    let mut i = 2 + numkeys;
    while i < a.len() {
        if is(&a[i], "LIMIT") && i + 1 < a.len() {
            limit = match int(&a[i + 1]) {
                Ok(n) if n >= 0 => n as usize,
                _ => return Err(CmdError::err("LIMIT can't be negative")),
            };
            i += 2;
        } else {
            return Err(CmdError::syntax());
        }
    }
    let limit = if limit == 0 { usize::MAX } else { limit };
    Ok(Reply::Int(combine(cx, &a[2..2 + numkeys], Op::Inter, limit)?.len() as i64))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn random_counts() {
        assert_eq!(RandomCount::parse(b"3").unwrap(), RandomCount::Distinct(3));
        assert_eq!(RandomCount::parse(b"-3").unwrap(), RandomCount::Repeat(3));
        assert_eq!(RandomCount::parse(b"0").unwrap(), RandomCount::Distinct(0));
        assert!(RandomCount::parse(b"-9223372036854775808").is_err());
        assert!(RandomCount::parse(b"x").is_err());
        assert!(!RandomCount::parse(b"4611686018427387903").unwrap().out_of_half_range());
        assert!(RandomCount::parse(b"4611686018427387904").unwrap().out_of_half_range());
        assert!(RandomCount::parse(b"-4611686018427387904").unwrap().out_of_half_range());
    }
}
