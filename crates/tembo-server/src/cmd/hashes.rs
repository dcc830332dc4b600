//! Hash commands: HSET HMSET HSETNX HGET HMGET HGETALL HDEL HLEN HEXISTS
//! HKEYS HVALS HSTRLEN HINCRBY HINCRBYFLOAT HSCAN HRANDFIELD.
//!
//! A hash is a metadata record (its `size` is the field count) plus one
//! sub-key per field whose value is the field's value. A hash Redis would
//! keep as a listpack gives its fields in insertion order ([`hash_order`]);
//! a bigger one in byte order, where Redis would use its hash table's.

use std::collections::HashSet;

use super::args::{int, is};
use super::hash_order;
use super::longdouble::{string2ld, Ld};
use super::random::{random_elements, RandomCount};
use super::sets::{read_lookup, scan_elements};
use super::{CmdError, CmdResult, Spec};
use crate::encoding::{Kind, Meta};
use crate::exec::Ctx;
use crate::keyspace::Res;
use crate::resp::Reply;

const WF: &[&str] = &["write", "denyoom", "fast"];
const WDF: &[&str] = &["write", "fast"];
const RF: &[&str] = &["readonly", "fast"];
const R: &[&str] = &["readonly"];

pub const COMMANDS: &[Spec] = &[
    Spec {
        name: "hset",
        arity: -4,
        flags: WF,
        keys: (1, 1, 1),
        group: "hash",
        summary: "Sets fields of a hash; returns how many were added.",
        run: hset,
    },
    Spec {
        name: "hmset",
        arity: -4,
        flags: WF,
        keys: (1, 1, 1),
        group: "hash",
        summary: "Sets fields of a hash (replies OK).",
        run: hmset,
    },
    Spec {
        name: "hsetnx",
        arity: 4,
        flags: WF,
        keys: (1, 1, 1),
        group: "hash",
        summary: "Sets a field of a hash only if it does not exist.",
        run: hsetnx,
    },
    Spec {
        name: "hget",
        arity: 3,
        flags: RF,
        keys: (1, 1, 1),
        group: "hash",
        summary: "Returns the value of a field of a hash.",
        run: hget,
    },
    Spec {
        name: "hmget",
        arity: -3,
        flags: RF,
        keys: (1, 1, 1),
        group: "hash",
        summary: "Returns the values of fields of a hash.",
        run: hmget,
    },
    Spec {
        name: "hgetall",
        arity: 2,
        flags: R,
        keys: (1, 1, 1),
        group: "hash",
        summary: "Returns every field and value of a hash.",
        run: hgetall,
    },
    Spec {
        name: "hdel",
        arity: -3,
        flags: WDF,
        keys: (1, 1, 1),
        group: "hash",
        summary: "Deletes fields of a hash; the hash goes when its last field does.",
        run: hdel,
    },
    Spec {
        name: "hlen",
        arity: 2,
        flags: RF,
        keys: (1, 1, 1),
        group: "hash",
        summary: "Returns the number of fields of a hash.",
        run: hlen,
    },
    Spec {
        name: "hexists",
        arity: 3,
        flags: RF,
        keys: (1, 1, 1),
        group: "hash",
        summary: "Whether a field exists in a hash.",
        run: hexists,
    },
    Spec {
        name: "hkeys",
        arity: 2,
        flags: R,
        keys: (1, 1, 1),
        group: "hash",
        summary: "Returns the fields of a hash.",
        run: hkeys,
    },
    Spec {
        name: "hvals",
        arity: 2,
        flags: R,
        keys: (1, 1, 1),
        group: "hash",
        summary: "Returns the values of a hash.",
        run: hvals,
    },
    Spec {
        name: "hstrlen",
        arity: 3,
        flags: RF,
        keys: (1, 1, 1),
        group: "hash",
        summary: "Returns the length of a field's value.",
        run: hstrlen,
    },
    Spec {
        name: "hincrby",
        arity: 4,
        flags: WF,
        keys: (1, 1, 1),
        group: "hash",
        summary: "Increments the integer value of a field.",
        run: hincrby,
    },
    Spec {
        name: "hincrbyfloat",
        arity: 4,
        flags: WF,
        keys: (1, 1, 1),
        group: "hash",
        summary: "Increments the floating-point value of a field.",
        run: hincrbyfloat,
    },
    Spec {
        name: "hscan",
        arity: -3,
        flags: R,
        keys: (1, 1, 1),
        group: "hash",
        summary: "HSCAN key cursor [MATCH p] [COUNT n]: iterates fields and values.",
        run: hscan,
    },
    Spec {
        name: "hrandfield",
        arity: -2,
        flags: R,
        keys: (1, 1, 1),
        group: "hash",
        summary: "HRANDFIELD key [count [WITHVALUES]]: returns random fields.",
        run: hrandfield,
    },
];

