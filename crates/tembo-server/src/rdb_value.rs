//! A key's value in Redis's RDB object format: what DUMP writes and RESTORE
//! reads.
//!
//! Tembo writes each type in its plain RDB encoding (string, list, set,
//! hash, and `ZSET_2` with binary scores), which every Redis since 4.0
//! loads. It reads those and every encoding Redis 7.0 writes or keeps
//! loading from older versions: ziplists, listpacks, intsets and
//! quicklists (v1 of ziplists, v2 of listpacks), and the old zset with
//! text scores, and streams (`crate::rdb_stream`). Module types are
//! refused with a typed error.
//! Every length is checked against the bytes that are there: a damaged or
//! hostile payload is an error, never a panic or a huge allocation.

use crate::rdb::{put_len, put_string, PayloadError, Reader};

/// (field, value) pairs: a hash's, or a collection's elements as stored.
pub type Pairs = Vec<(Vec<u8>, Vec<u8>)>;

/// A Redis value, decoded.
#[derive(Clone, Debug, PartialEq)]
pub enum Value {
    /// A string.
    String(Vec<u8>),
    /// A list, head first.
    List(Vec<Vec<u8>>),
    /// A set's members.
    Set(Vec<Vec<u8>>),
    /// A sorted set's (member, score) pairs.
    ZSet(Vec<(Vec<u8>, f64)>),
    /// A hash's (field, value) pairs.
    Hash(Pairs),
    /// A stream: entries, counters and consumer groups.
    Stream(crate::rdb_stream::StreamValue),
}

const STRING: u8 = 0;
const LIST: u8 = 1;
const SET: u8 = 2;
const ZSET: u8 = 3;
const HASH: u8 = 4;
const ZSET_2: u8 = 5;
const LIST_ZIPLIST: u8 = 10;
const SET_INTSET: u8 = 11;
const ZSET_ZIPLIST: u8 = 12;
const HASH_ZIPLIST: u8 = 13;
const LIST_QUICKLIST: u8 = 14;
const HASH_LISTPACK: u8 = 16;
const ZSET_LISTPACK: u8 = 17;
/// A small set as Redis 7.2 writes it (read only: Tembo writes type 2).
const SET_LISTPACK: u8 = 20;
const LIST_QUICKLIST_2: u8 = 18;

const BAD: PayloadError = PayloadError::Malformed("bad DUMP payload");

/// The RDB object bytes (type byte, then the value) of `v`.
pub fn encode(v: &Value) -> Vec<u8> {
    encode_with(v, put_string)
}

/// [`encode`] with the strings of strings, lists, sets, sorted sets and
/// hashes LZF-compressed where that pays, as Redis writes RDB files.
pub fn encode_compressed(v: &Value) -> Vec<u8> {
    encode_with(v, crate::rdb::put_string_compressed)
}

fn encode_with(v: &Value, put_string: fn(&mut Vec<u8>, &[u8])) -> Vec<u8> {
    let mut out = Vec::new();
    match v {
        Value::String(s) => {
            out.push(STRING);
            put_string(&mut out, s);
        }
        Value::List(items) | Value::Set(items) => {
            out.push(if matches!(v, Value::List(_)) { LIST } else { SET });
            put_len(&mut out, items.len() as u64);
            for i in items {
                put_string(&mut out, i);
            }
        }
        Value::ZSet(pairs) => {
            out.push(ZSET_2);
            put_len(&mut out, pairs.len() as u64);
            for (m, s) in pairs {
                put_string(&mut out, m);
                out.extend_from_slice(&s.to_le_bytes());
            }
        }
        Value::Stream(st) => crate::rdb_stream::encode(st, &mut out),
        Value::Hash(pairs) => {
            out.push(HASH);
            put_len(&mut out, pairs.len() as u64);
            for (f, val) in pairs {
                put_string(&mut out, f);
                put_string(&mut out, val);
            }
        }
    }
    out
}

/// Decodes RDB object bytes (a DUMP payload's body).
///
/// # Errors
/// [`PayloadError::Malformed`] for anything that is not one whole value of a
/// supported type.
pub fn decode(body: &[u8]) -> Result<Value, PayloadError> {
    decode_versioned(body, crate::rdb::RDB_VERSION_READ)
}

