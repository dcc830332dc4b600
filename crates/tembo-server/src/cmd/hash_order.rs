//! The order of a small hash's fields.
//!
//! Redis keeps a hash of at most `hash-max-listpack-entries` fields, none
//! of whose fields or values is longer than `hash-max-listpack-value`
//! bytes, as a listpack: HGETALL, HKEYS, HVALS, HSCAN and HRANDFIELD give
//! its fields in the order they were first set (an overwrite keeps a
//! field's place, HDEL closes the gap), and applications show or compare
//! them in that order. A bigger hash becomes a hash table, whose order is
//! arbitrary, and never goes back.
//!
//! Tembo's fields are sub-keys, in byte order. While a hash has the
//! listpack's shape it also keeps an *order index* beside them, under the
//! collection's `ZIDX` prefix (which a hash does not otherwise use, and
//! which the background reclaimer already deletes with the collection):
//!
//! ```text
//! Z db len(key) key version seq -> field      (seq: 8 bytes, big-endian)
//! ```
//!
//! and its metadata's `head` holds the next sequence number; `head == 0`
//! means the hash keeps no order index (it outgrew the shape, or an older
//! Tembo wrote it) and reads in byte order, as Redis's hash table reads in
//! its own. Adding a field appends an entry, HDEL deletes the removed
//! fields' entries (a walk of at most the listpack's size, as a listpack
//! delete is in Redis), and outgrowing the shape deletes the index, in the
//! same batch as the change.
//!
//! Reads treat the index as a hint, never as the truth: the sub-keys say
//! which fields exist, the index only where they go; a field it does not
//! name comes after those it does, in byte order.

use std::collections::{HashMap, HashSet};
use std::ops::Bound;

use crate::encoding::{sub_prefix, Kind, Meta, HASH_FIRST_SEQ, ZIDX};
use crate::exec::Ctx;
use crate::keyspace::{Res, SubRange};

/// The listpack limits in force (`hash-max-listpack-entries`, `-value`).
struct Shape {
    entries: u64,
    value: usize,
}

impl Shape {
    fn of(cx: &Ctx) -> Shape {
        let setting = |name: &str, default: u64| {
            super::server::inert_value(&cx.st.inert, name).and_then(|v| v.parse::<u64>().ok()).unwrap_or(default)
        };
        Shape {
            entries: setting("hash-max-listpack-entries", 512),
            value: usize::try_from(setting("hash-max-listpack-value", 64)).unwrap_or(usize::MAX),
        }
    }
}

/// Whether the hash `m` keeps an order index.
pub fn is_ordered(m: &Meta) -> bool {
    m.kind == Kind::Hash && m.head != 0
}

fn index_key(cx: &Ctx, key: &[u8], version: u64, seq: u64) -> Vec<u8> {
    let mut k = sub_prefix(ZIDX, cx.db(), key, version);
    k.extend_from_slice(&seq.to_be_bytes());
    k
}

/// The order index of `m` as (seq bytes, field), in order.
fn index(cx: &impl SubRange, key: &[u8], m: &Meta) -> Res<Vec<(Vec<u8>, Vec<u8>)>> {
    cx.sub_range(ZIDX, key, m, Bound::Unbounded, Bound::Unbounded, false, usize::MAX)
}

/// Before `field` is set to a value `value_len` bytes long in the hash
/// `m`: a field or value too long for a listpack drops the order index (as
/// Redis converts before it sets).
pub fn before_set(cx: &mut Ctx, key: &[u8], m: &mut Meta, field: &[u8], value_len: usize) -> Res<()> {
    if !is_ordered(m) {
        return Ok(());
    }
    let shape = Shape::of(cx);
    if field.len() > shape.value || value_len > shape.value {
        drop_index(cx, key, m)?;
    }
    Ok(())
}

