//! Order lines persisted lazily: an insert stores a node's new order line
//! but does not flush it; the node is remembered here instead, and its
//! header line is flushed when the node dies, when its generation of
//! waiting nodes drains, or when the tree closes.
//!
//! Why this is safe: no crash ever trusts an order line. After an unclean
//! shutdown every reader takes `node::read_checked` (the order line is
//! used only if it names exactly the valid slots, and the entries are
//! sorted by key otherwise), every writer repairs a node before it changes
//! it, and the background recovery rebuilds the order line of every node
//! visible at the aborted version before the fast paths resume (`recover`).
//! The slots themselves are flushed by every insert, so what a commit
//! makes durable is exactly what it made durable before: the entries.
//!
//! Two kinds of node are not reached by that walk, and get their order
//! line flushed here:
//! - a node that dies (its parent entry ends, or it stops being the root)
//!   stays readable by the named snapshots taken before, whose readers use
//!   the fast path once recovery is over: the batch that kills it flushes
//!   its header line before its commit ([`DirtyOrders::settle`]);
//! - a clean close lets the next open trust every order line: the tree
//!   flushes them all before the pool sets its clean flag
//!   ([`DirtyOrders::flush_all`]).
//!
//! What it saves: one flushed line of every put into a leaf with room,
//! which is most puts (11.3 → 10.3 lines per put at 1M x 256 B). A node
//! put into again before it is flushed costs nothing more.

use std::sync::atomic::Ordering;

use parking_lot::Mutex;
use tembo_pmem::Pool;

use crate::error::Result;

/// Bytes of a node's header line, which holds its order line.
const HEADER_BYTES: u64 = 64;
/// Header word 7: the tag of a node whose order line waits.
const TAG_OFFSET: u64 = 56;
/// Nodes listed per generation: a generation that reaches it is drained
/// (a few per insert) while the next one fills.
const GENERATION: usize = 1 << 17;
/// Lines of the draining generation flushed per insert.
const DRAIN: usize = 16;

/// Nodes whose order line was changed and not yet flushed.
///
/// Why tags and lists, not a set: a set of node offsets cost every put a
/// hashed insert into a table that, under flat combining, moves between
/// cores with the writer. A node is listed when its header's word 7 does
/// not hold the current generation's tag; the tag is then stored there, in
/// the line the insert has just written, and the offset appended to a
/// list. Tags are random 63-bit values with the top bit set, fresh for
/// every generation and every open, so a word left by an earlier session
/// or a new node's zero never passes for one. Listed entries are only ever
/// flushed, never read or written: a node may be freed and its block
/// reused while it is listed, and a flush of a line harms nothing.
#[derive(Debug)]
pub(crate) struct DirtyOrders {
    lists: Mutex<Lists>,
}

#[derive(Debug)]
struct Lists {
    tag: u64,
    previous_tag: u64,
    /// Nodes tagged with `tag`.
    current: Vec<u64>,
    /// Nodes tagged with `previous_tag` whose lines are not flushed yet.
    draining: Vec<u64>,
    /// Nodes per generation ([`GENERATION`]; smaller in tests).
    generation: usize,
}

fn fresh_tag() -> u64 {
    rand::random::<u64>() | 1 << 63
}

impl Default for DirtyOrders {
    fn default() -> DirtyOrders {
        DirtyOrders::with_generation(GENERATION)
    }
}

impl DirtyOrders {
    fn with_generation(generation: usize) -> DirtyOrders {
        let lists = Lists {
            tag: fresh_tag(),
            previous_tag: fresh_tag(),
            current: Vec::new(),
            draining: Vec::new(),
            generation,
        };
        DirtyOrders { lists: Mutex::new(lists) }
    }

    /// `node`'s order line was stored and not flushed (the writer holds
    /// the node: it is live).
    pub(crate) fn note(&self, pool: &Pool, node: u64) -> Result<()> {
        let word = pool.atomic_u64(node + TAG_OFFSET)?;
        let mut l = self.lists.lock();
        for _ in 0..DRAIN {
            match l.draining.pop() {
                Some(n) => pool.flush(n, HEADER_BYTES),
                None => break,
            }
        }
        if word.load(Ordering::Relaxed) == l.tag {
            return Ok(());
        }
        word.store(l.tag, Ordering::Relaxed);
        l.current.push(node);
        if l.current.len() >= l.generation {
            // Drained at DRAIN per insert, the previous generation is
            // empty by now; what is left of it is flushed here.
            for n in std::mem::take(&mut l.draining) {
                pool.flush(n, HEADER_BYTES);
            }
            l.draining = std::mem::take(&mut l.current);
            l.previous_tag = l.tag;
            l.tag = fresh_tag();
        }
        Ok(())
    }

