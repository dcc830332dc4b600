//! Write statistics: what the pool did to make data durable.
//!
//! Counting must not cost what it counts. A locked read-modify-write
//! (`lock xadd`) after a CLWB waits for the write-back like a fence does,
//! which made `persist` of one line ~20% slower than the raw instructions.
//! So each thread counts in its own cache-line-sized shard with a plain
//! relaxed load + store (no lock prefix), and a snapshot sums the shards.
//! Threads are spread over [`SHARDS`] shards round robin: the counts are
//! exact while at most that many threads persist into one pool; beyond that
//! two threads may share a shard and an increment can be lost (never torn).

use std::cell::Cell;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

/// Number of counter shards (threads that count without ever colliding).
pub(crate) const SHARDS: usize = 64;

#[derive(Debug, Default)]
#[repr(align(128))]
struct Shard {
    flush_lines: AtomicU64,
    fences: AtomicU64,
    msyncs: AtomicU64,
}

impl Shard {
    #[inline]
    fn bump(counter: &AtomicU64, n: u64) {
        // Only this thread writes this shard (see the module doc): a plain
        // load + store is exact and avoids the lock prefix.
        counter.store(counter.load(Ordering::Relaxed).wrapping_add(n), Ordering::Relaxed);
    }
}

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

#[derive(Debug)]
pub(crate) struct Counters {
    shards: Box<[Shard]>,
}

impl Default for Counters {
    fn default() -> Self {
        Counters { shards: (0..SHARDS).map(|_| Shard::default()).collect() }
    }
}

impl Counters {
    #[inline]
    fn shard(&self) -> &Shard {
        &self.shards[my_shard()]
    }
    #[inline]
    pub(crate) fn add_flush_lines(&self, n: u64) {
        Shard::bump(&self.shard().flush_lines, n);
    }
    #[inline]
    pub(crate) fn add_fence(&self) {
        Shard::bump(&self.shard().fences, 1);
    }
    #[inline]
    pub(crate) fn add_msync(&self) {
        Shard::bump(&self.shard().msyncs, 1);
    }
    pub(crate) fn snapshot(&self) -> WriteStats {
        let sum = |f: fn(&Shard) -> &AtomicU64| -> u64 {
            self.shards.iter().map(|s| f(s).load(Ordering::Relaxed)).fold(0, u64::wrapping_add)
        };
        let flush_count = sum(|s| &s.flush_lines);
        WriteStats {
            flush_count,
            fence_count: sum(|s| &s.fences),
            persisted_bytes: flush_count * crate::CACHE_LINE_BYTES,
            msync_count: sum(|s| &s.msyncs),
        }
    }
    /// Zeroes every shard. Racy against concurrent persisters by nature: a
    /// reset while others write gives "roughly since now".
    pub(crate) fn reset(&self) {
        for s in self.shards.iter() {
            s.flush_lines.store(0, Ordering::Relaxed);
            s.fences.store(0, Ordering::Relaxed);
            s.msyncs.store(0, Ordering::Relaxed);
        }
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
