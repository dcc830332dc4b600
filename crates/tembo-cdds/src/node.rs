//! Nodes: a header line holding the *order line*, and 30 unsorted,
//! self-checking entry slots.
//!
//! ```text
//! word 0     reader version word: session:16 | counter:48 (odd = being written)
//! word 1     NODE_MAGIC:32 | plen:16 | level:8   (level 0 = leaf; immutable)
//! words 2..5 the order line: byte 0 = n, bytes 1..=n = the used slots'
//!            indices in (key, start) order
//! word 6     birth (layout 5): filled:8 << 56 | born:48, immutable; 0 in older nodes
//! word 7     the writer's tag while the node's order line waits to be
//!            flushed (`lazy_order`); meaningless after a restart
//! 64 + 32·i  slot i (see `entry`)
//! ```
//!
//! Why a birth word: a new node is persisted only where it is used — its
//! header line and the lines of the `filled` slots it is made with — not
//! whole (a split persisted two 16-line nodes; now about 9 lines each).
//! Its other slots are zero in the cache, but a crash may bring back what
//! its block held before (an earlier node's slots, a record's bytes). So
//! the slots of a node are checked with a *salt* derived from `born` (the
//! version of the batch that made it) and its offset: a stale slot of an
//! earlier node in the same block, whose checks used another salt, reads
//! as torn; and past `filled` any slot that starts before `born` is torn
//! too (every later insert starts at or after it), whatever its checks.
//! Recovery clears torn slots of every node it walks, as before.
//!
//! Why an order line instead of sorted slots: an insert into sorted slots
//! shifts half a node, one persisted line and one fence per line crossed
//! (7 of the 17 lines a put flushed). Here a new entry goes into any free
//! slot, and the order line is rewritten: two lines, no ordering between
//! them, one fence (the commit's). Versions make that safe without atomic
//! 64-byte stores: every entry a batch adds starts at the uncommitted
//! version, so whatever mix of old and new order-line words a crash leaves,
//! no committed entry was overwritten, and the truth is the set of valid
//! slots. The fast paths trust the order line (a clean node always has one
//! that names exactly its used slots, in key order); after a crash readers
//! take [`read_checked`], which verifies slots, ignores an order line that
//! does not name exactly the valid slots, and sorts what it needs by key;
//! and recovery rebuilds every order line before the fast paths resume.
//!
//! Readers copy the node between two reads of the version word (the
//! Persistent Masstree seqlock) and retry when it changed. The version word
//! is never trusted across a restart: its top bits hold the session that
//! wrote it, and a word of another session reads as unlocked, so a crash in
//! the middle of a write cannot leave a node readers spin on.

use std::cmp::Ordering as CmpOrdering;
use std::sync::atomic::{fence, AtomicU64, Ordering};

use tembo_pmem::Pool;

use crate::entry::{Entry, ReadAt, Slot, SLOT_BYTES, SLOT_WORDS};
use crate::error::{CddsError, Result};
use crate::record;

/// Bytes of a node.
pub const NODE_BYTES: u64 = 1024;
/// Entry slots of a node.
pub const NODE_SLOTS: usize = 30;
const HEADER_BYTES: u64 = 64;
const NODE_WORDS: usize = (NODE_BYTES / 8) as usize;
const NODE_MAGIC: u64 = 0xCDD5_0DE0;
const ORDER_WORD: usize = 2;
const ORDER_WORDS: usize = 4;
const ALL_SLOTS: u32 = (1 << NODE_SLOTS) - 1;
/// The longest prefix a node records (its head word has 16 bits for it).
pub const MAX_PLEN: usize = 0xFFFF;

/// Header word 6: the node's birth (see the module docs).
const BIRTH_WORD: usize = 6;
const MASK48: u64 = (1 << 48) - 1;

/// How a node's slots are checked: its salt, and which slots could hold
/// stale words from before it was made (see the module docs).
#[derive(Clone, Copy, Debug, Default)]
pub struct Birth {
    born: u64,
    filled: usize,
    salt: u64,
}

impl Birth {
    /// The birth of node `node` from its header word 6 (0: made before
    /// layout 5, persisted whole, salt 0).
    pub fn of(word: u64, node: u64) -> Birth {
        if word == 0 {
            return Birth::default();
        }
        let born = word & MASK48;
        let salt = (born ^ node.rotate_left(23) ^ 0xB1A7_5EED).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        Birth { born, filled: ((word >> 56) as usize).min(NODE_SLOTS), salt: salt ^ (salt >> 29) }
    }