    /// `node` is dying (its parent entry ends, or it stops being the
    /// root; it is still live): flushes its header line if its order line
    /// waits, and clears its tag. The caller's commit fence makes the line
    /// durable.
    pub(crate) fn settle(&self, pool: &Pool, node: u64) -> Result<()> {
        let word = pool.atomic_u64(node + TAG_OFFSET)?;
        let l = self.lists.lock();
        let w = word.load(Ordering::Relaxed);
        if w == l.tag || w == l.previous_tag {
            word.store(0, Ordering::Relaxed);
            pool.flush(node, HEADER_BYTES);
        }
        Ok(())
    }

    /// Flushes every waiting order line (the caller fences: the pool's
    /// close does, before its clean flag).
    pub(crate) fn flush_all(&self, pool: &Pool) {
        let mut l = self.lists.lock();
        let (current, draining) = (std::mem::take(&mut l.current), std::mem::take(&mut l.draining));
        for n in current.into_iter().chain(draining) {
            pool.flush(n, HEADER_BYTES);
        }
        l.previous_tag = l.tag;
        l.tag = fresh_tag();
    }

    /// How many nodes are listed (for tests).
    #[cfg(test)]
    pub(crate) fn waiting(&self) -> usize {
        let l = self.lists.lock();
        l.current.len() + l.draining.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tembo_pmem::PoolOptions;

    #[test]
    fn a_full_generation_drains_while_the_next_fills() {
        let pool = Pool::simulated(&PoolOptions { size: 8 << 20, ..PoolOptions::default() }).expect("pool");
        let d = DirtyOrders::with_generation(4);
        let nodes: Vec<u64> = (0..40).map(|_| pool.alloc(1024).expect("alloc")).collect();
        for &n in &nodes[..4] {
            d.note(&pool, n).unwrap();
        }
        assert_eq!(d.waiting(), 4, "the first generation is full and now drains");
        let before = pool.write_stats().flush_count;
        // A node of the draining generation changes again: listed anew.
        d.note(&pool, nodes[0]).unwrap();
        assert_eq!(pool.write_stats().flush_count, before + 4, "the drain flushed the old generation");
        assert_eq!(d.waiting(), 1);
        // Its tag is the new generation's: a death flushes it.
        d.settle(&pool, nodes[0]).unwrap();
        assert_eq!(pool.write_stats().flush_count, before + 5);
        for &n in &nodes[4..40] {
            d.note(&pool, n).unwrap();
        }
        let listed = d.waiting();
        let before = pool.write_stats().flush_count;
        d.flush_all(&pool);
        assert_eq!(pool.write_stats().flush_count, before + listed as u64);
        assert_eq!(d.waiting(), 0);
    }

    #[test]
    fn nodes_are_listed_once_and_flushed_when_they_die_or_at_the_close() {
        let pool = Pool::simulated(&PoolOptions { size: 8 << 20, ..PoolOptions::default() }).expect("pool");
        let d = DirtyOrders::default();
        let a = pool.alloc(1024).expect("alloc");
        let b = pool.alloc(1024).expect("alloc");
        d.note(&pool, a).unwrap();
        d.note(&pool, b).unwrap();
        d.note(&pool, a).unwrap();
        assert_eq!(d.waiting(), 2, "a listed node is not listed twice");
        let before = pool.write_stats().flush_count;
        d.settle(&pool, a).unwrap();
        assert_eq!(pool.write_stats().flush_count, before + 1);
        d.settle(&pool, a).unwrap();
        assert_eq!(pool.write_stats().flush_count, before + 1, "a settled node is not flushed twice");
        assert_eq!(pool.load_u64(a + TAG_OFFSET).unwrap(), 0, "its tag is cleared");
        d.flush_all(&pool);
        assert_eq!(d.waiting(), 0);
        assert_eq!(pool.write_stats().flush_count, before + 3, "every listed node is flushed at the close");
        d.note(&pool, a).unwrap();
        assert_eq!(d.waiting(), 1, "a node flushed at a close is listed again when it changes");
    }
}
