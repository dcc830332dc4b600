//! Entries: self-checking 32-byte slots holding `[start, end)` and a record.
//!
//! Why every word carries a check: under the simulator's `random-words`
//! policy a slot being overwritten by a shift can reach the media as a mix
//! of its old and new words. Each word checks the entry's identity (start,
//! record, key prefix), so a mixed slot reads as *torn* and is skipped by
//! readers and removed by recovery. Check fields are never zero, so a slot
//! whose `start` word is zero is empty and nothing else is.
//!
//! | word | contents |
//! |---|---|
//! | 0 | `start:48 << 16 | c16(start, rec, prefix)` |
//! | 1 | `end48 << 16 | c16(end48, start, rec)`; `end48 = end | moved << 47`, end 0 = live |
//! | 2 | `(rec >> 4):44 << 20 | c20(start, rec, prefix)` |
//! | 3 | first 8 key bytes, big-endian, zero padded |

/// Bytes of one slot.
pub const SLOT_BYTES: u64 = 32;
/// Words of one slot.
pub const SLOT_WORDS: usize = 4;
/// The largest version (bit 47 of the end field is the *moved* flag).
pub const MAX_VERSION: u64 = (1 << 47) - 1;
const MOVED: u64 = 1 << 47;
const MASK48: u64 = (1 << 48) - 1;

/// A version to read at, with the aborted versions a lazy recovery has
/// not yet repaired away (empty once it has).
#[derive(Clone, Copy, Debug)]
pub struct ReadAt<'a> {
    /// The version read.
    pub version: u64,
    /// Aborted versions (see `recover`).
    pub aborted: &'a [u64],
}

impl ReadAt<'_> {
    /// Whether `e` is visible at this version.
    #[inline]
    pub fn sees(&self, e: &Entry) -> bool {
        e.visible_at(self.version, self.aborted)
    }
}

/// One decoded entry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Entry {
    /// First version that sees the entry.
    pub start: u64,
    /// First version that no longer sees it; 0 = still live.
    pub end: u64,
    /// The entry was copied to another node (split/merge): its record lives on.
    pub moved: bool,
    /// Pool offset of the record (16-byte aligned).
    pub rec: u64,
    /// First 8 key bytes, big-endian, zero padded (`u64::MAX` + sentinel flag
    /// for the maximum key is carried by the record, not here).
    pub prefix: u64,
}

/// What a slot holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Slot {
    /// Never written, or cleared: ends the node's packed slots.
    Empty,
    /// Words that do not check: a torn or corrupted slot, skipped.
    Torn,
    /// A valid entry.
    Valid(Entry),
}

