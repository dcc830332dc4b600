//! DUMP and RESTORE: a key's value as Redis's serialized payload and back.
//!
//! Payloads are Redis's (`crate::rdb_value`, RDB version 10 with CRC-64):
//! what Tembo dumps, Redis 7 restores, and what Redis dumps (its listpack,
//! ziplist, intset and quicklist encodings included), Tembo restores.
//! Streams are written in Redis 7.0's listpack-node format and restored
//! from it or from Redis 5–6's (`crate::rdb_stream`), consumer groups,
//! pending entries and consumers included. A restored key is written like
//! any other, in the command's group commit.

use std::collections::HashSet;
use std::ops::Bound;

use super::args::{int, is};
use super::lists::check_sizes;
use super::{CmdError, CmdResult, Spec};
use crate::encoding::{score_of_value, score_value, sub_key, zidx_key, Kind, Meta, LIST_MID, SUB};
use crate::exec::Ctx;
use crate::keyspace::SubRange;
use crate::rdb;
use crate::rdb_stream::{GroupValue, StreamValue};
use crate::rdb_value::{self, Pairs, Value};
use crate::resp::Reply;
use crate::stream::{self, Stream, StreamState};
use crate::stream_cg::{self, Group, Nack};
use crate::stream_id::StreamId;

pub const COMMANDS: &[Spec] = &[
    Spec {
        name: "dump",
        arity: 2,
        flags: &["readonly"],
        keys: (1, 1, 1),
        group: "keyspace",
        summary: "DUMP key: the value serialized in Redis's format, for RESTORE.",
        run: dump,
    },
    Spec {
        name: "restore",
        arity: -4,
        flags: &["write", "denyoom"],
        keys: (1, 1, 1),
        group: "keyspace",
        summary: "RESTORE key ttl payload [REPLACE] [ABSTTL] [IDLETIME seconds] [FREQ frequency]: creates a key from DUMP's payload.",
        run: restore,
    },
];

fn dump(cx: &mut Ctx, a: &[Vec<u8>]) -> CmdResult {
    let key = &a[1];
    let Some(m) = cx.lookup(key)? else { return Ok(Reply::Nil) };
    Ok(Reply::Bulk(payload(cx, key, &m)?))
}

/// A key's value serialized as DUMP gives it (RESTORE's payload; MIGRATE
/// sends it). Its strings are LZF-compressed where that pays, as Redis's
/// DUMP does under its default `rdbcompression yes`: besides smaller
/// payloads, that keeps the DUMP of a string near the 512 MiB limit (a
/// SETBIT far out) under `proto-max-bulk-len`, so that RESTORE, here or in
/// Redis, can take it back.
pub(super) fn payload(cx: &mut Ctx, key: &[u8], m: &Meta) -> Result<Vec<u8>, CmdError> {
    Ok(rdb::seal(rdb_value::encode_compressed(&value_of(cx, key, m)?)))
}

/// A key's whole value (`m` as a lookup gives it).
pub(crate) fn value_of(cx: &impl SubRange, key: &[u8], m: &Meta) -> Result<Value, CmdError> {
    let all = || cx.sub_range(SUB, key, m, Bound::Unbounded, Bound::Unbounded, false, usize::MAX);
    let value = match m.kind {
        Kind::String => Value::String(m.value.clone()),
        Kind::List => Value::List(all()?.into_iter().map(|(_, v)| v).collect()),
        Kind::Set => Value::Set(all()?.into_iter().map(|(f, _)| f).collect()),
        Kind::Hash => {
            let mut pairs = all()?;
            super::hash_order::sort(m, &mut pairs);
            Value::Hash(pairs)
        }
        Kind::ZSet => Value::ZSet(
            all()?
                .into_iter()
                .map(|(member, v)| score_of_value(&v).map(|s| (member, s)).ok_or_else(|| CmdError::corrupt(key)))
                .collect::<Result<_, _>>()?,
        ),
        Kind::Stream => Value::Stream(stream_value(cx, key, m)?),
    };
    Ok(value)
}

