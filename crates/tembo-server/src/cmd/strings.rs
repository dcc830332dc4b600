//! String commands. A string's bytes live in its metadata record, so a GET
//! is one engine lookup and a SET one put.

use super::args::{int, is};
use super::longdouble::{string2ld, Ld};
use super::{CmdError, CmdResult, Spec};
use crate::encoding::{Kind, Meta};
use crate::exec::Ctx;
use crate::keyspace::Res;
use crate::resp::Reply;

const W: &[&str] = &["write", "denyoom"];
const WF: &[&str] = &["write", "denyoom", "fast"];
const RF: &[&str] = &["readonly", "fast"];

pub const COMMANDS: &[Spec] = &[
    Spec {
        name: "get",
        arity: 2,
        flags: RF,
        keys: (1, 1, 1),
        group: "string",
        summary: "Returns the string value of a key.",
        run: get,
    },
    Spec {
        name: "set",
        arity: -3,
        flags: W,
        keys: (1, 1, 1),
        group: "string",
        summary: "SET key value [NX|XX] [GET] [EX s|PX ms|EXAT t|PXAT t|KEEPTTL].",
        run: set,
    },
    Spec {
        name: "setnx",
        arity: 3,
        flags: WF,
        keys: (1, 1, 1),
        group: "string",
        summary: "Sets a key only if it does not exist.",
        run: setnx,
    },
    Spec {
        name: "setex",
        arity: 4,
        flags: W,
        keys: (1, 1, 1),
        group: "string",
        summary: "Sets a key with an expiry in seconds.",
        run: setex,
    },
    Spec {
        name: "psetex",
        arity: 4,
        flags: W,
        keys: (1, 1, 1),
        group: "string",
        summary: "Sets a key with an expiry in milliseconds.",
        run: psetex,
    },
    Spec {
        name: "getset",
        arity: 3,
        flags: WF,
        keys: (1, 1, 1),
        group: "string",
        summary: "Sets a key and returns its old value.",
        run: getset,
    },
    Spec {
        name: "getdel",
        arity: 2,
        flags: &["write", "fast"],
        keys: (1, 1, 1),
        group: "string",
        summary: "Returns a key's value and deletes it.",
        run: getdel,
    },
    Spec {
        name: "getex",
        arity: -2,
        flags: &["write", "fast"],
        keys: (1, 1, 1),
        group: "string",
        summary: "Returns a key's value and changes its expiry.",
        run: getex,
    },
    Spec {
        name: "mget",
        arity: -2,
        flags: RF,
        keys: (1, -1, 1),
        group: "string",
        summary: "Returns the values of keys.",
        run: mget,
    },
    Spec {
        name: "mset",
        arity: -3,
        flags: W,
        keys: (1, -1, 2),
        group: "string",
        summary: "Sets several keys atomically.",
        run: mset,
    },
    Spec {
        name: "msetnx",
        arity: -3,
        flags: W,
        keys: (1, -1, 2),
        group: "string",
        summary: "Sets several keys only if none exists.",
        run: msetnx,
    },
    Spec {
        name: "incr",
        arity: 2,
        flags: WF,
        keys: (1, 1, 1),
        group: "string",
        summary: "Increments an integer by one.",
        run: incr,
    },
    Spec {
        name: "decr",
        arity: 2,
        flags: WF,
        keys: (1, 1, 1),
        group: "string",
        summary: "Decrements an integer by one.",
        run: decr,
    },
    Spec {
        name: "incrby",
        arity: 3,
        flags: WF,
        keys: (1, 1, 1),
        group: "string",
        summary: "Increments an integer.",
        run: incrby,
    },
    Spec {
        name: "decrby",
        arity: 3,
        flags: WF,
        keys: (1, 1, 1),
        group: "string",
        summary: "Decrements an integer.",
        run: decrby,
    },
    Spec {
        name: "incrbyfloat",
        arity: 3,
        flags: WF,
        keys: (1, 1, 1),
        group: "string",
        summary: "Increments a floating-point number.",
        run: incrbyfloat,
    },
    Spec {
        name: "append",
        arity: 3,
        flags: WF,
        keys: (1, 1, 1),
        group: "string",
        summary: "Appends to a string.",
        run: append,
    },
    Spec {
        name: "strlen",
        arity: 2,
        flags: RF,
        keys: (1, 1, 1),
        group: "string",
        summary: "Returns a string's length.",
        run: strlen,
    },
    Spec {
        name: "getrange",
        arity: 4,
        flags: &["readonly"],
        keys: (1, 1, 1),
        group: "string",
        summary: "Returns a substring.",
        run: getrange,
    },
    Spec {
        name: "substr",
        arity: 4,
        flags: &["readonly"],
        keys: (1, 1, 1),
        group: "string",
        summary: "SUBSTR key start end: GETRANGE's old name.",
        run: getrange,
    },
    Spec {
        name: "setrange",
        arity: 4,
        flags: W,
        keys: (1, 1, 1),
        group: "string",
        summary: "Overwrites part of a string.",
        run: setrange,
    },
];

