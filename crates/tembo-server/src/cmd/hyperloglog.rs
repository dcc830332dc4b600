//! HyperLogLog commands: PFADD PFCOUNT PFMERGE PFDEBUG PFSELFTEST.
//!
//! They exist so that applications counting unique visitors and the like
//! with Redis's HyperLogLogs move to Tembo unchanged. An HLL is a plain
//! string in Redis's own HYLL format ([`crate::hll`]), stored whole in its
//! key's metadata record like any string: GET, SET, DUMP-less copies
//! between servers and APPEND-style corruption all behave as in Redis, and
//! every update is one read-modify-write of that record inside the
//! command's batch, keeping the key's TTL as Redis does.

use rand::Rng;

use super::args::is;
use super::server::inert_value;
use super::strings::put_string;
use super::{CmdError, CmdResult, Spec};
use crate::encoding::{Kind, Meta};
use crate::exec::Ctx;
use crate::hll::{self, DENSE, HDR, REGISTERS, SPARSE};
use crate::keyspace::Res;
use crate::resp::Reply;

pub const COMMANDS: &[Spec] = &[
    Spec {
        name: "pfadd",
        arity: -2,
        flags: &["write", "denyoom", "fast"],
        keys: (1, 1, 1),
        group: "hyperloglog",
        summary: "PFADD key [element ...]: adds elements to a HyperLogLog.",
        run: pfadd,
    },
    Spec {
        name: "pfcount",
        arity: -2,
        flags: &["readonly", "may_replicate"],
        keys: (1, -1, 1),
        group: "hyperloglog",
        summary: "PFCOUNT key [key ...]: the approximate cardinality of the union of the HyperLogLogs.",
        run: pfcount,
    },
    Spec {
        name: "pfmerge",
        arity: -2,
        flags: &["write", "denyoom"],
        keys: (1, -1, 1),
        group: "hyperloglog",
        summary: "PFMERGE destkey [sourcekey ...]: merges HyperLogLogs into destkey.",
        run: pfmerge,
    },
    Spec {
        name: "pfdebug",
        arity: 3,
        flags: &["write", "denyoom", "admin"],
        keys: (2, 2, 1),
        group: "hyperloglog",
        summary: "PFDEBUG GETREG|DECODE|ENCODING|TODENSE key: internal HyperLogLog debugging.",
        run: pfdebug,
    },
    Spec {
        name: "pfselftest",
        arity: 1,
        flags: &["admin"],
        keys: (0, 0, 0),
        group: "hyperloglog",
        summary: "PFSELFTEST: tests the HyperLogLog implementation.",
        run: pfselftest,
    },
];

fn invalid() -> CmdError {
    CmdError("INVALIDOBJ Corrupted HLL object detected".into())
}

fn not_hll() -> CmdError {
    CmdError("WRONGTYPE Key is not a valid HyperLogLog string value.".into())
}

/// `hll-sparse-max-bytes`.
fn sparse_max(cx: &Ctx) -> usize {
    inert_value(&cx.st.inert, "hll-sparse-max-bytes").and_then(crate::size::parse).unwrap_or(3000) as usize
}

/// The HLL at `key`: `None` if missing, WRONGTYPE if not an HLL string.
fn lookup_hll(cx: &mut Ctx, key: &[u8]) -> Res<Option<Meta>> {
    match cx.lookup_kind(key, Kind::String)? {
        Some(m) if !hll::is_hll(&m.value) => Err(not_hll()),
        other => Ok(other),
    }
}

/// Writes the new bytes of an HLL, keeping the key's TTL.
fn store(cx: &mut Ctx, key: &[u8], old: Option<&Meta>, v: Vec<u8>) -> Res<()> {
    let exp = old.map_or(0, |m| m.expire_at);
    put_string(cx, key, old, v, exp)
}

/// Stores a sparse HyperLogLog made dense: the same registers, so as in
/// Redis 7.0 (PFDEBUG GETREG / TODENSE) no WATCH breaks and no event goes out.
fn store_encoding(cx: &mut Ctx, key: &[u8], old: &Meta, v: Vec<u8>) -> Res<()> {
    cx.st.encoding_only = true;
    let stored = store(cx, key, Some(old), v);
    cx.st.encoding_only = false;
    stored
}

fn pfadd(cx: &mut Ctx, a: &[Vec<u8>]) -> CmdResult {
    let max = sparse_max(cx);
    let old = lookup_hll(cx, &a[1])?;
    let (mut v, mut updated) = match &old {
        Some(m) => (m.value.clone(), 0),
        None => (hll::new_sparse(), 1),
    };
    for ele in &a[2..] {
        match hll::add(&mut v, ele, max) {
            Ok(true) => updated += 1,
            Ok(false) => {}
            Err(_) => {
                // Redis updates in place: the elements added before the
                // corrupt part was found stay added.
                if old.as_ref().is_some_and(|m| m.value != v) {
                    store(cx, &a[1], old.as_ref(), v)?;
                }
                return Err(invalid());
            }
        }
    }
    if updated > 0 {
        hll::invalidate(&mut v);
        store(cx, &a[1], old.as_ref(), v)?;
    }
    Ok(Reply::Int((updated > 0) as i64))
}

