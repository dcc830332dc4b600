//! Consumer groups as stored records: groups, their pending entries lists
//! (PEL) and consumers, all under the stream's [`STREAM_AUX`] tag and
//! version, so that they are deleted, copied and persisted with the stream.
//!
//! ```text
//! g group                                  -> last delivered ID (16) | entries read (i64)
//! p len(group) group id                    -> delivery time (ms) | delivery count | consumer
//! c len(group) group consumer              -> seen time (ms)
//! q len(group) group len(consumer) consumer id -> ""   (the consumer's own PEL, by ID)
//! ```
//!
//! Redis keeps the same structures in memory (radix trees, ordered by
//! bytes, which is the order of these keys); delivery and seen times are
//! wall-clock milliseconds, so they survive a restart. The lag and
//! entries-read arithmetic of Redis 7.0 is here too.
//!
//! [`STREAM_AUX`]: crate::encoding::STREAM_AUX

use std::ops::Bound;

use crate::cmd::CmdError;
use crate::encoding::STREAM_AUX;
use crate::exec::Ctx;
use crate::keyspace::Res;
use crate::keyspace::SubRange;
use crate::stream::{aux_del, aux_get, aux_put, aux_scan, Stream};
use crate::stream_id::StreamId;

/// `SCG_INVALID_ENTRIES_READ`.
pub const INVALID: i64 = -1;

/// A consumer group.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Group {
    /// Its name.
    pub name: Vec<u8>,
    /// Last delivered ID.
    pub last_id: StreamId,
    /// Entries read (logical counter), or [`INVALID`].
    pub entries_read: i64,
}

/// A pending entry.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Nack {
    /// The entry's ID.
    pub id: StreamId,
    /// Its consumer.
    pub consumer: Vec<u8>,
    /// Last delivery (Unix ms).
    pub delivery_time: u64,
    /// Deliveries.
    pub delivery_count: u64,
}

fn with_len(tag: u8, name: &[u8]) -> Vec<u8> {
    let mut f = Vec::with_capacity(5 + name.len() + 16);
    f.push(tag);
    f.extend_from_slice(&(name.len() as u32).to_be_bytes());
    f.extend_from_slice(name);
    f
}

fn group_field(name: &[u8]) -> Vec<u8> {
    [b"g", name].concat()
}

fn pel_prefix(group: &[u8]) -> Vec<u8> {
    with_len(b'p', group)
}

fn consumer_prefix(group: &[u8]) -> Vec<u8> {
    with_len(b'c', group)
}

fn cpel_prefix(group: &[u8], consumer: &[u8]) -> Vec<u8> {
    let mut f = with_len(b'q', group);
    f.extend_from_slice(&(consumer.len() as u32).to_be_bytes());
    f.extend_from_slice(consumer);
    f
}

/// Group `name` of the stream.
pub fn group_get(cx: &Ctx, key: &[u8], s: &Stream, name: &[u8]) -> Res<Option<Group>> {
    let Some(v) = aux_get(cx, key, s, &group_field(name))? else { return Ok(None) };
    decode_group(name, &v).map(Some).ok_or_else(|| CmdError::corrupt(key))
}

fn decode_group(name: &[u8], v: &[u8]) -> Option<Group> {
    Some(Group {
        name: name.to_vec(),
        last_id: StreamId::from_bytes(v)?,
        entries_read: i64::from_be_bytes(v.get(16..24)?.try_into().ok()?),
    })
}

/// Writes group `g`.
pub fn group_put(cx: &mut Ctx, key: &[u8], s: &Stream, g: &Group) -> Res<()> {
    let mut v = g.last_id.bytes().to_vec();
    v.extend_from_slice(&g.entries_read.to_be_bytes());
    aux_put(cx, key, s, &group_field(&g.name), v)
}

/// Every group, by name.
pub fn groups(cx: &impl SubRange, key: &[u8], s: &Stream) -> Res<Vec<Group>> {
    aux_scan(cx, key, s, b"g", None, false, usize::MAX)?
        .iter()
        .map(|(n, v)| decode_group(n, v).ok_or_else(|| CmdError::corrupt(key)))
        .collect()
}

/// Records between `prefix+lo` and `prefix+hi` (inclusive), at most `limit`; (suffix, value).
fn between(
    cx: &impl SubRange,
    key: &[u8],
    s: &Stream,
    prefix: &[u8],
    lo: &[u8],
    hi: &[u8],
    limit: usize,
) -> Res<Vec<(Vec<u8>, Vec<u8>)>> {
    let (l, h) = ([prefix, lo].concat(), [prefix, hi].concat());
    let rows = cx.sub_range(STREAM_AUX, key, &s.meta, Bound::Included(&l), Bound::Included(&h), false, limit)?;
    Ok(rows.into_iter().map(|(f, v)| (f[prefix.len()..].to_vec(), v)).collect())
}

