//! Checked access to pool memory: every read, write and atomic word goes
//! through a bounds check against the current pool size.

use std::sync::atomic::{AtomicU64, Ordering};

use super::*;

impl Pool {
    // ----- memory access ----------------------------------------------------

    /// Checks that `[offset, offset + len)` lies in the heap.
    ///
    /// # Errors
    /// [`PmemError::BadReference`].
    #[inline]
    pub fn check_range(&self, offset: PoolOffset, len: u64) -> Result<()> {
        let end = offset.checked_add(len);
        match end {
            Some(end) if offset >= HEADER_BYTES && end <= self.size() => Ok(()),
            _ => Err(PmemError::BadReference { what: "range outside the heap", offset, len }),
        }
    }

    /// A raw pointer to `[offset, offset + len)`, checked to lie in the heap.
    /// Engines that build typed views on it carry their own `unsafe` and
    /// `// SAFETY:` reasoning; the pointer stays valid while the pool lives.
    ///
    /// # Errors
    /// [`PmemError::BadReference`].
    #[inline]
    pub fn raw(&self, offset: PoolOffset, len: u64) -> Result<NonNull<u8>> {
        self.check_range(offset, len)?;
        // SAFETY: offset < size <= reserved, so the result is inside the region
        // and not null (the region's base is not null).
        Ok(unsafe { NonNull::new_unchecked(self.region.base().add(offset as usize)) })
    }

    /// [`Pool::prefetch`] for memory outside the pool: the first `max`
    /// bytes of `bytes` (a caller's value that a write will copy into the
    /// pool after a tree descent: loaded meanwhile, its misses overlap the
    /// descent's instead of following them).
    #[inline]
    pub fn prefetch_slice(bytes: &[u8], max: usize) {
        Self::prefetch_memory(bytes.as_ptr(), bytes.len().min(max));
    }

    /// [`Pool::prefetch_slice`] for the line holding one value in DRAM (an
    /// entry of a volatile index that a batch of frees will read).
    #[inline]
    pub fn prefetch_value<T>(value: &T) {
        Self::prefetch_memory((value as *const T).cast(), 1);
    }

    /// Prefetches the lines of `len` bytes from `start`, the bytes of a
    /// live Rust value.
    #[inline]
    fn prefetch_memory(start: *const u8, len: usize) {
        #[cfg(target_arch = "x86_64")]
        {
            let start = start as usize;
            let mut line = start & !63;
            while line < start + len {
                // SAFETY: prefetching has no architectural effect besides
                // the cache and never faults; the line holds bytes of a
                // live slice. SSE is part of x86-64.
                unsafe { std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(line as *const i8) };
                line += 64;
            }
        }
        #[cfg(not(target_arch = "x86_64"))]
        let _ = (start, len);
    }

    /// Asks the CPU to start loading the cache lines of `[offset, offset +
    /// len)` into its caches, without waiting. A search that will probe a
    /// few lines of a block it has not read yet (a tree node) pays one
    /// memory latency for all of them instead of one per dependent probe
    /// (Masstree prefetches its nodes the same way). A hint only: a range
    /// outside the heap is ignored.
    #[inline]
    pub fn prefetch(&self, offset: PoolOffset, len: u64) {
        let Ok(p) = self.raw(offset, len) else { return };
        #[cfg(target_arch = "x86_64")]
        {
            let base = p.as_ptr() as usize & !63;
            let end = p.as_ptr() as usize + len as usize;
            let mut line = base;
            while line < end {
                // SAFETY: prefetching has no architectural effect besides
                // the cache (it never faults); the line lies in the mapped
                // heap, checked by `raw` above. SSE is part of x86-64.
                unsafe { std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(line as *const i8) };
                line += 64;
            }
        }
        #[cfg(not(target_arch = "x86_64"))]
        let _ = p;
    }

    /// Copies pool bytes at `offset` into `dst`.
    ///
    /// # Errors
    /// [`PmemError::BadReference`].
    pub fn read(&self, offset: PoolOffset, dst: &mut [u8]) -> Result<()> {
        let p = self.raw(offset, dst.len() as u64)?;
        // SAFETY: the source range is mapped (checked by `raw`), `dst` is a
        // distinct Rust allocation, so the ranges do not overlap.
        unsafe { std::ptr::copy_nonoverlapping(p.as_ptr(), dst.as_mut_ptr(), dst.len()) };
        Ok(())
    }

