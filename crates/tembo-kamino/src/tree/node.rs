//! The in-place B+tree's node and record layouts, and reading them.
//!
//! Node (one object, [`NODE_BYTES`] of payload):
//!
//! | bytes | field |
//! |---|---|
//! | 0..8 | `level << 32 | count` (level 0: leaf) |
//! | 8..16 | next leaf (leaves; 0 at the right end) |
//! | 16..528 | `MAXK` entries of 16 bytes: key prefix (first 8 key bytes, big-endian), record |
//! | 528..792 | `MAXK + 1` children (inner nodes) |
//!
//! In a leaf, entry `i`'s record holds key and value; in an inner node it
//! holds the separator key (a copy: it outlives the pair it came from):
//! keys below separator `i` are under child `i`, the others under child
//! `i + 1`. Record: `klen << 32 | vlen` then the key, then the value; the
//! object may be larger than that (an update that fits is done in place).
//! The prefix decides most comparisons without touching the record.

use std::cmp::Ordering;

use tembo_pmem::{Pool, PoolOffset};

use crate::error::{invariant, Result};
use crate::layout::payload;

/// Keys per node.
pub const MAXK: usize = 32;
/// Fewest keys in a node other than the root.
pub const MINK: usize = MAXK / 2;
pub(crate) const H_META: u64 = 0;
pub(crate) const H_NEXT: u64 = 8;
pub(crate) const KEYS: u64 = 16;
pub(crate) const CHILDREN: u64 = KEYS + MAXK as u64 * 16;
/// Payload bytes of a node.
pub const NODE_BYTES: u64 = CHILDREN + (MAXK as u64 + 1) * 8;

pub(crate) fn entry_off(i: usize) -> u64 {
    KEYS + i as u64 * 16
}
pub(crate) fn child_off(i: usize) -> u64 {
    CHILDREN + i as u64 * 8
}

/// The big-endian first 8 bytes of `key`, zero-padded.
pub(crate) fn prefix(key: &[u8]) -> u64 {
    let mut b = [0u8; 8];
    let n = key.len().min(8);
    b[..n].copy_from_slice(&key[..n]);
    u64::from_be_bytes(b)
}

/// Reads nodes and records through the pool.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Reader<'p> {
    pub pool: &'p Pool,
}

impl Reader<'_> {
    #[inline]
    pub fn word(&self, obj: PoolOffset, off: u64) -> Result<u64> {
        Ok(self.pool.load_u64(payload(obj) + off)?)
    }

    /// (level, count) of a node.
    pub fn meta(&self, n: PoolOffset) -> Result<(u32, usize)> {
        let w = self.word(n, H_META)?;
        let count = (w & 0xffff_ffff) as usize;
        if count > MAXK {
            return Err(invariant("kamino.tree.count", n, format!("node count {count} over {MAXK}")));
        }
        Ok(((w >> 32) as u32, count))
    }

    pub fn rec(&self, n: PoolOffset, i: usize) -> Result<PoolOffset> {
        self.word(n, entry_off(i) + 8)
    }

    pub fn child(&self, n: PoolOffset, i: usize) -> Result<PoolOffset> {
        self.word(n, child_off(i))
    }

    /// (key length, value length) of a record.
    pub fn rec_lens(&self, rec: PoolOffset) -> Result<(u64, u64)> {
        let w = self.word(rec, 0)?;
        Ok((w >> 32, w & 0xffff_ffff))
    }

    pub fn rec_key(&self, rec: PoolOffset) -> Result<Vec<u8>> {
        let (kl, _) = self.rec_lens(rec)?;
        // A damaged length must be an error, not an allocation abort.
        self.pool.check_range(payload(rec) + 8, kl)?;
        let mut k = vec![0u8; kl as usize];
        self.pool.read(payload(rec) + 8, &mut k)?;
        Ok(k)
    }

    pub fn rec_value(&self, rec: PoolOffset) -> Result<Vec<u8>> {
        let mut v = Vec::new();
        self.rec_value_into(rec, &mut v)?;
        Ok(v)
    }

    /// Copies a record's value into `buf`, replacing its contents.
    pub fn rec_value_into(&self, rec: PoolOffset, buf: &mut Vec<u8>) -> Result<()> {
        self.rec_value_range_into(rec, 0, u64::MAX, buf).map(|_| ())
    }

    /// At most `limit` bytes of a record's value from byte `offset` on into
    /// `buf`; returns the value's whole length.
    pub fn rec_value_range_into(&self, rec: PoolOffset, offset: u64, limit: u64, buf: &mut Vec<u8>) -> Result<u64> {
        let (kl, vl) = self.rec_lens(rec)?;
        let at = payload(rec) + 8 + kl;
        // A damaged length must be an error, not an allocation abort.
        self.pool.check_range(at, vl)?;
        let offset = offset.min(vl);
        buf.clear();
        buf.resize((vl - offset).min(limit) as usize, 0);
        self.pool.read(at + offset, buf)?;
        Ok(vl)
    }

    /// Compares `key` with entry `i` of node `n`.
    pub fn cmp(&self, n: PoolOffset, i: usize, key: &[u8], kp: u64) -> Result<Ordering> {
        let p = self.word(n, entry_off(i))?;
        if kp != p {
            return Ok(kp.cmp(&p));
        }
        let rec = self.rec(n, i)?;
        let (kl, _) = self.rec_lens(rec)?;
        if kl <= 64 {
            let mut buf = [0u8; 64];
            let k = &mut buf[..kl as usize];
            self.pool.read(payload(rec) + 8, k)?;
            Ok(key.cmp(k))
        } else {
            Ok(key.cmp(&self.rec_key(rec)?[..]))
        }
    }

    /// The first index whose key is `>= key` (`strict`: `> key`).
    pub fn search(&self, n: PoolOffset, count: usize, key: &[u8], strict: bool) -> Result<(usize, bool)> {
        let kp = prefix(key);
        let (mut lo, mut hi) = (0, count);
        let mut found = false;
        while lo < hi {
            let mid = (lo + hi) / 2;
            match self.cmp(n, mid, key, kp)? {
                Ordering::Greater => lo = mid + 1,
                Ordering::Equal if strict => {
                    found = true;
                    lo = mid + 1
                }
                Ordering::Equal => {
                    found = true;
                    hi = mid
                }
                Ordering::Less => hi = mid,
            }
        }
        Ok((lo, found))
    }

    /// The child of inner node `n` to follow for `key`: keys equal to a
    /// separator live to its right; `before` finds the leaf holding the
    /// largest key below `key` instead.
    pub fn route(&self, n: PoolOffset, count: usize, key: &[u8], before: bool) -> Result<usize> {
        Ok(self.search(n, count, key, !before)?.0)
    }
}