/// Deletes every record of group `name` (XGROUP DESTROY).
pub fn group_destroy(cx: &mut Ctx, key: &[u8], s: &Stream, name: &[u8]) -> Res<()> {
    for prefix in [pel_prefix(name), consumer_prefix(name), with_len(b'q', name)] {
        for (suffix, _) in aux_scan(cx, key, s, &prefix, None, false, usize::MAX)? {
            aux_del(cx, key, s, &[&prefix[..], &suffix].concat());
        }
    }
    aux_del(cx, key, s, &group_field(name));
    Ok(())
}

/// The seen time of consumer `name` of `group`, if it exists.
pub fn consumer_get(cx: &Ctx, key: &[u8], s: &Stream, group: &[u8], name: &[u8]) -> Res<Option<u64>> {
    let f = [&consumer_prefix(group)[..], name].concat();
    Ok(aux_get(cx, key, s, &f)?.map(|v| v.get(..8).map_or(0, |b| u64::from_be_bytes(b.try_into().unwrap_or([0; 8])))))
}

/// Creates or refreshes consumer `name` (seen now); returns whether it was created.
pub fn consumer_touch(cx: &mut Ctx, key: &[u8], s: &Stream, group: &[u8], name: &[u8]) -> Res<bool> {
    let created = consumer_get(cx, key, s, group, name)?.is_none();
    let f = [&consumer_prefix(group)[..], name].concat();
    let now = cx.now;
    aux_put(cx, key, s, &f, now.to_be_bytes().to_vec())?;
    if created {
        crate::cmd::stream_groups::stream_event(cx, "xgroup-createconsumer", key);
    }
    Ok(created)
}

/// Writes consumer `name` of `group` with seen time `seen` (RESTORE).
pub fn consumer_put(cx: &mut Ctx, key: &[u8], s: &Stream, group: &[u8], name: &[u8], seen: u64) -> Res<()> {
    let f = [&consumer_prefix(group)[..], name].concat();
    aux_put(cx, key, s, &f, seen.to_be_bytes().to_vec())
}

/// Consumers of `group`: (name, seen time), by name.
pub fn consumers(cx: &impl SubRange, key: &[u8], s: &Stream, group: &[u8]) -> Res<Vec<(Vec<u8>, u64)>> {
    Ok(aux_scan(cx, key, s, &consumer_prefix(group), None, false, usize::MAX)?
        .into_iter()
        .map(|(n, v)| {
            let t = v.get(..8).and_then(|b| b.try_into().ok()).map_or(0, u64::from_be_bytes);
            (n, t)
        })
        .collect())
}

/// Deletes consumer `name` and its pending entries; returns how many it had.
pub fn consumer_del(cx: &mut Ctx, key: &[u8], s: &Stream, group: &[u8], name: &[u8]) -> Res<u64> {
    let ids = consumer_pel(cx, key, s, group, name, StreamId::MIN, StreamId::MAX, usize::MAX)?;
    let cp = cpel_prefix(group, name);
    for id in &ids {
        aux_del(cx, key, s, &[&pel_prefix(group)[..], &id.bytes()].concat());
        aux_del(cx, key, s, &[&cp[..], &id.bytes()].concat());
    }
    aux_del(cx, key, s, &[&consumer_prefix(group)[..], name].concat());
    Ok(ids.len() as u64)
}

fn decode_nack(id: &[u8], v: &[u8]) -> Option<Nack> {
    Some(Nack {
        id: StreamId::from_bytes(id)?,
        delivery_time: u64::from_be_bytes(v.get(..8)?.try_into().ok()?),
        delivery_count: u64::from_be_bytes(v.get(8..16)?.try_into().ok()?),
        consumer: v.get(16..)?.to_vec(),
    })
}

/// The pending entry `id` of `group`.
pub fn nack_get(cx: &Ctx, key: &[u8], s: &Stream, group: &[u8], id: StreamId) -> Res<Option<Nack>> {
    let f = [&pel_prefix(group)[..], &id.bytes()].concat();
    match aux_get(cx, key, s, &f)? {
        Some(v) => decode_nack(&id.bytes(), &v).map(Some).ok_or_else(|| CmdError::corrupt(key)),
        None => Ok(None),
    }
}

