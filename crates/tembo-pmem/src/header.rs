//! The pool header: page 0 of every pool.
//!
//! ```text
//! offset  bytes  field             changes   protected by
//! 0       8      magic "TEMBOPL\x01" never   magic compare
//! 8       4      format_version    never     static CRC
//! 12      4      page_bytes (4096) never     static CRC
//! 16      16     pool UUID         never     static CRC
//! 32      8      heap_offset       never     static CRC   (allocator metadata lives there)
//! 40      8      created_unix_secs never     static CRC
//! 48      4      flags (0)         never     static CRC
//! 52      4      static_crc32c     never     CRC-32C of bytes 0..52
//! 56      8      reserved          -         must be zero
//! 64      8      size word         growth    16-bit check in the word
//! 72      8      max_size word     grow      16-bit check in the word
//! 80      8      clean word        open/close 16-bit check in the word
//! 88      40     reserved          -         must be zero
//! 128     1024   32 root slots     roots     name[24] + word; check covers the name
//! 1152    2944   reserved          -         must be zero
//! ```
//!
//! Invariants (checked at every open, by [`Header::validate`]):
//! - `header.magic`, `header.format_version`, `header.static_crc`;
//! - `header.word_check`: every run-time word carries a CRC-16 of its field
//!   index and 48-bit value (and, for roots, the root's name) in its low 16
//!   bits, so a single store updates value and check together, a crash never
//!   tears one (aligned 8-byte stores are failure-atomic), and any flipped byte
//!   is detected;
//! - `header.zero_padding`: every reserved byte is zero;
//! - `header.size`: `heap_offset < size <= max_size`, sizes page-aligned.
//!
//! A root slot whose name is set but whose word is exactly zero is a root
//! whose creation (name first, then word) or removal (word first, then name)
//! was interrupted; open clears it.

use crate::error::{PmemError, Result};
use std::path::Path;

/// Bytes of the header; the heap starts right after it.
pub const HEADER_BYTES: u64 = 4096;
/// Allocation page size.
pub const PAGE_BYTES: u64 = 4096;
/// Magic at offset 0.
pub const MAGIC: [u8; 8] = *b"TEMBOPL\x01";
/// On-media format version this build reads and writes.
pub const FORMAT_VERSION: u32 = 1;
/// Largest value a 48-bit header word holds.
pub const WORD_VALUE_MAX: u64 = (1 << 48) - 1;
/// Number of named roots.
pub const ROOT_SLOTS: usize = 32;
/// Shortest root name in bytes.
pub const ROOT_NAME_MIN: usize = 2;
/// Longest root name in bytes.
pub const ROOT_NAME_MAX: usize = 24;

pub(crate) const OFF_FORMAT_VERSION: usize = 8;
pub(crate) const OFF_PAGE_BYTES: usize = 12;
pub(crate) const OFF_UUID: usize = 16;
pub(crate) const OFF_HEAP_OFFSET: usize = 32;
pub(crate) const OFF_CREATED: usize = 40;
pub(crate) const OFF_FLAGS: usize = 48;
pub(crate) const OFF_STATIC_CRC: usize = 52;
pub(crate) const OFF_SIZE: usize = 64;
pub(crate) const OFF_MAX_SIZE: usize = 72;
pub(crate) const OFF_CLEAN: usize = 80;
pub(crate) const OFF_ROOTS: usize = 128;
pub(crate) const ROOT_SLOT_BYTES: usize = ROOT_NAME_MAX + 8;
const ROOTS_END: usize = OFF_ROOTS + ROOT_SLOTS * ROOT_SLOT_BYTES;

const _: () = assert!(OFF_SIZE % 8 == 0 && OFF_MAX_SIZE % 8 == 0 && OFF_CLEAN % 8 == 0);
const _: () = assert!(ROOT_SLOT_BYTES % 8 == 0 && (OFF_ROOTS + ROOT_NAME_MAX) % 8 == 0);
const _: () = assert!(ROOTS_END as u64 <= HEADER_BYTES);

/// Which run-time word a check belongs to (mixed into its CRC so that a word
/// copied into another field does not validate).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum WordField {
    Size = 1,
    MaxSize = 2,
    Clean = 3,
    Root = 4,
}

const CRC16: crc::Crc<u16> = crc::Crc::<u16>::new(&crc::CRC_16_IBM_3740);
const CRC32C: crc::Crc<u32> = crc::Crc::<u32>::new(&crc::CRC_32_ISCSI);

/// The 16-bit check of a run-time word: CRC-16 of the field index, the
/// extra bytes (a root's name, a run's page number) and the 48-bit value,
/// with each of its two bytes made non-zero (a zero byte becomes 1).
///
/// Why non-zero bytes: an all-zero word means "not set" (an empty root slot,
/// an interrupted root creation). With both check bytes non-zero, no word
/// that was set can become all-zero by one corrupted byte, so a flipped byte
/// is always reported as corruption, never taken for "not set".
pub fn word_check(field: u8, extra: &[u8], value: u64) -> u16 {
    let mut d = CRC16.digest();
    d.update(&[field]);
    d.update(extra);
    d.update(&value.to_le_bytes()[..6]);
    let [lo, hi] = d.finalize().to_le_bytes();
    u16::from_le_bytes([lo.max(1), hi.max(1)])
}