/// After `field` was set in the hash `m` (`m.size` counts it; `added`: it
/// was new): a new field goes at the end of the order, and a hash of more
/// than `hash-max-listpack-entries` fields drops its index (Redis checks
/// after an overwrite too, so a lowered limit converts on the next write).
pub fn after_set(cx: &mut Ctx, key: &[u8], m: &mut Meta, field: &[u8], added: bool) -> Res<()> {
    if !is_ordered(m) {
        return Ok(());
    }
    if m.size > Shape::of(cx).entries {
        return drop_index(cx, key, m);
    }
    if added {
        let k = index_key(cx, key, m.version, m.head);
        cx.st.store.put(k, field.to_vec())?;
        m.head += 1;
    }
    Ok(())
}

/// After `removed` fields were deleted from the hash `m`: their index
/// entries go too (none to delete when the hash went with its last field).
pub fn after_delete(cx: &mut Ctx, key: &[u8], m: &Meta, removed: &HashSet<&[u8]>) -> Res<()> {
    if !is_ordered(m) || removed.is_empty() || m.size == 0 {
        return Ok(());
    }
    for (seq, field) in index(cx, key, m)? {
        if removed.contains(field.as_slice()) {
            let k = [sub_prefix(ZIDX, cx.db(), key, m.version), seq].concat();
            cx.st.store.delete(k);
        }
    }
    Ok(())
}

/// Deletes the order index of `m`, which reads in byte order from now on.
fn drop_index(cx: &mut Ctx, key: &[u8], m: &mut Meta) -> Res<()> {
    let prefix = sub_prefix(ZIDX, cx.db(), key, m.version);
    for (seq, _) in index(cx, key, m)? {
        cx.st.store.delete([prefix.as_slice(), &seq].concat());
    }
    m.head = 0;
    Ok(())
}

/// A new hash's metadata once its `fields` (in order) are stored: ordered
/// when they fit a listpack (how Redis loads a hash from a payload), with
/// its index written.
pub fn index_new(cx: &mut Ctx, key: &[u8], m: &mut Meta, fields: &[(Vec<u8>, Vec<u8>)]) -> Res<()> {
    let shape = Shape::of(cx);
    let fits = fields.len() as u64 <= shape.entries
        && fields.iter().all(|(f, v)| f.len() <= shape.value && v.len() <= shape.value);
    if !fits {
        m.head = 0;
        return Ok(());
    }
    m.head = HASH_FIRST_SEQ;
    for (field, _) in fields {
        let k = index_key(cx, key, m.version, m.head);
        cx.st.store.put(k, field.clone())?;
        m.head += 1;
    }
    Ok(())
}

/// Copies the order index of `m` (read from `entries`, as [`entries`]
/// gives them) to the hash `dst` of stored database `dst_db` under
/// `version` (COPY, RENAME, MOVE: the copy keeps the order).
pub fn copy_index(cx: &mut Ctx, entries: Vec<(Vec<u8>, Vec<u8>)>, dst_db: u8, dst: &[u8], version: u64) -> Res<()> {
    let prefix = sub_prefix(ZIDX, dst_db, dst, version);
    for (seq, field) in entries {
        cx.st.store.put([prefix.as_slice(), &seq].concat(), field)?;
    }
    Ok(())
}

/// The order index of `m` for [`copy_index`] (empty when it keeps none).
pub fn entries(cx: &Ctx, key: &[u8], m: &Meta) -> Res<Vec<(Vec<u8>, Vec<u8>)>> {
    if is_ordered(m) {
        index(cx, key, m)
    } else {
        Ok(Vec::new())
    }
}

/// Puts `pairs` (fields of the hash `m`, in byte order) in the hash's
/// order: the order index's, then any field it does not name.
pub fn sort<T>(cx: &impl SubRange, key: &[u8], m: &Meta, pairs: &mut [(Vec<u8>, T)]) -> Res<()> {
    if !is_ordered(m) || pairs.len() < 2 {
        return Ok(());
    }
    let position: HashMap<Vec<u8>, usize> =
        index(cx, key, m)?.into_iter().enumerate().map(|(i, (_, field))| (field, i)).collect();
    // A stable sort: fields the index misses keep their byte order, last.
    pairs.sort_by_key(|(field, _)| position.get(field).copied().unwrap_or(usize::MAX));
    Ok(())
}