fn pfcount(cx: &mut Ctx, a: &[Vec<u8>]) -> CmdResult {
    if a.len() > 2 {
        let mut max = vec![0u8; REGISTERS];
        for key in &a[1..] {
            if let Some(m) = lookup_hll(cx, key)? {
                hll::merge_into(&mut max, &m.value).map_err(|_| invalid())?;
            }
        }
        return Ok(Reply::Int(hll::count_raw(&max) as i64));
    }
    let Some(m) = lookup_hll(cx, &a[1])? else { return Ok(Reply::Int(0)) };
    if let Some(card) = hll::cached(&m.value) {
        return Ok(Reply::Int(card as i64));
    }
    let card = hll::count(&m.value).map_err(|_| invalid())?;
    let mut v = m.value.clone();
    hll::set_cache(&mut v, card);
    store(cx, &a[1], Some(&m), v)?;
    Ok(Reply::Int(card as i64))
}

fn pfmerge(cx: &mut Ctx, a: &[Vec<u8>]) -> CmdResult {
    let sparse_max = sparse_max(cx);
    let mut max = vec![0u8; REGISTERS];
    let mut dense = false;
    for key in &a[1..] {
        if let Some(m) = lookup_hll(cx, key)? {
            dense |= m.value[4] == DENSE;
            hll::merge_into(&mut max, &m.value).map_err(|_| invalid())?;
        }
    }
    let old = cx.lookup_kind(&a[1], Kind::String)?;
    let mut v = old.as_ref().map_or_else(hll::new_sparse, |m| m.value.clone());
    if dense {
        hll::to_dense(&mut v).map_err(|_| invalid())?;
    }
    for (i, &r) in max.iter().enumerate() {
        if r != 0 {
            hll::raise(&mut v, i, r, sparse_max);
        }
    }
    hll::invalidate(&mut v);
    store(cx, &a[1], old.as_ref(), v)?;
    Ok(Reply::ok())
}

fn pfdebug(cx: &mut Ctx, a: &[Vec<u8>]) -> CmdResult {
    let sub = &a[1];
    let Some(m) = cx.lookup(&a[2])? else { return Err(CmdError::err("The specified key does not exist")) };
    if m.kind != Kind::String {
        return Err(CmdError::wrongtype());
    }
    if !hll::is_hll(&m.value) {
        return Err(not_hll());
    }
    let sparse = m.value[4] == SPARSE;
    if is(sub, "getreg") {
        let mut v = m.value.clone();
        if sparse {
            hll::to_dense(&mut v).map_err(|_| invalid())?;
            store_encoding(cx, &a[2], &m, v.clone())?;
        }
        let regs = &v[HDR..];
        Ok(Reply::Array((0..REGISTERS).map(|i| Reply::Int(hll::dense_get(regs, i) as i64)).collect()))
    } else if is(sub, "decode") {
        if !sparse {
            return Err(CmdError::err("HLL encoding is not sparse"));
        }
        Ok(Reply::Bulk(hll::decode(&m.value).into_bytes()))
    } else if is(sub, "encoding") {
        Ok(Reply::Simple(if sparse { "sparse" } else { "dense" }.into()))
    } else if is(sub, "todense") {
        if !sparse {
            return Ok(Reply::Int(0));
        }
        let mut v = m.value.clone();
        hll::to_dense(&mut v).map_err(|_| invalid())?;
        store_encoding(cx, &a[2], &m, v)?;
        Ok(Reply::Int(1))
    } else {
        Err(CmdError::err(format!("Unknown PFDEBUG subcommand '{}'", String::from_utf8_lossy(sub))))
    }
}

/// Redis's self test: packed registers read back what was written, and
/// sparse and dense HLLs fed the same 10 million elements agree and stay
/// within six standard errors at every power of ten.
fn pfselftest(cx: &mut Ctx, _: &[Vec<u8>]) -> CmdResult {
    let failed = |msg: String| Err(CmdError(format!("TESTFAILED {msg}")));
    let mut rng = rand::thread_rng();
    let mut regs = vec![0u8; REGISTERS * 6 / 8];
    let mut bytes = vec![0u8; REGISTERS];
    for _ in 0..1000 {
        for (i, b) in bytes.iter_mut().enumerate() {
            *b = rng.gen_range(0..64);
            hll::dense_set_raw(&mut regs, i, *b);
        }
        for (i, &b) in bytes.iter().enumerate() {
            let got = hll::dense_get(&regs, i);
            if got != b {
                return failed(format!("Register {i} should be {b} but is {got}"));
            }
        }
    }
    let max = sparse_max(cx);
    let mut dense = hll::new_sparse();
    hll::to_dense(&mut dense).map_err(|_| invalid())?;
    let mut sparse = hll::new_sparse();
    let relerr = 1.04 / (REGISTERS as f64).sqrt();
    let seed: u64 = rng.gen();
    let mut checkpoint: u64 = 1;
    for j in 1..=10_000_000u64 {
        let ele = (j ^ seed).to_le_bytes();
        hll::add(&mut dense, &ele, max).map_err(|_| invalid())?;
        hll::add(&mut sparse, &ele, max).map_err(|_| invalid())?;
        if j != checkpoint {
            continue;
        }
        if (j as usize) < max / 2 && sparse[4] != SPARSE {
            return failed("sparse encoding not used".into());
        }
        let card = hll::count(&dense).map_err(|_| invalid())?;
        if hll::count(&sparse).map_err(|_| invalid())? != card {
            return failed("dense/sparse disagree".into());
        }
        let abserr = (checkpoint as i64 - card as i64).unsigned_abs();
        let maxerr = if j == 10 { 1 } else { (relerr * 6.0 * checkpoint as f64).ceil() as u64 };
        if abserr > maxerr {
            return failed(format!("Too big error. card:{checkpoint} abserr:{abserr}"));
        }
        checkpoint *= 10;
    }
    Ok(Reply::ok())
}
