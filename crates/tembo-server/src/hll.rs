//! Redis 7.0's HyperLogLog representation, byte for byte.
//!
//! Redis stores a HyperLogLog as an ordinary string in its own "HYLL"
//! format, and clients rely on that: they GET the bytes, copy them to
//! another server with SET, and PFCOUNT there. To be a drop-in replacement
//! Tembo must produce exactly the bytes Redis produces for the same PFADDs
//! and read any bytes Redis wrote, so this module reimplements the format
//! and its algorithms rather than using a HyperLogLog crate:
//!
//! - a 16-byte header: `HYLL`, the encoding (0 dense, 1 sparse), three
//!   zero bytes, and the cached cardinality as a little-endian u64 whose
//!   top bit marks the cache stale;
//! - 16,384 registers of 6 bits, packed least-significant bit first
//!   (dense, 12,288 bytes), or run-length opcodes ZERO / XZERO / VAL
//!   (sparse) until an update would make the string longer than
//!   `hll-sparse-max-bytes` or a register would exceed 32;
//! - the element hash MurmurHash64A with seed `0xadc83b19`, whose low 14
//!   bits pick the register and whose remaining bits give the run length;
//! - Otmar Ertl's estimator from the register histogram (σ and τ series).
//!
//! The sparse update rewrites one opcode into up to five and then merges
//! adjacent equal VAL opcodes in the same small window Redis scans, because
//! any other (equally valid) encoding would give different bytes.

/// Header length.
pub const HDR: usize = 16;
/// Number of registers (2^14).
pub const REGISTERS: usize = 1 << P;
/// Length of a dense HyperLogLog.
pub const DENSE_SIZE: usize = HDR + (REGISTERS * 6).div_ceil(8);
/// The dense encoding byte.
pub const DENSE: u8 = 0;
/// The sparse encoding byte.
pub const SPARSE: u8 = 1;

const P: u32 = 14;
const Q: usize = 64 - P as usize;
const SEED: u64 = 0xadc8_3b19;
const VAL_MAX_VALUE: u8 = 32;
const VAL_MAX_LEN: usize = 4;
const ZERO_MAX_LEN: usize = 64;
const XZERO_MAX_LEN: usize = 16384;
const ALPHA_INF: f64 = 0.721_347_520_444_481_7;

/// The bytes do not decode as a HyperLogLog (Redis's INVALIDOBJ).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Invalid;

/// MurmurHash2, 64-bit variant, reading the input as little-endian words.
pub fn murmur64a(data: &[u8], seed: u64) -> u64 {
    const M: u64 = 0xc6a4_a793_5bd1_e995;
    const R: u32 = 47;
    let mut h = seed ^ (data.len() as u64).wrapping_mul(M);
    let mut chunks = data.chunks_exact(8);
    for c in &mut chunks {
        let mut k = u64::from_le_bytes(c.try_into().expect("8 bytes"));
        k = k.wrapping_mul(M);
        k ^= k >> R;
        k = k.wrapping_mul(M);
        h ^= k;
        h = h.wrapping_mul(M);
    }
    let rest = chunks.remainder();
    if !rest.is_empty() {
        for (i, &b) in rest.iter().enumerate() {
            h ^= (b as u64) << (8 * i);
        }
        h = h.wrapping_mul(M);
    }
    h ^= h >> R;
    h = h.wrapping_mul(M);
    h ^= h >> R;
    h
}

/// The register an element maps to and the length of its run of zero bits
/// plus one (1..=51).
pub fn pattern(ele: &[u8]) -> (usize, u8) {
    let hash = murmur64a(ele, SEED);
    let index = (hash & (REGISTERS as u64 - 1)) as usize;
    let rest = (hash >> P) | (1u64 << Q);
    (index, rest.trailing_zeros() as u8 + 1)
}

/// An empty HyperLogLog as PFADD creates it: sparse, one XZERO run.
pub fn new_sparse() -> Vec<u8> {
    let mut v = vec![0u8; HDR];
    v[..4].copy_from_slice(b"HYLL");
    v[4] = SPARSE;
    let mut left = REGISTERS;
    while left > 0 {
        let n = left.min(XZERO_MAX_LEN);
        push_xzero(&mut v, n);
        left -= n;
    }
    v
}

/// Whether `v` passes Redis's HyperLogLog check (magic, encoding, and a
/// dense one's exact length); the registers are checked when read.
pub fn is_hll(v: &[u8]) -> bool {
    v.len() >= HDR && &v[..4] == b"HYLL" && v[4] <= SPARSE && (v[4] != DENSE || v.len() == DENSE_SIZE)
}