/// Packs a 48-bit value with its check: `value << 16 | word_check(..)`.
pub fn encode_word(field: u8, extra: &[u8], value: u64) -> u64 {
    debug_assert!(value <= WORD_VALUE_MAX);
    (value << 16) | u64::from(word_check(field, extra, value))
}

/// Unpacks a word, or `None` when its check fails.
pub fn decode_word(field: u8, extra: &[u8], word: u64) -> Option<u64> {
    let value = word >> 16;
    (word as u16 == word_check(field, extra, value)).then_some(value)
}

/// CRC-32C of the static part.
pub(crate) fn static_crc(bytes: &[u8]) -> u32 {
    CRC32C.checksum(&bytes[..OFF_STATIC_CRC])
}

/// The validated contents of a header.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Header {
    /// Pool UUID.
    pub uuid: [u8; 16],
    /// Where the heap (and the allocator's metadata) starts.
    pub heap_offset: u64,
    /// Creation time, seconds since the Unix epoch.
    pub created_unix_secs: u64,
    /// Current pool size in bytes.
    pub size: u64,
    /// Largest size the pool may grow to.
    pub max_size: u64,
    /// Whether the last close was clean.
    pub clean: bool,
    /// Named roots: (slot, name, offset).
    pub roots: Vec<(usize, String, u64)>,
    /// Slots whose creation or removal was interrupted (name set, word zero).
    pub torn_root_slots: Vec<usize>,
}

fn le_u32(b: &[u8], off: usize) -> u32 {
    let mut a = [0u8; 4];
    a.copy_from_slice(&b[off..off + 4]);
    u32::from_le_bytes(a)
}

pub(crate) fn le_u64(b: &[u8], off: usize) -> u64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[off..off + 8]);
    u64::from_le_bytes(a)
}

impl Header {
    /// Builds the bytes of a fresh header.
    pub(crate) fn build(uuid: [u8; 16], size: u64, max_size: u64, created: u64) -> Vec<u8> {
        let mut b = vec![0u8; HEADER_BYTES as usize];
        b[..8].copy_from_slice(&MAGIC);
        b[OFF_FORMAT_VERSION..OFF_FORMAT_VERSION + 4].copy_from_slice(&FORMAT_VERSION.to_le_bytes());
        b[OFF_PAGE_BYTES..OFF_PAGE_BYTES + 4].copy_from_slice(&(PAGE_BYTES as u32).to_le_bytes());
        b[OFF_UUID..OFF_UUID + 16].copy_from_slice(&uuid);
        b[OFF_HEAP_OFFSET..OFF_HEAP_OFFSET + 8].copy_from_slice(&HEADER_BYTES.to_le_bytes());
        b[OFF_CREATED..OFF_CREATED + 8].copy_from_slice(&created.to_le_bytes());
        let crc = static_crc(&b);
        b[OFF_STATIC_CRC..OFF_STATIC_CRC + 4].copy_from_slice(&crc.to_le_bytes());
        let put = |b: &mut Vec<u8>, off: usize, w: u64| b[off..off + 8].copy_from_slice(&w.to_le_bytes());
        put(&mut b, OFF_SIZE, encode_word(WordField::Size as u8, &[], size));
        put(&mut b, OFF_MAX_SIZE, encode_word(WordField::MaxSize as u8, &[], max_size));
        // A pool being created is not yet closed: it is "open" until closed.
        put(&mut b, OFF_CLEAN, encode_word(WordField::Clean as u8, &[], 0));
        b
    }

