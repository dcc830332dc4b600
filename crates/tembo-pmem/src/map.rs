//! The pool's memory: an address range reserved once, so the pool can grow in
//! place without moving its base.
//!
//! A file-backed region reserves `max_size` bytes of address space
//! (`PROT_NONE`, no memory committed) and maps the file over its start with
//! `MAP_FIXED`. Growing maps the new tail of the file right after the old one,
//! so every offset, reference and concurrent reader stays valid.
//!
//! `MAP_SYNC` is tried first: the kernel accepts it only on a DAX filesystem,
//! where flush + fence is power-fail durable. That acceptance, not a guess, is
//! what makes a pool `dax`.
//!
//! `MAP_SYNC` is probed with a throw-away mapping before the reservation is
//! touched (see `map_sync_granted`).
//!
//! An anonymous region (volatile pools and the crash simulator) is one
//! `MAP_NORESERVE` anonymous mapping of `max_size` bytes; the OS commits
//! pages only when touched.

use std::fs::File;
use std::os::fd::AsRawFd;
use std::ptr::NonNull;

use crate::error::{PmemError, Result};

/// Alignment of a region's base: a page, so offsets keep their page alignment.
pub const REGION_ALIGN: usize = 4096;

/// Memory of one pool.
#[derive(Debug)]
pub(crate) struct Region {
    base: NonNull<u8>,
    reserved: usize,
    kind: RegionKind,
}

#[derive(Debug)]
enum RegionKind {
    File { map_sync: bool },
    Anonymous,
}

// SAFETY: the region is plain memory owned by this value; all access to its
// bytes goes through `Pool`, which synchronises writers and uses atomics or
// copies for shared words. The raw pointer is only an address.
unsafe impl Send for Region {}
// SAFETY: as above; `Region` itself has no interior state besides the address.
unsafe impl Sync for Region {}

