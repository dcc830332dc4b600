//! How a stream is stored, and the steps every stream command shares.
//!
//! A stream is a metadata record of kind [`Kind::Stream`] whose `size` is
//! its length and whose `value` holds the stream-level state
//! ([`StreamState`]: last generated ID, entries added, maximal deleted ID,
//! recorded first ID). Each entry is a sub-key (`SUB` tag) whose field is
//! the 16-byte big-endian ID, so a range scan is an ID range, and whose
//! value is the entry's field/value pairs.
//!
//! Redis keeps entries in radix-tree nodes of at most
//! `stream-node-max-entries` entries (deleted ones included) and
//! `stream-node-max-bytes` bytes, and approximate trimming (`~`) and
//! `LIMIT` work in whole nodes; replies depend on where those boundaries
//! fall. So the node boundaries are kept too, as records under the
//! [`STREAM_AUX`] tag (`n` + first ID), and trimming follows Redis's node
//! walk exactly. Consumer groups live under the same tag (see
//! `stream_cg`). Everything is scoped by the stream's version, so DEL is
//! O(1) and the reclaimer sweeps entries, nodes and groups together.

use std::ops::Bound;

use crate::cmd::CmdError;
use crate::encoding::{sub_key, sub_prefix, Kind, Meta, STREAM_AUX, SUB};
use crate::exec::Ctx;
use crate::keyspace::Res;
use crate::keyspace::SubRange;
use crate::stream_id::StreamId;

/// Stream-level state kept in the metadata's `value`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct StreamState {
    /// The last generated ID.
    pub last_id: StreamId,
    /// Entries ever added.
    pub entries_added: u64,
    /// The largest deleted ID.
    pub max_deleted: StreamId,
    /// The recorded first entry ID.
    pub first_id: StreamId,
}

/// A stream read from its metadata.
#[derive(Clone, Debug)]
pub struct Stream {
    /// The metadata (its `value` is stale until [`Stream::meta_out`]).
    pub meta: Meta,
    /// The stream-level state.
    pub st: StreamState,
}

impl StreamState {
    fn decode(b: &[u8]) -> Option<StreamState> {
        if b.is_empty() {
            return Some(StreamState::default());
        }
        Some(StreamState {
            last_id: StreamId::from_bytes(b.get(0..16)?)?,
            entries_added: u64::from_be_bytes(b.get(16..24)?.try_into().ok()?),
            max_deleted: StreamId::from_bytes(b.get(24..40)?)?,
            first_id: StreamId::from_bytes(b.get(40..56)?)?,
        })
    }

    fn encode(&self) -> Vec<u8> {
        let mut v = Vec::with_capacity(56);
        v.extend_from_slice(&self.last_id.bytes());
        v.extend_from_slice(&self.entries_added.to_be_bytes());
        v.extend_from_slice(&self.max_deleted.bytes());
        v.extend_from_slice(&self.first_id.bytes());
        v
    }
}

impl Stream {
    /// The stream of metadata `meta` (which must be of kind Stream).
    pub fn from_meta(key: &[u8], meta: Meta) -> Res<Stream> {
        let st = StreamState::decode(&meta.value).ok_or_else(|| CmdError::corrupt(key))?;
        Ok(Stream { meta, st })
    }

    /// The metadata to write back.
    pub fn meta_out(&self) -> Meta {
        Meta { value: self.st.encode(), ..self.meta.clone() }
    }

    /// Length.
    pub fn len(&self) -> u64 {
        self.meta.size
    }

    /// Whether it has no entries.
    pub fn is_empty(&self) -> bool {
        self.meta.size == 0
    }
}

/// An entry: its ID and field/value list (flattened).
pub type Entry = (StreamId, Vec<Vec<u8>>);

