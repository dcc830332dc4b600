//! How Redis keys become ordered keys in one [`Db`](tembo_store::Db).
//!
//! Every Redis key has one **metadata** record; collections add one ordered
//! **sub-key** per element, scoped by a per-collection *version*:
//!
//! ```text
//! M db gen hash(key) key                    -> Meta (type, expiry, version, size; a string's bytes;
//!                                              a small hash's field order, see `cmd::hash_order`)
//! S db len(key) key version field           -> hash value | "" (set) | score (zset) | element (list; field = index)
//!                                              | 64 KiB of a chunked string (field = chunk index; see `chunked`)
//! Z db len(key) key version score member    -> ""   (sorted-set index, ordered by score then member)
//! E expire-at db key                        -> ""   (expiry index, ordered by time)
//! R db len(key) key version                 -> ""   (a dropped collection whose elements await reclaiming)
//! F db                                      -> the database's flush generation (u16)
//! G name                                    -> server globals (version high-water mark, key layout,
//!                                              the SWAPDB map from selected to stored database)
//! L name                                    -> a function library's code (FUNCTION LOAD), by lower-case name
//! ```
//!
//! Deleting or overwriting a collection removes only its metadata record
//! and, in the same batch, records the dropped (key, version) under `R`: its
//! sub-keys carry a version no metadata names any more, so no reader can
//! reach them, and the background reclaimer deletes them range by range,
//! then the `R` record (the lazy deletion of Apache Kvrocks, made
//! O(garbage) instead of a scan of all data). A recreated key gets a fresh
//! version, so stale elements never reappear; a crash keeps the `R` record
//! and the work resumes.
//!
//! FLUSHDB and FLUSHALL are O(1): a metadata key carries its database's
//! flush *generation*, and a flush only starts a new one (`F db`), which
//! hides every key of the old generation at once; those keys sort before
//! the new generation's, and the background sweep deletes them as a range
//! (handing collections to the reclaimer). After 65,535 flushes the
//! generation wraps back to 0 with one synchronous O(keys) flush.
//!
//! Metadata keys carry a 32-bit hash of the Redis key (FNV-1a) so that
//! their first eight bytes — the prefix the engine keeps in each slot and
//! compares before dereferencing a record — differ between keys even when
//! users name them `user:000001`, `user:000002`…; without it nearly every
//! comparison of a lookup is a cache miss into a record. Key iteration
//! (SCAN, KEYS) is therefore in hash order, which Redis does not promise
//! anything about either.
//!
//! All integers in keys are big-endian so that byte order is numeric
//! order; scores use the order-preserving transform of IEEE-754 doubles.

/// Redis value types.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// A string (its bytes live in the metadata record).
    String = 1,
    /// A hash: field -> value sub-keys.
    Hash = 2,
    /// A list: index -> element sub-keys, between `head` and `head + size`.
    List = 3,
    /// A set: member -> "" sub-keys.
    Set = 4,
    /// A sorted set: member -> score sub-keys plus the score index.
    ZSet = 5,
    /// A stream: 16-byte ID -> entry sub-keys; nodes, consumer groups,
    /// PELs and consumers under the [`STREAM_AUX`] tag; stream-level
    /// state (last ID, counters) in the metadata's `value`.
    Stream = 6,
}

impl Kind {
    fn from_byte(b: u8) -> Option<Kind> {
        Some(match b {
            1 => Kind::String,
            2 => Kind::Hash,
            3 => Kind::List,
            4 => Kind::Set,
            5 => Kind::ZSet,
            6 => Kind::Stream,
            _ => return None,
        })
    }

    /// The name TYPE replies with.
    pub fn name(self) -> &'static str {
        match self {
            Kind::String => "string",
            Kind::Hash => "hash",
            Kind::List => "list",
            Kind::Set => "set",
            Kind::ZSet => "zset",
            Kind::Stream => "stream",
        }
    }

    /// The encoding OBJECT ENCODING reports (the closest Redis name).
    pub fn encoding(self) -> &'static str {
        match self {
            Kind::String => "raw",
            Kind::Hash => "hashtable",
            Kind::List => "quicklist",
            Kind::Set => "hashtable",
            Kind::ZSet => "skiplist",
            Kind::Stream => "stream",
        }
    }
}