/// The hash at `key` for a write, or `None`; WRONGTYPE for other types.
fn hash(cx: &mut Ctx, key: &[u8]) -> Res<Option<Meta>> {
    cx.lookup_kind(key, Kind::Hash)
}

/// The hash at `key` for a read (counted as a keyspace hit or miss).
fn hash_read(cx: &mut Ctx, key: &[u8]) -> Res<Option<Meta>> {
    read_lookup(cx, key, Kind::Hash)
}

/// Writes `meta` back unless nothing about it changed.
fn save(cx: &mut Ctx, key: &[u8], old: Option<&Meta>, meta: &Meta) -> Res<()> {
    if old == Some(meta) {
        return Ok(());
    }
    cx.save_collection(key, old, meta)
}

/// Sets field/value pairs `pairs` (flat); returns how many fields were new.
fn set_pairs(cx: &mut Ctx, key: &[u8], pairs: &[Vec<u8>], cmd: &str) -> Res<i64> {
    if pairs.len() % 2 != 0 {
        return Err(CmdError::arity(cmd));
    }
    let old = hash(cx, key)?;
    let mut m = match &old {
        Some(m) => m.clone(),
        None => cx.new_collection(Kind::Hash),
    };
    let mut added = 0;
    for pair in pairs.chunks(2) {
        hash_order::before_set(cx, &mut m, &pair[0], pair[1].len());
        let new = !cx.sub_exists(key, &m, &pair[0])?;
        cx.sub_put(key, &m, &pair[0], pair[1].clone())?;
        if new {
            added += 1;
            m.size += 1;
        }
        hash_order::after_set(cx, &mut m, &pair[0], new);
    }
    save(cx, key, old.as_ref(), &m)?;
    Ok(added)
}

fn hset(cx: &mut Ctx, a: &[Vec<u8>]) -> CmdResult {
    Ok(Reply::Int(set_pairs(cx, &a[1], &a[2..], "hset")?))
}

fn hmset(cx: &mut Ctx, a: &[Vec<u8>]) -> CmdResult {
    set_pairs(cx, &a[1], &a[2..], "hmset")?;
    Ok(Reply::ok())
}

fn hsetnx(cx: &mut Ctx, a: &[Vec<u8>]) -> CmdResult {
    let old = hash(cx, &a[1])?;
    let mut m = match &old {
        Some(m) => {
            if cx.sub_exists(&a[1], m, &a[2])? {
                return Ok(Reply::Int(0));
            }
            m.clone()
        }
        None => cx.new_collection(Kind::Hash),
    };
    hash_order::before_set(cx, &mut m, &a[2], a[3].len());
    cx.sub_put(&a[1], &m, &a[2], a[3].clone())?;
    m.size += 1;
    hash_order::after_set(cx, &mut m, &a[2], true);
    save(cx, &a[1], old.as_ref(), &m)?;
    Ok(Reply::Int(1))
}

fn hget(cx: &mut Ctx, a: &[Vec<u8>]) -> CmdResult {
    let Some(m) = hash_read(cx, &a[1])? else { return Ok(Reply::Nil) };
    Ok(cx.sub_get(&a[1], &m, &a[2])?.map_or(Reply::Nil, Reply::Bulk))
}