/// The cached cardinality, if it is valid.
pub fn cached(v: &[u8]) -> Option<u64> {
    let card = u64::from_le_bytes(v[8..16].try_into().expect("8 bytes"));
    (v[15] & 0x80 == 0).then_some(card)
}

/// Stores `card` as the cached cardinality.
pub fn set_cache(v: &mut [u8], card: u64) {
    v[8..16].copy_from_slice(&card.to_le_bytes());
}

/// Marks the cached cardinality stale.
pub fn invalidate(v: &mut [u8]) {
    v[15] |= 0x80;
}

/// Register `i` of packed dense registers (a missing trailing byte reads 0).
pub fn dense_get(regs: &[u8], i: usize) -> u8 {
    let byte = i * 6 / 8;
    let fb = (i * 6) & 7;
    let b0 = regs[byte] as u32;
    let b1 = regs.get(byte + 1).copied().unwrap_or(0) as u32;
    (((b0 >> fb) | (b1 << (8 - fb))) & 63) as u8
}

/// Sets register `i` of packed dense registers to `val` (< 64).
pub fn dense_set_raw(regs: &mut [u8], i: usize, val: u8) {
    let byte = i * 6 / 8;
    let fb = (i * 6) & 7;
    let v = val as u32;
    regs[byte] = (regs[byte] as u32 & !(63u32 << fb) | (v << fb)) as u8;
    if let Some(b) = regs.get_mut(byte + 1) {
        *b = (*b as u32 & !(63u32 >> (8 - fb)) | (v >> (8 - fb))) as u8;
    }
}

/// Raises register `i` to `count`; whether it changed.
fn dense_raise(regs: &mut [u8], i: usize, count: u8) -> bool {
    if count > dense_get(regs, i) {
        dense_set_raw(regs, i, count);
        true
    } else {
        false
    }
}

/// One sparse opcode.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Op {
    /// A run of zero registers (one byte, up to 64).
    Zero(usize),
    /// A long run of zero registers (two bytes, up to 16,384).
    XZero(usize),
    /// A run of up to 4 registers holding 1..=32.
    Val(u8, usize),
}

impl Op {
    /// The opcode at `p` (a missing second byte of XZERO reads 0, as the
    /// terminator of Redis's strings would).
    fn at(v: &[u8], p: usize) -> Op {
        let b = v[p];
        match b & 0xc0 {
            0 => Op::Zero((b & 0x3f) as usize + 1),
            0x40 => Op::XZero((((b & 0x3f) as usize) << 8 | v.get(p + 1).copied().unwrap_or(0) as usize) + 1),
            _ => Op::Val(((b >> 2) & 0x1f) + 1, (b & 3) as usize + 1),
        }
    }
    fn span(self) -> usize {
        match self {
            Op::Zero(n) | Op::XZero(n) | Op::Val(_, n) => n,
        }
    }
    fn bytes(self) -> usize {
        if matches!(self, Op::XZero(_)) {
            2
        } else {
            1
        }
    }
}

fn val_byte(value: u8, len: usize) -> u8 {
    0x80 | (value - 1) << 2 | (len as u8 - 1)
}

fn push_xzero(v: &mut Vec<u8>, len: usize) {
    let l = len - 1;
    v.push(0x40 | (l >> 8) as u8);
    v.push((l & 0xff) as u8);
}

fn push_zeros(v: &mut Vec<u8>, len: usize) {
    if len > ZERO_MAX_LEN {
        push_xzero(v, len);
    } else {
        v.push((len - 1) as u8);
    }
}

/// Converts a sparse HyperLogLog to dense in place (header and cached
/// cardinality kept); a dense one is left alone.
pub fn to_dense(v: &mut Vec<u8>) -> Result<(), Invalid> {
    if v[4] == DENSE {
        return Ok(());
    }
    let mut dense = vec![0u8; DENSE_SIZE];
    dense[..HDR].copy_from_slice(&v[..HDR]);
    dense[4] = DENSE;
    let regs = &mut dense[HDR..];
    let (mut p, mut idx) = (HDR, 0usize);
    while p < v.len() {
        let op = Op::at(v, p);
        if let Op::Val(value, n) = op {
            // A value run past the last register makes the HLL invalid, as
            // in Redis 7.0.15 builds with the CVE-2025-32023 fix (the
            // reference server of the tests); zero runs are summed and the
            // total checked at the end.
            if idx + n > REGISTERS {
                return Err(Invalid);
            }
            for i in idx..idx + n {
                dense_set_raw(regs, i, value);
            }
        }
        idx += op.span();
        p += op.bytes();
    }
    if idx != REGISTERS {
        return Err(Invalid);
    }
    *v = dense;
    Ok(())
}