/// Prefix of metadata keys.
pub const META: u8 = b'M';
/// Prefix of collection sub-keys.
pub const SUB: u8 = b'S';
/// Prefix of the sorted-set score index.
pub const ZIDX: u8 = b'Z';
/// Prefix of a stream's auxiliary records (nodes, groups, PELs,
/// consumers): streams have no score index, so they use its tag, which
/// the reclaimer already sweeps for a dropped version.
pub const STREAM_AUX: u8 = ZIDX;
/// Prefix of the expiry index.
pub const EXPIRES: u8 = b'E';
/// Prefix of dropped collections awaiting reclaim.
pub const GARBAGE: u8 = b'R';
/// Prefix of server globals.
pub const GLOBAL: u8 = b'G';
/// Prefix of function libraries: `L lower-case name` → code.
pub const LIBRARY: u8 = b'L';
/// Prefix of the databases' flush generations: `F db` → u16 (absent: 0).
pub const FLUSH_GEN: u8 = b'F';

/// The key-layout version this build writes, recorded under [`layout_key`].
/// 2: metadata keys carry their database's flush generation.
/// 3: a string may be stored in chunks (metadata kind byte 7, `chunked`),
/// which a layout-2 build would read as corrupt; a layout-2 pool opens and
/// is recorded as 3, so that an older build then refuses it plainly.
pub const LAYOUT: u32 = 3;

/// Where a string's bytes start in its metadata record (after its kind
/// and expiry).
pub const STRING_AT: usize = 9;

/// The kind byte of a string stored in chunks (see `chunked_string`): its
/// record holds the expiry, the chunks' version and the string's length.
const STRING_CHUNKED: u8 = 7;

/// The most bytes a metadata record adds to the value it holds (a string's
/// bytes, a stream's state): kind, expiry, version, size and list head.
pub const META_HEADER_MAX: usize = 64;

/// Where the key-layout version is recorded.
pub fn layout_key() -> Vec<u8> {
    let mut k = vec![GLOBAL];
    k.extend_from_slice(b"layout");
    k
}

/// Where the map from the databases clients SELECT to the databases keys
/// are stored under is kept (SWAPDB changes it; absent: each is itself).
pub fn db_map_key() -> Vec<u8> {
    let mut k = vec![GLOBAL];
    k.extend_from_slice(b"db-map");
    k
}

/// Where function library `name` is stored (FLUSHALL does not reach it).
pub fn library_key(name: &str) -> Vec<u8> {
    let mut k = vec![LIBRARY];
    k.extend_from_slice(name.to_ascii_lowercase().as_bytes());
    k
}

/// Where database `db`'s flush generation is recorded.
pub fn flush_gen_key(db: u8) -> Vec<u8> {
    vec![FLUSH_GEN, db]
}

/// The list index of a new list's first element: lists grow both ways.
pub const LIST_MID: u64 = 1 << 63;

/// The first byte of a hash's metadata value while it keeps its field
/// order (`cmd::hash_order`); an empty value is a hash that keeps none.
pub const HASH_ORDERED: u8 = 1;

/// More elements (or string bytes) than a record may count: 2^48, beyond
/// any pool's size. A record counting more is damaged.
pub const MAX_ELEMENTS: u64 = 1 << 48;

/// A Redis key's metadata record.
#[derive(Clone, Debug, PartialEq)]
pub struct Meta {
    /// The type.
    pub kind: Kind,
    /// Absolute expiry in Unix milliseconds; 0 = none.
    pub expire_at: u64,
    /// The collection's version (scopes its sub-keys); 0 for strings.
    pub version: u64,
    /// Number of elements (collections).
    pub size: u64,
    /// Index of the first element (lists).
    pub head: u64,
    /// The value (strings); the stream-level state (streams).
    pub value: Vec<u8>,
}

impl Meta {
    /// A string's metadata.
    pub fn string(value: Vec<u8>) -> Meta {
        Meta { kind: Kind::String, expire_at: 0, version: 0, size: 0, head: 0, value }
    }

    /// An empty collection's metadata.
    pub fn collection(kind: Kind, version: u64) -> Meta {
        // A new hash keeps its field order (none named yet).
        let value = if kind == Kind::Hash { vec![HASH_ORDERED] } else { Vec::new() };
        Meta { kind, expire_at: 0, version, size: 0, head: LIST_MID, value }
    }

    /// Whether this is a string stored in chunks: a string with a version
    /// (its chunks' scope; `size` is its length, `value` holds its bytes
    /// only once read).
    pub fn is_chunked(&self) -> bool {
        self.kind == Kind::String && self.version != 0
    }

    /// The record of a string stored in chunks under `version`, `len` bytes long.
    pub fn encode_chunked(expire_at: u64, version: u64, len: u64) -> Vec<u8> {
        let mut out = Vec::with_capacity(25);
        out.push(STRING_CHUNKED);
        out.extend_from_slice(&expire_at.to_be_bytes());
        out.extend_from_slice(&version.to_be_bytes());
        out.extend_from_slice(&len.to_be_bytes());
        out
    }

