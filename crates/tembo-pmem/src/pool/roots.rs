//! Header words and named roots: each change is one aligned 8-byte store of
//! a self-checking word, persisted at once.

use std::sync::atomic::{AtomicU64, Ordering};

use super::*;

impl Pool {
    // ----- header -------------------------------------------------------------

    pub(super) fn header_word(&self, off: usize) -> &AtomicU64 {
        debug_assert!(off % 8 == 0 && (off as u64) < HEADER_BYTES);
        // SAFETY: the header page is always mapped; `off` is 8-aligned and
        // inside it (debug-checked; all callers pass header constants).
        unsafe { &*self.region.base().add(off).cast::<AtomicU64>() }
    }

    pub(crate) fn header_load(&self, off: usize) -> u64 {
        self.header_word(off).load(Ordering::Acquire)
    }

    pub(super) fn store_header_word(&self, off: usize, word: u64) {
        self.header_word(off).store(word, Ordering::Release);
        self.persist_always(off as u64, 8);
    }

    pub(super) fn header_fill_zero(&self, off: u64, len: u64) {
        debug_assert!(off + len <= HEADER_BYTES);
        // SAFETY: inside the always-mapped header page.
        unsafe { std::ptr::write_bytes(self.region.base().add(off as usize), 0, len as usize) };
        self.persist_always(off, len);
    }

    /// Copies any bytes below the pool size, header included (the
    /// simulator's view of the CPU image). Out-of-range bytes are left alone.
    pub(crate) fn read_any(&self, offset: u64, dst: &mut [u8]) {
        let end = (offset + dst.len() as u64).min(self.size());
        if offset >= end {
            return;
        }
        // SAFETY: [offset, end) is below the pool size, so mapped; `dst` is a
        // distinct allocation at least `end - offset` long.
        unsafe {
            std::ptr::copy_nonoverlapping(
                self.region.base().add(offset as usize),
                dst.as_mut_ptr(),
                (end - offset) as usize,
            )
        };
    }

    /// A copy of the header page.
    pub fn header_bytes(&self) -> Vec<u8> {
        let mut v = vec![0u8; HEADER_BYTES as usize];
        // SAFETY: the header page is mapped; `v` is a distinct allocation.
        unsafe { std::ptr::copy_nonoverlapping(self.region.base(), v.as_mut_ptr(), v.len()) };
        v
    }

    /// Validates the header as it is in memory now.
    ///
    /// # Errors
    /// As [`Header::validate`].
    pub fn header(&self) -> Result<Header> {
        Header::validate(&self.header_bytes(), &self.path)
    }

    // ----- roots ----------------------------------------------------------------

    /// All named roots.
    pub fn roots(&self) -> Vec<Root> {
        (0..ROOT_SLOTS).filter_map(|slot| self.root_slot(slot)).map(|(name, offset)| Root { name, offset }).collect()
    }

    pub(super) fn root_slot(&self, slot: usize) -> Option<(String, u64)> {
        let off = OFF_ROOTS + slot * ROOT_SLOT_BYTES;
        let mut name = [0u8; ROOT_NAME_MAX];
        // SAFETY: the slot lies in the mapped header page.
        unsafe { std::ptr::copy_nonoverlapping(self.region.base().add(off), name.as_mut_ptr(), ROOT_NAME_MAX) };
        let w = self.header_load(off + ROOT_NAME_MAX);
        let len = name.iter().position(|b| *b == 0).unwrap_or(ROOT_NAME_MAX);
        if len == 0 || w == 0 {
            return None;
        }
        let value = header::decode_word(WordField::Root as u8, &name, w)?;
        Some((String::from_utf8_lossy(&name[..len]).into_owned(), value))
    }

    /// The offset a named root points to.
    pub fn root(&self, name: &str) -> Option<PoolOffset> {
        self.roots().into_iter().find(|r| r.name == name).map(|r| r.offset)
    }

    /// Sets (creating if needed) a named root with one failure-atomic store.
    ///
    /// # Errors
    /// [`PmemError::BadRoot`] for a bad name or when all 32 slots are taken;
    /// [`PmemError::BadReference`] for an offset outside the heap.
    pub fn set_root(&self, name: &str, offset: PoolOffset) -> Result<()> {
        let raw = validate_root_name(name)?;
        if offset != 0 {
            self.check_range(offset, 1)?;
        }
        let _g = self.roots_lock.lock();
        let word = encode_word(WordField::Root as u8, &raw, offset);
        let existing = (0..ROOT_SLOTS).find(|s| self.root_slot(*s).is_some_and(|(n, _)| n == name));
        let slot = match existing {
            Some(s) => s,
            None => {
                let s = (0..ROOT_SLOTS)
                    .find(|s| self.header_load(OFF_ROOTS + s * ROOT_SLOT_BYTES + ROOT_NAME_MAX) == 0)
                    .ok_or_else(|| PmemError::BadRoot { name: name.into(), why: "all 32 root slots are in use" })?;
                // Name first, persisted; then the word makes the root exist.
                let off = OFF_ROOTS + s * ROOT_SLOT_BYTES;
                // SAFETY: the slot's name bytes lie in the mapped header page.
                unsafe { std::ptr::copy_nonoverlapping(raw.as_ptr(), self.region.base().add(off), ROOT_NAME_MAX) };
                self.persist_always(off as u64, ROOT_NAME_MAX as u64);
                s
            }
        };
        self.store_header_word(OFF_ROOTS + slot * ROOT_SLOT_BYTES + ROOT_NAME_MAX, word);
        Ok(())
    }

    /// Removes a named root (the word first, then the name).
    ///
    /// # Errors
    /// [`PmemError::BadRoot`] for a bad name.
    pub fn remove_root(&self, name: &str) -> Result<bool> {
        validate_root_name(name)?;
        let _g = self.roots_lock.lock();
        let Some(slot) = (0..ROOT_SLOTS).find(|s| self.root_slot(*s).is_some_and(|(n, _)| n == name)) else {
            return Ok(false);
        };
        let off = OFF_ROOTS + slot * ROOT_SLOT_BYTES;
        self.store_header_word(off + ROOT_NAME_MAX, 0);
        self.header_fill_zero(off as u64, ROOT_NAME_MAX as u64);
        Ok(true)
    }
}

pub(super) fn validate_root_name(name: &str) -> Result<[u8; ROOT_NAME_MAX]> {
    let b = name.as_bytes();
    if b.len() < ROOT_NAME_MIN || b.len() > ROOT_NAME_MAX || b.contains(&0) {
        return Err(PmemError::BadRoot { name: name.into(), why: "names have 2 to 24 bytes and no NUL" });
    }
    let mut raw = [0u8; ROOT_NAME_MAX];
    raw[..b.len()].copy_from_slice(b);
    Ok(raw)
}
