//! Nodes: a header line and 30 packed, self-checking entry slots.
//!
//! ```text
//! word 0   reader version word: session:16 | counter:48 (odd = shifting)
//! word 1   NODE_MAGIC:32 | level:8   (level 0 = leaf; immutable)
//! 2..7     zero
//! 64 + 32·i  slot i (see `entry`)
//! ```
//!
//! Readers copy the slots between two reads of the version word (the
//! Persistent Masstree seqlock) and retry when it changed. The version word
//! is never trusted across a restart: its top bits hold the session that
//! wrote it, and a word of another session reads as unlocked, so a crash in
//! the middle of a shift cannot leave a node readers spin on.
//!
//! Writers shift slots one at a time through [`OrderedWrites`], so every
//! slot's content exists, persisted, elsewhere in the node before the slot
//! is overwritten (under the ordering mode's rules); the shift's transient
//! duplicate is skipped by readers and removed by recovery.

use std::sync::atomic::{fence, AtomicU64, Ordering};

use tembo_pmem::{OrderedWrites, Pool};

use crate::entry::{Entry, Slot, SLOT_BYTES, SLOT_WORDS};
use crate::error::{CddsError, Result};

/// Bytes of a node.
pub const NODE_BYTES: u64 = 1024;
/// Entry slots of a node.
pub const NODE_SLOTS: usize = 30;
const HEADER_BYTES: u64 = 64;
const NODE_WORDS: usize = (NODE_BYTES / 8) as usize;
const NODE_MAGIC: u64 = 0xCDD5_0DE0;

/// Offset of slot `i` in node `node`.
#[inline]
pub fn slot_offset(node: u64, i: usize) -> u64 {
    node + HEADER_BYTES + i as u64 * SLOT_BYTES
}

/// A consistent copy of a node's valid entries (shift duplicates skipped),
/// with the slot each came from. Fixed arrays: a read allocates nothing.
#[derive(Clone, Debug)]
pub struct NodeCopy {
    /// 0 for leaves.
    pub level: u8,
    entries: [Entry; NODE_SLOTS],
    slots: [u8; NODE_SLOTS],
    len: usize,
    /// Slots up to the first empty one (valid, torn and duplicate).
    pub used: usize,
    /// Whether a torn slot or a duplicate was skipped (the node needs repair).
    pub dirty: bool,
}

impl NodeCopy {
    /// Valid entries in slot order.
    #[inline]
    pub fn entries(&self) -> &[Entry] {
        &self.entries[..self.len]
    }
    /// Slot index of each entry.
    #[inline]
    pub fn slots(&self) -> &[u8] {
        &self.slots[..self.len]
    }
}

/// Reads the level of `node` and checks its magic.
pub fn level(pool: &Pool, node: u64) -> Result<u8> {
    let w = pool.load_u64(node + 8)?;
    if w >> 32 != NODE_MAGIC {
        return Err(CddsError::invariant("not a tree node (bad node magic)", node));
    }
    Ok((w & 0xFF) as u8)
}

/// Reads a node's version word, waiting while a writer of this session
/// holds it odd (a word of another session never counts as locked).
fn wait_unlocked(word: &AtomicU64, session: u64) -> u64 {
    let mut spins = 0u32;
    loop {
        let v = word.load(Ordering::Acquire);
        if v >> 48 != session || v & 1 == 0 {
            return v;
        }
        spins += 1;
        if spins > 64 {
            std::thread::yield_now();
        }
        std::hint::spin_loop();
    }
}

/// Copies `node`'s entries consistently (retrying while a writer shifts),
/// without verifying slot checks: the fast path of readers and the writer.
/// Torn slots exist only in nodes an interrupted batch touched, and
/// recovery repairs all of those before the tree serves (see `recover`).
pub fn read(pool: &Pool, node: u64, session: u64) -> Result<Box<NodeCopy>> {
    read_with(pool, node, session, None)
}

/// [`read`] verifying every slot's checks (torn slots skipped, `dirty` set)
/// and skipping a slot equal to its left neighbour once ends from an
/// `aborted` version count as live (a repair interrupted between the
/// two copies of a shift's duplicate leaves them different only there).
pub fn read_checked(pool: &Pool, node: u64, session: u64, aborted: &[u64]) -> Result<Box<NodeCopy>> {
    read_with(pool, node, session, Some(aborted))
}

