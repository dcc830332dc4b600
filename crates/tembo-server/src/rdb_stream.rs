//! A stream in Redis's RDB object format: what DUMP writes and RESTORE
//! reads for a stream key.
//!
//! Redis keeps a stream's entries in listpacks of up to
//! `stream-node-max-entries` entries, each led by a *master entry* (the
//! node's first ID and field names) that later entries refer to with a
//! flag and ID deltas; the stream's counters and its consumer groups (each
//! with its pending entries and consumers) follow. Tembo reads types 15
//! (Redis 5 and 6), 19 (Redis 7.0) and 21 (Redis 7.2: each consumer's
//! active time follows its seen time; Tembo keeps Redis 7.0's one time, the
//! seen time, and drops the other) and writes 19. The payload is
//! checked whole before anything is written, as Redis's deep sanitization
//! checks it (every listpack, every master entry and entry count, every
//! pending entry owned by exactly one consumer, no duplicate group or
//! consumer), and beyond it where Tembo stores entries by ID: IDs must
//! ascend, stay at or below the last ID, and the length must count them.

use std::collections::{BTreeMap, HashSet};

use crate::rdb::{put_len, put_string, PayloadError, Reader};
use crate::rdb_value::listpack_elements;
use crate::stream_id::StreamId;

/// RDB type of a stream written by Redis 5 and 6.
pub const STREAM_LISTPACKS: u8 = 15;
/// RDB type of a stream written by Redis 7.0 (first ID, maximal deleted
/// ID, entries added, and each group's entries read).
pub const STREAM_LISTPACKS_2: u8 = 19;
/// RDB type of a stream written by Redis 7.2 and later (type 19's fields,
/// and each consumer's active time).
pub const STREAM_LISTPACKS_3: u8 = 21;

const BAD: PayloadError = PayloadError::Malformed("bad stream payload");
const FLAG_DELETED: i64 = 1;
const FLAG_SAME_FIELDS: i64 = 2;
/// Entries per listpack node in what DUMP writes (Redis's default
/// `stream-node-max-entries`).
const NODE_ENTRIES: usize = 100;

/// A stream, decoded.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct StreamValue {
    /// Entries in ID order: ID and flattened field/value list.
    pub entries: Vec<(StreamId, Vec<Vec<u8>>)>,
    /// The last generated ID.
    pub last_id: StreamId,
    /// The recorded first ID (0-0 for an empty stream).
    pub first_id: StreamId,
    /// The largest deleted ID.
    pub max_deleted: StreamId,
    /// Entries ever added.
    pub entries_added: u64,
    /// Consumer groups, in payload order.
    pub groups: Vec<GroupValue>,
    /// Decoded from type 15, which records no group's entries read: a
    /// restore estimates them as Redis 7.0 does when it loads one.
    pub legacy: bool,
}

/// A consumer group, decoded.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct GroupValue {
    /// Its name.
    pub name: Vec<u8>,
    /// Last delivered ID.
    pub last_id: StreamId,
    /// Entries read, or `None` where the payload does not say (type 15)
    /// or says it is unknown (Redis's `SCG_INVALID_ENTRIES_READ`).
    pub entries_read: Option<u64>,
    /// Pending entries, by ID: (ID, delivery time in ms, delivery count, consumer).
    pub pending: Vec<(StreamId, u64, u64, Vec<u8>)>,
    /// Consumers: (name, seen time in ms).
    pub consumers: Vec<(Vec<u8>, u64)>,
}