/// [`decode`] of the body of a payload of RDB `version`: the types Redis
/// 7.2 added (RDB 11) only in a payload of version 11 or later, so that a
/// payload saying version 10 is read exactly as Redis 7.0 reads it.
///
/// # Errors
/// As [`decode`].
pub fn decode_versioned(body: &[u8], version: u16) -> Result<Value, PayloadError> {
    let mut r = Reader::new(body);
    let v = decode_from(&mut r, version)?;
    if !r.at_end() {
        return Err(BAD);
    }
    Ok(v)
}

/// Reads one object (type byte, then the value) at `r`, leaving `r` after
/// it: an RDB file's values follow one another (`crate::rdb_load`).
///
/// # Errors
/// As [`decode`].
pub fn decode_from(r: &mut Reader<'_>, version: u16) -> Result<Value, PayloadError> {
    let ty = r.byte()?;
    decode_typed(r, ty, version)
}

/// [`decode_from`] of a value whose type byte has been read already.
///
/// # Errors
/// As [`decode`].
pub fn decode_typed(r: &mut Reader<'_>, ty: u8, version: u16) -> Result<Value, PayloadError> {
    if version < 11 && matches!(ty, SET_LISTPACK | crate::rdb_stream::STREAM_LISTPACKS_3) {
        return Err(BAD);
    }
    let v = match ty {
        STRING => Value::String(r.string()?),
        LIST => Value::List(strings(r)?),
        SET => Value::Set(strings(r)?),
        HASH => {
            let n = count(r, 2)?;
            let mut pairs = Vec::with_capacity(n.min(PREALLOC));
            for _ in 0..n {
                pairs.push((r.string()?, r.string()?));
            }
            Value::Hash(pairs)
        }
        t @ (ZSET | ZSET_2) => {
            let n = count(r, 2)?;
            let mut pairs = Vec::with_capacity(n.min(PREALLOC));
            for _ in 0..n {
                let m = r.string()?;
                let s = if t == ZSET_2 { f64::from_le_bytes(take8(r)?) } else { text_score(r)? };
                if s.is_nan() {
                    return Err(BAD);
                }
                pairs.push((m, s));
            }
            Value::ZSet(pairs)
        }
        LIST_ZIPLIST => Value::List(ziplist(&r.string()?)?),
        SET_INTSET => Value::Set(intset(&r.string()?)?),
        ZSET_ZIPLIST => Value::ZSet(scored(ziplist(&r.string()?)?)?),
        HASH_ZIPLIST => Value::Hash(paired(ziplist(&r.string()?)?)?),
        HASH_LISTPACK => Value::Hash(paired(listpack_elements(&r.string()?)?)?),
        ZSET_LISTPACK => Value::ZSet(scored(listpack_elements(&r.string()?)?)?),
        SET_LISTPACK => {
            let members = listpack_elements(&r.string()?)?;
            if members.is_empty() {
                return Err(BAD); // Redis 7.2 refuses an empty set listpack
            }
            Value::Set(members)
        }
        LIST_QUICKLIST => {
            let nodes = count(r, 1)?;
            let mut items = Vec::new();
            for _ in 0..nodes {
                items.extend(ziplist(&r.string()?)?);
            }
            Value::List(items)
        }
        LIST_QUICKLIST_2 => {
            let nodes = count(r, 2)?;
            let mut items = Vec::new();
            for _ in 0..nodes {
                let container = r.len()?;
                let data = r.string()?;
                if data.is_empty() {
                    return Err(BAD); // Redis refuses an empty node of either kind
                }
                match container {
                    1 => items.push(data),
                    2 => items.extend(listpack_elements(&data)?),
                    _ => return Err(BAD),
                }
            }
            Value::List(items)
        }
        t @ (crate::rdb_stream::STREAM_LISTPACKS
        | crate::rdb_stream::STREAM_LISTPACKS_2
        | crate::rdb_stream::STREAM_LISTPACKS_3) => Value::Stream(crate::rdb_stream::decode(r, t)?),
        _ => return Err(BAD),
    };
    Ok(v)
}