    /// The record's bytes (a string's: with its bytes, never its chunks;
    /// `Ctx::write_meta` is what stores a big one in chunks).
    pub fn encode(&self) -> Vec<u8> {
        if self.kind == Kind::String {
            return Meta::encode_string(self.expire_at, &self.value);
        }
        let mut out = Vec::with_capacity(9 + self.value.len().max(24));
        out.push(self.kind as u8);
        out.extend_from_slice(&self.expire_at.to_be_bytes());
        out.extend_from_slice(&self.version.to_be_bytes());
        out.extend_from_slice(&self.size.to_be_bytes());
        if self.kind == Kind::List {
            out.extend_from_slice(&self.head.to_be_bytes());
        }
        if matches!(self.kind, Kind::Stream | Kind::Hash) {
            out.extend_from_slice(&self.value);
        }
        out
    }

    /// Reads a record; `None` if it is not one this layout writes.
    pub fn decode(b: &[u8]) -> Option<Meta> {
        let mut m = Meta::decode_head(b)?;
        if let Some(at) = m.value_at() {
            m.value = b.get(at..)?.to_vec();
        }
        Some(m)
    }

    /// [`Meta::decode`] of a record read whole into `b`, keeping its
    /// allocation for a string's value (a big string is not copied again).
    pub fn decode_owned(mut b: Vec<u8>) -> Option<Meta> {
        let mut m = Meta::decode_head(&b)?;
        if let Some(at) = m.value_at() {
            b.drain(..at.min(b.len()));
            m.value = b;
        }
        Some(m)
    }

    /// The record's header alone (its first [`META_HEADER_MAX`] bytes are
    /// enough): the value of a string or stream is left empty.
    pub fn decode_head(b: &[u8]) -> Option<Meta> {
        if *b.first()? == STRING_CHUNKED {
            let (expire_at, version, size) = (be64(b.get(1..9)?), be64(b.get(9..17)?), be64(b.get(17..25)?));
            if version == 0 || size > MAX_ELEMENTS {
                return None;
            }
            return Some(Meta { kind: Kind::String, expire_at, version, size, head: 0, value: Vec::new() });
        }
        let kind = Kind::from_byte(*b.first()?)?;
        let expire_at = be64(b.get(1..9)?);
        let mut m = Meta { kind, expire_at, version: 0, size: 0, head: 0, value: Vec::new() };
        if kind != Kind::String {
            m.version = be64(b.get(9..17)?);
            m.size = be64(b.get(17..25)?);
        }
        if kind == Kind::List {
            m.head = be64(b.get(25..33)?);
        }
        // Counts no pool can hold, a list whose last index overflows and
        // an empty collection (deleted with its last element; only a
        // stream may be empty) are damage: commands do arithmetic on them.
        let empty = m.size == 0 && !matches!(kind, Kind::String | Kind::Stream);
        if empty || m.size > MAX_ELEMENTS || m.head.checked_add(m.size).is_none() {
            return None;
        }
        Some(m)
    }

    /// Where the value (a string's bytes, a stream's state, a hash's field
    /// order) starts in this record; the other collections, and strings
    /// stored in chunks, hold none.
    pub fn value_at(&self) -> Option<usize> {
        match self.kind {
            Kind::String if self.is_chunked() => None,
            Kind::String => Some(STRING_AT),
            // A record of an older layout, 25 bytes long, reads as an
            // empty value: a hash that keeps no field order.
            Kind::Stream | Kind::Hash => Some(25),
            _ => None,
        }
    }

    /// A string's record: the header of `expire_at` and `value`, copied once.
    pub fn encode_string(expire_at: u64, value: &[u8]) -> Vec<u8> {
        let mut out = Vec::with_capacity(STRING_AT + value.len());
        out.extend_from_slice(&Meta::string_header(expire_at));
        out.extend_from_slice(value);
        out
    }

    /// The first [`STRING_AT`] bytes of a string's record: its kind and
    /// expiry.
    pub fn string_header(expire_at: u64) -> [u8; STRING_AT] {
        let mut h = [0u8; STRING_AT];
        h[0] = Kind::String as u8;
        h[1..].copy_from_slice(&expire_at.to_be_bytes());
        h
    }

    /// Whether the key has expired at `now_ms`.
    pub fn expired(&self, now_ms: u64) -> bool {
        self.expire_at != 0 && self.expire_at <= now_ms
    }
}

/// Reads 8 big-endian bytes (the caller has checked the length).
pub fn be64(b: &[u8]) -> u64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[..8]);
    u64::from_be_bytes(a)
}