fn restore(cx: &mut Ctx, a: &[Vec<u8>]) -> CmdResult {
    let key = &a[1];
    let (mut replace, mut absttl, mut idle, mut freq) = (false, false, None, None);
    let mut j = 4;
    while j < a.len() {
        if is(&a[j], "replace") {
            replace = true;
        } else if is(&a[j], "absttl") {
            absttl = true;
        } else if is(&a[j], "idletime") && j + 1 < a.len() && freq.is_none() {
            j += 1;
            let secs = u64::try_from(int(&a[j])?).map_err(|_| CmdError::err("Invalid IDLETIME value, must be >= 0"))?;
            idle = Some(secs);
        } else if is(&a[j], "freq") && j + 1 < a.len() && idle.is_none() {
            j += 1;
            let f = int(&a[j])?;
            if !(0..=255).contains(&f) {
                return Err(CmdError::err("Invalid FREQ value, must be >= 0 and <= 255"));
            }
            freq = Some(f as u8);
        } else {
            return Err(CmdError::syntax());
        }
        j += 1;
    }
    let ttl = int(&a[2])?;
    if ttl < 0 {
        return Err(CmdError::err("Invalid TTL value, must be >= 0"));
    }
    let old = cx.lookup(key)?;
    if old.is_some() && !replace {
        return Err(CmdError("BUSYKEY Target key name already exists.".into()));
    }
    let body = rdb::open_checked(&a[3], !cx.st.skip_checksum)
        .map_err(|_| CmdError::err("DUMP payload version or checksum are wrong"))?;
    let value =
        rdb_value::decode_versioned(body, rdb::version_of(&a[3])).map_err(|_| CmdError::err("Bad data format"))?;
    check_unique(&value)?;
    let now = crate::exec::now_ms();
    let expire_at = match (ttl, absttl) {
        (0, _) => 0,
        (t, true) => t as u64,
        // Redis adds the time to the TTL in a signed 64-bit integer with no
        // overflow check: a TTL that overflows comes out negative, so the
        // key counts as already expired.
        (t, false) => match (now as i64).wrapping_add(t) {
            at if at <= 0 => 1,
            at => at as u64,
        },
    };
    if expire_at != 0 && expire_at <= now {
        // Already expired: the key is not created (and a replaced one goes).
        if let Some(old) = &old {
            cx.remove(key, old);
        }
        return Ok(Reply::ok());
    }
    let mut meta = match value {
        Value::String(s) => {
            check_sizes(cx, key.len(), s.len())?;
            Meta::string(s)
        }
        Value::Stream(v) => write_stream(cx, key, v)?,
        collection => write_elements(cx, key, collection)?,
    };
    meta.expire_at = expire_at;
    cx.write_meta(key, old.as_ref(), &meta)?;
    // As Redis's objectSetLRUOrLFU: FREQ counts under an LFU policy,
    // IDLETIME under any other.
    let db = cx.db();
    match (idle, freq) {
        (_, Some(f)) if cx.st.maxmemory.policy.lfu() => cx.st.access.set_freq(db, key, f, cx.now),
        (Some(secs), _) if !cx.st.maxmemory.policy.lfu() => cx.st.access.set_idle(db, key, secs, cx.now),
        _ => {}
    }
    Ok(Reply::ok())
}

/// Redis refuses a payload whose set, hash or sorted set repeats a member.
fn check_unique(v: &Value) -> Result<(), CmdError> {
    fn unique<'a>(mut names: impl Iterator<Item = &'a Vec<u8>>) -> bool {
        let mut seen = HashSet::new();
        names.all(|n| seen.insert(n))
    }
    let ok = match v {
        // A stream's payload is checked for duplicates as it decodes.
        Value::String(_) | Value::List(_) | Value::Stream(_) => true,
        Value::Set(m) => unique(m.iter()),
        Value::Hash(p) => unique(p.iter().map(|(f, _)| f)),
        Value::ZSet(p) => unique(p.iter().map(|(m, _)| m)),
    };
    if ok {
        Ok(())
    } else {
        Err(CmdError::err("Bad data format"))
    }
}