fn mix(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

fn check(tag: u64, a: u64, b: u64, c: u64, bits: u32) -> u64 {
    let h = mix(mix(mix(tag ^ a) ^ b) ^ c) & ((1 << bits) - 1);
    if h == 0 {
        1
    } else {
        h
    }
}

/// The prefix word of `key` in a node whose keys share their first `plen`
/// bytes: the 8 key bytes after those.
#[inline]
pub fn key_prefix_at(key: &[u8], plen: usize) -> u64 {
    key_prefix(key.get(plen..).unwrap_or(&[]))
}

/// The key prefix word of `key`.
#[inline]
pub fn key_prefix(key: &[u8]) -> u64 {
    // Most keys have eight bytes to spare: one load, no copy loop (the
    // general path below compiles to a libc `memmove` call for a variable
    // length, which was 5% of a random delete's time).
    if let Some(head) = key.first_chunk::<8>() {
        return u64::from_be_bytes(*head);
    }
    let mut b = [0u8; 8];
    let n = key.len().min(8);
    b[..n].copy_from_slice(&key[..n]);
    u64::from_be_bytes(b)
}

impl Entry {
    /// A live entry starting at `start`.
    pub fn new(start: u64, rec: u64, prefix: u64) -> Entry {
        Entry { start, end: 0, moved: false, rec, prefix }
    }

    /// The `end` word for `end`/`moved` of this entry in a node whose
    /// slots are checked with `salt` (see `node`).
    pub fn end_word(&self, salt: u64, end: u64, moved: bool) -> u64 {
        let e48 = (end & MASK48) | if moved { MOVED } else { 0 };
        e48 << 16 | check(0x11 ^ salt, e48, self.start, self.rec, 16)
    }

    /// The four words of the slot, in a node whose slots are checked with
    /// `salt` (0 in nodes made before tree layout 5).
    pub fn encode(&self, salt: u64) -> [u64; SLOT_WORDS] {
        debug_assert!(self.start <= MAX_VERSION && self.end <= MAX_VERSION && self.rec % 16 == 0);
        let w0 = (self.start & MASK48) << 16 | check(0x10 ^ salt, self.start, self.rec, self.prefix, 16);
        let w2 = (self.rec >> 4) << 20 | check(0x12 ^ salt, self.start, self.rec, self.prefix, 20);
        [w0, self.end_word(salt, self.end, self.moved), w2, self.prefix]
    }

    /// Decodes a slot's words, checked with `salt`.
    pub fn decode(w: &[u64], salt: u64) -> Slot {
        if w[0] == 0 {
            return Slot::Empty;
        }
        let start = w[0] >> 16;
        let rec = (w[2] >> 20) << 4;
        let prefix = w[3];
        if w[0] & 0xFFFF != check(0x10 ^ salt, start, rec, prefix, 16)
            || w[2] & 0xF_FFFF != check(0x12 ^ salt, start, rec, prefix, 20)
        {
            return Slot::Torn;
        }
        let e48 = w[1] >> 16;
        if w[1] & 0xFFFF != check(0x11 ^ salt, e48, start, rec, 16) {
            return Slot::Torn;
        }
        Slot::Valid(Entry { start, end: e48 & !MOVED, moved: e48 & MOVED != 0, rec, prefix })
    }

    /// Decodes a slot's fields without verifying its checks (readers of
    /// repaired nodes; see `node::read`).
    #[inline]
    pub fn decode_unchecked(w: &[u64]) -> Slot {
        if w[0] == 0 {
            return Slot::Empty;
        }
        let e48 = w[1] >> 16;
        Slot::Valid(Entry {
            start: w[0] >> 16,
            end: e48 & !MOVED,
            moved: e48 & MOVED != 0,
            rec: (w[2] >> 20) << 4,
            prefix: w[3],
        })
    }

    /// The entry as it reads once an end from an `aborted` version is reset
    /// to live (what recovery's repair makes of it).
    #[inline]
    pub fn normalized(&self, aborted: &[u64]) -> Entry {
        if self.end != 0 && aborted.contains(&self.end) && !aborted.contains(&self.start) {
            Entry { end: 0, moved: false, ..*self }
        } else {
            *self
        }
    }

    /// Whether the entry is visible at version `v`, given the aborted versions.
    #[inline]
    pub fn visible_at(&self, v: u64, aborted: &[u64]) -> bool {
        if self.start > v || (!aborted.is_empty() && aborted.contains(&self.start)) {
            return false;
        }
        self.end == 0 || self.end > v || (!aborted.is_empty() && aborted.contains(&self.end))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_empty() {
        let e = Entry { start: 77, end: 90, moved: true, rec: 0x1234_5670, prefix: key_prefix(b"hello") };
        for salt in [0, 0x5eed_5a17] {
            assert_eq!(Entry::decode(&e.encode(salt), salt), Slot::Valid(e));
            assert_eq!(Entry::decode(&[0, 1, 2, 3], salt), Slot::Empty);
        }
        let z = Entry::new(0, 16, 0);
        assert_ne!(z.encode(0)[0], 0, "start 0 must not read as empty");
    }

    #[test]
    fn a_slot_of_another_salt_is_torn() {
        // A node's salt differs from that of every earlier node in its
        // block: a stale slot left there reads as torn, not as an entry.
        let e = Entry::new(5, 0x1000, key_prefix(b"aaa"));
        let mut accepted = 0;
        for salt in 1..2_000u64 {
            if Entry::decode(&e.encode(salt.wrapping_mul(0x9E37_79B9)), 7) != Slot::Torn {
                accepted += 1;
            }
        }
        assert_eq!(accepted, 0);
    }

    #[test]
    fn mixed_slots_are_torn() {
        let a = Entry::new(5, 0x1000, key_prefix(b"aaa"));
        let b = Entry::new(6, 0x2000, key_prefix(b"bbb"));
        let (wa, wb) = (a.encode(0), b.encode(0));
        for mask in 1u32..15 {
            let mut w = [0u64; 4];
            for (i, word) in w.iter_mut().enumerate() {
                *word = if mask & (1 << i) != 0 { wb[i] } else { wa[i] };
            }
            assert_eq!(Entry::decode(&w, 0), Slot::Torn, "mask {mask:b}");
        }
    }

    #[test]
    fn prefix_words_order_as_their_keys_do() {
        // Short keys pad with zeros; long ones take their first 8 bytes.
        assert_eq!(key_prefix(b""), 0);
        assert_eq!(key_prefix(b"ab"), 0x6162 << 48);
        assert_eq!(key_prefix(b"abcdefgh"), u64::from_be_bytes(*b"abcdefgh"));
        assert_eq!(key_prefix(b"abcdefghij"), key_prefix(b"abcdefgh"));
        let keys: [&[u8]; 7] = [b"", b"\0", b"a", b"a\0", b"ab", b"abcdefgh", b"abcdefgi\xff"];
        for w in keys.windows(2) {
            assert!(key_prefix(w[0]) <= key_prefix(w[1]), "{:?} {:?}", w[0], w[1]);
        }
        assert_eq!(key_prefix_at(b"xxabcdefghZ", 2), key_prefix(b"abcdefgh"));
        assert_eq!(key_prefix_at(b"xx", 5), 0);
    }

    #[test]
    fn visibility() {
        let mut e = Entry::new(3, 16, 0);
        assert!(!e.visible_at(2, &[]) && e.visible_at(3, &[]) && e.visible_at(100, &[]));
        e.end = 7;
        assert!(e.visible_at(6, &[]) && !e.visible_at(7, &[]));
        assert!(e.visible_at(9, &[7]), "an aborted end counts as live");
        assert!(!e.visible_at(9, &[3]), "an aborted start is absent");
    }
}