/// Raises register `index` of a sparse HyperLogLog to `count`, converting
/// it to dense when the value does not fit or the string would outgrow
/// `max_bytes`. Whether a register changed.
pub fn sparse_set(v: &mut Vec<u8>, index: usize, count: u8, max_bytes: usize) -> Result<bool, Invalid> {
    if count > VAL_MAX_VALUE {
        return promote(v, index, count);
    }
    let mut end = v.len();
    let (mut p, mut first, mut span) = (HDR, 0usize, 0usize);
    let mut prev = None;
    while p < end {
        let op = Op::at(v, p);
        span = op.span();
        if index < first + span {
            break;
        }
        prev = Some(p);
        p += op.bytes();
        first += span;
    }
    if span == 0 || p >= end {
        return Err(Invalid);
    }
    let op = Op::at(v, p);
    let single = match op {
        Op::Val(old, _) if old >= count => return Ok(false),
        Op::Val(_, 1) | Op::Zero(1) => true,
        _ => false,
    };
    if single {
        v[p] = val_byte(count, 1);
    } else {
        let last = first + span - 1;
        let mut seq = Vec::with_capacity(5);
        match op {
            Op::Val(cur, _) => {
                if index != first {
                    seq.push(val_byte(cur, index - first));
                }
                seq.push(val_byte(count, 1));
                if index != last {
                    seq.push(val_byte(cur, last - index));
                }
            }
            _ => {
                if index != first {
                    push_zeros(&mut seq, index - first);
                }
                seq.push(val_byte(count, 1));
                if index != last {
                    push_zeros(&mut seq, last - index);
                }
            }
        }
        let old_len = op.bytes();
        if seq.len() > old_len && end + seq.len() - old_len > max_bytes {
            return promote(v, index, count);
        }
        let new_len = end + seq.len() - old_len;
        let tail = v.get(p + old_len..).map(<[u8]>::to_vec).unwrap_or_default();
        v.truncate(p);
        v.extend_from_slice(&seq);
        v.extend_from_slice(&tail);
        v.truncate(new_len);
        end = new_len;
    }
    // Merge adjacent VAL opcodes of equal value around the change.
    let mut p = prev.unwrap_or(HDR);
    let mut scan = 5;
    while p < end && scan > 0 {
        scan -= 1;
        match Op::at(v, p) {
            Op::XZero(_) => p += 2,
            Op::Zero(_) => p += 1,
            Op::Val(v1, l1) => {
                if p + 1 < end {
                    if let Op::Val(v2, l2) = Op::at(v, p + 1) {
                        if v1 == v2 && l1 + l2 <= VAL_MAX_LEN {
                            v[p + 1] = val_byte(v1, l1 + l2);
                            v.remove(p);
                            end -= 1;
                            continue;
                        }
                    }
                }
                p += 1;
            }
        }
    }
    invalidate(v);
    Ok(true)
}

fn promote(v: &mut Vec<u8>, index: usize, count: u8) -> Result<bool, Invalid> {
    to_dense(v)?;
    dense_raise(&mut v[HDR..], index, count);
    Ok(true)
}

/// Adds one element; whether a register changed.
pub fn add(v: &mut Vec<u8>, ele: &[u8], max_bytes: usize) -> Result<bool, Invalid> {
    let (index, count) = pattern(ele);
    match v[4] {
        DENSE => Ok(dense_raise(&mut v[HDR..], index, count)),
        SPARSE => sparse_set(v, index, count, max_bytes),
        _ => Err(Invalid),
    }
}

/// Raises register `index` of either encoding to `count` (PFMERGE's write;
/// a sparse failure is ignored there, as in Redis).
pub fn raise(v: &mut Vec<u8>, index: usize, count: u8, max_bytes: usize) {
    if v[4] == DENSE {
        dense_raise(&mut v[HDR..], index, count);
    } else {
        let _ = sparse_set(v, index, count, max_bytes);
    }
}

/// Folds the registers of `v` into `max` (one byte per register).
pub fn merge_into(max: &mut [u8], v: &[u8]) -> Result<(), Invalid> {
    if v[4] == DENSE {
        for (i, m) in max.iter_mut().enumerate() {
            *m = (*m).max(dense_get(&v[HDR..], i));
        }
        return Ok(());
    }
    let (mut p, mut idx) = (HDR, 0usize);
    while p < v.len() {
        let op = Op::at(v, p);
        if let Op::Val(value, n) = op {
            if idx + n > REGISTERS {
                return Err(Invalid);
            }
            for m in &mut max[idx..idx + n] {
                *m = (*m).max(value);
            }
        }
        idx += op.span();
        p += op.bytes();
    }
    if idx == REGISTERS {
        Ok(())
    } else {
        Err(Invalid)
    }
}