/// Stages a restored collection's elements under a new version; its
/// metadata (not yet written).
fn write_elements(cx: &mut Ctx, key: &[u8], value: Value) -> Result<Meta, CmdError> {
    let (kind, elements): (Kind, Pairs) = match value {
        Value::List(items) => {
            let fields = (0..items.len() as u64).map(|i| (LIST_MID + i).to_be_bytes().to_vec());
            (Kind::List, fields.zip(items).collect())
        }
        Value::Set(members) => (Kind::Set, members.into_iter().map(|m| (m, Vec::new())).collect()),
        Value::Hash(pairs) => (Kind::Hash, pairs),
        Value::ZSet(pairs) => (Kind::ZSet, pairs.into_iter().map(|(m, s)| (m, score_value(s))).collect()),
        Value::String(_) | Value::Stream(_) => unreachable!("strings and streams are written by the caller"),
    };
    // Redis refuses an empty collection (a key cannot hold one).
    if elements.is_empty() {
        return Err(CmdError::err("Bad data format"));
    }
    let db = cx.db();
    let longest_field = elements.iter().map(|(f, _)| f.len()).max().unwrap_or(0);
    let longest_value = elements.iter().map(|(_, v)| v.len()).max().unwrap_or(0);
    check_sizes(cx, sub_key(db, key, 0, &vec![0; longest_field]).len() + 8, longest_value)?;
    let mut meta = cx.new_collection(kind);
    if kind == Kind::Hash {
        // The payload's order is the hash's, as Redis loads a listpack.
        super::hash_order::set_new(cx, &mut meta, &elements);
    }
    for (field, v) in elements {
        if kind == Kind::ZSet {
            let score = score_of_value(&v).ok_or_else(|| CmdError::err("Bad data format"))?;
            cx.st.store.put(zidx_key(db, key, meta.version, score, &field), Vec::new())?;
        }
        cx.st.store.put(sub_key(db, key, meta.version, &field), v)?;
        meta.size += 1;
    }
    Ok(meta)
}

/// A stream's entries, counters and groups, as DUMP writes them.
fn stream_value(cx: &impl SubRange, key: &[u8], m: &Meta) -> Result<StreamValue, CmdError> {
    let s = Stream::from_meta(key, m.clone())?;
    let entries = stream::range(cx, key, &s, StreamId::MIN, StreamId::MAX, false, 0)?;
    let mut groups = Vec::new();
    for g in stream_cg::groups(cx, key, &s)? {
        let pending = stream_cg::pel_range(cx, key, &s, &g.name, StreamId::MIN, StreamId::MAX, usize::MAX)?
            .into_iter()
            .map(|n| (n.id, n.delivery_time, n.delivery_count, n.consumer))
            .collect();
        let consumers = stream_cg::consumers(cx, key, &s, &g.name)?;
        let entries_read = u64::try_from(g.entries_read).ok();
        groups.push(GroupValue { name: g.name, last_id: g.last_id, entries_read, pending, consumers });
    }
    Ok(StreamValue {
        entries,
        last_id: s.st.last_id,
        first_id: s.st.first_id,
        max_deleted: s.st.max_deleted,
        entries_added: s.st.entries_added,
        groups,
        legacy: false,
    })
}

/// Stages a restored stream's entries (in nodes as XADD would make them),
/// groups, consumers and pending entries under a new version; its
/// metadata (not yet written).
fn write_stream(cx: &mut Ctx, key: &[u8], v: StreamValue) -> Result<Meta, CmdError> {
    let mut s = stream::create(cx);
    for (id, fv) in &v.entries {
        stream::append(cx, key, &mut s, *id, fv)?;
    }
    s.st = StreamState {
        last_id: v.last_id,
        entries_added: v.entries_added,
        max_deleted: v.max_deleted,
        first_id: v.first_id,
    };
    for g in v.groups {
        let entries_read = if v.legacy {
            stream_cg::estimate_distance(&s, g.last_id)
        } else {
            g.entries_read.and_then(|n| i64::try_from(n).ok()).unwrap_or(stream_cg::INVALID)
        };
        stream_cg::group_put(cx, key, &s, &Group { name: g.name.clone(), last_id: g.last_id, entries_read })?;
        for (name, seen) in &g.consumers {
            stream_cg::consumer_put(cx, key, &s, &g.name, name, *seen)?;
        }
        for (id, delivery_time, delivery_count, consumer) in g.pending {
            let nack = Nack { id, consumer, delivery_time, delivery_count };
            stream_cg::nack_put(cx, key, &s, &g.name, &nack, None)?;
        }
    }
    Ok(s.meta_out())
}