/// The string at `key`, or `None`; WRONGTYPE for other types.
fn string(cx: &mut Ctx, key: &[u8]) -> Res<Option<Meta>> {
    cx.lookup_kind(key, Kind::String)
}

/// Stores `value` at `key` (replacing whatever was there) with expiry `expire_at`.
pub fn put_string(cx: &mut Ctx, key: &[u8], old: Option<&Meta>, value: Vec<u8>, expire_at: u64) -> Res<()> {
    put_string_from(cx, key, old, &value, expire_at)
}

/// [`put_string`] from a borrowed value (a command's argument): the
/// record is built from it with one copy.
pub fn put_string_from(cx: &mut Ctx, key: &[u8], old: Option<&Meta>, value: &[u8], expire_at: u64) -> Res<()> {
    let max = cx.st.shared.max_bulk();
    if value.len() > max {
        return Err(CmdError::err("string exceeds maximum allowed size (proto-max-bulk-len)"));
    }
    cx.write_string(key, old, expire_at, value)
}

fn get(cx: &mut Ctx, a: &[Vec<u8>]) -> CmdResult {
    let m = string(cx, &a[1])?;
    if m.is_some() {
        cx.st.stats.hits += 1;
    } else {
        cx.st.stats.misses += 1;
    }
    Ok(m.map_or(Reply::Nil, |m| Reply::Bulk(m.value)))
}

/// The unit and reference of an expiry option.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum ExpUnit {
    /// EX: seconds from now.
    Ex,
    /// PX: milliseconds from now.
    Px,
    /// EXAT: a Unix time in seconds.
    ExAt,
    /// PXAT: a Unix time in milliseconds.
    PxAt,
}

/// The options of SET (`NX XX GET KEEPTTL EX PX EXAT PXAT`) or GETEX
/// (`EX PX EXAT PXAT PERSIST`), parsed as Redis 7's
/// `parseExtendedStringArgumentsOrReply` does: the same option may repeat
/// (the last value wins), conflicting ones are a syntax error, and the
/// expiry's number is not read yet — every syntax error comes first.
#[derive(Debug, Default)]
struct ExtOpts<'a> {
    nx: bool,
    xx: bool,
    get: bool,
    keepttl: bool,
    persist: bool,
    expire: Option<(ExpUnit, &'a [u8])>,
}

fn parse_ext_opts(a: &[Vec<u8>], set: bool) -> Res<ExtOpts<'_>> {
    let mut o = ExtOpts::default();
    let mut i = if set { 3 } else { 2 };
    while i < a.len() {
        let opt = &a[i];
        let next = a.get(i + 1).map(|v| v.as_slice());
        let unit = o.expire.map(|(u, _)| u);
        let timed = |u: ExpUnit| !o.keepttl && !o.persist && unit.map_or(true, |x| x == u) && next.is_some();
        if set && is(opt, "NX") && !o.xx {
            o.nx = true;
        } else if set && is(opt, "XX") && !o.nx {
            o.xx = true;
        } else if set && is(opt, "GET") {
            o.get = true;
        } else if set && is(opt, "KEEPTTL") && !o.persist && unit.is_none() {
            o.keepttl = true;
        } else if !set && is(opt, "PERSIST") && unit.is_none() && !o.keepttl {
            o.persist = true;
        } else if let Some(u) =
            [("EX", ExpUnit::Ex), ("PX", ExpUnit::Px), ("EXAT", ExpUnit::ExAt), ("PXAT", ExpUnit::PxAt)]
                .into_iter()
                .find(|(w, _)| is(opt, w))
                .map(|(_, u)| u)
                .filter(|&u| timed(u))
        {
            o.expire = next.map(|n| (u, n));
            i += 1;
        } else {
            return Err(CmdError::syntax());
        }
        i += 1;
    }
    Ok(o)
}

