//! MEMORY (USAGE, DOCTOR, STATS, PURGE, HELP): the introspection that
//! tools and test harnesses call.
//!
//! MEMORY USAGE estimates the pool bytes a key takes the way Redis does:
//! the metadata record plus, for a collection, the average of a sample of
//! its elements times its size (`SAMPLES 0` reads every element). Each
//! stored key is charged its bytes plus [`ENTRY_OVERHEAD`].

use std::ops::Bound;

use super::args::{int, is};
use super::{CmdError, CmdResult, Spec};
use crate::encoding::{meta_key, Kind, Meta, SUB};
use crate::exec::{Ctx, State};
use crate::keyspace::{fields, sub_bounds};
use crate::resp::Reply;

/// Bytes the engine spends per stored key beyond the key and value bytes:
/// a 32-byte leaf slot plus a record header with its checksum.
pub const ENTRY_OVERHEAD: u64 = 48;

pub const COMMANDS: &[Spec] = &[Spec {
    name: "memory",
    arity: -2,
    flags: &["readonly"],
    keys: (2, 2, 1),
    group: "server",
    summary: "MEMORY USAGE key [SAMPLES count] | DOCTOR | STATS | PURGE | MALLOC-STATS | HELP.",
    run: memory,
}];

fn memory(cx: &mut Ctx, a: &[Vec<u8>]) -> CmdResult {
    let sub = String::from_utf8_lossy(&a[1]).to_ascii_lowercase();
    match sub.as_str() {
        "usage" if a.len() == 3 || a.len() == 5 => {
            let samples = match a.get(3) {
                None => 5,
                Some(opt) if is(opt, "samples") => {
                    let n = int(&a[4])?;
                    if n < 0 {
                        return Err(CmdError::syntax());
                    }
                    if n == 0 {
                        usize::MAX
                    } else {
                        n as usize
                    }
                }
                Some(_) => return Err(CmdError::syntax()),
            };
            usage(cx, &a[2], samples)
        }
        "doctor" if a.len() == 2 => Ok(Reply::bulk(
            "Tembo keeps every key in its persistent pool; INFO memory reports the pool's use. Nothing to report.",
        )),
        "stats" if a.len() == 2 => {
            let pool = cx.st.store.db().pool();
            let used = pool.used_bytes();
            let size = pool.size();
            let keys: i64 = (0..cx.st.gens.len()).map(|d| cx.st.key_count(d)).sum();
            Ok(Reply::Map(vec![
                (Reply::bulk("total.allocated"), Reply::Int(used as i64)),
                (Reply::bulk("keys.count"), Reply::Int(keys)),
                (Reply::bulk("dataset.bytes"), Reply::Int(used as i64)),
                (Reply::bulk("pool.size"), Reply::Int(size as i64)),
            ]))
        }
        "purge" if a.len() == 2 => Ok(Reply::ok()),
        // Redis's answer when its allocator is not jemalloc.
        "malloc-stats" if a.len() == 2 => Ok(Reply::bulk("Stats not supported for the current allocator")),
        "help" if a.len() == 2 => Ok(super::help(&[
            "MEMORY <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
            "DOCTOR",
            "    Return memory problems reports.",
            "STATS",
            "    Return information about the memory usage of the server.",
            "USAGE <key> [SAMPLES <count>]",
            "    Return memory in bytes used by <key> and its value. Nested values are",
            "    sampled up to <count> times (default: 5, 0 means sample all).",
            "PURGE",
            "    Nothing to purge: the pool reclaims space in the background.",
            "MALLOC-STATS",
            "    Return internal statistics report from the memory allocator.",
        ])),
        _ => Err(super::subcommand_error(a, "MEMORY")),
    }
}

fn usage(cx: &mut Ctx, key: &[u8], samples: usize) -> CmdResult {
    let Some(m) = cx.lookup(key)? else { return Ok(Reply::Nil) };
    Ok(Reply::Int(key_bytes(cx.st, cx.db(), key, &m, samples)? as i64))
}

/// The pool bytes `key` of physical database `db` (metadata `m`) takes,
/// estimated from `samples` of its elements (`usize::MAX`: all): what
/// MEMORY USAGE reports and what an eviction counts as freed.
pub fn key_bytes(st: &State, db: u8, key: &[u8], m: &Meta, samples: usize) -> Result<u64, CmdError> {
    let meta_bytes = meta_key(db, 0, key).len() as u64 + m.encode().len() as u64 + ENTRY_OVERHEAD;
    if m.kind == Kind::String && m.is_chunked() {
        // A big string's bytes are in chunks beside its metadata.
        return Ok(meta_bytes.saturating_add(m.size));
    }
    if m.kind == Kind::String || m.size == 0 {
        return Ok(meta_bytes);
    }
    let prefix = crate::encoding::sub_prefix(SUB, db, key, m.version);
    let (lo, hi) = sub_bounds(&prefix, Bound::Unbounded, Bound::Unbounded);
    let sample = fields(st.store.scan(lo, hi, false), prefix.len(), samples)?;
    let sampled: u64 =
        sample.iter().map(|(f, v)| prefix.len() as u64 + f.len() as u64 + v.len() as u64 + ENTRY_OVERHEAD).sum();
    let n = sample.len().max(1) as u64;
    // A sorted-set member is stored twice: by member and in the score index
    // (8 score bytes in its key, an empty value).
    let per_element = match m.kind {
        Kind::ZSet => sampled / n * 2,
        _ => sampled / n,
    };
    Ok(meta_bytes.saturating_add(per_element.saturating_mul(m.size)))
}