/// Encodes an entry's field/value list.
pub fn encode_fields(fv: &[Vec<u8>]) -> Vec<u8> {
    let mut out = Vec::with_capacity(4 + fv.iter().map(|f| f.len() + 4).sum::<usize>());
    out.extend_from_slice(&(fv.len() as u32).to_be_bytes());
    for f in fv {
        out.extend_from_slice(&(f.len() as u32).to_be_bytes());
        out.extend_from_slice(f);
    }
    out
}

/// Decodes [`encode_fields`].
pub fn decode_fields(b: &[u8]) -> Option<Vec<Vec<u8>>> {
    let n = u32::from_be_bytes(b.get(..4)?.try_into().ok()?) as usize;
    let mut out = Vec::with_capacity(n.min(1024));
    let mut at = 4;
    for _ in 0..n {
        let len = u32::from_be_bytes(b.get(at..at + 4)?.try_into().ok()?) as usize;
        at += 4;
        out.push(b.get(at..at + len)?.to_vec());
        at += len;
    }
    Some(out)
}

/// Looks a stream up: `None` if absent, WRONGTYPE if another type.
pub fn load(cx: &mut Ctx, key: &[u8]) -> Res<Option<Stream>> {
    match cx.lookup_kind(key, Kind::Stream)? {
        Some(m) => Ok(Some(Stream::from_meta(key, m)?)),
        None => Ok(None),
    }
}

/// A new, empty stream.
pub fn create(cx: &mut Ctx) -> Stream {
    Stream { meta: cx.new_collection(Kind::Stream), st: StreamState::default() }
}

/// Writes the stream's metadata (an empty stream stays: streams may be empty).
pub fn save(cx: &mut Ctx, key: &[u8], old: Option<&Meta>, s: &Stream) -> Res<()> {
    cx.write_meta(key, old, &s.meta_out())
}

/// Writes the metadata of an existing stream without touching WATCH or
/// waking blocked clients: what Redis does for XSETID (it does not signal
/// the key as modified).
pub fn save_quiet(cx: &mut Ctx, key: &[u8], s: &Stream) -> Res<()> {
    let db = cx.db();
    let k = crate::encoding::meta_key(db, cx.st.gen(db), key);
    cx.st.store.put(k, s.meta_out().encode())?;
    Ok(())
}

/// The full key of auxiliary record `field`.
///
/// Auxiliary records (nodes, groups, PELs, consumers) are written without
/// touching WATCH: in Redis 7.0 the group commands do not signal the key
/// as modified either.
pub fn aux_key(cx: &Ctx, key: &[u8], s: &Stream, field: &[u8]) -> Vec<u8> {
    let mut k = sub_prefix(STREAM_AUX, cx.db(), key, s.meta.version);
    k.extend_from_slice(field);
    k
}

/// Reads auxiliary record `field`.
pub fn aux_get(cx: &Ctx, key: &[u8], s: &Stream, field: &[u8]) -> Res<Option<Vec<u8>>> {
    Ok(cx.st.store.get(&aux_key(cx, key, s, field))?)
}

/// Writes auxiliary record `field`.
pub fn aux_put(cx: &mut Ctx, key: &[u8], s: &Stream, field: &[u8], v: Vec<u8>) -> Res<()> {
    let k = aux_key(cx, key, s, field);
    cx.st.store.put(k, v)?;
    Ok(())
}

/// Deletes auxiliary record `field`.
pub fn aux_del(cx: &mut Ctx, key: &[u8], s: &Stream, field: &[u8]) {
    let k = aux_key(cx, key, s, field);
    cx.st.store.delete(k);
}

