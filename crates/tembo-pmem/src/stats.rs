//! Write statistics: what the pool did to make data durable.
//!
//! Counters are relaxed atomics: exact when one thread persists, never torn,
//! and cheap next to the flush they count (a few ns against ~100 ns).

use std::sync::atomic::{AtomicU64, Ordering};

#[derive(Debug, Default)]
pub(crate) struct Counters {
    flush_lines: AtomicU64,
    fences: AtomicU64,
    msyncs: AtomicU64,
}

impl Counters {
    #[inline]
    pub(crate) fn add_flush_lines(&self, n: u64) {
        self.flush_lines.fetch_add(n, Ordering::Relaxed);
    }
    #[inline]
    pub(crate) fn add_fence(&self) {
        self.fences.fetch_add(1, Ordering::Relaxed);
    }
    #[inline]
    pub(crate) fn add_msync(&self) {
        self.msyncs.fetch_add(1, Ordering::Relaxed);
    }
    pub(crate) fn snapshot(&self) -> WriteStats {
        let flush_count = self.flush_lines.load(Ordering::Relaxed);
        WriteStats {
            flush_count,
            fence_count: self.fences.load(Ordering::Relaxed),
            persisted_bytes: flush_count * crate::CACHE_LINE_BYTES,
            msync_count: self.msyncs.load(Ordering::Relaxed),
        }
    }
    pub(crate) fn reset(&self) {
        self.flush_lines.store(0, Ordering::Relaxed);
        self.fences.store(0, Ordering::Relaxed);
        self.msyncs.store(0, Ordering::Relaxed);
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
            flush_count: self.flush_count - earlier.flush_count,
            fence_count: self.fence_count - earlier.fence_count,
            persisted_bytes: self.persisted_bytes - earlier.persisted_bytes,
            msync_count: self.msync_count - earlier.msync_count,
        }
    }
}