    /// The node's birth word.
    fn word(born: u64, filled: usize) -> u64 {
        (filled as u64) << 56 | (born & MASK48)
    }

    /// The salt its slots are checked with.
    pub fn salt(&self) -> u64 {
        self.salt
    }

    /// Decodes slot `i`'s words with the node's checks.
    pub fn decode(&self, i: usize, w: &[u64]) -> Slot {
        match Entry::decode(w, self.salt) {
            Slot::Valid(e) if i >= self.filled && e.start < self.born => Slot::Torn,
            s => s,
        }
    }

    /// Whether slot `i` may hold stale words from before the node was made
    /// after a crash (it was not persisted at birth).
    pub fn unpersisted(&self, i: usize) -> bool {
        self.born != 0 && i >= self.filled
    }
}

/// The birth of `node`, from its header.
pub fn birth(pool: &Pool, node: u64) -> Result<Birth> {
    Ok(Birth::of(pool.load_u64(node + 8 * BIRTH_WORD as u64)?, node))
}

/// Offset of slot `i` in node `node`.
#[inline]
pub fn slot_offset(node: u64, i: usize) -> u64 {
    node + HEADER_BYTES + i as u64 * SLOT_BYTES
}

/// A node's order line: the used slots in (key, start) order.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct OrderLine {
    bytes: [u8; 32],
}

impl OrderLine {
    fn from_words(w: &[u64]) -> OrderLine {
        let mut bytes = [0u8; 32];
        for (chunk, word) in bytes.chunks_exact_mut(8).zip(w) {
            chunk.copy_from_slice(&word.to_le_bytes());
        }
        OrderLine { bytes }
    }

    fn load(words: &[AtomicU64]) -> OrderLine {
        let mut w = [0u64; ORDER_WORDS];
        for (d, a) in w.iter_mut().zip(&words[ORDER_WORD..ORDER_WORD + ORDER_WORDS]) {
            *d = a.load(Ordering::Relaxed);
        }
        OrderLine::from_words(&w)
    }

    fn words(&self) -> [u64; ORDER_WORDS] {
        let mut w = [0u64; ORDER_WORDS];
        for (d, chunk) in w.iter_mut().zip(self.bytes.chunks_exact(8)) {
            *d = u64::from_le_bytes(chunk.try_into().expect("8 bytes"));
        }
        w
    }

    /// The order of `slots` (each below [`NODE_SLOTS`], at most that many).
    pub fn of(slots: &[u8]) -> OrderLine {
        let mut o = OrderLine::default();
        let n = slots.len().min(NODE_SLOTS);
        o.bytes[0] = n as u8;
        o.bytes[1..=n].copy_from_slice(&slots[..n]);
        o
    }

    /// Slots named (as stored; see [`OrderLine::well_formed`]).
    #[inline]
    pub fn len(&self) -> usize {
        (self.bytes[0] as usize).min(NODE_SLOTS)
    }

    /// Whether it names no slot.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The slot at `rank` (< `len`).
    #[inline]
    pub fn slot(&self, rank: usize) -> usize {
        self.bytes[1 + rank] as usize
    }

    /// The named slots in order.
    #[inline]
    pub fn slots(&self) -> &[u8] {
        &self.bytes[1..=self.len()]
    }

    /// The named slots as a bit set, or `None` unless the line names at
    /// most [`NODE_SLOTS`] distinct slots, each below [`NODE_SLOTS`].
    pub fn mask(&self) -> Option<u32> {
        if self.bytes[0] as usize > NODE_SLOTS {
            return None;
        }
        let mut m = 0u32;
        for &s in self.slots() {
            if s as usize >= NODE_SLOTS || m & (1 << s) != 0 {
                return None;
            }
            m |= 1 << s;
        }
        Some(m)
    }

    /// Whether the line is well formed (see [`OrderLine::mask`]).
    pub fn well_formed(&self) -> bool {
        self.mask().is_some()
    }

    /// The slots of `valid` (a bit set) in the order to try them after a
    /// crash: this line's order if it names exactly those slots (`true`),
    /// else ascending slot order (`false`; the caller sorts by key).
    pub fn trusted_or_by_slot(&self, valid: u32) -> (OrderLine, bool) {
        if self.mask() == Some(valid) {
            return (*self, true);
        }
        let mut by_slot = OrderLine::default();
        for i in (0..NODE_SLOTS as u8).filter(|&i| valid & (1 << i) != 0) {
            by_slot.insert(by_slot.len(), i);
        }
        (by_slot, false)
    }

