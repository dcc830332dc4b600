//! Size classes for small blocks and the geometry of the slabs holding them.
//!
//! Classes are 16-byte steps up to 128 bytes, then four per doubling up to
//! 32 KiB (at most 25% internal waste). Each slab is a run of pages: a 64-byte
//! run header, an allocation bitmap, then the blocks, 64-byte aligned.

use std::sync::OnceLock;

use super::run::RUN_HEADER_BYTES;
use crate::header::PAGE_BYTES;

/// Largest block served from a slab; larger ones get a page run of their own.
pub const MAX_SLAB_BLOCK: u64 = 32 * 1024;
/// Smallest block.
pub const MIN_BLOCK: u64 = 16;
/// Fewest pages of a slab: 8 pages (32 KiB), so that the smallest pool
/// (15 pages of heap) that may not grow still holds a slab of every class
/// up to 1920-byte blocks.
pub const MIN_SLAB_PAGES: u64 = 8;
/// Number of size classes.
pub const CLASS_COUNT: usize = 40;

/// Where things are inside one slab of a class.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SlabGeometry {
    /// Block size in bytes.
    pub block_bytes: u64,
    /// Pages of the slab run.
    pub pages: u64,
    /// Blocks in the slab.
    pub blocks: u64,
    /// 8-byte words of the bitmap (at run start + 64).
    pub bitmap_words: u64,
    /// Offset of block 0 from the run start.
    pub first_block: u64,
}

const fn class_sizes() -> [u64; CLASS_COUNT] {
    let mut out = [0u64; CLASS_COUNT];
    let mut i = 0;
    while i < 8 {
        out[i] = 16 * (i as u64 + 1);
        i += 1;
    }
    let mut base = 128u64;
    while i < CLASS_COUNT {
        let mut q = 5;
        while q <= 8 {
            out[i] = base * q / 4;
            i += 1;
            q += 1;
        }
        base *= 2;
    }
    out
}

/// Block size of every class, ascending.
pub const CLASS_SIZES: [u64; CLASS_COUNT] = class_sizes();
const _: () = assert!(CLASS_SIZES[CLASS_COUNT - 1] == MAX_SLAB_BLOCK);

/// The smallest class whose blocks hold `size` bytes, if a slab serves it.
#[inline]
pub fn class_of(size: u64) -> Option<u8> {
    if size > MAX_SLAB_BLOCK {
        return None;
    }
    if size <= 128 {
        return Some((size.max(1).div_ceil(16) - 1) as u8);
    }
    // Four classes per doubling above 128: find the doubling, then the quarter.
    let log = 63 - (size - 1).leading_zeros() as u64; // 2^log < size <= 2^(log+1)
    let base = 1u64 << log;
    let quarter = (size - base).div_ceil(base / 4); // 1..=4
    Some((8 + (log - 7) * 4 + quarter - 1) as u8)
}

fn compute(class: usize) -> SlabGeometry {
    let block = CLASS_SIZES[class];
    let pages = (64 * block).div_ceil(PAGE_BYTES).clamp(MIN_SLAB_PAGES, 256);
    let run = pages * PAGE_BYTES;
    let mut blocks = (run - RUN_HEADER_BYTES) / block;
    loop {
        let words = blocks.div_ceil(64);
        let first = (RUN_HEADER_BYTES + words * 8).div_ceil(64) * 64;
        if first + blocks * block <= run {
            return SlabGeometry { block_bytes: block, pages, blocks, bitmap_words: words, first_block: first };
        }
        blocks -= 1;
    }
}

/// The slab geometry of `class` (which must be below [`CLASS_COUNT`]).
#[inline]
pub fn geometry(class: u8) -> &'static SlabGeometry {
    static TABLE: OnceLock<Vec<SlabGeometry>> = OnceLock::new();
    &TABLE.get_or_init(|| (0..CLASS_COUNT).map(compute).collect())[class as usize]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn class_of_picks_the_smallest_fitting_class() {
        for size in 1..=MAX_SLAB_BLOCK {
            let c = class_of(size).unwrap() as usize;
            assert!(CLASS_SIZES[c] >= size, "size {size} class {c}");
            if c > 0 {
                assert!(CLASS_SIZES[c - 1] < size, "size {size} class {c} not smallest");
            }
        }
        assert_eq!(class_of(0), Some(0));
        assert_eq!(class_of(MAX_SLAB_BLOCK + 1), None);
    }

    #[test]
    fn geometries_fit_and_hold_many_blocks() {
        for c in 0..CLASS_COUNT as u8 {
            let g = geometry(c);
            assert!(g.first_block + g.blocks * g.block_bytes <= g.pages * PAGE_BYTES);
            assert!(g.blocks >= 31, "class {c}: {g:?}");
            assert!(g.bitmap_words * 64 >= g.blocks);
            // A slab's lazily cleared words are a u64 mask (`Slab::lazy_words`).
            assert!(g.bitmap_words <= 64, "class {c}: {g:?}");
            assert_eq!(g.first_block % 64, 0);
        }
    }
}
