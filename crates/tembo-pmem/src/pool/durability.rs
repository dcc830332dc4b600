//! The persist primitives (`flush`, `fence`, `persist`) and how each
//! backend (hardware flushes, msync, volatile, simulator) carries them out.

use super::*;

impl Pool {
    // ----- persist primitives ---------------------------------------------

    /// Writes back the cache lines of `[offset, offset + len)` (no wait).
    /// Does nothing in ordering mode `none` and in volatile pools.
    #[inline]
    pub fn flush(&self, offset: PoolOffset, len: u64) {
        if self.ordering == OrderingMode::None {
            return;
        }
        self.flush_always(offset, len)
    }

    /// Waits for every earlier flush: the durability point. In msync mode it
    /// also `msync`s the pages flushed since the last fence.
    #[inline]
    pub fn fence(&self) {
        if self.ordering == OrderingMode::None {
            return;
        }
        self.fence_always()
    }

    /// `flush` + `fence`.
    #[inline]
    pub fn persist(&self, offset: PoolOffset, len: u64) {
        self.flush(offset, len);
        self.fence();
    }

    /// Like [`Pool::flush`] but also in ordering mode `none`: used for the
    /// pool's own metadata, which must stay openable whatever is measured.
    #[inline]
    pub(crate) fn flush_always(&self, offset: PoolOffset, len: u64) {
        let size = self.size();
        let end = offset.saturating_add(len).min(size);
        if offset >= end {
            debug_assert!(len == 0, "flush outside the pool: {offset:#x}+{len}");
            return;
        }
        let len = end - offset;
        match &self.backend {
            Backend::Hardware => {
                // SAFETY: [offset, end) is below the pool size, so it lies in
                // the mapped part of the region; `instr` was checked available.
                let lines =
                    unsafe { persist::flush_range(self.instr, self.region.base().add(offset as usize), len as usize) };
                self.counters.add_flush_lines(lines);
            }
            Backend::Msync { dirty, .. } => {
                let first = offset / CACHE_LINE_BYTES;
                let last = (end - 1) / CACHE_LINE_BYTES;
                self.counters.add_flush_lines(last - first + 1);
                dirty.lock().push((offset, len));
            }
            Backend::Volatile => {}
            Backend::Sim(sim) => {
                let lines = sim.flush(offset, len);
                self.counters.add_flush_lines(lines);
            }
        }
    }

    #[inline]
    pub(crate) fn fence_always(&self) {
        match &self.backend {
            Backend::Hardware => {
                persist::fence(self.instr);
                self.counters.add_fence();
            }
            Backend::Msync { dirty, fencing } => {
                // A thread whose flushed ranges another thread's fence took
                // must wait for that fence's msyncs before it may go on.
                let _fencing = fencing.lock();
                let ranges = std::mem::take(&mut *dirty.lock());
                self.counters.add_fence();
                // One msync for the span of every range: each call ends in
                // a flush of the disk's cache (a round trip of ~0.2 ms),
                // while writing the clean or unflushed pages between them
                // costs little — the kernel skips clean pages, and a page
                // written early is what the kernel's own writeback may do
                // at any moment anyway.
                if let Some((off, len)) = page_span(&ranges) {
                    // An msync failure means the data may not be durable: the
                    // only honest reaction is to stop before acknowledging.
                    if let Err(e) = self.region.msync(off as usize, len as usize) {
                        panic_on_lost_durability(&e);
                    }
                    self.counters.add_msync();
                }
            }
            Backend::Volatile => {}
            Backend::Sim(sim) => {
                self.counters.add_fence();
                sim.fence(self);
            }
        }
    }

    #[inline]
    pub(crate) fn persist_always(&self, offset: PoolOffset, len: u64) {
        self.flush_always(offset, len);
        self.fence_always();
    }
}

/// The page-aligned range covering every one of `ranges` (`None` for none).
pub(super) fn page_span(ranges: &[(u64, u64)]) -> Option<(u64, u64)> {
    let page = map::page_size() as u64;
    let start = ranges.iter().map(|&(off, _)| off).min()? / page * page;
    let end = ranges.iter().map(|&(off, len)| off + len).max()?.div_ceil(page) * page;
    Some((start, end - start))
}

#[cold]
pub(super) fn panic_on_lost_durability(e: &PmemError) -> ! {
    // A write that cannot be made durable must never be acknowledged; the
    // fence has no error channel, so the process stops here, before any reply.
    eprintln!("tembo: fatal: msync failed, durability cannot be guaranteed: {e}");
    std::process::abort()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn page_span_covers_every_range() {
        let p = map::page_size() as u64;
        assert_eq!(page_span(&[]), None);
        assert_eq!(page_span(&[(p * 3 + 5, 10), (0, 1), (p * 3 + 100, 8), (p, 1)]), Some((0, 4 * p)));
        assert_eq!(page_span(&[(p * 7 + 1, 2 * p)]), Some((7 * p, 3 * p)));
    }
}