/// A count of items each at least `min_bytes` long, checked against what is
/// left so that a forged count cannot ask for a huge allocation.
/// Most elements reserved ahead from a stored count: a count is only
/// checked against the bytes left, which in a whole RDB file (not one
/// payload) can be gigabytes, and a damaged one must fail as damage, not
/// as an allocation too big to make.
const PREALLOC: usize = 4096;

fn count(r: &mut Reader<'_>, min_bytes: usize) -> Result<usize, PayloadError> {
    let n = usize::try_from(r.len()?).map_err(|_| BAD)?;
    if n.saturating_mul(min_bytes) > r.remaining() {
        return Err(BAD);
    }
    Ok(n)
}

fn strings(r: &mut Reader<'_>) -> Result<Vec<Vec<u8>>, PayloadError> {
    let n = count(r, 1)?;
    (0..n).map(|_| r.string()).collect()
}

fn take8(r: &mut Reader<'_>) -> Result<[u8; 8], PayloadError> {
    let mut b = [0u8; 8];
    for x in &mut b {
        *x = r.byte()?;
    }
    Ok(b)
}

/// An old zset score: a length byte (253 NaN, 254 +inf, 255 -inf), then
/// the number as text.
fn text_score(r: &mut Reader<'_>) -> Result<f64, PayloadError> {
    match r.byte()? {
        253 => Ok(f64::NAN),
        254 => Ok(f64::INFINITY),
        255 => Ok(f64::NEG_INFINITY),
        n => {
            let text: Vec<u8> = (0..n).map(|_| r.byte()).collect::<Result<_, _>>()?;
            std::str::from_utf8(&text).ok().and_then(|t| t.parse().ok()).ok_or(BAD)
        }
    }
}

fn paired(items: Vec<Vec<u8>>) -> Result<Pairs, PayloadError> {
    if items.len() % 2 != 0 {
        return Err(BAD);
    }
    let mut it = items.into_iter();
    let mut out = Vec::new();
    while let (Some(a), Some(b)) = (it.next(), it.next()) {
        out.push((a, b));
    }
    Ok(out)
}

fn scored(items: Vec<Vec<u8>>) -> Result<Vec<(Vec<u8>, f64)>, PayloadError> {
    paired(items)?
        .into_iter()
        .map(|(m, s)| {
            let score: f64 = std::str::from_utf8(&s).ok().and_then(|t| t.parse().ok()).ok_or(BAD)?;
            if score.is_nan() {
                return Err(BAD);
            }
            Ok((m, score))
        })
        .collect()
}

fn le(b: &[u8]) -> i64 {
    // Sign-extends a little-endian two's-complement integer of 1 to 8 bytes.
    let mut v: i64 = 0;
    for (i, &x) in b.iter().enumerate() {
        v |= i64::from(x) << (8 * i);
    }
    let bits = 8 * b.len() as u32;
    if bits < 64 {
        let shift = 64 - bits;
        v = (v << shift) >> shift;
    }
    v
}

fn slice(b: &[u8], at: usize, n: usize) -> Result<&[u8], PayloadError> {
    b.get(at..at.checked_add(n).ok_or(BAD)?).ok_or(BAD)
}