fn read_with(pool: &Pool, node: u64, session: u64, checked: Option<&[u64]>) -> Result<Box<NodeCopy>> {
    let words = pool.atomic_words(node, NODE_WORDS)?;
    let mut buf = [0u64; NODE_WORDS];
    loop {
        let v1 = wait_unlocked(&words[0], session);
        for (b, w) in buf.iter_mut().zip(words.iter()).skip(1) {
            *b = w.load(Ordering::Relaxed);
        }
        fence(Ordering::Acquire);
        if words[0].load(Ordering::Relaxed) == v1 {
            break;
        }
    }
    decode(&buf, node, checked)
}

fn decode(buf: &[u64; NODE_WORDS], node: u64, checked: Option<&[u64]>) -> Result<Box<NodeCopy>> {
    decode_slots(buf[1], node, checked, |i| {
        let mut w = [0u64; SLOT_WORDS];
        w.copy_from_slice(&buf[8 + i * SLOT_WORDS..8 + (i + 1) * SLOT_WORDS]);
        w
    })
}

/// The writer's copy of a node only it changes (every node of the tree:
/// there is one writer): no version word to wait for or validate, no
/// whole-node copy first, and no slot read past the first empty one.
pub fn read_own(pool: &Pool, node: u64) -> Result<Box<NodeCopy>> {
    let words = pool.atomic_words(node, NODE_WORDS)?;
    decode_slots(words[1].load(Ordering::Relaxed), node, None, |i| {
        let mut w = [0u64; SLOT_WORDS];
        for (d, a) in w.iter_mut().zip(&words[8 + i * SLOT_WORDS..8 + (i + 1) * SLOT_WORDS]) {
            *d = a.load(Ordering::Relaxed);
        }
        w
    })
}

/// Decodes a node from its head word and its slots (read by `slot(i)`, in
/// order, up to the first empty one); `checked`: verify slots, with the
/// aborted versions that normalise duplicates.
fn decode_slots(
    head: u64,
    node: u64,
    checked: Option<&[u64]>,
    mut slot: impl FnMut(usize) -> [u64; SLOT_WORDS],
) -> Result<Box<NodeCopy>> {
    if head >> 32 != NODE_MAGIC {
        return Err(CddsError::invariant("not a tree node (bad node magic)", node));
    }
    const NONE: Entry = Entry { start: 0, end: 0, moved: false, rec: 0, prefix: 0 };
    let mut copy = Box::new(NodeCopy {
        level: (head & 0xFF) as u8,
        entries: [NONE; NODE_SLOTS],
        slots: [0; NODE_SLOTS],
        len: 0,
        used: NODE_SLOTS,
        dirty: false,
    });
    let mut prev: Option<[u64; SLOT_WORDS]> = None;
    let mut prev_entry: Option<Entry> = None;
    for i in 0..NODE_SLOTS {
        let w = slot(i);
        let decoded = if checked.is_some() { Entry::decode(&w) } else { Entry::decode_unchecked(&w) };
        match decoded {
            Slot::Empty => {
                copy.used = i;
                break;
            }
            Slot::Torn => copy.dirty = true,
            Slot::Valid(e) => {
                let dup = prev == Some(w)
                    || checked.is_some_and(|ab| {
                        !ab.is_empty() && prev_entry.is_some_and(|p| e.normalized(ab) == p.normalized(ab))
                    });
                if dup {
                    copy.dirty = true;
                } else {
                    copy.entries[copy.len] = e;
                    copy.slots[copy.len] = i as u8;
                    copy.len += 1;
                }
                prev = Some(w);
                prev_entry = Some(e);
            }
        }
    }
    Ok(copy)
}