/// The absolute expiry (Unix ms) of an expiry option, with Redis 7's checks
/// (`getExpireMillisecondsOrReply`): a positive integer whose conversion to
/// an absolute time in milliseconds does not overflow.
fn expiry_ms(cx: &Ctx, unit: ExpUnit, n: &[u8], cmd: &str) -> Res<u64> {
    let v = int(n)?;
    let bad = || CmdError::err(format!("invalid expire time in '{cmd}' command"));
    let seconds = matches!(unit, ExpUnit::Ex | ExpUnit::ExAt);
    if v <= 0 || (seconds && v > i64::MAX / 1000) {
        return Err(bad());
    }
    let ms = if seconds { v * 1000 } else { v };
    let at = match unit {
        ExpUnit::Ex | ExpUnit::Px => ms.checked_add(cx.ttl_base() as i64),
        ExpUnit::ExAt | ExpUnit::PxAt => Some(ms),
    };
    at.filter(|&t| t > 0).map(|t| t as u64).ok_or_else(bad)
}

fn set(cx: &mut Ctx, a: &[Vec<u8>]) -> CmdResult {
    let o = parse_ext_opts(a, true)?;
    let expire = match o.expire {
        Some((unit, n)) => Some(expiry_ms(cx, unit, n, "set")?),
        None => None,
    };
    // The old string's bytes only for GET's reply.
    let old = if o.get { cx.lookup(&a[1])? } else { cx.lookup_head(&a[1])? };
    if o.get && old.as_ref().is_some_and(|m| m.kind != Kind::String) {
        return Err(CmdError::wrongtype());
    }
    let old_reply = || if o.get { old.as_ref().map_or(Reply::Nil, |m| Reply::bulk(&m.value)) } else { Reply::Nil };
    if (o.nx && old.is_some()) || (o.xx && old.is_none()) {
        return Ok(old_reply());
    }
    let exp = match expire {
        Some(t) => t,
        None if o.keepttl => old.as_ref().map_or(0, |m| m.expire_at),
        None => 0,
    };
    put_string_from(cx, &a[1], old.as_ref(), &a[2], exp)?;
    Ok(if o.get { old_reply() } else { Reply::ok() })
}

fn setnx(cx: &mut Ctx, a: &[Vec<u8>]) -> CmdResult {
    if cx.lookup_head(&a[1])?.is_some() {
        return Ok(Reply::Int(0));
    }
    put_string_from(cx, &a[1], None, &a[2], 0)?;
    Ok(Reply::Int(1))
}

fn setex_unit(cx: &mut Ctx, a: &[Vec<u8>], unit: ExpUnit, cmd: &str) -> CmdResult {
    let at = expiry_ms(cx, unit, &a[2], cmd)?;
    let old = cx.lookup_head(&a[1])?;
    put_string_from(cx, &a[1], old.as_ref(), &a[3], at)?;
    Ok(Reply::ok())
}

fn setex(cx: &mut Ctx, a: &[Vec<u8>]) -> CmdResult {
    setex_unit(cx, a, ExpUnit::Ex, "setex")
}

fn psetex(cx: &mut Ctx, a: &[Vec<u8>]) -> CmdResult {
    setex_unit(cx, a, ExpUnit::Px, "psetex")
}

fn getset(cx: &mut Ctx, a: &[Vec<u8>]) -> CmdResult {
    let old = string(cx, &a[1])?;
    put_string(cx, &a[1], old.as_ref(), a[2].clone(), 0)?;
    Ok(old.map_or(Reply::Nil, |m| Reply::Bulk(m.value)))
}

fn getdel(cx: &mut Ctx, a: &[Vec<u8>]) -> CmdResult {
    let Some(old) = string(cx, &a[1])? else { return Ok(Reply::Nil) };
    cx.remove(&a[1], &old);
    Ok(Reply::Bulk(old.value))
}