/// Writes pending entry `n` of `group`, moving it out of `old_consumer`'s PEL if that differs.
pub fn nack_put(cx: &mut Ctx, key: &[u8], s: &Stream, group: &[u8], n: &Nack, old_consumer: Option<&[u8]>) -> Res<()> {
    let idb = n.id.bytes();
    if let Some(old) = old_consumer.filter(|o| *o != n.consumer.as_slice()) {
        aux_del(cx, key, s, &[&cpel_prefix(group, old)[..], &idb].concat());
    }
    let mut v = Vec::with_capacity(16 + n.consumer.len());
    v.extend_from_slice(&n.delivery_time.to_be_bytes());
    v.extend_from_slice(&n.delivery_count.to_be_bytes());
    v.extend_from_slice(&n.consumer);
    aux_put(cx, key, s, &[&pel_prefix(group)[..], &idb].concat(), v)?;
    if old_consumer != Some(n.consumer.as_slice()) {
        aux_put(cx, key, s, &[&cpel_prefix(group, &n.consumer)[..], &idb].concat(), Vec::new())?;
    }
    Ok(())
}

/// Deletes pending entry `n` of `group` (from its consumer's PEL too).
pub fn nack_del(cx: &mut Ctx, key: &[u8], s: &Stream, group: &[u8], n: &Nack) {
    let idb = n.id.bytes();
    aux_del(cx, key, s, &[&pel_prefix(group)[..], &idb].concat());
    aux_del(cx, key, s, &[&cpel_prefix(group, &n.consumer)[..], &idb].concat());
}

/// `group`'s pending entries with IDs in `[start, end]`, at most `limit`.
pub fn pel_range(
    cx: &impl SubRange,
    key: &[u8],
    s: &Stream,
    group: &[u8],
    start: StreamId,
    end: StreamId,
    limit: usize,
) -> Res<Vec<Nack>> {
    if start > end {
        return Ok(Vec::new());
    }
    between(cx, key, s, &pel_prefix(group), &start.bytes(), &end.bytes(), limit)?
        .iter()
        .map(|(id, v)| decode_nack(id, v).ok_or_else(|| CmdError::corrupt(key)))
        .collect()
}

/// Number of pending entries of `group`.
pub fn pel_len(cx: &Ctx, key: &[u8], s: &Stream, group: &[u8]) -> Res<usize> {
    Ok(aux_scan(cx, key, s, &pel_prefix(group), None, false, usize::MAX)?.len())
}

/// IDs in consumer `consumer`'s PEL within `[start, end]`, at most `limit`.
#[allow(clippy::too_many_arguments)]
pub fn consumer_pel(
    cx: &Ctx,
    key: &[u8],
    s: &Stream,
    group: &[u8],
    consumer: &[u8],
    start: StreamId,
    end: StreamId,
    limit: usize,
) -> Res<Vec<StreamId>> {
    if start > end {
        return Ok(Vec::new());
    }
    between(cx, key, s, &cpel_prefix(group, consumer), &start.bytes(), &end.bytes(), limit)?
        .iter()
        .map(|(id, _)| StreamId::from_bytes(id).ok_or_else(|| CmdError::corrupt(key)))
        .collect()
}

/// `streamRangeHasTombstones(s, start, MAX)`.
fn has_tombstones_from(s: &Stream, start: StreamId) -> bool {
    if s.is_empty() || s.st.max_deleted.is_zero() || s.st.first_id > s.st.max_deleted {
        return false;
    }
    start <= s.st.max_deleted
}

/// `streamEstimateDistanceFromFirstEverEntry`.
pub fn estimate_distance(s: &Stream, id: StreamId) -> i64 {
    let st = &s.st;
    if st.entries_added == 0 {
        return 0;
    }
    if s.is_empty() && id <= st.last_id {
        return st.entries_added as i64;
    }
    if id == st.last_id {
        return st.entries_added as i64;
    } else if id > st.last_id {
        return INVALID;
    }
    if st.max_deleted.is_zero() || st.max_deleted < st.first_id {
        if id < st.first_id {
            return st.entries_added.wrapping_sub(s.len()) as i64;
        } else if id == st.first_id {
            return st.entries_added.wrapping_sub(s.len()).wrapping_add(1) as i64;
        }
    }
    INVALID
}

/// A group's lag (`None`: unknown), as XINFO reports it.
pub fn lag(s: &Stream, g: &Group) -> Option<i64> {
    if s.st.entries_added == 0 {
        return Some(0);
    }
    if g.entries_read != INVALID && !has_tombstones_from(s, g.last_id) {
        return Some((s.st.entries_added as i64).wrapping_sub(g.entries_read));
    }
    let read = estimate_distance(s, g.last_id);
    (read != INVALID).then(|| (s.st.entries_added as i64).wrapping_sub(read))
}

/// Advances the group past delivered entry `id` (`streamReplyWithRange`'s counter update).
pub fn advance(s: &Stream, g: &mut Group, id: StreamId) {
    if id <= g.last_id {
        return;
    }
    if g.entries_read != INVALID && !has_tombstones_from(s, id) {
        g.entries_read = g.entries_read.wrapping_add(1);
    } else if s.st.entries_added != 0 {
        g.entries_read = estimate_distance(s, id);
    }
    g.last_id = id;
}