/// Allocates a node of `level`, fills it with `entries` (slots 0..), and
/// persists it. Nothing points to it yet.
pub fn create(pool: &Pool, level: u8, entries: &[Entry]) -> Result<u64> {
    debug_assert!(entries.len() <= NODE_SLOTS);
    let node = pool.alloc(NODE_BYTES)?;
    if node % 64 != 0 {
        let _ = pool.free(node);
        return Err(CddsError::invariant("allocator returned a node that is not line aligned", node));
    }
    pool.fill(node, NODE_BYTES, 0)?;
    pool.store_u64(node + 8, NODE_MAGIC << 32 | level as u64)?;
    for (i, e) in entries.iter().enumerate() {
        write_slot_words(pool, slot_offset(node, i), &e.encode())?;
    }
    pool.persist(node, NODE_BYTES);
    Ok(node)
}

fn write_slot_words(pool: &Pool, off: u64, w: &[u64; SLOT_WORDS]) -> Result<()> {
    let a = pool.atomic_words(off, SLOT_WORDS)?;
    for (dst, v) in a.iter().zip(w) {
        dst.store(*v, Ordering::Relaxed);
    }
    Ok(())
}

fn read_slot_words(pool: &Pool, off: u64) -> Result<[u64; SLOT_WORDS]> {
    let a = pool.atomic_words(off, SLOT_WORDS)?;
    Ok([
        a[0].load(Ordering::Relaxed),
        a[1].load(Ordering::Relaxed),
        a[2].load(Ordering::Relaxed),
        a[3].load(Ordering::Relaxed),
    ])
}

/// The writer's handle on one node while it changes several slots: makes
/// the version word odd on creation and even again on drop.
#[derive(Debug)]
pub struct NodeWriter<'p> {
    pool: &'p Pool,
    node: u64,
    word: &'p AtomicU64,
    odd: u64,
}

impl<'p> NodeWriter<'p> {
    /// Locks `node` against readers for the writer of `session`.
    pub fn begin(pool: &'p Pool, node: u64, session: u64) -> Result<NodeWriter<'p>> {
        let word = pool.atomic_u64(node)?;
        let old = word.load(Ordering::Relaxed);
        let counter = if old >> 48 == session { old & ((1 << 48) - 1) } else { 0 };
        let odd = session << 48 | ((counter + 1) | 1) & ((1 << 48) - 1);
        word.store(odd, Ordering::Relaxed);
        fence(Ordering::Release);
        Ok(NodeWriter { pool, node, word, odd })
    }

    /// Inserts `e` at slot `pos`, shifting slots `pos..used` right by one.
    pub fn insert_at(&mut self, pos: usize, used: usize, e: &Entry) -> Result<()> {
        if used >= NODE_SLOTS || pos > used {
            return Err(CddsError::invariant(format!("insert at {pos} with {used} slots used"), self.node));
        }
        let mut ow = OrderedWrites::new(self.pool);
        for i in (pos..used).rev() {
            let w = read_slot_words(self.pool, slot_offset(self.node, i))?;
            ow.before(slot_offset(self.node, i + 1), SLOT_BYTES);
            write_slot_words(self.pool, slot_offset(self.node, i + 1), &w)?;
            ow.wrote(slot_offset(self.node, i + 1), SLOT_BYTES);
        }
        ow.before(slot_offset(self.node, pos), SLOT_BYTES);
        write_slot_words(self.pool, slot_offset(self.node, pos), &e.encode())?;
        ow.wrote(slot_offset(self.node, pos), SLOT_BYTES);
        ow.finish();
        Ok(())
    }

    /// Removes slot `pos`, shifting slots `pos+1..used` left and clearing
    /// slot `used - 1`.
    pub fn remove_at(&mut self, pos: usize, used: usize) -> Result<()> {
        if pos >= used || used > NODE_SLOTS {
            return Err(CddsError::invariant(format!("remove at {pos} with {used} slots used"), self.node));
        }
        let mut ow = OrderedWrites::new(self.pool);
        for i in pos..used - 1 {
            let w = read_slot_words(self.pool, slot_offset(self.node, i + 1))?;
            ow.before(slot_offset(self.node, i), SLOT_BYTES);
            write_slot_words(self.pool, slot_offset(self.node, i), &w)?;
            ow.wrote(slot_offset(self.node, i), SLOT_BYTES);
        }
        ow.before(slot_offset(self.node, used - 1), SLOT_BYTES);
        write_slot_words(self.pool, slot_offset(self.node, used - 1), &[0; SLOT_WORDS])?;
        ow.wrote(slot_offset(self.node, used - 1), SLOT_BYTES);
        ow.finish();
        Ok(())
    }
}

impl Drop for NodeWriter<'_> {
    fn drop(&mut self) {
        self.word.store(self.odd + 1, Ordering::Release);
    }
}