fn hmget(cx: &mut Ctx, a: &[Vec<u8>]) -> CmdResult {
    let m = hash_read(cx, &a[1])?;
    let mut out = Vec::with_capacity(a.len() - 2);
    for field in &a[2..] {
        out.push(match &m {
            Some(m) => cx.sub_get(&a[1], m, field)?.map_or(Reply::Nil, Reply::Bulk),
            None => Reply::Nil,
        });
    }
    Ok(Reply::Array(out))
}

/// Every (field, value) of the hash at `key`; empty if it does not exist.
fn all(cx: &mut Ctx, key: &[u8]) -> Res<Vec<(Vec<u8>, Vec<u8>)>> {
    let Some(m) = hash_read(cx, key)? else { return Ok(Vec::new()) };
    let mut pairs = cx.sub_all(key, &m)?;
    hash_order::sort(&m, &mut pairs);
    Ok(pairs)
}

fn hgetall(cx: &mut Ctx, a: &[Vec<u8>]) -> CmdResult {
    let pairs = all(cx, &a[1])?;
    Ok(Reply::Map(pairs.into_iter().map(|(f, v)| (Reply::Bulk(f), Reply::Bulk(v))).collect()))
}

fn hkeys(cx: &mut Ctx, a: &[Vec<u8>]) -> CmdResult {
    Ok(Reply::Array(all(cx, &a[1])?.into_iter().map(|(f, _)| Reply::Bulk(f)).collect()))
}

fn hvals(cx: &mut Ctx, a: &[Vec<u8>]) -> CmdResult {
    Ok(Reply::Array(all(cx, &a[1])?.into_iter().map(|(_, v)| Reply::Bulk(v)).collect()))
}

fn hdel(cx: &mut Ctx, a: &[Vec<u8>]) -> CmdResult {
    let Some(old) = hash(cx, &a[1])? else { return Ok(Reply::Int(0)) };
    let mut m = old.clone();
    let mut removed = HashSet::new();
    for field in &a[2..] {
        if !removed.contains(field.as_slice()) && cx.sub_exists(&a[1], &m, field)? {
            cx.sub_del(&a[1], &m, field);
            removed.insert(field.as_slice());
        }
    }
    m.size = CmdError::shrink(&a[1], m.size, removed.len() as u64)?;
    if !removed.is_empty() {
        hash_order::after_delete(&mut m, &removed);
        cx.save_shrunk(&a[1], &old, &m)?;
    }
    Ok(Reply::Int(removed.len() as i64))
}

fn hlen(cx: &mut Ctx, a: &[Vec<u8>]) -> CmdResult {
    Ok(Reply::Int(hash_read(cx, &a[1])?.map_or(0, |m| m.size as i64)))
}

fn hexists(cx: &mut Ctx, a: &[Vec<u8>]) -> CmdResult {
    let Some(m) = hash_read(cx, &a[1])? else { return Ok(Reply::Int(0)) };
    Ok(Reply::Int(cx.sub_exists(&a[1], &m, &a[2])? as i64))
}

fn hstrlen(cx: &mut Ctx, a: &[Vec<u8>]) -> CmdResult {
    let Some(m) = hash_read(cx, &a[1])? else { return Ok(Reply::Int(0)) };
    Ok(Reply::Int(cx.sub_get(&a[1], &m, &a[2])?.map_or(0, |v| v.len() as i64)))
}

/// Replaces the value of `field` (new or not) in the hash `key` that had `old`.
fn put_field(cx: &mut Ctx, key: &[u8], old: Option<Meta>, existed: bool, field: &[u8], value: Vec<u8>) -> Res<()> {
    let mut m = match &old {
        Some(m) => m.clone(),
        None => cx.new_collection(Kind::Hash),
    };
    hash_order::before_set(cx, &mut m, field, value.len());
    cx.sub_put(key, &m, field, value)?;
    if !existed {
        m.size += 1;
    }
    hash_order::after_set(cx, &mut m, field, !existed);
    save(cx, key, old.as_ref(), &m)
}