    /// Validates header bytes read from `path` (used in error messages).
    ///
    /// # Errors
    /// [`PmemError::NotAPool`], [`PmemError::FormatVersionMismatch`],
    /// [`PmemError::ChecksumMismatch`] or [`PmemError::Corrupted`] naming the field.
    pub fn validate(bytes: &[u8], path: &Path) -> Result<Header> {
        if bytes.len() < 8 || bytes[..8] != MAGIC {
            return Err(PmemError::NotAPool { path: path.to_path_buf() });
        }
        if bytes.len() < HEADER_BYTES as usize {
            return Err(PmemError::Truncated {
                path: path.to_path_buf(),
                expected: HEADER_BYTES,
                found: bytes.len() as u64,
            });
        }
        let version = le_u32(bytes, OFF_FORMAT_VERSION);
        if version != FORMAT_VERSION {
            return Err(PmemError::FormatVersionMismatch {
                path: path.to_path_buf(),
                found: version,
                expected: FORMAT_VERSION,
            });
        }
        let stored = le_u32(bytes, OFF_STATIC_CRC);
        let computed = static_crc(bytes);
        if stored != computed {
            return Err(PmemError::ChecksumMismatch { path: path.to_path_buf(), stored, computed });
        }
        let page = le_u32(bytes, OFF_PAGE_BYTES);
        let heap_offset = le_u64(bytes, OFF_HEAP_OFFSET);
        let flags = le_u32(bytes, OFF_FLAGS);
        if u64::from(page) != PAGE_BYTES || heap_offset != HEADER_BYTES || flags != 0 {
            return Err(PmemError::corrupted(
                format!("header geometry (page {page}, heap offset {heap_offset}, flags {flags})"),
                0,
            ));
        }
        let word = |off: usize, field: WordField, name: &str| -> Result<u64> {
            decode_word(field as u8, &[], le_u64(bytes, off))
                .ok_or_else(|| PmemError::corrupted(format!("header word {name} (check mismatch)"), off as u64))
        };
        let size = word(OFF_SIZE, WordField::Size, "size")?;
        let max_size = word(OFF_MAX_SIZE, WordField::MaxSize, "max_size")?;
        let clean = word(OFF_CLEAN, WordField::Clean, "clean_shutdown")?;
        if clean > 1 {
            return Err(PmemError::corrupted("header word clean_shutdown (not 0 or 1)", OFF_CLEAN as u64));
        }
        if size <= heap_offset || size % PAGE_BYTES != 0 || max_size < size || max_size % PAGE_BYTES != 0 {
            return Err(PmemError::corrupted(
                format!("header sizes (size {size}, max_size {max_size})"),
                OFF_SIZE as u64,
            ));
        }
        for (lo, hi) in [(56usize, 64usize), (88, OFF_ROOTS), (ROOTS_END, HEADER_BYTES as usize)] {
            if let Some(i) = bytes[lo..hi].iter().position(|b| *b != 0) {
                return Err(PmemError::corrupted("header reserved byte is not zero", (lo + i) as u64));
            }
        }
        let mut roots = Vec::new();
        let mut torn_root_slots = Vec::new();
        for slot in 0..ROOT_SLOTS {
            let off = OFF_ROOTS + slot * ROOT_SLOT_BYTES;
            let name = &bytes[off..off + ROOT_NAME_MAX];
            let w = le_u64(bytes, off + ROOT_NAME_MAX);
            let name_len = name.iter().position(|b| *b == 0).unwrap_or(ROOT_NAME_MAX);
            if name_len == 0 {
                if name.iter().any(|b| *b != 0) || w != 0 {
                    return Err(PmemError::corrupted(format!("root slot {slot} (empty name, data set)"), off as u64));
                }
                continue;
            }
            // Names have at least two bytes, so one flipped byte in an empty
            // slot can never pass for a root whose creation was interrupted.
            if name_len < ROOT_NAME_MIN || name[name_len..].iter().any(|b| *b != 0) {
                return Err(PmemError::corrupted(format!("root slot {slot} (name padding)"), off as u64));
            }
            if w == 0 {
                torn_root_slots.push(slot);
                continue;
            }
            let value = decode_word(WordField::Root as u8, name, w).ok_or_else(|| {
                PmemError::corrupted(format!("root slot {slot} (check mismatch)"), (off + ROOT_NAME_MAX) as u64)
            })?;
            let name = std::str::from_utf8(&name[..name_len])
                .map_err(|_| PmemError::corrupted(format!("root slot {slot} (name is not UTF-8)"), off as u64))?;
            if value != 0 && (value < heap_offset || value >= max_size) {
                return Err(PmemError::corrupted(format!("root {name:?} points outside the heap"), off as u64));
            }
            roots.push((slot, name.to_string(), value));
        }
        let mut uuid = [0u8; 16];
        uuid.copy_from_slice(&bytes[OFF_UUID..OFF_UUID + 16]);
        Ok(Header {
            uuid,
            heap_offset,
            created_unix_secs: le_u64(bytes, OFF_CREATED),
            size,
            max_size,
            clean: clean == 1,
            roots,
            torn_root_slots,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fresh_header_validates() {
        let b = Header::build([7; 16], 1 << 20, 1 << 24, 42);
        let h = Header::validate(&b, Path::new("x")).unwrap();
        assert_eq!(h.size, 1 << 20);
        assert_eq!(h.max_size, 1 << 24);
        assert!(!h.clean);
        assert!(h.roots.is_empty());
    }

    #[test]
    fn every_single_byte_flip_is_detected() {
        let b = Header::build([7; 16], 1 << 20, 1 << 24, 42);
        for i in 0..b.len() {
            for bit in [0x01u8, 0x80, 0xff] {
                let mut c = b.clone();
                c[i] ^= bit;
                assert!(Header::validate(&c, Path::new("x")).is_err(), "flip at byte {i} mask {bit:#x} not detected");
            }
        }
    }

    #[test]
    fn word_round_trips_and_rejects_other_field() {
        let w = encode_word(WordField::Size as u8, &[], 123_456);
        assert_eq!(decode_word(WordField::Size as u8, &[], w), Some(123_456));
        assert_eq!(decode_word(WordField::MaxSize as u8, &[], w), None);
    }
}