fn getex(cx: &mut Ctx, a: &[Vec<u8>]) -> CmdResult {
    // Redis's order: options, then the key (missing: nil, whatever the
    // expiry), its type, and only then the expiry's number.
    let o = parse_ext_opts(a, false)?;
    let Some(mut old) = string(cx, &a[1])? else { return Ok(Reply::Nil) };
    let value = old.value.clone();
    if old.is_chunked() {
        // Its head alone: only the metadata record is rewritten.
        old.value = Vec::new();
    }
    if let Some((unit, n)) = o.expire {
        let at = expiry_ms(cx, unit, n, "getex")?;
        if at <= cx.ttl_base() {
            cx.remove(&a[1], &old);
        } else {
            let new = Meta { expire_at: at, ..old.clone() };
            cx.write_meta(&a[1], Some(&old), &new)?;
        }
    } else if o.persist && old.expire_at != 0 {
        let new = Meta { expire_at: 0, ..old.clone() };
        cx.write_meta(&a[1], Some(&old), &new)?;
    }
    Ok(Reply::Bulk(value))
}

fn mget(cx: &mut Ctx, a: &[Vec<u8>]) -> CmdResult {
    let mut out = Vec::with_capacity(a.len() - 1);
    for key in &a[1..] {
        out.push(match cx.lookup(key)? {
            Some(m) if m.kind == Kind::String => Reply::Bulk(m.value),
            _ => Reply::Nil,
        });
    }
    Ok(Reply::Array(out))
}

fn mset(cx: &mut Ctx, a: &[Vec<u8>]) -> CmdResult {
    if a.len() % 2 == 0 {
        return Err(CmdError::arity("mset"));
    }
    for pair in a[1..].chunks(2) {
        let old = cx.lookup_head(&pair[0])?;
        put_string_from(cx, &pair[0], old.as_ref(), &pair[1], 0)?;
    }
    Ok(Reply::ok())
}

fn msetnx(cx: &mut Ctx, a: &[Vec<u8>]) -> CmdResult {
    if a.len() % 2 == 0 {
        return Err(CmdError::arity("msetnx"));
    }
    for pair in a[1..].chunks(2) {
        if cx.lookup_head(&pair[0])?.is_some() {
            return Ok(Reply::Int(0));
        }
    }
    for pair in a[1..].chunks(2) {
        let old = cx.lookup_head(&pair[0])?;
        put_string_from(cx, &pair[0], old.as_ref(), &pair[1], 0)?;
    }
    Ok(Reply::Int(1))
}

/// Adds `by` to the integer at `key` (0 if missing), keeping its expiry.
fn add(cx: &mut Ctx, key: &[u8], by: i64) -> CmdResult {
    let old = string(cx, key)?;
    let cur = match &old {
        Some(m) => int(&m.value)?,
        None => 0,
    };
    let new = cur.checked_add(by).ok_or_else(|| CmdError::err("increment or decrement would overflow"))?;
    let exp = old.as_ref().map_or(0, |m| m.expire_at);
    put_string(cx, key, old.as_ref(), new.to_string().into_bytes(), exp)?;
    Ok(Reply::Int(new))
}

fn incr(cx: &mut Ctx, a: &[Vec<u8>]) -> CmdResult {
    add(cx, &a[1], 1)
}

fn decr(cx: &mut Ctx, a: &[Vec<u8>]) -> CmdResult {
    add(cx, &a[1], -1)
}

fn incrby(cx: &mut Ctx, a: &[Vec<u8>]) -> CmdResult {
    add(cx, &a[1], int(&a[2])?)
}

fn decrby(cx: &mut Ctx, a: &[Vec<u8>]) -> CmdResult {
    let by = int(&a[2])?;
    let neg = by.checked_neg().ok_or_else(|| CmdError::err("decrement would overflow"))?;
    add(cx, &a[1], neg)
}