impl Region {
    /// Maps `len` bytes of `file` inside a reservation of `reserved` bytes.
    /// With `try_sync`, asks for `MAP_SYNC` first and reports whether it was
    /// granted.
    pub(crate) fn map_file(file: &File, len: usize, reserved: usize, try_sync: bool) -> Result<Region> {
        let reserved = reserved.max(len);
        // SAFETY: a fresh anonymous PROT_NONE mapping at an address of the
        // kernel's choosing touches no existing memory.
        let base = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                reserved,
                libc::PROT_NONE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
                -1,
                0,
            )
        };
        if base == libc::MAP_FAILED {
            return Err(PmemError::io(
                format!("reserving {reserved} bytes of address space"),
                std::io::Error::last_os_error(),
            ));
        }
        let base = NonNull::new(base.cast::<u8>()).ok_or_else(|| PmemError::Invariant {
            name: "pmem.map.nonnull",
            detail: "mmap returned a null address".into(),
        })?;
        let mut region = Region { base, reserved, kind: RegionKind::File { map_sync: false } };
        let map_sync = region.map_file_range(file, 0, len, try_sync)?;
        region.kind = RegionKind::File { map_sync };
        Ok(region)
    }

    /// Maps `[offset, offset + len)` of the file at the same offset of the
    /// reservation. Returns whether `MAP_SYNC` was used.
    fn map_file_range(&self, file: &File, offset: usize, len: usize, try_sync: bool) -> Result<bool> {
        if len == 0 {
            return Ok(try_sync);
        }
        let end = offset.checked_add(len).filter(|e| *e <= self.reserved);
        if end.is_none() || offset % REGION_ALIGN != 0 {
            return Err(PmemError::Invariant {
                name: "pmem.map.in_reservation",
                detail: format!("mapping {offset}+{len} outside reservation {}", self.reserved),
            });
        }
        let addr = self.base.as_ptr().wrapping_add(offset).cast::<libc::c_void>();
        let prot = libc::PROT_READ | libc::PROT_WRITE;
        let sync = try_sync && Self::map_sync_granted(file, offset, len)?;
        let flags = if sync { libc::MAP_SHARED_VALIDATE | libc::MAP_SYNC } else { libc::MAP_SHARED };
        // SAFETY: `addr..addr+len` lies inside our own reservation (checked
        // above), so MAP_FIXED replaces only memory this region owns.
        let p =
            unsafe { libc::mmap(addr, len, prot, flags | libc::MAP_FIXED, file.as_raw_fd(), offset as libc::off_t) };
        if p == libc::MAP_FAILED {
            return Err(PmemError::io("mapping the pool file", std::io::Error::last_os_error()));
        }
        Ok(sync)
    }

    /// Asks the kernel whether it grants `MAP_SYNC` for this file, with a
    /// probe mapping at an address of its choosing.
    ///
    /// Why not try `MAP_SYNC | MAP_FIXED` over the reservation directly: a
    /// refused `MAP_FIXED` mapping has already unmapped its target range, and
    /// in that gap another thread's mapping (a stack, a spawned process's
    /// memory) can land — which the fallback mapping would then overwrite.
    fn map_sync_granted(file: &File, offset: usize, len: usize) -> Result<bool> {
        let probe_len = len.min(REGION_ALIGN);
        // SAFETY: no MAP_FIXED: the kernel picks a free address, so no
        // existing mapping is touched.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                probe_len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED_VALIDATE | libc::MAP_SYNC,
                file.as_raw_fd(),
                offset as libc::off_t,
            )
        };
        if p == libc::MAP_FAILED {
            let err = std::io::Error::last_os_error();
            return match err.raw_os_error() {
                Some(libc::EOPNOTSUPP) | Some(libc::EINVAL) => Ok(false),
                _ => Err(PmemError::io("probing MAP_SYNC on the pool file", err)),
            };
        }
        // SAFETY: `p..p+probe_len` is the probe mapping made just above.
        unsafe { libc::munmap(p, probe_len) };
        Ok(true)
    }
    /// Maps the file's bytes `[old_len, new_len)` after the current mapping.
    pub(crate) fn grow_file(&self, file: &File, old_len: usize, new_len: usize) -> Result<()> {
        let map_sync = matches!(self.kind, RegionKind::File { map_sync: true });
        let got = self.map_file_range(file, old_len, new_len - old_len, map_sync)?;
        if got != map_sync {
            return Err(PmemError::Invariant {
                name: "pmem.map.sync_stable",
                detail: "MAP_SYNC was granted for part of the pool only".into(),
            });
        }
        Ok(())
    }

    /// A zeroed anonymous region of `reserved` bytes. The kernel commits
    /// pages only when touched (`MAP_NORESERVE`), so a pool whose maximum
    /// exceeds RAM opens here as it does from its file.
    pub(crate) fn anonymous(reserved: usize) -> Result<Region> {
        let reserved = reserved.max(REGION_ALIGN);
        // SAFETY: a fresh anonymous mapping at an address of the kernel's
        // choosing touches no existing memory.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                reserved,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
                -1,
                0,
            )
        };
        if p == libc::MAP_FAILED {
            let err = std::io::Error::last_os_error();
            return Err(PmemError::io(
                format!(
                    "reserving {reserved} bytes of anonymous memory for an in-memory pool (lower its maximum size)"
                ),
                err,
            ));
        }
        let base = NonNull::new(p.cast::<u8>()).ok_or_else(|| PmemError::Invariant {
            name: "pmem.map.nonnull",
            detail: "mmap returned a null address".into(),
        })?;
        Ok(Region { base, reserved, kind: RegionKind::Anonymous })
    }

    pub(crate) fn base(&self) -> *mut u8 {
        self.base.as_ptr()
    }

    pub(crate) fn reserved(&self) -> usize {
        self.reserved
    }

    pub(crate) fn map_sync(&self) -> bool {
        matches!(self.kind, RegionKind::File { map_sync: true })
    }

    /// `msync(MS_SYNC)` of the pages covering `[offset, offset + len)`.
    pub(crate) fn msync(&self, offset: usize, len: usize) -> Result<()> {
        if !matches!(self.kind, RegionKind::File { .. }) || len == 0 {
            return Ok(());
        }
        let page = page_size();
        let start = offset & !(page - 1);
        let end = (offset + len).div_ceil(page) * page;
        let addr = self.base.as_ptr().wrapping_add(start).cast::<libc::c_void>();
        // SAFETY: the range is page-aligned and inside the mapped file part of
        // the reservation (callers pass ranges below the pool size).
        let rc = unsafe { libc::msync(addr, end - start, libc::MS_SYNC) };
        if rc != 0 {
            return Err(PmemError::io("msync of pool pages", std::io::Error::last_os_error()));
        }
        Ok(())
    }
}

impl Drop for Region {
    fn drop(&mut self) {
        // SAFETY: base..base+reserved is exactly the mapping made in
        // `map_file` or `anonymous`; unmapping it removes the file mappings
        // inside too. No reference into it outlives the `Pool` owning it.
        unsafe {
            libc::munmap(self.base.as_ptr().cast(), self.reserved);
        }
    }
}

/// The OS page size.
pub(crate) fn page_size() -> usize {
    // SAFETY: sysconf has no preconditions.
    let p = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    if p <= 0 {
        4096
    } else {
        p as usize
    }
}

/// Whether the file lives on a RAM-backed filesystem (tmpfs, ramfs).
pub(crate) fn on_ram_filesystem(file: &File) -> bool {
    const TMPFS_MAGIC: i64 = 0x0102_1994;
    const RAMFS_MAGIC: i64 = 0x8584_58f6;
    // SAFETY: statfs is plain data; zeroed is a valid initial value.
    let mut st: libc::statfs = unsafe { std::mem::zeroed() };
    // SAFETY: valid fd and a valid out-pointer.
    let rc = unsafe { libc::fstatfs(file.as_raw_fd(), &mut st) };
    if rc != 0 {
        return false;
    }
    let t = st.f_type as i64;
    t == TMPFS_MAGIC || t == RAMFS_MAGIC
}