    fn insert(&mut self, rank: usize, slot: u8) {
        let n = self.len();
        self.bytes.copy_within(1 + rank..1 + n, 2 + rank);
        self.bytes[1 + rank] = slot;
        self.bytes[0] = n as u8 + 1;
    }
}

/// The level (0 = leaf) in a node's head word.
#[inline]
fn level_of(head: u64) -> u8 {
    (head & 0xFF) as u8
}

/// The prefix length in a node's head word: every key the node holds or
/// will ever be asked about shares its first `plen` bytes (the common
/// prefix of the node's key range, fixed when the node is made), so its
/// slots' prefix words hold key bytes `plen..plen + 8`.
#[inline]
fn plen_of(head: u64) -> usize {
    ((head >> 8) & 0xFFFF) as usize
}

/// A consistent copy of a node's entries in key order, with the slot each
/// came from. Fixed arrays: a read allocates nothing but the box.
#[derive(Clone, Debug)]
pub struct NodeCopy {
    /// 0 for leaves.
    pub level: u8,
    /// Bytes every key of the node's range shares (see `plen_of`).
    pub plen: usize,
    entries: [Entry; NODE_SLOTS],
    slots: [u8; NODE_SLOTS],
    len: usize,
    /// Slots in use (valid or torn).
    pub used: usize,
    /// Whether the node needs repair: a torn slot, or an order line that
    /// does not name exactly the valid slots in key order ([`read_checked`]).
    pub dirty: bool,
}

impl NodeCopy {
    fn empty(head: u64) -> Box<NodeCopy> {
        const NONE: Entry = Entry { start: 0, end: 0, moved: false, rec: 0, prefix: 0 };
        Box::new(NodeCopy {
            level: level_of(head),
            plen: plen_of(head),
            entries: [NONE; NODE_SLOTS],
            slots: [0; NODE_SLOTS],
            len: 0,
            used: 0,
            dirty: false,
        })
    }

    fn push(&mut self, e: Entry, slot: usize) {
        self.entries[self.len] = e;
        self.slots[self.len] = slot as u8;
        self.len += 1;
    }