/// Bytes before the Redis key in a metadata key: tag, db, generation (2),
/// hash (4) — exactly the eight bytes the engine compares in a slot.
pub const META_HEAD: usize = 8;

/// The layout's key hash: 32-bit FNV-1a (fixed forever: it is part of the pool format).
pub fn key_hash(key: &[u8]) -> u32 {
    key.iter().fold(0x811c_9dc5u32, |h, &b| (h ^ b as u32).wrapping_mul(0x0100_0193))
}

/// `M db gen hash(key) key`, where `gen` is the database's flush
/// generation: FLUSHDB starts a new generation, which makes every key of
/// the old one invisible at once (O(1)); the old generation's keys sort
/// before the new one's, so the background sweep deletes them as one range.
/// The generation is 16 bits so that the whole 32-bit hash still lies in
/// the engine's 8-byte slot prefix.
pub fn meta_key(db: u8, gen: u16, key: &[u8]) -> Vec<u8> {
    let mut k = meta_prefix(db, gen);
    k.reserve(4 + key.len());
    k.extend_from_slice(&key_hash(key).to_be_bytes());
    k.extend_from_slice(key);
    k
}

/// The key hash a metadata key carries (0 if too short to be one).
pub fn meta_key_hash(k: &[u8]) -> u32 {
    k.get(META_HEAD - 4..META_HEAD).and_then(|h| <[u8; 4]>::try_from(h).ok()).map_or(0, u32::from_be_bytes)
}

/// The Redis key of a metadata key (`None` if too short to be one).
pub fn meta_user_key(k: &[u8]) -> Option<&[u8]> {
    k.get(META_HEAD..)
}

/// The prefix of every metadata key of database `db` in generation `gen`.
pub fn meta_prefix(db: u8, gen: u16) -> Vec<u8> {
    let mut k = Vec::with_capacity(META_HEAD + 16);
    k.push(META);
    k.push(db);
    k.extend_from_slice(&gen.to_be_bytes());
    k
}

/// `tag db len(key) key version`: the prefix of a collection's sub-keys (`tag` = SUB or ZIDX).
pub fn sub_prefix(tag: u8, db: u8, key: &[u8], version: u64) -> Vec<u8> {
    let mut k = Vec::with_capacity(2 + 4 + key.len() + 8 + 16);
    k.push(tag);
    k.push(db);
    k.extend_from_slice(&(key.len() as u32).to_be_bytes());
    k.extend_from_slice(key);
    k.extend_from_slice(&version.to_be_bytes());
    k
}

/// A collection's sub-key for `field`.
pub fn sub_key(db: u8, key: &[u8], version: u64, field: &[u8]) -> Vec<u8> {
    let mut k = sub_prefix(SUB, db, key, version);
    k.extend_from_slice(field);
    k
}

/// Splits a `SUB`/`ZIDX` key into (db, user key, version, rest).
pub fn split_sub(k: &[u8]) -> Option<(u8, &[u8], u64, &[u8])> {
    let db = *k.get(1)?;
    let len = u32::from_be_bytes(k.get(2..6)?.try_into().ok()?) as usize;
    let key = k.get(6..6 + len)?;
    let version = be64(k.get(6 + len..14 + len)?);
    Some((db, key, version, &k[14 + len..]))
}

/// The order-preserving bytes of a score: byte order equals numeric order.
pub fn score_bytes(score: f64) -> [u8; 8] {
    let bits = score.to_bits();
    let ordered = if bits >> 63 == 1 { !bits } else { bits | (1 << 63) };
    ordered.to_be_bytes()
}

/// The inverse of [`score_bytes`].
pub fn score_from_bytes(b: &[u8]) -> f64 {
    let ordered = be64(b);
    let bits = if ordered >> 63 == 1 { ordered & !(1 << 63) } else { !ordered };
    f64::from_bits(bits)
}

/// A sorted set's index key for (score, member).
pub fn zidx_key(db: u8, key: &[u8], version: u64, score: f64, member: &[u8]) -> Vec<u8> {
    let mut k = sub_prefix(ZIDX, db, key, version);
    k.extend_from_slice(&score_bytes(normalize_zero(score)));
    k.extend_from_slice(member);
    k
}

/// -0.0 and 0.0 are one score in Redis; one byte form keeps them one index entry.
pub fn normalize_zero(s: f64) -> f64 {
    if s == 0.0 {
        0.0
    } else {
        s
    }
}

/// A sorted-set member's sub-key value: its score.
pub fn score_value(score: f64) -> Vec<u8> {
    normalize_zero(score).to_be_bytes().to_vec()
}