/// The entries of a ziplist (Redis before 7.0 for small lists, hashes and
/// sorted sets), checked whole as Redis's deep sanitization checks it: the
/// header's byte count and tail offset, each entry's record of the length
/// of the one before it, the entry count (unless saturated), and the end
/// byte as the last byte.
fn ziplist(b: &[u8]) -> Result<Vec<Vec<u8>>, PayloadError> {
    const HEADER: usize = 10; // zlbytes u32, zltail u32, zllen u16
    if b.len() < HEADER + 1 || u32_at(b, 0)? as usize != b.len() || b[b.len() - 1] != 0xff {
        return Err(BAD);
    }
    let tail = u32_at(b, 4)? as usize;
    let declared = u16::from_le_bytes([b[8], b[9]]);
    let end = b.len() - 1;
    if tail > end {
        return Err(BAD);
    }
    let mut out = Vec::new();
    let (mut i, mut prev_len, mut last) = (HEADER, 0usize, None);
    while i < end {
        let start = i;
        let recorded = if b[i] == 0xff {
            return Err(BAD); // an end byte before the end
        } else if b[i] == 0xfe {
            i += 5;
            u32_at(b, start + 1)? as usize
        } else {
            i += 1;
            usize::from(b[start])
        };
        if recorded != prev_len {
            return Err(BAD);
        }
        let enc = *b.get(i).ok_or(BAD)?;
        let (value, used) = match enc >> 6 {
            0 => {
                let n = usize::from(enc & 0x3f);
                (slice(b, i + 1, n)?.to_vec(), 1 + n)
            }
            1 => {
                let n = usize::from(enc & 0x3f) << 8 | usize::from(*b.get(i + 1).ok_or(BAD)?);
                (slice(b, i + 2, n)?.to_vec(), 2 + n)
            }
            2 => {
                let n = u32::from_be_bytes(slice(b, i + 1, 4)?.try_into().map_err(|_| BAD)?) as usize;
                (slice(b, i + 5, n)?.to_vec(), 5 + n)
            }
            _ => {
                let width = match enc {
                    0xc0 => 2,
                    0xd0 => 4,
                    0xe0 => 8,
                    0xf0 => 3,
                    0xfe => 1,
                    0xf1..=0xfd => 0,
                    _ => return Err(BAD),
                };
                let v = if width == 0 { i64::from(enc & 0x0f) - 1 } else { le(slice(b, i + 1, width)?) };
                (v.to_string().into_bytes(), 1 + width)
            }
        };
        i += used;
        if i > end {
            return Err(BAD); // the entry runs over the end byte
        }
        out.push(value);
        prev_len = i - start;
        last = Some(start);
    }
    if last.is_some_and(|l| l != tail) || (declared != u16::MAX && usize::from(declared) != out.len()) {
        return Err(BAD);
    }
    Ok(out)
}

/// A little-endian u32 at `at`.
fn u32_at(b: &[u8], at: usize) -> Result<u32, PayloadError> {
    Ok(u32::from_le_bytes(slice(b, at, 4)?.try_into().map_err(|_| BAD)?))
}

/// The entries of a listpack (Redis 7's small lists, hashes, sorted sets),
/// checked whole as Redis's deep sanitization checks it: the header's byte
/// count, each entry's back-length, the element count (unless saturated),
/// and the end byte as the last byte.
pub(crate) fn listpack_elements(b: &[u8]) -> Result<Vec<Vec<u8>>, PayloadError> {
    const HEADER: usize = 6; // total bytes u32, element count u16
    if b.len() < HEADER + 1 || u32_at(b, 0)? as usize != b.len() || b[b.len() - 1] != 0xff {
        return Err(BAD);
    }
    let declared = u16::from_le_bytes([b[4], b[5]]);
    let end = b.len() - 1;
    let mut out = Vec::new();
    let mut i = HEADER;
    while i < end {
        let enc = b[i];
        let (value, len) = if enc & 0x80 == 0 {
            (i64::from(enc).to_string().into_bytes(), 1)
        } else if enc & 0xc0 == 0x80 {
            let n = usize::from(enc & 0x3f);
            (slice(b, i + 1, n)?.to_vec(), 1 + n)
        } else if enc & 0xe0 == 0xc0 {
            let raw = i64::from(enc & 0x1f) << 8 | i64::from(*b.get(i + 1).ok_or(BAD)?);
            let v = if raw >= 1 << 12 { raw - (1 << 13) } else { raw };
            (v.to_string().into_bytes(), 2)
        } else if enc & 0xf0 == 0xe0 {
            let n = usize::from(enc & 0x0f) << 8 | usize::from(*b.get(i + 1).ok_or(BAD)?);
            (slice(b, i + 2, n)?.to_vec(), 2 + n)
        } else if enc == 0xf0 {
            let n = u32_at(b, i + 1)? as usize;
            (slice(b, i + 5, n)?.to_vec(), 5 + n)
        } else {
            let width = match enc {
                0xf1 => 2,
                0xf2 => 3,
                0xf3 => 4,
                0xf4 => 8,
                _ => return Err(BAD), // 0xf5..=0xfe, or the end byte where an entry should be
            };
            (le(slice(b, i + 1, width)?).to_string().into_bytes(), 1 + width)
        };
        let backlen = backlen_bytes(len);
        i += len + backlen;
        if i > end || decode_backlen(b, i - 1) != Some(len as u64) {
            return Err(BAD);
        }
        if i > end {
            return Err(BAD); // the entry runs over the end byte
        }
        out.push(value);
    }
    if declared != u16::MAX && usize::from(declared) != out.len() {
        return Err(BAD);
    }
    Ok(out)
}

