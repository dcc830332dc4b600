//! Write statistics: what the pool did to make data durable, and the
//! per-thread sharded counters they are kept in ([`ShardedCounts`], also
//! used by the transaction heap).
//!
//! Counting must not cost what it counts. Each thread counts in its own
//! cache-line-sized shard, so counting scales with cores, and a snapshot
//! sums the shards. Threads are spread over [`SHARDS`] shards round robin.

use std::cell::Cell;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

/// Number of counter shards (threads that count without ever colliding).
pub(crate) const SHARDS: usize = 64;

/// `K` counters that many threads bump without sharing a cache line: each
/// thread counts in its own 128-byte-aligned shard and a read sums the
/// shards. [`ShardedCounts::add`] is an exact atomic add on a line no
/// other thread writes (cheap, and uncontended however many cores bump).
#[derive(Debug)]
pub struct ShardedCounts<const K: usize> {
    shards: Box<[Shard<K>]>,
}

#[derive(Debug)]
#[repr(align(128))]
struct Shard<const K: usize>([AtomicU64; K]);

static NEXT_SHARD: AtomicUsize = AtomicUsize::new(0);

thread_local! {
    static MY_SHARD: Cell<usize> = const { Cell::new(usize::MAX) };
}

#[inline]
fn my_shard() -> usize {
    MY_SHARD.with(|c| {
        let s = c.get();
        if s != usize::MAX {
            return s;
        }
        let s = NEXT_SHARD.fetch_add(1, Ordering::Relaxed) % SHARDS;
        c.set(s);
        s
    })
}

impl<const K: usize> Default for ShardedCounts<K> {
    fn default() -> Self {
        ShardedCounts { shards: (0..SHARDS).map(|_| Shard(std::array::from_fn(|_| AtomicU64::new(0)))).collect() }
    }
}

impl<const K: usize> ShardedCounts<K> {
    /// Adds `n` to counter `i` (`i < K`).
    #[inline]
    pub fn add(&self, i: usize, n: u64) {
        self.shards[my_shard()].0[i].fetch_add(n, Ordering::Relaxed);
    }

    /// Adds `n` to counter `i` with a plain load + store (no lock prefix).
    /// A locked read-modify-write after a CLWB waits for the write-back
    /// like a fence does, which made `persist` of one line ~20% slower
    /// than the raw instructions. Exact while at most [`SHARDS`] threads
    /// count at once; beyond that two threads may share a shard and an
    /// increment can be lost (never torn).
    #[inline]
    pub(crate) fn add_unlocked(&self, i: usize, n: u64) {
        let c = &self.shards[my_shard()].0[i];
        c.store(c.load(Ordering::Relaxed).wrapping_add(n), Ordering::Relaxed);
    }

    /// Counter `i` summed over the shards.
    pub fn get(&self, i: usize) -> u64 {
        self.shards.iter().map(|s| s.0[i].load(Ordering::Relaxed)).fold(0, u64::wrapping_add)
    }

    /// Zeroes every counter. Racy against concurrent adders by nature: a
    /// reset while others count gives "roughly since now".
    pub fn reset(&self) {
        for s in self.shards.iter() {
            for c in &s.0 {
                c.store(0, Ordering::Relaxed);
            }
        }
    }
}

const FLUSH_LINES: usize = 0;
const FENCES: usize = 1;
const MSYNCS: usize = 2;

/// The pool's write counters (bumped without a lock prefix: see
/// [`ShardedCounts::add_unlocked`]).
#[derive(Debug, Default)]
pub(crate) struct Counters(ShardedCounts<3>);

impl Counters {
    #[inline]
    pub(crate) fn add_flush_lines(&self, n: u64) {
        self.0.add_unlocked(FLUSH_LINES, n);
    }
    #[inline]
    pub(crate) fn add_fence(&self) {
        self.0.add_unlocked(FENCES, 1);
    }
    #[inline]
    pub(crate) fn add_msync(&self) {
        self.0.add_unlocked(MSYNCS, 1);
    }
    pub(crate) fn snapshot(&self) -> WriteStats {
        let flush_count = self.0.get(FLUSH_LINES);
        WriteStats {
            flush_count,
            fence_count: self.0.get(FENCES),
            persisted_bytes: flush_count * crate::CACHE_LINE_BYTES,
            msync_count: self.0.get(MSYNCS),
        }
    }
    pub(crate) fn reset(&self) {
        self.0.reset()
    }
}

/// A snapshot of a pool's write statistics since open (or the last reset).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct WriteStats {
    /// Cache lines flushed.
    pub flush_count: u64,
    /// Fences executed.
    pub fence_count: u64,
    /// Bytes written back by flushes (`flush_count` × 64).
    pub persisted_bytes: u64,
    /// `msync` calls (msync mode only).
    pub msync_count: u64,
}

impl WriteStats {
    /// Component-wise difference `self - earlier`.
    pub fn since(&self, earlier: &WriteStats) -> WriteStats {
        WriteStats {
            flush_count: self.flush_count.saturating_sub(earlier.flush_count),
            fence_count: self.fence_count.saturating_sub(earlier.fence_count),
            persisted_bytes: self.persisted_bytes.saturating_sub(earlier.persisted_bytes),
            msync_count: self.msync_count.saturating_sub(earlier.msync_count),
        }
    }
}