/// The score a [`score_value`] holds.
pub fn score_of_value(v: &[u8]) -> Option<f64> {
    Some(f64::from_be_bytes(v.get(..8)?.try_into().ok()?))
}

/// `E expire-at db key`.
pub fn expire_key(at: u64, db: u8, key: &[u8]) -> Vec<u8> {
    let mut k = Vec::with_capacity(10 + key.len());
    k.push(EXPIRES);
    k.extend_from_slice(&at.to_be_bytes());
    k.push(db);
    k.extend_from_slice(key);
    k
}

/// The smallest key strictly greater than every key starting with `prefix`
/// (`None`: no such key, the prefix is all 0xff).
pub fn prefix_end(prefix: &[u8]) -> Option<Vec<u8>> {
    let mut end = prefix.to_vec();
    while let Some(last) = end.pop() {
        if last < 0xff {
            end.push(last + 1);
            return Some(end);
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn score_order_is_numeric(a in proptest::num::f64::NORMAL | proptest::num::f64::ZERO | proptest::num::f64::INFINITE,
                                  b in proptest::num::f64::NORMAL | proptest::num::f64::ZERO | proptest::num::f64::INFINITE) {
            let (a, b) = (normalize_zero(a), normalize_zero(b));
            prop_assert_eq!(score_from_bytes(&score_bytes(a)), a);
            prop_assert_eq!(a.partial_cmp(&b).unwrap(), score_bytes(a).cmp(&score_bytes(b)));
        }

        #[test]
        fn meta_round_trips(kind in 1u8..=6, exp in any::<u64>(), ver in any::<u64>(), size in 1..=MAX_ELEMENTS, head in any::<u64>(), value in proptest::collection::vec(any::<u8>(), 0..64)) {
            let kind = Kind::from_byte(kind).unwrap();
            let head = head.min(u64::MAX - size);
            let m = match kind {
                Kind::String => Meta { expire_at: exp, ..Meta::string(value) },
                Kind::List => Meta { expire_at: exp, size, head, ..Meta::collection(kind, ver) },
                Kind::Stream | Kind::Hash => Meta { expire_at: exp, size, head: 0, value, ..Meta::collection(kind, ver) },
                _ => Meta { expire_at: exp, size, head: 0, ..Meta::collection(kind, ver) },
            };
            prop_assert_eq!(Meta::decode(&m.encode()), Some(m));
        }

        #[test]
        fn damaged_counts_do_not_decode(kind in 2u8..=5, ver in any::<u64>(), size in any::<u64>(), head in any::<u64>()) {
            // Hashes, lists, sets and sorted sets: empty, beyond any pool, or
            // (lists) a last index that overflows.
            let kind = Kind::from_byte(kind).unwrap();
            let head = if kind == Kind::List { head } else { 0 };
            let m = Meta { size, head, ..Meta::collection(kind, ver) };
            let sane = size != 0 && size <= MAX_ELEMENTS && head.checked_add(size).is_some();
            prop_assert_eq!(Meta::decode(&m.encode()).is_some(), sane);
            prop_assert_eq!(Meta::decode(&Meta::encode_chunked(0, 1, size)).is_some(), size <= MAX_ELEMENTS);
        }

        #[test]
        fn chunked_string_heads_round_trip(exp in any::<u64>(), ver in 1u64.., len in 0..=MAX_ELEMENTS) {
            let m = Meta::decode(&Meta::encode_chunked(exp, ver, len)).unwrap();
            prop_assert!(m.is_chunked());
            prop_assert_eq!(m, Meta { kind: Kind::String, expire_at: exp, version: ver, size: len, head: 0, value: Vec::new() });
        }

        #[test]
        fn sub_keys_split_back(db in any::<u8>(), key in proptest::collection::vec(any::<u8>(), 0..40), ver in any::<u64>(), field in proptest::collection::vec(any::<u8>(), 0..40)) {
            let k = sub_key(db, &key, ver, &field);
            prop_assert_eq!(split_sub(&k), Some((db, &key[..], ver, &field[..])));
            prop_assert!(k.starts_with(&sub_prefix(SUB, db, &key, ver)));
        }
    }

    #[test]
    fn a_key_is_not_a_prefix_of_another_keys_elements() {
        // "a" and "ab" must not share sub-key ranges: the length prefix sees to it.
        let a = sub_prefix(SUB, 0, b"a", 1);
        let ab = sub_key(0, b"ab", 1, b"x");
        assert!(!ab.starts_with(&a));
        assert_eq!(prefix_end(b"a\xff"), Some(b"b".to_vec()));
        assert_eq!(prefix_end(b"\xff"), None);
        assert!(Meta::decode(b"\x09").is_none());
    }
}