    /// Stores `src` at `offset` (not yet durable: flush and fence after).
    ///
    /// # Errors
    /// [`PmemError::BadReference`].
    pub fn write(&self, offset: PoolOffset, src: &[u8]) -> Result<()> {
        let p = self.raw(offset, src.len() as u64)?;
        // SAFETY: the destination range is mapped and writable (checked by
        // `raw`); `src` is a distinct Rust allocation. No `&`/`&mut` into the
        // mapping is handed out for bytes written this way (see `bytes`).
        unsafe { std::ptr::copy_nonoverlapping(src.as_ptr(), p.as_ptr(), src.len()) };
        Ok(())
    }

    /// Fills `[offset, offset + len)` with `byte` (not yet durable).
    ///
    /// # Errors
    /// [`PmemError::BadReference`].
    pub fn fill(&self, offset: PoolOffset, len: u64, byte: u8) -> Result<()> {
        let p = self.raw(offset, len)?;
        // SAFETY: the range is mapped and writable (checked by `raw`).
        unsafe { std::ptr::write_bytes(p.as_ptr(), byte, len as usize) };
        Ok(())
    }

    /// Borrows pool bytes in place, without copying.
    ///
    /// # Errors
    /// [`PmemError::BadReference`].
    ///
    /// # Safety
    /// No one may write these bytes while the borrow lives (through
    /// [`Pool::write`], an atomic, or a raw pointer). Engines use it for
    /// immutable data, such as values of entries that are never rewritten.
    pub unsafe fn bytes(&self, offset: PoolOffset, len: u64) -> Result<&[u8]> {
        let p = self.raw(offset, len)?;
        // SAFETY: the range is mapped for the pool's lifetime, which bounds
        // the borrow; the caller promises no concurrent writes.
        Ok(unsafe { std::slice::from_raw_parts(p.as_ptr(), len as usize) })
    }

    /// The 8-byte word at `offset` as an atomic, for words that readers share
    /// with a writer and for failure-atomic 8-byte stores.
    ///
    /// # Errors
    /// [`PmemError::BadReference`] if out of the heap or not 8-byte aligned.
    #[inline]
    pub fn atomic_u64(&self, offset: PoolOffset) -> Result<&AtomicU64> {
        if offset % 8 != 0 {
            return Err(PmemError::BadReference { what: "atomic word not 8-byte aligned", offset, len: 8 });
        }
        let p = self.raw(offset, 8)?;
        // SAFETY: the word is mapped for the pool's lifetime and 8-byte aligned
        // (the region base is page aligned); AtomicU64 has the layout of u64
        // and every bit pattern is valid. Concurrent access to it happens only
        // through atomics or through copies that the engines synchronise.
        Ok(unsafe { &*p.as_ptr().cast::<AtomicU64>() })
    }

    /// `count` consecutive 8-byte words at `offset` as atomics: the view a
    /// lock-free reader copies a node through (one bounds check, not one per
    /// word).
    ///
    /// # Errors
    /// [`PmemError::BadReference`] if out of the heap or not 8-byte aligned.
    #[inline]
    pub fn atomic_words(&self, offset: PoolOffset, count: usize) -> Result<&[AtomicU64]> {
        if offset % 8 != 0 {
            return Err(PmemError::BadReference { what: "atomic words not 8-byte aligned", offset, len: 8 });
        }
        let p = self.raw(offset, count as u64 * 8)?;
        // SAFETY: as for `atomic_u64`, for each of the `count` words, which
        // lie in the mapped heap (checked by `raw`) for the pool's lifetime.
        Ok(unsafe { std::slice::from_raw_parts(p.as_ptr().cast::<AtomicU64>(), count) })
    }

    /// Reads the 8-byte word at `offset` (acquire).
    ///
    /// # Errors
    /// As [`Pool::atomic_u64`].
    #[inline]
    pub fn load_u64(&self, offset: PoolOffset) -> Result<u64> {
        Ok(self.atomic_u64(offset)?.load(Ordering::Acquire))
    }

    /// Stores the 8-byte word at `offset` with one failure-atomic store
    /// (release; not yet durable).
    ///
    /// # Errors
    /// As [`Pool::atomic_u64`].
    #[inline]
    pub fn store_u64(&self, offset: PoolOffset, value: u64) -> Result<()> {
        self.atomic_u64(offset)?.store(value, Ordering::Release);
        Ok(())
    }
}