/// Decodes a stream's value (after its type byte `ty`).
///
/// What the entries decode to may be larger than the payload: an entry
/// that shares its node's field names gets a copy of them. So the decoded
/// bytes are bounded by 64 MiB plus 16 times the payload's length (a
/// stream Redis writes, with its nodes of at most `stream-node-max-bytes`,
/// stays far below); past that the payload is refused rather than
/// allowed to ask for memory quadratic in its size.
pub fn decode(r: &mut Reader<'_>, ty: u8) -> Result<StreamValue, PayloadError> {
    let mut v = StreamValue::default();
    let mut budget = (64usize << 20).saturating_add(r.remaining().saturating_mul(16));
    let nodes = r.len()?;
    let mut previous: Option<StreamId> = None;
    for _ in 0..nodes {
        let key = r.string()?;
        let master = StreamId::from_bytes(&key).filter(|_| key.len() == 16).ok_or(BAD)?;
        if previous.is_some_and(|p| p >= master) {
            return Err(BAD); // nodes in key order, none twice
        }
        previous = Some(master);
        let lp = r.string()?;
        node_entries(&lp, master, &mut v.entries, &mut budget)?;
    }
    let length = r.len()?;
    v.last_id = id(r)?;
    if ty >= STREAM_LISTPACKS_2 {
        v.first_id = id(r)?;
        v.max_deleted = id(r)?;
        v.entries_added = r.len()?;
    } else {
        // Redis 7.0 takes the first entry's ID, or MAX-MAX for a stream
        // with none (`streamGetEdgeID`).
        v.first_id = v.entries.first().map_or(StreamId::MAX, |e| e.0);
        v.entries_added = length;
        v.legacy = true;
    }
    // Entries ever added count the ones there (Redis never writes fewer).
    if length != v.entries.len() as u64 || v.entries_added < length || v.entries.last().is_some_and(|e| e.0 > v.last_id)
    {
        return Err(BAD);
    }
    let groups = r.len()?;
    let mut names = HashSet::new();
    for _ in 0..groups {
        let g = group(r, ty)?;
        if !names.insert(g.name.clone()) {
            return Err(BAD); // a group named twice
        }
        v.groups.push(g);
    }
    Ok(v)
}

/// A stream ID as two RDB lengths (ms, then seq).
fn id(r: &mut Reader<'_>) -> Result<StreamId, PayloadError> {
    Ok(StreamId::new(r.len()?, r.len()?))
}

/// A 16-byte big-endian ID stored raw (a pending entry's).
fn raw_id(r: &mut Reader<'_>) -> Result<StreamId, PayloadError> {
    let mut b = [0u8; 16];
    for x in &mut b {
        *x = r.byte()?;
    }
    StreamId::from_bytes(&b).ok_or(BAD)
}

/// A millisecond time: 8 bytes, little-endian.
fn millis(r: &mut Reader<'_>) -> Result<u64, PayloadError> {
    let mut b = [0u8; 8];
    for x in &mut b {
        *x = r.byte()?;
    }
    Ok(u64::from_le_bytes(b))
}

fn group(r: &mut Reader<'_>, ty: u8) -> Result<GroupValue, PayloadError> {
    let mut g = GroupValue { name: r.string()?, last_id: id(r)?, ..GroupValue::default() };
    if ty >= STREAM_LISTPACKS_2 {
        let read = r.len()?;
        g.entries_read = (read != u64::MAX).then_some(read);
    }
    let mut pending: BTreeMap<StreamId, (u64, u64, Option<Vec<u8>>)> = BTreeMap::new();
    let n = r.len()?;
    for _ in 0..n {
        let id = raw_id(r)?;
        let entry = (millis(r)?, r.len()?, None);
        if pending.insert(id, entry).is_some() {
            return Err(BAD); // a pending entry listed twice
        }
    }
    let consumers = r.len()?;
    let mut seen = HashSet::new();
    for _ in 0..consumers {
        let name = r.string()?;
        let time = millis(r)?;
        if ty >= STREAM_LISTPACKS_3 {
            millis(r)?; // the active time (Redis 7.2), which 7.0 has not
        }
        if !seen.insert(name.clone()) {
            return Err(BAD); // a consumer listed twice
        }
        let owned = r.len()?;
        for _ in 0..owned {
            let id = raw_id(r)?;
            match pending.get_mut(&id) {
                Some((_, _, owner @ None)) => *owner = Some(name.clone()),
                // Not pending in the group, or owned by another consumer.
                _ => return Err(BAD),
            }
        }
        g.consumers.push((name, time));
    }
    for (id, (time, count, owner)) in pending {
        // Every pending entry belongs to a consumer (Redis checks this in
        // its deep sanitization; Tembo stores the owner with the entry).
        g.pending.push((id, time, count, owner.ok_or(BAD)?));
    }
    Ok(g)
}

/// One listpack element as an integer, as Redis's `lpGetIntegerIfValid`
/// reads one (`string2ll`): an integer element, or a string that is an
/// integer's canonical decimal form (no sign but a leading `-`, no leading
/// zero, no `-0`).
fn int(e: &[u8]) -> Result<i64, PayloadError> {
    let digits = e.strip_prefix(b"-").unwrap_or(e);
    let canonical = match digits {
        [] => false,
        [b'0'] => e.len() == 1,
        [first, ..] => (b'1'..=b'9').contains(first) && digits.iter().all(u8::is_ascii_digit),
    };
    if !canonical {
        return Err(BAD);
    }
    std::str::from_utf8(e).ok().and_then(|s| s.parse().ok()).ok_or(BAD)
}