/// Auxiliary records whose field starts with `prefix`, from `from` (a
/// suffix after the prefix, inclusive) on, at most `limit`; (suffix, value).
pub fn aux_scan(
    cx: &impl SubRange,
    key: &[u8],
    s: &Stream,
    prefix: &[u8],
    from: Option<&[u8]>,
    rev: bool,
    limit: usize,
) -> Res<Vec<(Vec<u8>, Vec<u8>)>> {
    let lo_f: Vec<u8> = [prefix, from.unwrap_or(b"")].concat();
    let hi_f = crate::encoding::prefix_end(prefix);
    let (lo, hi) = if rev {
        // Reverse: from `from` (inclusive) down to the prefix.
        let hi = match from {
            Some(_) => Bound::Included(&lo_f[..]),
            None => hi_f.as_deref().map_or(Bound::Unbounded, Bound::Excluded),
        };
        (Bound::Included(prefix), hi)
    } else {
        (Bound::Included(&lo_f[..]), hi_f.as_deref().map_or(Bound::Unbounded, Bound::Excluded))
    };
    let rows = cx.sub_range(STREAM_AUX, key, &s.meta, lo, hi, rev, limit)?;
    Ok(rows.into_iter().map(|(f, v)| (f[prefix.len()..].to_vec(), v)).collect())
}

/// Entries with IDs in `[start, end]`, ascending (descending if `rev`), at
/// most `count` (0: all).
pub fn range(
    cx: &impl SubRange,
    key: &[u8],
    s: &Stream,
    start: StreamId,
    end: StreamId,
    rev: bool,
    count: usize,
) -> Res<Vec<Entry>> {
    if start > end || s.is_empty() {
        return Ok(Vec::new());
    }
    let (a, b) = (start.bytes(), end.bytes());
    let limit = if count == 0 { usize::MAX } else { count };
    let rows = cx.sub_range(SUB, key, &s.meta, Bound::Included(&a), Bound::Included(&b), rev, limit)?;
    rows.into_iter()
        .map(|(f, v)| {
            let id = StreamId::from_bytes(&f).ok_or_else(|| CmdError::corrupt(key))?;
            Ok((id, decode_fields(&v).ok_or_else(|| CmdError::corrupt(key))?))
        })
        .collect()
}

/// The entry `id`, if present.
pub fn get(cx: &Ctx, key: &[u8], s: &Stream, id: StreamId) -> Res<Option<Vec<Vec<u8>>>> {
    match cx.st.store.get(&sub_key(cx.db(), key, s.meta.version, &id.bytes()))? {
        Some(v) => Ok(Some(decode_fields(&v).ok_or_else(|| CmdError::corrupt(key))?)),
        None => Ok(None),
    }
}

/// The first (or last) live entry ID; `None` if empty.
pub fn edge(cx: &Ctx, key: &[u8], s: &Stream, last: bool) -> Res<Option<StreamId>> {
    Ok(range(cx, key, s, StreamId::MIN, StreamId::MAX, last, 1)?.first().map(|e| e.0))
}

/// A node record: live entries, entries ever put in it, approximate
/// bytes, the last ID put in it.
#[derive(Clone, Copy, Debug)]
struct Node {
    first: StreamId,
    live: u64,
    total: u64,
    bytes: u64,
    last: StreamId,
}

fn node_field(id: StreamId) -> Vec<u8> {
    let mut f = vec![b'n'];
    f.extend_from_slice(&id.bytes());
    f
}

fn node_decode(first: &[u8], v: &[u8]) -> Option<Node> {
    let u = |i: usize| Some(u64::from_be_bytes(v.get(i..i + 8)?.try_into().ok()?));
    let n = Node {
        first: StreamId::from_bytes(first)?,
        live: u(0)?,
        total: u(8)?,
        bytes: u(16)?,
        last: StreamId::from_bytes(v.get(24..40)?)?,
    };
    // More live entries than entries, or counts no pool can hold, are
    // damage (appends add to them). A node's first ID may exceed its last:
    // an exact trim can leave a node with no live entry, and an XADD after
    // XSETID lowered the stream's top ID appends below its first.
    let max = crate::encoding::MAX_ELEMENTS;
    (n.live <= n.total && n.total <= max && n.bytes <= max).then_some(n)
}