/// The current value of `field` in the hash at `key` (for the INCR commands).
fn field_value(cx: &mut Ctx, key: &[u8], field: &[u8]) -> Res<(Option<Meta>, Option<Vec<u8>>)> {
    let old = hash(cx, key)?;
    let cur = match &old {
        Some(m) => cx.sub_get(key, m, field)?,
        None => None,
    };
    Ok((old, cur))
}

fn hincrby(cx: &mut Ctx, a: &[Vec<u8>]) -> CmdResult {
    let by = int(&a[3])?;
    let (old, cur) = field_value(cx, &a[1], &a[2])?;
    let value = match &cur {
        Some(v) => int(v).map_err(|_| CmdError::err("hash value is not an integer"))?,
        None => 0,
    };
    let new = value.checked_add(by).ok_or_else(|| CmdError::err("increment or decrement would overflow"))?;
    put_field(cx, &a[1], old, cur.is_some(), &a[2], new.to_string().into_bytes())?;
    Ok(Reply::Int(new))
}

fn hincrbyfloat(cx: &mut Ctx, a: &[Vec<u8>]) -> CmdResult {
    // x87 `long double`, as Redis (see `longdouble`).
    let by = string2ld(&a[3]).ok_or_else(CmdError::not_float)?;
    if !by.is_finite() {
        return Err(CmdError::err("value is NaN or Infinity"));
    }
    let (old, cur) = field_value(cx, &a[1], &a[2])?;
    let value = match &cur {
        Some(v) => string2ld(v).ok_or_else(|| CmdError::err("hash value is not a float"))?,
        None => Ld::ZERO,
    };
    let new =
        value.add(by).filter(Ld::is_finite).ok_or_else(|| CmdError::err("increment would produce NaN or Infinity"))?;
    let text = new.to_human().into_bytes();
    put_field(cx, &a[1], old, cur.is_some(), &a[2], text.clone())?;
    Ok(Reply::Bulk(text))
}

fn hscan(cx: &mut Ctx, a: &[Vec<u8>]) -> CmdResult {
    scan_elements(cx, a, Kind::Hash, true)
}

fn hrandfield(cx: &mut Ctx, a: &[Vec<u8>]) -> CmdResult {
    if a.len() == 2 {
        let Some(m) = hash_read(cx, &a[1])? else { return Ok(Reply::Nil) };
        let one = random_elements(cx, &a[1], &m, RandomCount::Distinct(1))?;
        return Ok(one.into_iter().next().map_or(Reply::Nil, |(f, _)| Reply::Bulk(f)));
    }
    let count = RandomCount::parse(&a[2])?;
    let with_values = a.len() == 4 && is(&a[3], "WITHVALUES");
    if a.len() > 4 || (a.len() == 4 && !with_values) {
        return Err(CmdError::syntax());
    }
    if with_values && count.out_of_half_range() {
        return Err(CmdError::err("value is out of range"));
    }
    let Some(m) = hash_read(cx, &a[1])? else { return Ok(Reply::Array(Vec::new())) };
    let mut picked = random_elements(cx, &a[1], &m, count)?;
    if let RandomCount::Distinct(_) = count {
        // Redis picks distinct fields of a listpack in its order.
        hash_order::sort(&m, &mut picked);
    }
    Ok(Reply::Array(if !with_values {
        picked.into_iter().map(|(f, _)| Reply::Bulk(f)).collect()
    } else if cx.client.proto >= 3 {
        picked.into_iter().map(|(f, v)| Reply::Array(vec![Reply::Bulk(f), Reply::Bulk(v)])).collect()
    } else {
        picked.into_iter().flat_map(|(f, v)| [Reply::Bulk(f), Reply::Bulk(v)]).collect()
    }))
}
