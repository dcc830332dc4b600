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

/// Alignment every region keeps at the least: a page, so offsets keep their
/// page alignment (regions are in fact reserved at 2 MiB boundaries, see
/// `reserve_aligned`).
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
        let base = reserve_aligned(reserved, libc::PROT_NONE)?;
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
        // Huge pages where a flush is a cache-line write-back (DAX) or
        // nothing at all (tmpfs): not where durability is `msync`, which
        // would then write back a whole 2 MiB folio per dirty line.
        if sync || on_ram_filesystem(file) {
            advise_huge_pages(addr, len);
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
        let base = reserve_aligned(reserved, libc::PROT_READ | libc::PROT_WRITE).map_err(|e| match e {
            PmemError::Io { source, .. } => PmemError::io(
                format!(
                    "reserving {reserved} bytes of anonymous memory for an in-memory pool (lower its maximum size)"
                ),
                source,
            ),
            other => other,
        })?;
        Ok(Region { base, reserved, kind: RegionKind::Anonymous })
    }

    /// Asks for transparent huge pages over the region's first `len`
    /// bytes: a pool built from an image is then backed by one fault per
    /// 2 MiB instead of one per 4 KiB page (a crash campaign builds tens of
    /// thousands of pools from images, and on a VM each fault costs
    /// microseconds). Advice only.
    pub(crate) fn advise_huge(&self, len: usize) {
        let len = len.min(self.reserved).next_multiple_of(HUGE_ALIGN).min(self.reserved);
        if len > 0 {
            advise_huge_pages(self.base.as_ptr().cast(), len);
        }
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

    /// Bytes of `[0, len)` of the region that the kernel currently maps
    /// with huge pages (2 MiB PMD mappings), read from `/proc/self/smaps`;
    /// `None` where that file cannot be read (not Linux, no procfs).
    /// Only pages touched so far are mapped at all, so ask after use.
    pub(crate) fn huge_page_bytes(&self, len: usize) -> Option<u64> {
        // An anonymous region may share a kernel mapping with a neighbour
        // (a malloc arena), whose huge pages would be counted too.
        if !matches!(self.kind, RegionKind::File { .. }) {
            return None;
        }
        let smaps = std::fs::read_to_string("/proc/self/smaps").ok()?;
        let (lo, hi) = (self.base.as_ptr() as usize, self.base.as_ptr() as usize + len);
        let mut inside = false;
        let mut kib = 0u64;
        for line in smaps.lines() {
            let mut words = line.split_whitespace();
            let Some(first) = words.next() else { continue };
            if let Some((a, b)) = first.split_once('-') {
                if let (Ok(a), Ok(b)) = (usize::from_str_radix(a, 16), usize::from_str_radix(b, 16)) {
                    // A mapping header: `start-end perms offset dev inode path`.
                    inside = a < hi && b > lo;
                    continue;
                }
            }
            if inside && matches!(first, "AnonHugePages:" | "ShmemPmdMapped:" | "FilePmdMapped:") {
                kib += words.next().and_then(|w| w.parse::<u64>().ok()).unwrap_or(0);
            }
        }
        Some(kib * 1024)
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
        // SAFETY: base..base+reserved is exactly the reservation made by
        // `reserve_aligned` (for `map_file` or `anonymous`); unmapping it removes the file mappings
        // inside too. No reference into it outlives the `Pool` owning it.
        unsafe {
            libc::munmap(self.base.as_ptr().cast(), self.reserved);
        }
    }
}

/// Huge-page alignment of a reservation (2 MiB, x86-64's and AArch64's
/// PMD size): a DAX file or a tmpfs with huge pages enabled can then back
/// the pool with 2 MiB pages, each saving a TLB miss for every 512 small
/// pages a random lookup would otherwise touch.
pub(crate) const HUGE_ALIGN: usize = 2 << 20;