    /// Entries in key order.
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

/// Compares two entries by key, then start version. Different prefix
/// words decide without reading a record (the zero padding sorts like the
/// end of a shorter key); equal ones, and the sentinel's, read the keys.
pub fn cmp_key_start(pool: &Pool, a: &Entry, b: &Entry) -> Result<CmpOrdering> {
    let by_key = if a.prefix != b.prefix && a.prefix != u64::MAX && b.prefix != u64::MAX {
        a.prefix.cmp(&b.prefix)
    } else {
        record::cmp_entries(pool, a, b)?
    };
    Ok(by_key.then(a.start.cmp(&b.start)))
}

/// Sorts `entries` (with their `slots`) by key, then start version; every
/// entry's record must be readable. An insertion sort: nodes are small and
/// usually sorted already, and a comparison can fail. Returns whether they
/// were sorted already.
pub fn sort_by_key(pool: &Pool, entries: &mut [Entry], slots: &mut [u8]) -> Result<bool> {
    let mut sorted = true;
    for i in 1..entries.len() {
        let mut j = i;
        while j > 0 && cmp_key_start(pool, &entries[j - 1], &entries[j])? == CmpOrdering::Greater {
            entries.swap(j - 1, j);
            slots.swap(j - 1, j);
            sorted = false;
            j -= 1;
        }
    }
    Ok(sorted)
}

/// Reads the level of `node` and checks its magic.
pub fn level(pool: &Pool, node: u64) -> Result<u8> {
    let w = pool.load_u64(node + 8)?;
    if w >> 32 != NODE_MAGIC {
        return Err(CddsError::invariant("not a tree node (bad node magic)", node));
    }
    Ok(level_of(w))
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

/// Copies `node`'s entries consistently (retrying while a writer changes
/// it) in the order its order line gives, without verifying slot checks:
/// the fast path of readers. Torn slots and stale order lines exist only
/// in nodes an interrupted batch touched, and those are read through
/// [`read_checked`] until recovery has repaired every one (see `recover`).
pub fn read(pool: &Pool, node: u64, session: u64) -> Result<Box<NodeCopy>> {
    let buf = stable_copy(pool, node, session)?;
    decode_ordered(buf[1], OrderLine::from_words(&buf[ORDER_WORD..ORDER_WORD + ORDER_WORDS]), node, |i| {
        slot_words_of(&buf, i)
    })
}

/// The entries of `node` visible at `at`, in key order, trusting nothing:
/// every slot's checks are verified (torn slots skipped), the order line is
/// used only if it names exactly the valid slots, and the visible entries
/// are sorted by key if they are not in order already (`dirty` is set when
/// the node needs repair). Only visible entries are returned because only
/// their records are sure to be readable: a moved entry no retained
/// version sees may point to a record its copy's deletion freed.
pub fn read_checked(pool: &Pool, node: u64, session: u64, at: ReadAt<'_>) -> Result<Box<NodeCopy>> {
    let buf = stable_copy(pool, node, session)?;
    let head = buf[1];
    check_magic(head, node)?;
    let mut copy = NodeCopy::empty(head);
    let mut valid = 0u32;
    let mut decoded = [Slot::Empty; NODE_SLOTS];
    let birth = Birth::of(buf[BIRTH_WORD], node);
    for (i, d) in decoded.iter_mut().enumerate() {
        *d = birth.decode(i, &slot_words_of(&buf, i));
        match d {
            Slot::Empty => {}
            Slot::Torn => {
                copy.used += 1;
                copy.dirty = true;
            }
            Slot::Valid(_) => {
                copy.used += 1;
                valid |= 1 << i;
            }
        }
    }
    let order = OrderLine::from_words(&buf[ORDER_WORD..ORDER_WORD + ORDER_WORDS]);
    let (sequence, trusted) = order.trusted_or_by_slot(valid);
    copy.dirty |= !trusted;
    for &s in sequence.slots() {
        if let Slot::Valid(e) = decoded[s as usize] {
            if at.sees(&e) {
                copy.push(e, s as usize);
            }
        }
    }
    let len = copy.len;
    let NodeCopy { entries, slots, .. } = &mut *copy;
    if !sort_by_key(pool, &mut entries[..len], &mut slots[..len])? {
        copy.dirty = true;
    }
    Ok(copy)
}

/// The node's words, copied between two equal reads of its version word.
fn stable_copy(pool: &Pool, node: u64, session: u64) -> Result<[u64; NODE_WORDS]> {
    let words = pool.atomic_words(node, NODE_WORDS)?;
    let mut buf = [0u64; NODE_WORDS];
    loop {
        let v1 = wait_unlocked(&words[0], session);
        for (b, w) in buf.iter_mut().zip(words.iter()).skip(1) {
            *b = w.load(Ordering::Relaxed);
        }
        fence(Ordering::Acquire);
        if words[0].load(Ordering::Relaxed) == v1 {
            return Ok(buf);
        }
    }
}

fn slot_words_of(buf: &[u64; NODE_WORDS], i: usize) -> [u64; SLOT_WORDS] {
    let mut w = [0u64; SLOT_WORDS];
    w.copy_from_slice(&buf[8 + i * SLOT_WORDS..8 + (i + 1) * SLOT_WORDS]);
    w
}

fn check_magic(head: u64, node: u64) -> Result<()> {
    if head >> 32 != NODE_MAGIC {
        return Err(CddsError::invariant("not a tree node (bad node magic)", node));
    }
    Ok(())
}

/// The writer's copy of a node only it changes (every node of the tree:
/// there is one writer): no version word to wait for or validate, no
/// whole-node copy first, and only the slots the order line names read.
pub fn read_own(pool: &Pool, node: u64) -> Result<Box<NodeCopy>> {
    let words = pool.atomic_words(node, NODE_WORDS)?;
    pool.prefetch(node, NODE_BYTES);
    decode_ordered(words[1].load(Ordering::Relaxed), OrderLine::load(words), node, |i| {
        let mut w = [0u64; SLOT_WORDS];
        for (d, a) in w.iter_mut().zip(&words[8 + i * SLOT_WORDS..8 + (i + 1) * SLOT_WORDS]) {
            *d = a.load(Ordering::Relaxed);
        }
        w
    })
}

/// Decodes a node from its head word, its order line and its slots (read
/// by `slot(i)`), trusting the order line.
fn decode_ordered(
    head: u64,
    order: OrderLine,
    node: u64,
    mut slot: impl FnMut(usize) -> [u64; SLOT_WORDS],
) -> Result<Box<NodeCopy>> {
    check_magic(head, node)?;
    if !order.well_formed() {
        return Err(CddsError::invariant("malformed order line", node));
    }
    let mut copy = NodeCopy::empty(head);
    for &s in order.slots() {
        match Entry::decode_unchecked(&slot(s as usize)) {
            Slot::Valid(e) => copy.push(e, s as usize),
            _ => return Err(CddsError::invariant(format!("the order line names empty slot {s}"), node)),
        }
    }
    copy.used = copy.len;
    Ok(copy)
}

/// Allocates a node of `level` whose keys share their first `plen` bytes
/// (the entries' prefix words must hold the bytes after them), fills it
/// with `entries` (slots 0.., in that order, which must be key order), and
/// persists its header and those slots; `born` is the version of the batch
/// making it (no entry inserted later starts before it). Nothing points
/// to it yet.
pub fn create(pool: &Pool, level: u8, plen: usize, born: u64, entries: &[Entry]) -> Result<u64> {
    check_shape(plen, entries)?;
    let node = make(pool, level, plen, born, entries, pool.alloc(NODE_BYTES)?)?;
    pool.fence();
    Ok(node)
}

/// [`create`] for a node of batch `born` that only entries starting at
/// `born` (or a root pointer stored after a fence) will name: its
/// allocation and its lines are flushed, not fenced. The fence before the
/// commit store makes them durable before the batch's entries can be
/// trusted; a crash before it aborts `born`, whose entries no reader,
/// repair or leak walk follows, and the sweep frees the block. A split
/// made two to four fences more per new node before; on a disk file
/// each fence is an msync (`docs/design/cdds.md`, §9).
pub fn create_in_batch(pool: &Pool, level: u8, plen: usize, born: u64, entries: &[Entry]) -> Result<u64> {
    check_shape(plen, entries)?;
    make(pool, level, plen, born, entries, pool.alloc_deferred(NODE_BYTES)?)
}

fn check_shape(plen: usize, entries: &[Entry]) -> Result<()> {
    if entries.len() > NODE_SLOTS {
        return Err(CddsError::invariant(format!("{} entries for one node", entries.len()), 0));
    }
    if plen > MAX_PLEN {
        return Err(CddsError::invariant(format!("prefix length {plen} for one node"), 0));
    }
    Ok(())
}

/// Fills the block `node` as [`create`] describes and flushes (does not
/// fence) what it wrote.
fn make(pool: &Pool, level: u8, plen: usize, born: u64, entries: &[Entry], node: u64) -> Result<u64> {
    if node % 64 != 0 {
        let _ = pool.free(node);
        return Err(CddsError::invariant("allocator returned a node that is not line aligned", node));
    }
    // Zero in the cache: without a crash the unused slots read as empty.
    pool.fill(node, NODE_BYTES, 0)?;
    pool.store_u64(node + 8, NODE_MAGIC << 32 | (plen as u64) << 8 | level as u64)?;
    let word = Birth::word(born, entries.len());
    pool.store_u64(node + 8 * BIRTH_WORD as u64, word)?;
    let salt = Birth::of(word, node).salt;
    for (i, e) in entries.iter().enumerate() {
        write_slot_words(pool, slot_offset(node, i), &e.encode(salt))?;
    }
    let identity: Vec<u8> = (0..entries.len() as u8).collect();
    store_order(pool.atomic_words(node, NODE_WORDS)?, &OrderLine::of(&identity));
    pool.flush(node, HEADER_BYTES + entries.len() as u64 * SLOT_BYTES);
    Ok(node)
}

fn store_order(words: &[AtomicU64], order: &OrderLine) {
    for (a, w) in words[ORDER_WORD..ORDER_WORD + ORDER_WORDS].iter().zip(order.words()) {
        a.store(w, Ordering::Relaxed);
    }
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

/// The raw order line of `node` (for repair and `check`).
pub fn order_line(pool: &Pool, node: u64) -> Result<OrderLine> {
    Ok(OrderLine::load(pool.atomic_words(node, NODE_WORDS)?))
}

/// The writer's handle on one node while it changes it: makes the version
/// word odd on creation and even again on drop.
#[derive(Debug)]
pub struct NodeWriter<'p> {
    pool: &'p Pool,
    node: u64,
    words: &'p [AtomicU64],
    odd: u64,
    order: OrderLine,
    birth: Birth,
}

impl<'p> NodeWriter<'p> {
    /// Locks `node` against readers for the writer of `session`.
    pub fn begin(pool: &'p Pool, node: u64, session: u64) -> Result<NodeWriter<'p>> {
        let words = pool.atomic_words(node, NODE_WORDS)?;
        let old = words[0].load(Ordering::Relaxed);
        let counter = if old >> 48 == session { old & ((1 << 48) - 1) } else { 0 };
        let odd = session << 48 | ((counter + 1) | 1) & ((1 << 48) - 1);
        words[0].store(odd, Ordering::Relaxed);
        fence(Ordering::Release);
        let birth = Birth::of(words[BIRTH_WORD].load(Ordering::Relaxed), node);
        Ok(NodeWriter { pool, node, words, odd, order: OrderLine::load(words), birth })
    }

    /// Inserts `e` at `rank` in key order: into a free slot, which is
    /// flushed (the commit's fence orders it; nothing a committed version
    /// sees is overwritten), then into the order line, which is stored but
    /// **not flushed**: no crash trusts an order line, and the caller
    /// records the node so that its line is flushed when the node dies or
    /// the tree closes (see `lazy_order`).
    pub fn insert(&mut self, rank: usize, e: &Entry) -> Result<()> {
        let n = self.order.len();
        let Some(mask) = self.order.mask() else {
            return Err(CddsError::invariant("malformed order line", self.node));
        };
        if n >= NODE_SLOTS || rank > n {
            return Err(CddsError::invariant(format!("insert at rank {rank} with {n} slots used"), self.node));
        }
        let free = (!mask & ALL_SLOTS).trailing_zeros() as usize;
        if e.start < self.birth.born {
            return Err(CddsError::invariant(
                format!("insert of an entry starting at {} into a node born at {}", e.start, self.birth.born),
                self.node,
            ));
        }
        let off = slot_offset(self.node, free);
        write_slot_words(self.pool, off, &e.encode(self.birth.salt))?;
        self.pool.flush(off, SLOT_BYTES);
        self.order.insert(rank, free as u8);
        store_order(self.words, &self.order);
        Ok(())
    }

    /// Removes the entries at `ranks` of the order line and clears `stray`
    /// slots (used but not named by it): clears their slots and rewrites
    /// the order line, flushed but not fenced. The caller fences before it
    /// frees anything the cleared slots named (a commit's fence, or the GC
    /// step's): until then a crash may bring the removed entries back,
    /// which is harmless only while what they point to is still theirs.
    /// Any mix of old and new slots and order words a crash leaves is one
    /// that `read_checked` and the repair already handle (dead or aborted
    /// entries, a stale order line that is then sorted).
    pub fn remove(&mut self, ranks: &[usize], stray: &[usize]) -> Result<()> {
        let n = self.order.len();
        if !self.order.well_formed() || ranks.iter().any(|&r| r >= n) {
            return Err(CddsError::invariant(format!("remove ranks {ranks:?} with {n} slots used"), self.node));
        }
        let keep: Vec<u8> = (0..n).filter(|r| !ranks.contains(r)).map(|r| self.order.slot(r) as u8).collect();
        let clear: Vec<usize> = ranks.iter().map(|&r| self.order.slot(r)).chain(stray.iter().copied()).collect();
        self.clear_and_publish(OrderLine::of(&keep), &clear)
    }

    /// Clears `clear` (slot indices) and stores `order`, then persists both.
    pub fn rewrite(&mut self, order: OrderLine, clear: &[usize]) -> Result<()> {
        self.clear_and_publish(order, clear)?;
        self.pool.fence();
        Ok(())
    }

    /// [`NodeWriter::rewrite`] without the fence.
    fn clear_and_publish(&mut self, order: OrderLine, clear: &[usize]) -> Result<()> {
        for &s in clear {
            if s >= NODE_SLOTS {
                return Err(CddsError::invariant(format!("slot {s} out of range"), self.node));
            }
            let off = slot_offset(self.node, s);
            write_slot_words(self.pool, off, &[0; SLOT_WORDS])?;
            self.pool.flush(off, SLOT_BYTES);
        }
        self.order = order;
        self.publish_order();
        Ok(())
    }

    fn publish_order(&mut self) {
        store_order(self.words, &self.order);
        self.pool.flush(self.node, HEADER_BYTES);
    }
}

impl Drop for NodeWriter<'_> {
    fn drop(&mut self) {
        self.words[0].store(self.odd + 1, Ordering::Release);
    }
}

/// Stores a new `end` word into slot `slot` (one failure-atomic store) and
/// flushes it; the commit's fence orders it.
pub fn set_end(pool: &Pool, node: u64, slot: usize, e: &Entry, end: u64, moved: bool) -> Result<()> {
    let off = slot_offset(node, slot) + 8;
    pool.store_u64(off, e.end_word(birth(pool, node)?.salt, end, moved))?;
    pool.flush(off, 8);
    Ok(())
}

/// The raw state of every slot, by slot index (for the writer, recovery
/// and `check`).
pub fn raw_slots(pool: &Pool, node: u64) -> Result<Vec<Slot>> {
    let b = birth(pool, node)?;
    let mut out = Vec::with_capacity(NODE_SLOTS);
    for i in 0..NODE_SLOTS {
        out.push(b.decode(i, &read_slot_words(pool, slot_offset(node, i))?));
    }
    Ok(out)
}

/// An optimistic view of a node for the read fast path (Persistent
/// Masstree style): the version word and the order line are read first,
/// slots are read in place with atomic loads only where the binary search
/// looks, and [`RawNode::validate`] re-reads the version word; a changed
/// word means a writer changed the node meanwhile and the caller retries
/// it. Positions are ranks in key order.
#[derive(Debug, Default)]
pub struct RawNode<'p> {
    words: &'p [AtomicU64],
    version: u64,
    order: OrderLine,
    level: u8,
    plen: usize,
}

impl<'p> RawNode<'p> {
    /// Starts reading `node`: waits out a writer, reads level and order line.
    pub fn load(&mut self, pool: &'p Pool, node: u64, session: u64) -> Result<()> {
        let words = pool.atomic_words(node, NODE_WORDS)?;
        // The binary search probes ~5 slots in different lines, each load
        // depending on the last: fetch the whole node at once instead.
        pool.prefetch(node, NODE_BYTES);
        loop {
            let v1 = wait_unlocked(&words[0], session);
            let head = words[1].load(Ordering::Relaxed);
            // Not validated here (a loop per node of every lookup): a
            // clean node's line is well formed, and `slot_word` clamps every
            // index, so a damaged one gives a wrong answer, never an access
            // outside the node; `check` reports it.
            let order = OrderLine::load(words);
            if head >> 32 != NODE_MAGIC {
                fence(Ordering::Acquire);
                if words[0].load(Ordering::Relaxed) != v1 {
                    continue;
                }
                check_magic(head, node)?;
            }
            *self = RawNode { words, version: v1, order, level: level_of(head), plen: plen_of(head) };
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

    /// Bytes every key of the node's range shares (see `plen_of`).
    #[inline]
    pub fn plen(&self) -> usize {
        self.plen
    }

    /// Entries in the node.
    #[inline]
    pub fn used(&self) -> usize {
        self.order.len()
    }

    /// For the writer: an error unless the order line names distinct slots
    /// of this node (what [`read_own`] checks before the writer trusts it;
    /// readers skip it, clamping instead).
    pub fn check_order(&self, node: u64) -> Result<()> {
        if self.order.well_formed() {
            Ok(())
        } else {
            Err(CddsError::invariant("malformed order line", node))
        }
    }

    /// The slot index at rank `i` (< `used`), clamped into the node.
    #[inline]
    pub fn slot(&self, i: usize) -> usize {
        self.order.slot(i).min(NODE_SLOTS - 1)
    }

    /// The entry at rank `i` (< `used`) for the writer, whose nodes cannot
    /// change under it: a slot that does not decode is an error here, not a
    /// race (as [`read_own`] reports it).
    pub fn entry_checked(&self, i: usize, node: u64) -> Result<Entry> {
        let s = self.order.slot(i);
        if s >= NODE_SLOTS {
            return Err(CddsError::invariant("malformed order line", node));
        }
        match Entry::decode_unchecked(&self.words_at(8 + s * SLOT_WORDS)) {
            Slot::Valid(e) => Ok(e),
            _ => Err(CddsError::invariant(format!("the order line names empty slot {s}"), node)),
        }
    }

    /// The four words of the slot starting at word `b`.
    #[inline]
    fn words_at(&self, b: usize) -> [u64; SLOT_WORDS] {
        [
            self.words[b].load(Ordering::Relaxed),
            self.words[b + 1].load(Ordering::Relaxed),
            self.words[b + 2].load(Ordering::Relaxed),
            self.words[b + 3].load(Ordering::Relaxed),
        ]
    }

    /// The first word of the slot at rank `i`.
    #[inline]
    fn slot_word(&self, i: usize) -> usize {
        8 + self.order.slot(i).min(NODE_SLOTS - 1) * SLOT_WORDS
    }

    /// The key prefix word of the entry at rank `i` (< `used`).
    #[inline]
    pub fn prefix(&self, i: usize) -> u64 {
        self.words[self.slot_word(i) + 3].load(Ordering::Relaxed)
    }

    /// The entry at rank `i` (< `used`).
    #[inline]
    pub fn entry(&self, i: usize) -> Entry {
        match Entry::decode_unchecked(&self.words_at(self.slot_word(i))) {
            Slot::Valid(e) => e,
            // Raced with a writer: a start above every version is invisible,
            // and validation fails.
            _ => Entry { start: u64::MAX, end: 0, moved: false, rec: 16, prefix: 0 },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tembo_pmem::PoolOptions;

    /// What a crash can leave in the slots a node did not persist at birth
    /// reads as torn: a slot of an earlier node in the block (another
    /// salt), and, whatever its checks, one that starts before the node
    /// was born; an entry inserted since reads back.
    #[test]
    fn stale_slots_past_the_filled_ones_read_as_torn() {
        let pool = Pool::simulated(&PoolOptions { size: 4 << 20, ..PoolOptions::default() }).expect("pool");
        let made = [Entry::new(10, 0x1000, 1), Entry::new(10, 0x2000, 2)];
        let n = create(&pool, 0, 0, 10, &made).expect("node");
        let b = birth(&pool, n).expect("birth");
        assert!(!b.unpersisted(1) && b.unpersisted(2));
        let earlier = Birth::of(Birth::word(4, 30), n);
        write_slot_words(&pool, slot_offset(n, 5), &Entry::new(4, 0x3000, 3).encode(earlier.salt())).unwrap();
        write_slot_words(&pool, slot_offset(n, 6), &Entry::new(9, 0x4000, 4).encode(b.salt())).unwrap();
        write_slot_words(&pool, slot_offset(n, 7), &Entry::new(12, 0x5000, 5).encode(b.salt())).unwrap();
        let slots = raw_slots(&pool, n).expect("slots");
        assert_eq!(slots[0], Slot::Valid(made[0]));
        assert_eq!(slots[5], Slot::Torn, "a slot checked with an earlier node's salt");
        assert_eq!(slots[6], Slot::Torn, "a slot starting before the node's birth");
        assert_eq!(slots[7], Slot::Valid(Entry::new(12, 0x5000, 5)));
        assert_eq!(slots[8], Slot::Empty);
        let mut w = NodeWriter::begin(&pool, n, 1).expect("writer");
        assert!(w.insert(0, &Entry::new(9, 0x6000, 0)).is_err(), "nothing starting before birth is inserted");
    }

    #[test]
    fn order_line_round_trip_and_insert() {
        let mut o = OrderLine::of(&[3, 0, 7]);
        assert_eq!(OrderLine::from_words(&o.words()), o);
        assert_eq!(o.mask(), Some(1 << 3 | 1 | 1 << 7));
        o.insert(1, 9);
        assert_eq!(o.slots(), &[3, 9, 0, 7]);
        o.insert(4, 1);
        assert_eq!(o.slots(), &[3, 9, 0, 7, 1]);
        let full: Vec<u8> = (0..NODE_SLOTS as u8).rev().collect();
        let f = OrderLine::of(&full);
        assert_eq!(OrderLine::from_words(&f.words()).slots(), &full[..]);
        assert_eq!(f.mask(), Some(ALL_SLOTS));
    }

    #[test]
    fn malformed_order_lines_are_caught() {
        assert_eq!(OrderLine::of(&[1, 1]).mask(), None, "duplicate slot");
        assert_eq!(OrderLine::of(&[30]).mask(), None, "slot out of range");
        let mut o = OrderLine::default();
        o.bytes[0] = 31;
        assert_eq!(o.mask(), None, "count out of range");
        assert_eq!(o.len(), NODE_SLOTS, "a bad count never indexes past the line");
    }
}