/// The cardinality of `v`'s registers (not using the cache).
pub fn count(v: &[u8]) -> Result<u64, Invalid> {
    let mut histo = [0u64; 64];
    if v[4] == DENSE {
        for i in 0..REGISTERS {
            histo[dense_get(&v[HDR..], i) as usize] += 1;
        }
    } else {
        let (mut p, mut idx) = (HDR, 0usize);
        while p < v.len() {
            let op = Op::at(v, p);
            let value = if let Op::Val(value, _) = op { value as usize } else { 0 };
            histo[value] += op.span() as u64;
            idx += op.span();
            p += op.bytes();
        }
        if idx != REGISTERS {
            return Err(Invalid);
        }
    }
    Ok(estimate(&histo))
}

/// The cardinality of one-byte-per-register registers (PFCOUNT's union).
pub fn count_raw(regs: &[u8]) -> u64 {
    let mut histo = [0u64; 64];
    for &r in regs {
        histo[(r & 63) as usize] += 1;
    }
    estimate(&histo)
}

fn sigma(mut x: f64) -> f64 {
    if x == 1.0 {
        return f64::INFINITY;
    }
    let (mut y, mut z) = (1.0, x);
    loop {
        x *= x;
        let before = z;
        z += x * y;
        y += y;
        if before == z {
            return z;
        }
    }
}

fn tau(mut x: f64) -> f64 {
    if x == 0.0 || x == 1.0 {
        return 0.0;
    }
    let (mut y, mut z) = (1.0, 1.0 - x);
    loop {
        x = x.sqrt();
        let before = z;
        y *= 0.5;
        let d = 1.0 - x;
        z -= d * d * y;
        if before == z {
            return z / 3.0;
        }
    }
}

/// Ertl's improved raw estimator over the register-value histogram.
fn estimate(histo: &[u64; 64]) -> u64 {
    let m = REGISTERS as f64;
    let mut z = m * tau((m - histo[Q + 1] as f64) / m);
    for j in (1..=Q).rev() {
        z += histo[j] as f64;
        z *= 0.5;
    }
    z += m * sigma(histo[0] as f64 / m);
    (ALPHA_INF * m * m / z).round() as u64
}

/// PFDEBUG DECODE's text for a sparse HyperLogLog.
pub fn decode(v: &[u8]) -> String {
    let mut out = Vec::new();
    let mut p = HDR;
    while p < v.len() {
        let op = Op::at(v, p);
        out.push(match op {
            Op::Zero(n) => format!("z:{n}"),
            Op::XZero(n) => format!("Z:{n}"),
            Op::Val(value, n) => format!("v:{value},{n}"),
        });
        p += op.bytes();
    }
    out.join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_is_redis_bytes() {
        let v = new_sparse();
        assert_eq!(v, b"HYLL\x01\0\0\0\0\0\0\0\0\0\0\0\x7f\xff");
        assert_eq!(count(&v), Ok(0));
    }

    #[test]
    fn sparse_and_dense_agree() {
        let mut s = new_sparse();
        let mut d = new_sparse();
        to_dense(&mut d).unwrap();
        for i in 0u64..5000 {
            let e = i.to_le_bytes();
            add(&mut s, &e, 3000).unwrap();
            add(&mut d, &e, 3000).unwrap();
            if i % 97 == 0 {
                assert_eq!(count(&s), count(&d));
            }
        }
        assert_eq!(s[4], DENSE);
        assert_eq!(s[HDR..], d[HDR..]);
        let c = count(&d).unwrap() as f64;
        assert!((c - 5000.0).abs() < 5000.0 * 0.05, "{c}");
    }

    #[test]
    fn registers_round_trip() {
        let mut regs = vec![0u8; DENSE_SIZE - HDR];
        for i in 0..REGISTERS {
            dense_set_raw(&mut regs, i, (i * 7 % 64) as u8);
        }
        for i in 0..REGISTERS {
            assert_eq!(dense_get(&regs, i), (i * 7 % 64) as u8);
        }
    }

    #[test]
    fn corrupt_sparse_is_invalid() {
        let mut v = new_sparse();
        v.push(0x80);
        assert_eq!(count(&v), Err(Invalid));
        assert_eq!(to_dense(&mut v.clone()), Err(Invalid));
        let mut max = vec![0u8; REGISTERS];
        assert_eq!(merge_into(&mut max, &v), Err(Invalid));
        let short = b"HYLL\x01\0\0\0\0\0\0\0\0\0\0\0\x7f\xfe".to_vec();
        assert_eq!(to_dense(&mut short.clone()), Err(Invalid));
        assert_eq!(merge_into(&mut max, &short), Err(Invalid));
        v.truncate(HDR);
        assert_eq!(add(&mut v, b"a", 3000), Err(Invalid));
    }
}