/// Reserves `len` bytes of address space starting at a [`HUGE_ALIGN`]
/// boundary: over-reserves by the alignment and unmaps the slack on both
/// sides.
fn reserve_aligned(len: usize, prot: libc::c_int) -> Result<NonNull<u8>> {
    let padded = len.checked_add(HUGE_ALIGN).ok_or_else(|| PmemError::Invariant {
        name: "pmem.map.reserve",
        detail: format!("a reservation of {len} bytes overflows the address space"),
    })?;
    // SAFETY: a fresh anonymous mapping at an address of the kernel's
    // choosing touches no existing memory.
    let p = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            padded,
            prot,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
            -1,
            0,
        )
    };
    if p == libc::MAP_FAILED {
        return Err(PmemError::io(format!("reserving {len} bytes of address space"), std::io::Error::last_os_error()));
    }
    let start = p as usize;
    let aligned = start.next_multiple_of(HUGE_ALIGN);
    let head = aligned - start;
    let tail = padded - head - len;
    // SAFETY: both ranges lie inside the mapping made just above and are
    // outside the aligned part this function returns; nothing uses them.
    // Unmapping a range of one's own fresh mapping cannot fail but for
    // resource limits; a slack left mapped is only unused address space.
    unsafe {
        if head > 0 {
            libc::munmap(p, head);
        }
        if tail > 0 {
            libc::munmap((aligned + len) as *mut libc::c_void, tail);
        }
    }
    NonNull::new(aligned as *mut u8)
        .ok_or_else(|| PmemError::Invariant { name: "pmem.map.nonnull", detail: "mmap returned a null address".into() })
}

/// Asks for transparent huge pages over a mapped range. Advice only: the
/// kernel ignores it where huge pages are off for the memory (e.g. a tmpfs
/// with `huge=never`), and a refusal changes nothing, so errors are ignored.
fn advise_huge_pages(addr: *mut libc::c_void, len: usize) {
    // SAFETY: madvise only reads the range's page tables; the range was
    // mapped by the caller.
    unsafe {
        libc::madvise(addr, len, libc::MADV_HUGEPAGE);
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
    ram_filesystem_free(file).is_some()
}

/// The bytes still free on the file's filesystem if it is RAM-backed
/// (tmpfs, ramfs; `u64::MAX` where it has no size limit), `None` for any
/// other filesystem.
pub(crate) fn ram_filesystem_free(file: &File) -> Option<u64> {
    const TMPFS_MAGIC: i64 = 0x0102_1994;
    const RAMFS_MAGIC: i64 = 0x8584_58f6;
    // SAFETY: statfs is plain data; zeroed is a valid initial value.
    let mut st: libc::statfs = unsafe { std::mem::zeroed() };
    // SAFETY: valid fd and a valid out-pointer.
    let rc = unsafe { libc::fstatfs(file.as_raw_fd(), &mut st) };
    if rc != 0 {
        return None;
    }
    match st.f_type as i64 {
        // A tmpfs mounted with `size=0` (and ramfs) reports no blocks.
        TMPFS_MAGIC | RAMFS_MAGIC if st.f_blocks == 0 => Some(u64::MAX),
        TMPFS_MAGIC | RAMFS_MAGIC => Some((st.f_bavail as u64).saturating_mul(st.f_bsize as u64)),
        _ => None,
    }
}

/// Allocates the file's blocks for `[offset, offset + len)` now
/// (`fallocate`, extending the file if needed). A mapped page of a sparse
/// file is allocated when it is first stored to; if the filesystem is full
/// then, the store raises `SIGBUS` and kills the process. Reserving the
/// pool's pages when it is created or grown turns that into an error
/// returned where it can be handled (`ENOSPC`). On a filesystem that
/// cannot preallocate the file stays sparse, as before.
pub(crate) fn reserve_file_space(file: &File, offset: u64, len: u64) -> std::io::Result<()> {
    if len == 0 {
        return Ok(());
    }
    let (Ok(off), Ok(n)) = (libc::off_t::try_from(offset), libc::off_t::try_from(len)) else {
        return Err(std::io::Error::from_raw_os_error(libc::EFBIG));
    };
    loop {
        // SAFETY: a valid open file descriptor; mode 0 only allocates blocks
        // (and extends the size), it never touches existing data.
        let rc = unsafe { libc::fallocate(file.as_raw_fd(), 0, off, n) };
        if rc == 0 {
            return Ok(());
        }
        let e = std::io::Error::last_os_error();
        match e.raw_os_error() {
            Some(libc::EINTR) => continue,
            Some(libc::EOPNOTSUPP) | Some(libc::ENOSYS) => return Ok(()),
            _ => return Err(e),
        }
    }
}

/// Whether `e` says the filesystem is out of space.
pub(crate) fn is_no_space(e: &std::io::Error) -> bool {
    matches!(e.raw_os_error(), Some(libc::ENOSPC) | Some(libc::EDQUOT))
}

/// Bytes of the file's allocated blocks (`st_blocks`), if `fstat` says.
pub(crate) fn allocated_bytes(file: &File) -> Option<u64> {
    use std::os::unix::fs::MetadataExt;
    file.metadata().ok().map(|m| m.blocks().saturating_mul(512))
}