fn incrbyfloat(cx: &mut Ctx, a: &[Vec<u8>]) -> CmdResult {
    // Redis's order: the key's type, its value, then the increment; the
    // arithmetic is x87 `long double` (see `longdouble`).
    let old = string(cx, &a[1])?;
    let cur = match &old {
        Some(m) => string2ld(&m.value).ok_or_else(CmdError::not_float)?,
        None => Ld::ZERO,
    };
    let by = string2ld(&a[2]).ok_or_else(CmdError::not_float)?;
    let new =
        cur.add(by).filter(Ld::is_finite).ok_or_else(|| CmdError::err("increment would produce NaN or Infinity"))?;
    let text = new.to_human();
    let exp = old.as_ref().map_or(0, |m| m.expire_at);
    put_string(cx, &a[1], old.as_ref(), text.clone().into_bytes(), exp)?;
    Ok(Reply::Bulk(text.into_bytes()))
}

/// Rewrites only the string's last chunk when it is stored in chunks
/// (`chunked`); a shorter string is copied once out and once back in.
fn append(cx: &mut Ctx, a: &[Vec<u8>]) -> CmdResult {
    let add = &a[2];
    // Refused before the string is read (WRONGTYPE still first).
    if cx.string_len(&a[1])?.unwrap_or(0) + add.len() as u64 > cx.st.shared.max_bulk() as u64 {
        return Err(CmdError::err("string exceeds maximum allowed size (proto-max-bulk-len)"));
    }
    let mut e = cx.edit_string(&a[1], |len| (len, len + add.len() as u64))?;
    let at = (e.len - e.lo()) as usize;
    let end = e.len + add.len() as u64;
    e.bytes()[at..at + add.len()].copy_from_slice(add);
    Ok(Reply::Int(cx.finish_string_edit(&a[1], e, end)? as i64))
}

fn strlen(cx: &mut Ctx, a: &[Vec<u8>]) -> CmdResult {
    Ok(Reply::Int(cx.string_len(&a[1])?.unwrap_or(0) as i64))
}

/// Reads only the bytes it returns (and the record's header).
fn getrange(cx: &mut Ctx, a: &[Vec<u8>]) -> CmdResult {
    let (start, end) = (int(&a[2])?, int(&a[3])?);
    let len = cx.string_len(&a[1])?.unwrap_or(0);
    Ok(match getrange_span(start, end, len as usize) {
        Some((s, e)) => Reply::Bulk(cx.string_part(&a[1], s as u64, e - s + 1)?),
        None => Reply::bulk(b""),
    })
}

/// GETRANGE's inclusive span of a `len`-byte string, as Redis 7 computes it:
/// negative indices count from the end and are then clamped to 0 — so an
/// `end` before the start of the string still selects the first byte
/// (`GETRANGE "-1" -10 -6` is "-"), unless both are negative and
/// `start > end`.
fn getrange_span(start: i64, end: i64, len: usize) -> Option<(usize, usize)> {
    if start < 0 && end < 0 && start > end {
        return None;
    }
    let n = len as i64;
    let start = if start < 0 { n.saturating_add(start).max(0) } else { start };
    let end = if end < 0 { n.saturating_add(end).max(0) } else { end };
    let end = end.min(n - 1);
    if start > end || len == 0 {
        None
    } else {
        Some((start as usize, end as usize))
    }
}

fn setrange(cx: &mut Ctx, a: &[Vec<u8>]) -> CmdResult {
    let offset = int(&a[2])?;
    if offset < 0 {
        return Err(CmdError::err("offset is out of range"));
    }
    let part = &a[3];
    let end = offset as usize + part.len();
    if part.is_empty() || end > cx.st.shared.max_bulk() {
        // The type is checked first, as Redis does (WRONGTYPE wins).
        let len = cx.string_len(&a[1])?.unwrap_or(0);
        if part.is_empty() {
            return Ok(Reply::Int(len as i64));
        }
        return Err(CmdError::err("string exceeds maximum allowed size (proto-max-bulk-len)"));
    }
    let (offset, end) = (offset as u64, end as u64);
    let mut e = cx.edit_string(&a[1], |_| (offset, end))?;
    let at = (offset - e.lo()) as usize;
    e.bytes()[at..at + part.len()].copy_from_slice(part);
    let len = e.len.max(end);
    Ok(Reply::Int(cx.finish_string_edit(&a[1], e, len)? as i64))
}
