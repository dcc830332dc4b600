//! Online growth: the file is extended and mapped inside the address range
//! reserved at open, so the base never moves; the size word commits it.

use std::sync::atomic::Ordering;

use super::*;

/// The reserve is this fraction of the maximum size's pages...
const RESERVE_FRACTION: u64 = 32;
/// ...and at most this many pages (256 KiB: room for eight 8-page slabs).
const RESERVE_PAGES_MAX: u64 = 64;

impl Pool {
    // ----- growth -----------------------------------------------------------------

    /// Extends the pool's size word after the allocator has laid out the new
    /// pages. Called with the allocator lock held. The file work is skipped
    /// where [`Pool::prepare_growth`] has done it already.
    pub(crate) fn extend_mapping(&self, new_size: u64) -> Result<()> {
        let old = self.size();
        debug_assert!(new_size > old && new_size <= self.max_size());
        match (&self.file, &self.backend) {
            (Some(file), _) => {
                let mut prepared = self.prepared.lock();
                let from = (*prepared).max(old);
                if new_size > from {
                    self.extend_file(file, from, new_size)?;
                    *prepared = new_size;
                }
            }
            (None, Backend::Sim(sim)) => sim.grow(new_size as usize),
            (None, _) => {}
        }
        // Visible to `raw` (and so to the allocator) before the size word
        // makes the pages part of the pool on media.
        self.size.store(new_size, Ordering::Release);
        Ok(())
    }

    /// Extends the file from `from` to `to` bytes, maps the new range and
    /// reserves its blocks, durably; nothing reads it until a size word
    /// takes it into the pool (a file longer than its pool opens as that
    /// pool: `check_file`).
    fn extend_file(&self, file: &File, from: u64, to: u64) -> Result<()> {
        file.set_len(to).map_err(|e| PmemError::io(format!("growing {} to {to} bytes", self.path.display()), e))?;
        self.region.grow_file(file, from as usize, to as usize)?;
        // Huge pages for the new range while it is all holes (on a RAM
        // filesystem; `huge.rs`), then its blocks reserved, before the
        // allocator or anyone else touches it: a full filesystem is a full
        // pool here, not a SIGBUS at the first store to a page.
        self.collapse_fresh_pages(from, to - from);
        crate::map::reserve_file_space(file, from, to - from).map_err(|e| {
            // Give back what the collapse took (its 2 MiB pages count
            // against the filesystem) and what `fallocate` reserved before
            // it failed: the file ends where it did. Nothing reads past
            // the size word.
            let _ = file.set_len(from);
            if crate::map::is_no_space(&e) {
                PmemError::PoolFull {
                    requested: to - self.size(),
                    size: self.size(),
                    max_size: self.max_size(),
                    filesystem_full: true,
                }
            } else {
                PmemError::io(format!("reserving space to grow {} to {to} bytes", self.path.display()), e)
            }
        })?;
        // The new length must be durable before a size word says the pages
        // belong to the pool (else a power cut could leave a header larger
        // than its file: a pool that cannot open). Growth is rare; on tmpfs
        // this costs nothing.
        file.sync_data().map_err(|e| PmemError::io(format!("syncing the growth of {}", self.path.display()), e))
    }

    /// Does the slow part of the pool's next growth ahead of need, off the
    /// allocation path: when less than half of the next growth step is
    /// left unallocated, extends, reserves and maps the file for that step
    /// (zeroing its pages is most of a growth's time: about a second per
    /// GiB on some VMs, during which every allocating thread would wait on
    /// the allocator's lock). The growth itself, when an allocation needs
    /// it, then only commits the size word. Meant for a background thread
    /// (the cdds engine's GC thread calls it); returns whether it extended
    /// the file. Changes nothing a crash or a reopen can see but the
    /// file's length.
    ///
    /// # Errors
    /// [`PmemError::PoolFull`] if the filesystem is full (the file is left
    /// as it was; the allocation that needs the room reports it too),
    /// [`PmemError::Io`] if the file cannot be extended.
    pub fn prepare_growth(&self) -> Result<bool> {
        let Some(file) = &self.file else { return Ok(false) };
        let size = self.size();
        let target = size.saturating_add(crate::alloc::growth_step(size)).min(self.growth_limit());
        if target <= (*self.prepared.lock()).max(size) {
            return Ok(false);
        }
        if size.saturating_sub(self.used_bytes()) > crate::alloc::growth_step(size) / 2 {
            return Ok(false);
        }
        let mut prepared = self.prepared.lock();
        let from = (*prepared).max(self.size());
        if target <= from {
            return Ok(false);
        }
        self.extend_file(file, from, target)?;
        *prepared = target;
        Ok(true)
    }

    /// Persists the new size: the commit point of a growth.
    pub(crate) fn commit_size(&self, new_size: u64) {
        self.store_header_word(OFF_SIZE, encode_word(WordField::Size as u8, &[], new_size));
    }

    /// Sets the growth limit. The address range reserved at open bounds what
    /// this session can use; a larger limit takes full effect on the next open.
    ///
    /// # Errors
    /// [`PmemError::SizeTooSmall`] below the current size,
    /// [`PmemError::TooLarge`] above the format's limit.
    pub fn set_max_size(&self, max: u64) -> Result<()> {
        let _g = self.alloc.lock();
        let max = round_up_pages(max).filter(|m| *m <= WORD_VALUE_MAX).ok_or(PmemError::TooLarge {
            what: "maximum pool size",
            requested: max,
            limit: WORD_VALUE_MAX,
        })?;
        if max < self.size() {
            return Err(PmemError::SizeTooSmall { requested: max, minimum: self.size() });
        }
        self.store_header_word(OFF_MAX_SIZE, encode_word(WordField::MaxSize as u8, &[], max));
        self.max_size.store(max, Ordering::Release);
        Ok(())
    }

    /// The size this session can grow to: the header's limit, bounded by the
    /// address range reserved at open.
    /// Runs `f` with the allocator's reserve open: the last pages of a
    /// pool at its maximum size, which other allocations may not turn into
    /// new runs (slabs or large blocks), so that an operation that frees
    /// space — a delete whose merge needs a new node — still finds room
    /// when nothing else does. The reserve is max size / 32, at most
    /// 256 KiB (64 pages); zero in pools under 128 KiB. Allocations made by
    /// other threads while a scope is open may use it too: scopes are
    /// meant to be short.
    pub fn with_reserve<T>(&self, f: impl FnOnce() -> T) -> T {
        struct Close<'a>(&'a std::sync::atomic::AtomicUsize);
        impl Drop for Close<'_> {
            fn drop(&mut self) {
                self.0.fetch_sub(1, Ordering::SeqCst);
            }
        }
        self.reserve_scopes.fetch_add(1, Ordering::SeqCst);
        let _close = Close(&self.reserve_scopes);
        f()
    }

    /// Whether a [`Pool::with_reserve`] scope is open.
    pub(crate) fn reserve_open(&self) -> bool {
        self.reserve_scopes.load(Ordering::SeqCst) > 0
    }

    /// Pages the allocator keeps back for [`Pool::with_reserve`] scopes.
    pub(crate) fn reserve_pages(&self) -> u64 {
        (self.growth_limit() / PAGE_BYTES / RESERVE_FRACTION).min(RESERVE_PAGES_MAX)
    }

    pub(crate) fn growth_limit(&self) -> u64 {
        self.max_size().min(self.region.reserved() as u64)
    }
}