fn node_put(cx: &mut Ctx, key: &[u8], s: &Stream, n: &Node) -> Res<()> {
    let mut v = Vec::with_capacity(40);
    v.extend_from_slice(&n.live.to_be_bytes());
    v.extend_from_slice(&n.total.to_be_bytes());
    v.extend_from_slice(&n.bytes.to_be_bytes());
    v.extend_from_slice(&n.last.bytes());
    aux_put(cx, key, s, &node_field(n.first), v)
}

/// The node holding `id` (the last node starting at or before it).
fn node_of(cx: &Ctx, key: &[u8], s: &Stream, id: StreamId) -> Res<Option<Node>> {
    let rows = aux_scan(cx, key, s, b"n", Some(&id.bytes()), true, 1)?;
    match rows.first() {
        Some((f, v)) => Ok(Some(node_decode(f, v).ok_or_else(|| CmdError::corrupt(key))?)),
        None => Ok(None),
    }
}

fn nodes(cx: &Ctx, key: &[u8], s: &Stream, limit: usize) -> Res<Vec<Node>> {
    aux_scan(cx, key, s, b"n", None, false, limit)?
        .iter()
        .map(|(f, v)| node_decode(f, v).ok_or_else(|| CmdError::corrupt(key)))
        .collect()
}

/// Number of nodes (XINFO's radix-tree-keys).
pub fn node_count(cx: &Ctx, key: &[u8], s: &Stream) -> Res<usize> {
    Ok(aux_scan(cx, key, s, b"n", None, false, usize::MAX)?.len())
}

fn setting(cx: &Ctx, name: &str, default: u64) -> u64 {
    crate::cmd::inert_u64(&cx.st.inert, name, default)
}

/// Appends entry `id` (already checked to be greater than the last ID).
pub fn append(cx: &mut Ctx, key: &[u8], s: &mut Stream, id: StreamId, fv: &[Vec<u8>]) -> Res<()> {
    let elelen: u64 = fv.iter().map(|f| f.len() as u64).sum();
    let max_entries = setting(cx, "stream-node-max-entries", 100);
    let mut max_bytes = setting(cx, "stream-node-max-bytes", 4096);
    if max_bytes == 0 || max_bytes > (1 << 30) {
        max_bytes = 1 << 30;
    }
    let tail = node_of(cx, key, s, StreamId::MAX)?;
    let mut node = match tail {
        Some(n) if n.bytes + elelen < max_bytes && (max_entries == 0 || n.total < max_entries) => n,
        _ => Node { first: id, live: 0, total: 0, bytes: 0, last: id },
    };
    node.live += 1;
    node.total += 1;
    // Roughly what the entry takes in a listpack: each element with its
    // header and backlen, plus the flags, ID deltas and count.
    node.bytes += fv.iter().map(|f| f.len() as u64 + 2).sum::<u64>() + 8;
    node.last = id;
    node_put(cx, key, s, &node)?;
    cx.sub_put(key, &s.meta, &id.bytes(), encode_fields(fv))?;
    s.meta.size += 1;
    s.st.last_id = id;
    s.st.entries_added = s.st.entries_added.wrapping_add(1);
    if s.meta.size == 1 {
        s.st.first_id = id;
    }
    Ok(())
}

/// Deletes entry `id` if present (XDEL's step; the caller updates
/// `max_deleted` and `first_id`). Returns whether it was there.
pub fn delete(cx: &mut Ctx, key: &[u8], s: &mut Stream, id: StreamId) -> Res<bool> {
    if !cx.sub_exists(key, &s.meta, &id.bytes())? {
        return Ok(false);
    }
    cx.sub_del(key, &s.meta, &id.bytes());
    s.meta.size = CmdError::shrink(key, s.meta.size, 1)?;
    if let Some(mut n) = node_of(cx, key, s, id)? {
        n.live = n.live.saturating_sub(1);
        if n.live == 0 {
            aux_del(cx, key, s, &node_field(n.first));
        } else {
            node_put(cx, key, s, &n)?;
        }
    }
    Ok(true)
}