/// A count or size that must be non-negative.
fn count(e: &[u8]) -> Result<usize, PayloadError> {
    usize::try_from(int(e)?).map_err(|_| BAD)
}

/// Appends the live entries of the listpack node keyed `master`, checked
/// as Redis's `streamValidateListpackIntegrity` checks it.
fn node_entries(
    lp: &[u8],
    master: StreamId,
    out: &mut Vec<(StreamId, Vec<Vec<u8>>)>,
    budget: &mut usize,
) -> Result<(), PayloadError> {
    let el = listpack_elements(lp)?;
    let mut it = el.iter().map(Vec::as_slice);
    let mut next = || it.next().ok_or(BAD);
    if el.is_empty() {
        return Err(BAD); // Redis never writes an empty node
    }
    let live = count(next()?)?;
    let deleted = count(next()?)?;
    let master_fields: Vec<&[u8]> = {
        let n = count(next()?)?;
        if n > el.len() {
            return Err(BAD);
        }
        (0..n).map(|_| next()).collect::<Result<_, _>>()?
    };
    if int(next()?)? != 0 {
        return Err(BAD); // the master entry's terminator
    }
    let total = live.checked_add(deleted).filter(|t| *t <= el.len()).ok_or(BAD)?;
    let mut seen_live = 0;
    for _ in 0..total {
        let flags = int(next()?)?;
        let ms = master.ms.wrapping_add(int(next()?)? as u64);
        let seq = master.seq.wrapping_add(int(next()?)? as u64);
        let id = StreamId::new(ms, seq);
        let mut fv = Vec::new();
        let extra = if flags & FLAG_SAME_FIELDS != 0 {
            for f in &master_fields {
                fv.push(f.to_vec());
                fv.push(next()?.to_vec());
            }
            3
        } else {
            let n = count(next()?)?;
            if n > el.len() {
                return Err(BAD);
            }
            for _ in 0..n {
                fv.push(next()?.to_vec());
                fv.push(next()?.to_vec());
            }
            4 + n
        };
        let fields = fv.len() / 2;
        if count(next()?)? != fields + extra {
            return Err(BAD); // lp-count
        }
        // Each element's bytes and its vector's own size.
        let cost = fv.iter().map(|f| f.len() + 24).sum::<usize>();
        *budget = budget.checked_sub(cost).ok_or(PayloadError::Malformed("stream payload decodes past its bound"))?;
        if flags & FLAG_DELETED != 0 {
            continue;
        }
        if id < master || out.last().is_some_and(|e| e.0 >= id) {
            return Err(BAD); // IDs ascend from the node's master ID
        }
        seen_live += 1;
        out.push((id, fv));
    }
    if next().is_ok() || seen_live != live {
        return Err(BAD);
    }
    Ok(())
}

/// Appends the RDB object bytes (type byte, then the value) of `v`, in
/// Redis 7.0's format (type 19): nodes of up to 100 entries, each entry
/// flagged as sharing the node's field names when it does.
pub fn encode(v: &StreamValue, out: &mut Vec<u8>) {
    out.push(STREAM_LISTPACKS_2);
    let nodes: Vec<_> = v.entries.chunks(NODE_ENTRIES).collect();
    put_len(out, nodes.len() as u64);
    for node in nodes {
        put_string(out, &node[0].0.bytes());
        put_string(out, &node_listpack(node));
    }
    put_len(out, v.entries.len() as u64);
    for id in [v.last_id, v.first_id, v.max_deleted] {
        put_len(out, id.ms);
        put_len(out, id.seq);
    }
    put_len(out, v.entries_added);
    put_len(out, v.groups.len() as u64);
    for g in &v.groups {
        let mut owned: std::collections::HashMap<&[u8], Vec<&StreamId>> = std::collections::HashMap::new();
        for p in &g.pending {
            owned.entry(p.3.as_slice()).or_default().push(&p.0);
        }
        put_string(out, &g.name);
        put_len(out, g.last_id.ms);
        put_len(out, g.last_id.seq);
        put_len(out, g.entries_read.unwrap_or(u64::MAX));
        put_len(out, g.pending.len() as u64);
        for (id, time, count, _) in &g.pending {
            out.extend_from_slice(&id.bytes());
            out.extend_from_slice(&time.to_le_bytes());
            put_len(out, *count);
        }
        put_len(out, g.consumers.len() as u64);
        for (name, seen) in &g.consumers {
            put_string(out, name);
            out.extend_from_slice(&seen.to_le_bytes());
            let ids = owned.get(name.as_slice()).map_or(&[][..], Vec::as_slice);
            put_len(out, ids.len() as u64);
            for id in ids {
                out.extend_from_slice(&id.bytes());
            }
        }
    }
}

