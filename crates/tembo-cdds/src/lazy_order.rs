//! Order lines persisted lazily: an insert stores a node's new order line
//! but does not flush it; the node is remembered here instead, and its
//! header line is flushed when the node dies, when too many nodes wait, or
//! when the tree closes.
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

use parking_lot::Mutex;
use tembo_pmem::{OffsetSet, Pool};

/// Bytes of a node's header line, which holds its order line.
const HEADER_BYTES: u64 = 64;
/// Most nodes waiting; beyond it the oldest few are flushed per insert, so
/// the set stays a few MiB and a close flushes at most this many lines.
const MAX_WAITING: usize = 1 << 18;
/// Nodes flushed per insert once [`MAX_WAITING`] is reached.
const EVICT: usize = 16;

/// Nodes whose order line was changed and not yet flushed.
#[derive(Debug, Default)]
pub(crate) struct DirtyOrders {
    nodes: Mutex<OffsetSet>,
}

impl DirtyOrders {
    /// `node`'s order line was stored and not flushed.
    pub(crate) fn note(&self, pool: &Pool, node: u64) {
        let mut nodes = self.nodes.lock();
        if nodes.insert(node) && nodes.len() > MAX_WAITING {
            let victims: Vec<u64> = nodes.iter().copied().filter(|&n| n != node).take(EVICT).collect();
            for n in victims {
                nodes.remove(&n);
                pool.flush(n, HEADER_BYTES);
            }
        }
    }

    /// `node` is dying (or its order line must be durable for another
    /// reason): flushes its header line if it waits. The caller's commit
    /// fence makes it durable.
    pub(crate) fn settle(&self, pool: &Pool, node: u64) {
        if self.nodes.lock().remove(&node) {
            pool.flush(node, HEADER_BYTES);
        }
    }

    /// Flushes every waiting order line (the caller fences: the pool's
    /// close does, before its clean flag).
    pub(crate) fn flush_all(&self, pool: &Pool) {
        for n in self.nodes.lock().drain() {
            pool.flush(n, HEADER_BYTES);
        }
    }

    /// How many order lines wait (for tests).
    #[cfg(test)]
    pub(crate) fn waiting(&self) -> usize {
        self.nodes.lock().len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tembo_pmem::PoolOptions;

    #[test]
    fn settle_and_flush_all_empty_the_set() {
        let pool = Pool::simulated(&PoolOptions { size: 8 << 20, ..PoolOptions::default() }).expect("pool");
        let d = DirtyOrders::default();
        let a = pool.alloc(1024).expect("alloc");
        let b = pool.alloc(1024).expect("alloc");
        d.note(&pool, a);
        d.note(&pool, b);
        d.note(&pool, a);
        assert_eq!(d.waiting(), 2);
        let before = pool.write_stats().flush_count;
        d.settle(&pool, a);
        assert_eq!(d.waiting(), 1);
        assert_eq!(pool.write_stats().flush_count, before + 1);
        d.settle(&pool, a);
        assert_eq!(pool.write_stats().flush_count, before + 1, "a settled node is not flushed twice");
        d.flush_all(&pool);
        assert_eq!(d.waiting(), 0);
        assert_eq!(pool.write_stats().flush_count, before + 2);
    }
}