/// How to trim.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Trim {
    /// Keep at most this many entries.
    MaxLen(u64),
    /// Drop entries with smaller IDs.
    MinId(StreamId),
}

/// `streamTrim`: walks the nodes from the first, removing whole nodes
/// while the strategy allows, then (exact trimming only) entries inside
/// the first node it cannot remove whole; `limit` (0: none) caps the
/// entries removed, in whole nodes. Returns the number removed.
pub fn trim(cx: &mut Ctx, key: &[u8], s: &mut Stream, how: Trim, approx: bool, limit: u64) -> Res<u64> {
    let mut deleted = 0u64;
    for mut n in nodes(cx, key, s, usize::MAX)? {
        if let Trim::MaxLen(max) = how {
            if s.meta.size <= max {
                break;
            }
        }
        // A node counting more entries than its stream holds is damage.
        let rest = CmdError::shrink(key, s.meta.size, n.live)?;
        if limit != 0 && deleted.saturating_add(n.live) > limit {
            break;
        }
        let remove_node = match how {
            Trim::MaxLen(max) => rest >= max,
            Trim::MinId(min) => n.last < min,
        };
        let entries = range(cx, key, s, n.first, n.last, false, 0)?;
        if remove_node {
            for (id, _) in &entries {
                cx.sub_del(key, &s.meta, &id.bytes());
            }
            aux_del(cx, key, s, &node_field(n.first));
            s.meta.size = rest;
            deleted += n.live;
            continue;
        }
        if approx {
            break;
        }
        for (id, _) in &entries {
            let stop = match how {
                Trim::MaxLen(max) => s.meta.size <= max,
                Trim::MinId(min) => *id >= min,
            };
            if stop {
                break;
            }
            cx.sub_del(key, &s.meta, &id.bytes());
            s.meta.size = CmdError::shrink(key, s.meta.size, 1)?;
            n.live = CmdError::shrink(key, n.live, 1)?;
            deleted += 1;
        }
        node_put(cx, key, s, &n)?;
        break;
    }
    if s.meta.size == 0 {
        s.st.first_id = StreamId::MIN;
    } else if deleted > 0 {
        s.st.first_id = edge(cx, key, s, false)?.unwrap_or(StreamId::MIN);
    }
    Ok(deleted)
}

/// Copies every auxiliary record of stream `src` (database `src_db`, as
/// the client numbers it) to `dst` under `version` in the current database
/// (COPY, RENAME, MOVE).
pub fn copy_aux(cx: &mut Ctx, src_db: u8, src: &[u8], meta: &Meta, dst: &[u8], version: u64) -> Res<()> {
    let dst_db = cx.client.db;
    let dst_stored = cx.db();
    cx.client.db = src_db;
    let rows = cx.sub_range(STREAM_AUX, src, meta, Bound::Unbounded, Bound::Unbounded, false, usize::MAX);
    cx.client.db = dst_db;
    for (f, v) in rows? {
        let mut k = sub_prefix(STREAM_AUX, dst_stored, dst, version);
        k.extend_from_slice(&f);
        cx.st.store.put(k, v)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn state_and_fields_round_trip() {
        let st = StreamState {
            last_id: StreamId::new(5, 6),
            entries_added: 9,
            max_deleted: StreamId::new(1, 2),
            first_id: StreamId::new(3, 4),
        };
        assert_eq!(StreamState::decode(&st.encode()), Some(st));
        assert_eq!(StreamState::decode(b""), Some(StreamState::default()));
        assert!(StreamState::decode(b"short").is_none());
        let fv = vec![b"f".to_vec(), b"".to_vec(), b"x".repeat(300)];
        assert_eq!(decode_fields(&encode_fields(&fv)), Some(fv));
        assert!(decode_fields(b"\0\0\0\x02\0\0\0\x09ab").is_none());
    }
}