/// How many bytes a listpack entry of `len` bytes (encoding and data)
/// gives its back-length field, by Redis's thresholds (`lpEncodeBacklen`,
/// strict bounds included: an entry of 16,383 bytes takes three).
pub(crate) fn backlen_bytes(len: usize) -> usize {
    match len {
        0..=127 => 1,
        128..=16_382 => 2,
        16_383..=2_097_150 => 3,
        2_097_151..=268_435_454 => 4,
        _ => 5,
    }
}

/// The back-length field that ends at `last`, read backwards as Redis
/// reads it (`lpDecodeBacklen`): 7 bits a byte, a set top bit meaning
/// another byte before it; `None` past 5 bytes or the buffer's start.
fn decode_backlen(b: &[u8], last: usize) -> Option<u64> {
    let (mut val, mut shift, mut p) = (0u64, 0u32, last);
    loop {
        let byte = *b.get(p)?;
        val |= u64::from(byte & 127) << shift;
        if byte & 128 == 0 {
            return Some(val);
        }
        shift += 7;
        p = p.checked_sub(1)?;
        if shift > 28 {
            return None;
        }
    }
}

/// The members of an intset.
fn intset(b: &[u8]) -> Result<Vec<Vec<u8>>, PayloadError> {
    let width = u32::from_le_bytes(slice(b, 0, 4)?.try_into().map_err(|_| BAD)?) as usize;
    let n = u32::from_le_bytes(slice(b, 4, 4)?.try_into().map_err(|_| BAD)?) as usize;
    if !matches!(width, 2 | 4 | 8) || n == 0 || b.len() != 8 + n.checked_mul(width).ok_or(BAD)? {
        return Err(BAD);
    }
    // Redis's deep check: members strictly ascending (sorted, no duplicates).
    let members: Vec<i64> = b[8..].chunks(width).map(le).collect();
    if members.windows(2).any(|w| w[1] <= w[0]) {
        return Err(BAD);
    }
    Ok(members.into_iter().map(|m| m.to_string().into_bytes()).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn body_of(payload: &[u8]) -> Vec<u8> {
        crate::rdb::open(payload).unwrap().to_vec()
    }

    #[test]
    fn a_redis_7_2_listpack_set_decodes() {
        // Type 20: a listpack of members (here the integer 7 and "ab").
        let lp = [13, 0, 0, 0, 2, 0, 0x07, 0x01, 0x82, b'a', b'b', 0x03, 0xff];
        let mut body = vec![SET_LISTPACK, lp.len() as u8];
        body.extend_from_slice(&lp);
        let payload = crate::rdb::seal_as(body, 11);
        let v = decode(crate::rdb::open(&payload).unwrap()).unwrap();
        assert_eq!(v, Value::Set(vec![b"7".to_vec(), b"ab".to_vec()]));
        // An empty one is refused, as Redis 7.2 refuses it.
        let empty = [7, 0, 0, 0, 0, 0, 0xff];
        let mut body = vec![SET_LISTPACK, empty.len() as u8];
        body.extend_from_slice(&empty);
        assert!(decode(&body).is_err());
        // A payload saying RDB 10 has no type 20, as Redis 7.0 has none.
        assert!(decode_versioned(&body_of(&payload), 10).is_err());
        assert!(decode_versioned(&body_of(&payload), 11).is_ok());
        // Redis 7.4's hash with field expiry (type 25) is not read.
        assert!(decode(&[25, 0]).is_err());
    }

    #[test]
    fn every_type_round_trips() {
        let values = [
            Value::String(b"bar".to_vec()),
            Value::List(vec![b"a".to_vec(), vec![0; 300], b"-12".to_vec()]),
            Value::Set(vec![b"x".to_vec(), b"y".to_vec()]),
            Value::ZSet(vec![(b"m".to_vec(), 1.5), (b"n".to_vec(), f64::NEG_INFINITY)]),
            Value::Hash(vec![(b"f".to_vec(), b"v".to_vec())]),
        ];
        for v in values {
            assert_eq!(decode(&encode(&v)).unwrap(), v);
        }
    }

    #[test]
    fn packed_encodings_decode() {
        // A listpack of "a", 7, -3 (13-bit), 300 (13-bit), 70000 (24-bit).
        let lp =
            [23, 0, 0, 0, 5, 0, 0x81, b'a', 2, 0x07, 1, 0xdf, 0xfd, 2, 0xc1, 0x2c, 2, 0xf2, 0x70, 0x11, 0x01, 4, 0xff];
        let got: Vec<String> =
            listpack_elements(&lp).unwrap().into_iter().map(|v| String::from_utf8(v).unwrap()).collect();
        assert_eq!(got, ["a", "7", "-3", "300", "70000"]);
        // A ziplist of "ab", 5 (immediate), -2 (int8), 1000 (int16).
        let zl =
            [24, 0, 0, 0, 19, 0, 0, 0, 4, 0, 0, 0x02, b'a', b'b', 4, 0xf6, 2, 0xfe, 0xfe, 3, 0xc0, 0xe8, 0x03, 0xff];
        let got: Vec<String> = ziplist(&zl).unwrap().into_iter().map(|v| String::from_utf8(v).unwrap()).collect();
        assert_eq!(got, ["ab", "5", "-2", "1000"]);
        let is = [2, 0, 0, 0, 2, 0, 0, 0, 0xff, 0xff, 0x10, 0x00];
        assert_eq!(intset(&is).unwrap(), vec![b"-1".to_vec(), b"16".to_vec()]);
    }

    #[test]
    fn damaged_payloads_are_errors() {
        let good = encode(&Value::Hash(vec![(b"f".to_vec(), b"v".to_vec())]));
        for cut in 0..good.len() {
            assert!(decode(&good[..cut]).is_err());
        }
        // A forged count cannot make it allocate.
        assert!(decode(&[LIST, 0x81, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff]).is_err());
        assert!(decode(&[SET_INTSET, 8, 3, 0, 0, 0, 0xff, 0xff, 0xff, 0x7f]).is_err());
        assert!(decode(&[15]).is_err());
        assert!(decode(&[21, 0]).is_err()); // Redis 7.2's stream type: its payloads carry RDB version 11
    }

    #[test]
    fn packed_encodings_are_checked_whole() {
        // Each damage below is one Redis's deep sanitization refuses.
        let zl = [17u8, 0, 0, 0, 14, 0, 0, 0, 2, 0, 0, 0x02, b'a', b'b', 4, 0xf6, 0xff];
        let damaged_zl: [(usize, u8); 5] = [
            (0, 18),    // zlbytes says one byte more than there is
            (4, 10),    // zltail names the first entry, not the last
            (8, 3),     // zllen says three entries
            (14, 3),    // the second entry's record of the first's length
            (15, 0xff), // an end byte where an entry's encoding should be
        ];
        for (at, byte) in damaged_zl {
            let mut z = zl;
            z[at] = byte;
            assert!(ziplist(&z).is_err(), "ziplist with byte {at} = {byte:#x}");
        }
        // A saturated count is not checked, as in Redis.
        let mut z = zl;
        z[8] = 0xff;
        z[9] = 0xff;
        assert_eq!(ziplist(&z).unwrap().len(), 2);
        // An empty ziplist's tail offset need only stay inside it.
        assert!(ziplist(&[11, 0, 0, 0, 10, 0, 0, 0, 0, 0, 0xff]).unwrap().is_empty());

        let lp = [15u8, 0, 0, 0, 3, 0, 0x81, b'a', 2, 0x07, 1, 0xc1, 0x2c, 2, 0xff];
        let damaged_lp: [(usize, u8); 5] = [
            (0, 14),    // total bytes one short
            (4, 2),     // element count
            (8, 3),     // the first entry's back-length
            (10, 2),    // the second entry's back-length
            (11, 0xf5), // an encoding Redis does not define
        ];
        for (at, byte) in damaged_lp {
            let mut l = lp;
            l[at] = byte;
            assert!(listpack_elements(&l).is_err(), "listpack with byte {at} = {byte:#x}");
        }
        // The end byte must be the last byte, and nothing may follow it.
        let mut l = lp.to_vec();
        l.insert(14, 0xff);
        l[0] = 16;
        assert!(listpack_elements(&l).is_err());

        // An entry of 16,383 bytes takes a 3-byte back-length (Redis's
        // strict bound), and decodes.
        let n = 16_383 - 5;
        let mut big = vec![0u8; 6];
        big.push(0xf0);
        big.extend_from_slice(&(n as u32).to_le_bytes());
        big.extend(std::iter::repeat(b'x').take(n));
        big.extend_from_slice(&[0x00, 0xff, 0xff]); // 16,383 = 127 << 7 | 127, in three bytes
        big.push(0xff);
        let total = big.len() as u32;
        big[..4].copy_from_slice(&total.to_le_bytes());
        big[4] = 1;
        assert_eq!(listpack_elements(&big).unwrap(), vec![vec![b'x'; n]]);

        // Intsets: sorted and without duplicates, and never empty.
        assert!(intset(&[2, 0, 0, 0, 2, 0, 0, 0, 5, 0, 5, 0]).is_err());
        assert!(intset(&[2, 0, 0, 0, 2, 0, 0, 0, 6, 0, 5, 0]).is_err());
        assert!(intset(&[2, 0, 0, 0, 0, 0, 0, 0]).is_err());
    }

    #[test]
    fn mutated_payloads_never_panic() {
        use rand::{Rng, SeedableRng};
        let mut rng = rand::rngs::StdRng::seed_from_u64(7);
        // Valid payloads of every shape, packed ones included.
        let lp = [15u8, 0, 0, 0, 3, 0, 0x81, b'a', 2, 0x07, 1, 0xc1, 0x2c, 2, 0xff];
        let zl = [17u8, 0, 0, 0, 14, 0, 0, 0, 2, 0, 0, 0x02, b'a', b'b', 4, 0xf6, 0xff];
        assert_eq!(listpack_elements(&lp).unwrap().len(), 3);
        assert_eq!(ziplist(&zl).unwrap().len(), 2);
        let mut seeds: Vec<Vec<u8>> = vec![
            encode(&Value::List(vec![b"a".to_vec(); 5])),
            encode(&Value::ZSet(vec![(b"m".to_vec(), 2.0)])),
            encode(&Value::Hash(vec![(b"f".to_vec(), vec![1; 100])])),
        ];
        for (t, packed) in
            [(HASH_LISTPACK, &lp[..]), (LIST_ZIPLIST, &zl[..]), (SET_INTSET, &[2, 0, 0, 0, 1, 0, 0, 0, 5, 0])]
        {
            let mut v = vec![t];
            put_string(&mut v, packed);
            seeds.push(v);
        }
        let mut v = vec![LIST_QUICKLIST_2, 1, 2];
        put_string(&mut v, &lp);
        seeds.push(v);
        for _ in 0..20_000 {
            let mut p = seeds[rng.gen_range(0..seeds.len())].clone();
            for _ in 0..rng.gen_range(1..4) {
                let i = rng.gen_range(0..p.len());
                match rng.gen_range(0..3) {
                    0 => p[i] = rng.gen(),
                    1 => p.truncate(i.max(1)),
                    _ => p.insert(i, rng.gen()),
                }
            }
            let _ = decode(&p);
        }
    }
}