/// A node's listpack: the master entry (the first entry's field names),
/// then each entry.
fn node_listpack(node: &[(StreamId, Vec<Vec<u8>>)]) -> Vec<u8> {
    let master = node[0].0;
    let master_fields: Vec<&Vec<u8>> = node[0].1.iter().step_by(2).collect();
    let mut lp = Listpack::default();
    lp.int(node.len() as i64);
    lp.int(0);
    lp.int(master_fields.len() as i64);
    for f in &master_fields {
        lp.string(f);
    }
    lp.int(0);
    for (id, fv) in node {
        let fields: Vec<&Vec<u8>> = fv.iter().step_by(2).collect();
        let same = fields == master_fields;
        lp.int(if same { FLAG_SAME_FIELDS } else { 0 });
        lp.int(id.ms.wrapping_sub(master.ms) as i64);
        lp.int(id.seq.wrapping_sub(master.seq) as i64);
        if same {
            for val in fv.iter().skip(1).step_by(2) {
                lp.string(val);
            }
            lp.int(fields.len() as i64 + 3);
        } else {
            lp.int(fields.len() as i64);
            for e in fv {
                lp.string(e);
            }
            lp.int(2 * fields.len() as i64 + 4);
        }
    }
    lp.finish()
}

/// A listpack being written.
#[derive(Default)]
struct Listpack {
    body: Vec<u8>,
    count: usize,
}

impl Listpack {
    fn int(&mut self, v: i64) {
        let start = self.body.len();
        match v {
            0..=127 => self.body.push(v as u8),
            -4096..=4095 => {
                let u = (v as u64) & 0x1fff;
                self.body.extend_from_slice(&[0xc0 | (u >> 8) as u8, u as u8]);
            }
            _ => {
                let (tag, width) = if i16::try_from(v).is_ok() {
                    (0xf1, 2)
                } else if (-(1 << 23)..1 << 23).contains(&v) {
                    (0xf2, 3)
                } else if i32::try_from(v).is_ok() {
                    (0xf3, 4)
                } else {
                    (0xf4, 8)
                };
                self.body.push(tag);
                self.body.extend_from_slice(&v.to_le_bytes()[..width]);
            }
        }
        self.end_entry(start);
    }

    fn string(&mut self, s: &[u8]) {
        let start = self.body.len();
        let n = s.len();
        if n < 64 {
            self.body.push(0x80 | n as u8);
        } else if n < 4096 {
            self.body.extend_from_slice(&[0xe0 | (n >> 8) as u8, n as u8]);
        } else {
            self.body.push(0xf0);
            self.body.extend_from_slice(&(n as u32).to_le_bytes());
        }
        self.body.extend_from_slice(s);
        self.end_entry(start);
    }

    /// Appends the back-length of the entry begun at `start`.
    fn end_entry(&mut self, start: usize) {
        let len = self.body.len() - start;
        let n = crate::rdb_value::backlen_bytes(len);
        let l = len as u64;
        for k in 0..n {
            let b = ((l >> (7 * (n - 1 - k))) & 127) as u8;
            self.body.push(if k == 0 { b } else { b | 128 });
        }
        self.count += 1;
    }

