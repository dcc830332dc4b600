//! Run headers: the allocator's only persistent metadata besides slab bitmaps.
//!
//! The heap is a sequence of runs of whole pages that covers it without gaps.
//! Each run starts with a 64-byte header whose first word says what the run
//! is and how many pages it spans; walking from page 0 by run lengths visits
//! every run. The word carries a CRC-16 of its value and its page number, so a
//! stale header copied from elsewhere or a flipped bit is detected.
//!
//! Every change to the run layout is one 8-byte store that leaves a walkable
//! heap (see `alloc/mod.rs` for the order of the stores).

use crate::header::{decode_word, encode_word};

/// Bytes at the start of every run reserved for its header.
pub const RUN_HEADER_BYTES: u64 = 64;
/// Largest run, in pages (36 bits).
pub const RUN_PAGES_MAX: u64 = (1 << 36) - 1;
const FIELD_RUN: u8 = 0x10;

/// What a run holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum RunKind {
    /// Free pages.
    Free,
    /// One large block.
    Large,
    /// A slab of small blocks of one size class.
    Slab(u8),
}

/// Encodes the header word of a run starting at heap page `page`.
pub fn encode(page: u64, kind: RunKind, pages: u64) -> u64 {
    debug_assert!(pages > 0 && pages <= RUN_PAGES_MAX);
    let (code, class) = match kind {
        RunKind::Free => (1u64, 0u64),
        RunKind::Large => (2, 0),
        RunKind::Slab(c) => (3, u64::from(c)),
    };
    encode_word(FIELD_RUN, &page.to_le_bytes(), pages | (class << 36) | (code << 42))
}

/// Decodes a run header word read at heap page `page`.
pub fn decode(page: u64, word: u64) -> Option<(RunKind, u64)> {
    let v = decode_word(FIELD_RUN, &page.to_le_bytes(), word)?;
    let pages = v & RUN_PAGES_MAX;
    let class = ((v >> 36) & 0x3f) as u8;
    let kind = match v >> 42 {
        1 if class == 0 => RunKind::Free,
        2 if class == 0 => RunKind::Large,
        3 => RunKind::Slab(class),
        _ => return None,
    };
    (pages > 0).then_some((kind, pages))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn headers_round_trip_and_bind_to_their_page() {
        for kind in [RunKind::Free, RunKind::Large, RunKind::Slab(39)] {
            let w = encode(77, kind, 1234);
            assert_eq!(decode(77, w), Some((kind, 1234)));
            assert_eq!(decode(78, w), None);
            assert_eq!(decode(77, w ^ (1 << 20)), None);
        }
        assert_eq!(decode(0, 0), None);
    }
}
