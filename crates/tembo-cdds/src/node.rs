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

/// A consistent copy of a node's valid entries (torn slots and shift
/// duplicates skipped), with the slot each came from.
#[derive(Clone, Debug)]
pub struct NodeCopy {
    /// 0 for leaves.
    pub level: u8,
    /// Valid entries in slot order.
    pub entries: Vec<Entry>,
    /// Slot index of each entry.
    pub slots: Vec<u8>,
    /// Slots up to the first empty one (valid, torn and duplicate).
    pub used: usize,
    /// Whether a torn slot or a duplicate was skipped (the node needs repair).
    pub dirty: bool,
}

/// Reads the level of `node` and checks its magic.
pub fn level(pool: &Pool, node: u64) -> Result<u8> {
    let w = pool.load_u64(node + 8)?;
    if w >> 32 != NODE_MAGIC {
        return Err(CddsError::invariant("not a tree node (bad node magic)", node));
    }
    Ok((w & 0xFF) as u8)
}

/// Copies `node`'s entries consistently (retrying while a writer shifts).
pub fn read(pool: &Pool, node: u64, session: u64) -> Result<NodeCopy> {
    let words = pool.atomic_words(node, NODE_WORDS)?;
    let mut buf = [0u64; NODE_WORDS];
    let mut spins = 0u32;
    loop {
        let v1 = words[0].load(Ordering::Acquire);
        if v1 >> 48 == session && v1 & 1 == 1 {
            spins += 1;
            if spins > 64 {
                std::thread::yield_now();
            }
            std::hint::spin_loop();
            continue;
        }
        for (b, w) in buf.iter_mut().zip(words.iter()).skip(1) {
            *b = w.load(Ordering::Relaxed);
        }
        fence(Ordering::Acquire);
        if words[0].load(Ordering::Relaxed) == v1 {
            break;
        }
    }
    decode(&buf, node)
}

fn decode(buf: &[u64; NODE_WORDS], node: u64) -> Result<NodeCopy> {
    if buf[1] >> 32 != NODE_MAGIC {
        return Err(CddsError::invariant("not a tree node (bad node magic)", node));
    }
    let mut copy = NodeCopy {
        level: (buf[1] & 0xFF) as u8,
        entries: Vec::with_capacity(NODE_SLOTS),
        slots: Vec::with_capacity(NODE_SLOTS),
        used: NODE_SLOTS,
        dirty: false,
    };
    let mut prev: Option<&[u64]> = None;
    for i in 0..NODE_SLOTS {
        let w = &buf[8 + i * SLOT_WORDS..8 + (i + 1) * SLOT_WORDS];
        match Entry::decode(w) {
            Slot::Empty => {
                copy.used = i;
                break;
            }
            Slot::Torn => copy.dirty = true,
            Slot::Valid(e) => {
                if prev == Some(w) {
                    copy.dirty = true;
                } else {
                    copy.entries.push(e);
                    copy.slots.push(i as u8);
                }
                prev = Some(w);
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