    fn finish(self) -> Vec<u8> {
        let total = 6 + self.body.len() + 1;
        let mut out = Vec::with_capacity(total);
        out.extend_from_slice(&(total as u32).to_le_bytes());
        out.extend_from_slice(&(self.count.min(u16::MAX as usize) as u16).to_le_bytes());
        out.extend_from_slice(&self.body);
        out.push(0xff);
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> StreamValue {
        let e = |ms, seq, fv: &[&str]| (StreamId::new(ms, seq), fv.iter().map(|s| s.as_bytes().to_vec()).collect());
        let mut entries = vec![e(1, 0, &["a", "1", "b", "two"]), e(1, 5, &["a", "-7", "b", "x"]), e(2, 0, &["c", "3"])];
        // Enough entries for a second node, and long and numeric values.
        for i in 0..150u64 {
            let len = if i == 149 { 5000 } else { (i % 70) as usize };
            entries.push((StreamId::new(10 + i, 0), vec![b"f".to_vec(), vec![b'z'; len]]));
        }
        let last = entries.last().unwrap().0;
        StreamValue {
            entries,
            last_id: StreamId::new(last.ms, last.seq + 3),
            first_id: StreamId::new(1, 0),
            max_deleted: StreamId::new(1, 2),
            entries_added: 200,
            groups: vec![GroupValue {
                name: b"g".to_vec(),
                last_id: StreamId::new(1, 5),
                entries_read: Some(2),
                pending: vec![
                    (StreamId::new(1, 0), 1_700_000_000_000, 2, b"alice".to_vec()),
                    (StreamId::new(1, 5), 1_700_000_000_001, 1, b"bob".to_vec()),
                ],
                consumers: vec![(b"alice".to_vec(), 5), (b"bob".to_vec(), 6), (b"carol".to_vec(), 7)],
            }],
            legacy: false,
        }
    }

    fn round_trip(v: &StreamValue) -> Result<StreamValue, PayloadError> {
        let mut out = Vec::new();
        encode(v, &mut out);
        let mut r = Reader::new(&out[1..]);
        let got = decode(&mut r, out[0])?;
        assert!(r.at_end());
        Ok(got)
    }

    #[test]
    fn a_stream_round_trips() {
        let v = sample();
        assert_eq!(round_trip(&v).unwrap(), v);
        let empty = StreamValue { last_id: StreamId::new(5, 5), ..StreamValue::default() };
        assert_eq!(round_trip(&empty).unwrap(), empty);
    }

    fn hex_bytes(hex: &str) -> Vec<u8> {
        (0..hex.len()).step_by(2).map(|i| u8::from_str_radix(&hex[i..i + 2], 16).unwrap()).collect()
    }

    /// The stream in a whole sealed payload.
    fn decoded(payload: &[u8]) -> StreamValue {
        let body = crate::rdb::open(payload).unwrap();
        let mut r = Reader::new(&body[1..]);
        let v = decode(&mut r, body[0]).unwrap();
        assert!(r.at_end());
        v
    }

    #[test]
    fn a_redis_7_dump_decodes() {
        // On redis-server 7.0.15: XADD st 1-1 a 1; XADD st 2-0 a 2 b x;
        // XADD st 3-0 a 3; XDEL st 3-0; XGROUP CREATE st g 0; XREADGROUP
        // GROUP g alice COUNT 1 STREAMS st >; XGROUP CREATECONSUMER st g
        // bob; DUMP st.
        let hex = "130110000000000000000100000000000000013d3d000000180002010101010181610200010201000100010101040100\
                   010101dfff0202018161020201816202817802080103010201dfff0203010401ff0203000101030003010167010181ff\
                   ffffffffffffff0100000000000000010000000000000001719ca533a2010000010205616c696365719ca533a2010000\
                   010000000000000001000000000000000103626f62719ca533a2010000000a00484796a582790c04";
        let v = decoded(&hex_bytes(hex));
        let fv = |x: &[&str]| x.iter().map(|s| s.as_bytes().to_vec()).collect::<Vec<_>>();
        assert_eq!(
            v.entries,
            vec![(StreamId::new(1, 1), fv(&["a", "1"])), (StreamId::new(2, 0), fv(&["a", "2", "b", "x"]))]
        );
        assert_eq!(
            (v.last_id, v.first_id, v.max_deleted),
            (StreamId::new(3, 0), StreamId::new(1, 1), StreamId::new(3, 0))
        );
        assert_eq!(v.entries_added, 3);
        let g = &v.groups[0];
        assert_eq!((g.name.as_slice(), g.last_id, g.entries_read), (&b"g"[..], StreamId::new(1, 1), None));
        assert_eq!(g.pending, vec![(StreamId::new(1, 1), 1_796_162_821_233, 1, b"alice".to_vec())]);
        assert_eq!(g.consumers, vec![(b"alice".to_vec(), 1_796_162_821_233), (b"bob".to_vec(), 1_796_162_821_233)]);
        // Tembo's own encoding of it decodes to the same value.
        assert_eq!(round_trip(&v).unwrap(), v);
    }

    #[test]
    fn a_redis_7_2_dump_decodes() {
        // The same stream as Redis 7.2 writes it (RDB 11, type 21): each
        // consumer's active time follows its seen time.
        let hex = "150110000000000000000100000000000000013d3d000000180002010101010181610200010201000100010101040100\
                   010101dfff0202018161020201816202817802080103010201dfff0203010401ff0203000101030003010167010181ff\
                   ffffffffffffff0100000000000000010000000000000001719ca533a2010000010205616c696365719ca533a2010000\
                   809ca533a2010000010000000000000001000000000000000103626f62719ca533a2010000719ca533a201000000";
        let payload = crate::rdb::seal_as(hex_bytes(hex), 11);
        let v = decoded(&payload);
        let opened = crate::rdb::open(&payload).unwrap();
        assert_eq!(v.entries.len(), 2);
        assert_eq!((v.first_id, v.max_deleted, v.entries_added), (StreamId::new(1, 1), StreamId::new(3, 0), 3));
        let g = &v.groups[0];
        assert_eq!(g.pending, vec![(StreamId::new(1, 1), 1_796_162_821_233, 1, b"alice".to_vec())]);
        // The seen time is kept, the active time dropped.
        assert_eq!(g.consumers, vec![(b"alice".to_vec(), 1_796_162_821_233), (b"bob".to_vec(), 1_796_162_821_233)]);
        // Cut short (the last consumer without its active time): refused.
        let mut short = payload[..payload.len() - 10].to_vec();
        short.truncate(short.len() - 9);
        short.push(0);
        assert!(decode(&mut Reader::new(&short[1..]), 21).is_err());
        // Versions past 12 stay refused.
        let future = crate::rdb::seal_as(opened.to_vec(), 13);
        assert_eq!(crate::rdb::open(&future), Err(PayloadError::VersionOrChecksum));
    }

    /// A node whose entries all share one long field name (each decoded
    /// entry gets a copy) is refused before it asks for memory quadratic
    /// in the payload's size.
    #[test]
    fn shared_field_names_cannot_blow_memory_up() {
        let name = vec![b'f'; 1 << 20];
        let entries: Vec<(StreamId, Vec<Vec<u8>>)> =
            (0..100u64).map(|i| (StreamId::new(1, i), vec![name.clone(), b"v".to_vec()])).collect();
        let v = StreamValue { last_id: StreamId::new(1, 99), entries, entries_added: 100, ..StreamValue::default() };
        let mut out = Vec::new();
        encode(&v, &mut out);
        // 100 entries of 1 MiB each from a payload of ~1 MiB: past 64 MiB + 16x.
        assert!(out.len() < 2 << 20);
        let err = decode(&mut Reader::new(&out[1..]), out[0]).unwrap_err();
        assert_eq!(err, PayloadError::Malformed("stream payload decodes past its bound"));
        // Ten such entries (10 MiB) are within the bound and decode.
        let v = StreamValue { entries: v.entries[..10].to_vec(), last_id: StreamId::new(1, 9), entries_added: 10, ..v };
        assert_eq!(round_trip(&v).unwrap(), v);
    }

    #[test]
    fn counts_are_read_as_redis_reads_integers() {
        assert_eq!(int(b"0").unwrap(), 0);
        assert_eq!(int(b"-12").unwrap(), -12);
        for bad in [&b"+2"[..], b"01", b"-0", b"", b"-", b" 1", b"1 ", b"99999999999999999999"] {
            assert!(int(bad).is_err(), "{:?}", String::from_utf8_lossy(bad));
        }
    }

    #[test]
    fn damaged_streams_are_refused() {
        let v = sample();
        let mut good = Vec::new();
        encode(&v, &mut good);
        for cut in 1..good.len() {
            let mut r = Reader::new(&good[1..cut]);
            let whole = decode(&mut r, good[0]).is_ok_and(|_| r.at_end());
            assert!(!whole, "cut at {cut}");
        }
        // A pending entry without a consumer, fewer entries added than
        // there are, an entry past the last ID, a group named twice.
        let mut orphan = v.clone();
        orphan.groups[0].consumers.retain(|c| c.0 != b"bob");
        assert!(round_trip(&orphan).is_err());
        let mut few = v.clone();
        few.entries_added = 1;
        assert!(round_trip(&few).is_err(), "fewer entries added than there are");
        let mut past = v.clone();
        past.last_id = StreamId::new(1, 0);
        assert!(round_trip(&past).is_err());
        let mut twice = v;
        twice.groups.push(twice.groups[0].clone());
        assert!(round_trip(&twice).is_err());
    }
}