/// Stores a new `end` word into slot `slot` (one failure-atomic store) and
/// flushes it; the commit's fence orders it.
pub fn set_end(pool: &Pool, node: u64, slot: usize, e: &Entry, end: u64, moved: bool) -> Result<()> {
    let off = slot_offset(node, slot) + 8;
    pool.store_u64(off, e.end_word(end, moved))?;
    pool.flush(off, 8);
    Ok(())
}

/// The raw state of every slot (for the writer, recovery and `check`).
pub fn raw_slots(pool: &Pool, node: u64) -> Result<Vec<Slot>> {
    let mut out = Vec::with_capacity(NODE_SLOTS);
    for i in 0..NODE_SLOTS {
        out.push(Entry::decode(&read_slot_words(pool, slot_offset(node, i))?));
    }
    Ok(out)
}

/// An optimistic view of a node for the read fast path (Persistent
/// Masstree style): the version word is read first, slots are read in place
/// with atomic loads only where the binary search looks, and
/// [`RawNode::validate`] re-reads the version word; a changed word means a
/// writer shifted meanwhile and the caller retries the node. Slots
/// `0..used` are valid and sorted in a stable node (readers never see a
/// shift, and recovery repaired every torn slot before serving).
#[derive(Debug, Default)]
pub struct RawNode<'p> {
    words: &'p [AtomicU64],
    version: u64,
    used: usize,
    level: u8,
}

impl<'p> RawNode<'p> {
    /// Starts reading `node`: waits out a writer, reads level and slot count.
    pub fn load(&mut self, pool: &'p Pool, node: u64, session: u64) -> Result<()> {
        let words = pool.atomic_words(node, NODE_WORDS)?;
        loop {
            let v1 = wait_unlocked(&words[0], session);
            let head = words[1].load(Ordering::Relaxed);
            if head >> 32 != NODE_MAGIC {
                fence(Ordering::Acquire);
                if words[0].load(Ordering::Relaxed) != v1 {
                    continue;
                }
                return Err(CddsError::invariant("not a tree node (bad node magic)", node));
            }
            // Slots are packed: binary search for the first empty one.
            let (mut lo, mut hi) = (0, NODE_SLOTS);
            while lo < hi {
                let mid = (lo + hi) / 2;
                if words[8 + mid * SLOT_WORDS].load(Ordering::Relaxed) != 0 {
                    lo = mid + 1;
                } else {
                    hi = mid;
                }
            }
            *self = RawNode { words, version: v1, used: lo, level: (head & 0xFF) as u8 };
            return Ok(());
        }
    }

    /// Whether nothing changed since [`RawNode::load`] (else: retry the node).
    #[inline]
    pub fn validate(&self) -> bool {
        fence(Ordering::Acquire);
        self.words[0].load(Ordering::Relaxed) == self.version
    }

    /// 0 for leaves.
    #[inline]
    pub fn level(&self) -> u8 {
        self.level
    }

    /// Slots in use.
    #[inline]
    pub fn used(&self) -> usize {
        self.used
    }

    /// The key prefix word of slot `i` (< `used`).
    #[inline]
    pub fn prefix(&self, i: usize) -> u64 {
        self.words[8 + i * SLOT_WORDS + 3].load(Ordering::Relaxed)
    }

    /// The entry in slot `i` (< `used`).
    #[inline]
    pub fn entry(&self, i: usize) -> Entry {
        let b = 8 + i * SLOT_WORDS;
        let w = [
            self.words[b].load(Ordering::Relaxed),
            self.words[b + 1].load(Ordering::Relaxed),
            self.words[b + 2].load(Ordering::Relaxed),
            self.words[b + 3].load(Ordering::Relaxed),
        ];
        match Entry::decode_unchecked(&w) {
            Slot::Valid(e) => e,
            // Raced with a writer: a start above every version is invisible,
            // and validation fails.
            _ => Entry { start: u64::MAX, end: 0, moved: false, rec: 16, prefix: 0 },
        }
    }
}
