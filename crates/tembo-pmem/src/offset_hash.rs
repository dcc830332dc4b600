//! A hasher for pool offsets and page numbers: one multiplication and a
//! fold. The maps and sets keyed by them (slabs by page, blocks marked by
//! a leak sweep, bitmap words of lazy frees) hold values the pool itself produced,
//! so SipHash's resistance to chosen keys buys nothing there, at several
//! times the cost. The fold moves the product's well-mixed high bits into
//! the low ones, which a table indexes by (offsets are aligned, so their
//! own low bits are zero).

use std::collections::{HashMap, HashSet};
use std::hash::{BuildHasherDefault, Hasher};

/// The hasher (see the module docs).
#[derive(Debug, Default)]
pub struct OffsetHasher(u64);

impl Hasher for OffsetHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0.rotate_left(8) ^ u64::from(b)).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        }
    }
    fn write_u64(&mut self, n: u64) {
        self.0 = (n ^ (n >> 29)).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        self.0 ^= self.0 >> 32;
    }
}

/// A set of offsets (or page numbers).
pub type OffsetSet = HashSet<u64, BuildHasherDefault<OffsetHasher>>;
/// A map from offsets (or page numbers).
pub type OffsetMap<V> = HashMap<u64, V, BuildHasherDefault<OffsetHasher>>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn aligned_offsets_spread_over_low_bits() {
        use std::hash::BuildHasher;
        let b = BuildHasherDefault::<OffsetHasher>::default();
        let low: HashSet<u64> = (0..1024u64).map(|i| b.hash_one(i * 1024) & 1023).collect();
        assert!(low.len() > 600, "{} distinct low bits of 1024", low.len());
    }
}
