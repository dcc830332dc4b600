//! The pool: one file (or anonymous memory) mapped once, its header, named
//! roots, the durability mode, and the persist primitives.
//!
//! Invariants:
//! - `pool.lock`: a file pool holds an exclusive `flock` for its whole life,
//!   so a second process (or handle) gets [`PmemError::Locked`];
//! - `pool.base_stable`: the mapping's base never moves; growth maps the new
//!   tail inside the address range reserved at open;
//! - `pool.header_words`: run-time header fields change only by one aligned
//!   8-byte store of a self-checking word, persisted at once;
//! - `pool.clean`: the clean-shutdown word is 0 while the pool is open and 1
//!   only after a close that persisted everything.

use std::fs::{File, OpenOptions};
use std::io::Read;
use std::os::fd::AsRawFd;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::ptr::NonNull;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};

use parking_lot::Mutex;

use crate::alloc::AllocState;
use crate::error::{PmemError, Result};
use crate::header::{
    self, encode_word, Header, WordField, HEADER_BYTES, OFF_CLEAN, OFF_MAX_SIZE, OFF_ROOTS, OFF_SIZE, PAGE_BYTES,
    ROOT_NAME_MAX, ROOT_NAME_MIN, ROOT_SLOTS, ROOT_SLOT_BYTES, WORD_VALUE_MAX,
};
use crate::map::{self, Region};
use crate::persist::{self, FlushInstruction, OrderingMode, CACHE_LINE_BYTES};
use crate::sim::SimState;
use crate::stats::{Counters, WriteStats};
use crate::PoolOffset;

/// Smallest pool: the header and 15 pages of heap.
pub const MIN_POOL_BYTES: u64 = 64 * 1024;
/// Default growth limit when none is given: 16 × the initial size, at least 1 GiB.
pub const DEFAULT_MAX_FACTOR: u64 = 16;

mod access;
mod durability;
mod growth;
mod options;
mod publish;
mod roots;

pub use options::{Mode, ModeRequest, PoolOptions};

/// How the persist primitives reach durability.
#[derive(Debug)]
enum Backend {
    /// Flush instructions on a DAX or emulated mapping.
    Hardware,
    /// Pages flushed since the last fence, `msync`ed by the fence.
    Msync {
        /// Ranges flushed since the last fence.
        dirty: Mutex<Vec<(u64, u64)>>,
        /// Held by a fence from taking `dirty` to the end of its msyncs,
        /// so that a fence never returns while another thread's msync of
        /// ranges flushed before it is still running.
        fencing: Mutex<()>,
    },
    /// Nothing to do.
    Volatile,
    /// The crash simulator.
    Sim(Box<SimState>),
}

/// A named root: a well-known persistent reference an engine starts from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Root {
    /// Its name (2 to 24 bytes).
    pub name: String,
    /// Where it points.
    pub offset: PoolOffset,
}

/// An open pool. `Send + Sync`: share it with `Arc`.
///
/// Dropping it closes it cleanly (see [`Pool::close`] to see errors).
#[derive(Debug)]
pub struct Pool {
    region: Region,
    size: AtomicU64,
    max_size: AtomicU64,
    mode: Mode,
    instr: FlushInstruction,
    ordering: OrderingMode,
    backend: Backend,
    counters: Counters,
    pub(crate) alloc: Mutex<AllocState>,
    file: Option<File>,
    path: PathBuf,
    uuid: [u8; 16],
    opened_unclean: bool,
    leaks_reclaimed: AtomicBool,
    closed: AtomicBool,
    roots_lock: Mutex<()>,
    /// Open [`Pool::with_reserve`] scopes: while above zero, new runs may
    /// take the pages the allocator keeps back at a full pool.
    reserve_scopes: AtomicUsize,
    /// How far this session has extended, reserved and mapped the file:
    /// at least the size (0 reads as the size), more after
    /// [`Pool::prepare_growth`]. Serializes that file work.
    prepared: Mutex<u64>,
}

fn now_secs() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0)
}

fn round_up_pages(n: u64) -> Option<u64> {
    n.checked_add(PAGE_BYTES - 1).map(|v| v / PAGE_BYTES * PAGE_BYTES)
}

fn create_sizes(opts: &PoolOptions) -> Result<(u64, u64)> {
    if opts.size < MIN_POOL_BYTES {
        return Err(PmemError::SizeTooSmall { requested: opts.size, minimum: MIN_POOL_BYTES });
    }
    let limit = WORD_VALUE_MAX / PAGE_BYTES * PAGE_BYTES;
    let too_large = |what, requested| PmemError::TooLarge { what, requested, limit };
    let size =
        round_up_pages(opts.size).filter(|s| *s <= WORD_VALUE_MAX).ok_or_else(|| too_large("pool size", opts.size))?;
    let max = match opts.max_size {
        Some(m) => m,
        // The default never exceeds the limit: only an asked-for size can.
        None => size.saturating_mul(DEFAULT_MAX_FACTOR).clamp(1 << 30, limit),
    };
    let max =
        round_up_pages(max).filter(|s| *s <= WORD_VALUE_MAX).ok_or_else(|| too_large("maximum pool size", max))?;
    if max < size {
        return Err(PmemError::SizeTooSmall { requested: max, minimum: size });
    }
    Ok((size, max))
}

/// Releases the pool's flock explicitly. Closing our descriptor is not
/// enough: a process forked by another thread holds a copy of it (and so the
/// lock) until it execs, and meanwhile this very process could not reopen
/// its own pool.
fn unlock_file(file: &File) {
    // SAFETY: flock on a valid descriptor has no memory-safety preconditions.
    unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_UN) };
}

fn lock_file(file: &File, path: &Path) -> Result<()> {
    // SAFETY: flock on a valid descriptor has no memory-safety preconditions.
    let rc = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) };
    if rc != 0 {
        let err = std::io::Error::last_os_error();
        if err.raw_os_error() == Some(libc::EWOULDBLOCK) {
            return Err(PmemError::Locked { path: path.to_path_buf() });
        }
        return Err(PmemError::io(format!("locking {}", path.display()), err));
    }
    Ok(())
}

/// Whether `path` names the file open as `file` (same device and inode).
fn same_file(file: &File, path: &Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    match (file.metadata(), std::fs::metadata(path)) {
        (Ok(a), Ok(b)) => a.dev() == b.dev() && a.ino() == b.ino(),
        _ => false,
    }
}

/// Makes the directory entry of `path` durable (fsync of its directory).
fn sync_parent_dir(path: &Path) -> Result<()> {
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(|e| PmemError::io(format!("syncing directory {} of the new pool", dir.display()), e))
}

impl Pool {
    /// Creates a new pool file at `path` (which must not exist).
    ///
    /// The pool is built under a hidden name beside `path` and renamed to
    /// `path` only once formatted and synced (see `publish`): a creation
    /// that is killed leaves no half-made pool under the name.
    ///
    /// # Errors
    /// [`PmemError::SizeTooSmall`], [`PmemError::Io`] (the file exists, no
    /// space), [`PmemError::ModeUnavailable`] (`dax` asked for on a non-DAX
    /// filesystem).
    pub fn create(path: impl AsRef<Path>, opts: &PoolOptions) -> Result<Pool> {
        let path = path.as_ref();
        let (size, max) = create_sizes(opts)?;
        let instr = opts.flush_instruction()?;
        if path.symlink_metadata().is_ok() {
            // Checked again, without a race, when the pool is renamed into
            // place; this spares building one that cannot be.
            return Err(PmemError::io(
                format!("creating pool file {}", path.display()),
                std::io::ErrorKind::AlreadyExists.into(),
            ));
        }
        publish::remove_stale_partials(path);
        let partial = publish::partial_path(path);
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&partial)
            .map_err(|e| PmemError::io(format!("creating pool file {}", path.display()), e))?;
        // A second descriptor of the same open file: it can release the lock
        // should creating fail after `file` has moved into the closure.
        let file_for_unlock =
            file.try_clone().map_err(|e| PmemError::io(format!("duplicating descriptor of {}", path.display()), e))?;
        let made = (|| {
            lock_file(&file, path)?;
            file.set_len(size).map_err(|e| PmemError::io(format!("sizing {} to {size} bytes", path.display()), e))?;
            let (region, mode) = Self::map_with_mode(&file, path, size, max, opts.mode)?;
            let backend = Self::backend_for(mode);
            let pool = Pool::assemble(region, mode, backend, instr, opts.ordering, Some(file), path, max)?;
            // Huge pages first (on a RAM filesystem), while the file is
            // all holes; then every page reserved. Nothing has touched
            // the mapping yet.
            pool.collapse_fresh_pages(0, size);
            if let Err(e) = reserve_pages(&file_for_unlock, path, size) {
                // Not formatted: its close must not write a header.
                pool.keep_unclean();
                return Err(e);
            }
            let pool = pool.format(size, max)?;
            // The header is durable in the file's pages; the file itself
            // (its size, and its name in the directory) must be too, or a
            // power cut soon after could lose a pool holding acknowledged
            // writes (POSIX: fsync the file, then its directory).
            let synced = file_for_unlock
                .sync_all()
                .map_err(|e| PmemError::io(format!("syncing new pool file {}", path.display()), e))
                .and_then(|()| publish::publish(&partial, path))
                .and_then(|()| sync_parent_dir(path));
            if let Err(e) = synced {
                // Unlinked while still locked, so no other process can open
                // this pool between its close and its removal.
                let _ = std::fs::remove_file(&partial);
                if same_file(&file_for_unlock, path) {
                    let _ = std::fs::remove_file(path);
                }
                pool.keep_unclean();
                return Err(e);
            }
            Ok(pool)
        })();
        if made.is_err() {
            let _ = std::fs::remove_file(&partial);
            unlock_file(&file_for_unlock);
        }
        made
    }

    /// Opens an existing pool file.
    ///
    /// `opts.size` and `opts.max_size` are ignored (the header has them).
    ///
    /// # Errors
    /// [`PmemError::NotAPool`], [`PmemError::FormatVersionMismatch`],
    /// [`PmemError::Truncated`], [`PmemError::ChecksumMismatch`],
    /// [`PmemError::Corrupted`], [`PmemError::Locked`], [`PmemError::Io`].
    pub fn open(path: impl AsRef<Path>, opts: &PoolOptions) -> Result<Pool> {
        let path = path.as_ref();
        let instr = opts.flush_instruction()?;
        let mut file = OpenOptions::new()
            .read(true)
            .write(true)
            .open(path)
            .map_err(|e| PmemError::io(format!("opening pool file {}", path.display()), e))?;
        lock_file(&file, path)?;
        let checked = Self::check_file(&mut file, path).and_then(|header| {
            // A pool left sparse (by an older build, or copied without its
            // holes) gets its pages now, or a clear error. A pool whose
            // blocks are all there is not walked again: on tmpfs that walk
            // costs ~70 ms a GiB, and a reopen must be fast.
            if map::allocated_bytes(&file).is_some_and(|b| b < header.size) {
                reserve_pages(&file, path, header.size)?;
            }
            Ok((Self::map_with_mode(&file, path, header.size, header.max_size, opts.mode)?, header))
        });
        let ((region, mode), header) = match checked {
            Ok(v) => v,
            Err(e) => {
                unlock_file(&file);
                return Err(e);
            }
        };
        let backend = Self::backend_for(mode);
        let pool = Pool::assemble(region, mode, backend, instr, opts.ordering, Some(file), path, header.max_size)?;
        pool.finish_open(header)
    }

    /// Reads and validates the header of a locked pool file and checks the
    /// file is as long as the header says.
    fn check_file(file: &mut File, path: &Path) -> Result<Header> {
        let len = file.metadata().map_err(|e| PmemError::io(format!("stat of {}", path.display()), e))?.len();
        let mut head = Vec::with_capacity(HEADER_BYTES as usize);
        file.take(HEADER_BYTES)
            .read_to_end(&mut head)
            .map_err(|e| PmemError::io(format!("reading header of {}", path.display()), e))?;
        let header = Header::validate(&head, path)?;
        if len < header.size {
            return Err(PmemError::Truncated { path: path.to_path_buf(), expected: header.size, found: len });
        }
        Ok(header)
    }

    /// Opens `path` if it exists, else creates it with `opts`.
    ///
    /// # Errors
    /// As [`Pool::open`] and [`Pool::create`].
    pub fn open_or_create(path: impl AsRef<Path>, opts: &PoolOptions) -> Result<Pool> {
        let path = path.as_ref();
        if path.exists() {
            Pool::open(path, opts)
        } else {
            Pool::create(path, opts)
        }
    }

    /// A volatile pool in anonymous memory (tests and measurements).
    ///
    /// # Errors
    /// [`PmemError::SizeTooSmall`], or out of memory.
    pub fn in_memory(opts: &PoolOptions) -> Result<Pool> {
        let (size, max) = create_sizes(opts)?;
        let region = Region::anonymous(max as usize)?;
        let pool = Pool::assemble(
            region,
            Mode::Volatile,
            Backend::Volatile,
            opts.flush_instruction()?,
            opts.ordering,
            None,
            Path::new("<memory>"),
            max,
        )?;
        pool.format(size, max)
    }

    /// A new pool in the crash simulator. Its media image starts all zero, so
    /// creating the pool is itself a simulated workload.
    ///
    /// # Errors
    /// As [`Pool::in_memory`].
    pub fn simulated(opts: &PoolOptions) -> Result<Pool> {
        let (size, max) = create_sizes(opts)?;
        let region = Region::anonymous(max as usize)?;
        let sim = SimState::new(vec![0u8; size as usize]);
        let pool = Pool::assemble(
            region,
            Mode::Simulated,
            Backend::Sim(Box::new(sim)),
            opts.flush_instruction()?,
            opts.ordering,
            None,
            Path::new("<simulated>"),
            max,
        )?;
        pool.format(size, max)
    }

    /// Opens a pool image (bytes of a pool file, e.g. a crash image) in the
    /// crash simulator. Everything in the image counts as already on media.
    ///
    /// # Errors
    /// Exactly as [`Pool::open`] would for a file with these bytes.
    pub fn from_image(image: &[u8], opts: &PoolOptions) -> Result<Pool> {
        let path = Path::new("<image>");
        let header = Header::validate(&image[..image.len().min(HEADER_BYTES as usize)], path)?;
        if (image.len() as u64) < header.size {
            return Err(PmemError::Truncated {
                path: path.to_path_buf(),
                expected: header.size,
                found: image.len() as u64,
            });
        }
        let size = header.size as usize;
        let region = Region::anonymous(header.max_size as usize)?;
        region.advise_huge(size);
        // SAFETY: the region is a fresh allocation of max_size >= size bytes,
        // and `image` has at least `size` bytes (checked above).
        unsafe { std::ptr::copy_nonoverlapping(image.as_ptr(), region.base(), size) };
        let sim = SimState::new(image[..size].to_vec());
        let pool = Pool::assemble(
            region,
            Mode::Simulated,
            Backend::Sim(Box::new(sim)),
            opts.flush_instruction()?,
            opts.ordering,
            None,
            path,
            header.max_size,
        )?;
        pool.finish_open(header)
    }

    fn map_with_mode(file: &File, path: &Path, size: u64, max: u64, req: ModeRequest) -> Result<(Region, Mode)> {
        let try_sync = matches!(req, ModeRequest::Auto | ModeRequest::Dax);
        let region = Region::map_file(file, size as usize, max as usize, try_sync)?;
        let mode = match req {
            ModeRequest::Auto if region.map_sync() => Mode::Dax,
            ModeRequest::Auto if map::on_ram_filesystem(file) => Mode::Emulated,
            ModeRequest::Auto => Mode::Msync,
            ModeRequest::Dax if region.map_sync() => Mode::Dax,
            ModeRequest::Dax => {
                return Err(PmemError::ModeUnavailable {
                    path: path.to_path_buf(),
                    requested: "dax",
                    why: "the filesystem refused MAP_SYNC (not a DAX filesystem); use emulated or msync".into(),
                })
            }
            ModeRequest::Emulated => Mode::Emulated,
            ModeRequest::Msync => Mode::Msync,
        };
        Ok((region, mode))
    }

    fn backend_for(mode: Mode) -> Backend {
        match mode {
            Mode::Msync => Backend::Msync { dirty: Mutex::new(Vec::new()), fencing: Mutex::new(()) },
            _ => Backend::Hardware,
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn assemble(
        region: Region,
        mode: Mode,
        backend: Backend,
        instr: FlushInstruction,
        ordering: OrderingMode,
        file: Option<File>,
        path: &Path,
        max: u64,
    ) -> Result<Pool> {
        Ok(Pool {
            region,
            size: AtomicU64::new(0),
            max_size: AtomicU64::new(max),
            mode,
            instr,
            ordering,
            backend,
            counters: Counters::default(),
            alloc: Mutex::new(AllocState::empty()),
            file,
            path: path.to_path_buf(),
            uuid: [0; 16],
            opened_unclean: false,
            leaks_reclaimed: AtomicBool::new(false),
            closed: AtomicBool::new(false),
            roots_lock: Mutex::new(()),
            reserve_scopes: AtomicUsize::new(0),
            prepared: Mutex::new(0),
        })
    }

    /// Writes a fresh header and an empty heap. The magic goes last, so a
    /// crash while creating leaves a file that opens as "not a pool".
    fn format(mut self, size: u64, max: u64) -> Result<Pool> {
        self.uuid = *uuid::Uuid::new_v4().as_bytes();
        let bytes = Header::build(self.uuid, size, max, now_secs());
        self.size.store(size, Ordering::Release);
        // SAFETY: the header page is mapped (size >= MIN_POOL_BYTES) and
        // `bytes` is a distinct allocation of HEADER_BYTES bytes.
        unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr().add(8), self.region.base().add(8), bytes.len() - 8) };
        self.persist_always(8, HEADER_BYTES - 8);
        let state = AllocState::format(&self, size)?;
        *self.alloc.lock() = state;
        // SAFETY: as above, the first 8 bytes of the header page.
        unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), self.region.base(), 8) };
        self.persist_always(0, 8);
        Ok(self)
    }

    fn finish_open(mut self, header: Header) -> Result<Pool> {
        self.uuid = header.uuid;
        self.size.store(header.size, Ordering::Release);
        self.max_size.store(header.max_size, Ordering::Release);
        self.opened_unclean = !header.clean;
        for slot in &header.torn_root_slots {
            let off = OFF_ROOTS + slot * ROOT_SLOT_BYTES;
            self.header_fill_zero(off as u64, ROOT_NAME_MAX as u64);
        }
        self.store_header_word(OFF_CLEAN, encode_word(WordField::Clean as u8, &[], 0));
        let state = match AllocState::rebuild(&self) {
            Ok(state) => state,
            Err(e) => {
                // Not opened, so not closed either: dropping must not mark
                // the pool clean (it may have crashed) — only unlock it.
                self.closed.store(true, Ordering::Release);
                return Err(e);
            }
        };
        *self.alloc.lock() = state;
        Ok(self)
    }

    // ----- identity and configuration -------------------------------------

    /// The durability mode.
    pub fn mode(&self) -> Mode {
        self.mode
    }
    /// The flush instruction in use.
    pub fn flush_instruction(&self) -> FlushInstruction {
        self.instr
    }
    /// The ordering mode engines should follow.
    pub fn ordering(&self) -> OrderingMode {
        self.ordering
    }
    /// The pool file's path (`<memory>`, `<simulated>` or `<image>` otherwise).
    pub fn path(&self) -> &Path {
        &self.path
    }
    /// The pool's UUID.
    pub fn uuid(&self) -> uuid::Uuid {
        uuid::Uuid::from_bytes(self.uuid)
    }
    /// Current size in bytes.
    #[inline]
    pub fn size(&self) -> u64 {
        self.size.load(Ordering::Acquire)
    }
    /// Bytes of a file pool's page-cache pages mapped as 2 MiB pages right
    /// now (`None` for in-memory pools and where the kernel does not say).
    /// File pools on a RAM filesystem or DAX ask for huge pages
    /// (`MADV_HUGEPAGE` over a 2 MiB-aligned mapping), which saves most TLB
    /// misses of random lookups; on a RAM filesystem the pages a pool
    /// creation or growth adds are collapsed into them whatever the mount
    /// says (`huge.rs`; Linux 6.1 or later). Pages are mapped when first
    /// touched, so this grows with use. DAX mappings are not counted: the
    /// kernel's accounting skips device pages, so there it reads 0 whatever
    /// the page size. Reading it walks the process's page tables: not for
    /// a hot path.
    pub fn huge_page_bytes(&self) -> Option<u64> {
        self.region.huge_page_bytes(usize::try_from(self.size()).unwrap_or(usize::MAX))
    }
    /// Backs the fresh pages `[offset, offset + len)` of a file pool on a
    /// RAM filesystem with 2 MiB pages (`huge.rs`); nothing for other
    /// pools. The range must be mapped, unused and not yet reserved; the
    /// caller reserves it right after. A range the filesystem has no room
    /// for is left alone: the reservation after it fails anyway, and a
    /// collapse would first take 2 MiB pages until the filesystem is full,
    /// for nothing.
    pub(crate) fn collapse_fresh_pages(&self, offset: u64, len: u64) {
        let Some(file) = &self.file else { return };
        if self.region.map_sync() || !matches!(map::ram_filesystem_free(file), Some(free) if free >= len) {
            return;
        }
        let (Ok(offset), Ok(len)) = (usize::try_from(offset), usize::try_from(len)) else { return };
        // SAFETY: the caller has mapped `[offset, offset + len)` of the
        // file at the same offsets of the region, which stays mapped for
        // the pool's life.
        unsafe { crate::huge::collapse_fresh(file, self.region.base(), offset, len) };
    }
    /// Largest size the pool may grow to.
    pub fn max_size(&self) -> u64 {
        self.max_size.load(Ordering::Acquire)
    }
    /// Where the heap starts.
    pub fn heap_offset(&self) -> u64 {
        HEADER_BYTES
    }
    /// Whether the last session ended without a clean close (a crash):
    /// engines then run their recovery and [`Pool::reclaim_leaks`].
    pub fn opened_unclean(&self) -> bool {
        self.opened_unclean
    }
    /// Whether [`Pool::reclaim_leaks`] has run in this session.
    pub fn leaks_reclaimed(&self) -> bool {
        self.leaks_reclaimed.load(Ordering::Acquire)
    }
    pub(crate) fn set_leaks_reclaimed(&self) {
        self.leaks_reclaimed.store(true, Ordering::Release);
    }
    /// Write statistics since open or the last reset.
    pub fn write_stats(&self) -> WriteStats {
        self.counters.snapshot()
    }
    /// Resets the write statistics.
    pub fn reset_write_stats(&self) {
        self.counters.reset()
    }
    /// The crash simulator's state, for simulated pools.
    pub fn simulator(&self) -> Option<&SimState> {
        match &self.backend {
            Backend::Sim(s) => Some(s),
            _ => None,
        }
    }

    // ----- close ------------------------------------------------------------------

    /// Closes the pool: persists the clean-shutdown flag and releases the lock.
    ///
    /// # Errors
    /// [`PmemError::Io`] if the final msync fails.
    pub fn close(self) -> Result<()> {
        self.close_inner()
    }

    /// Closes the pool as [`Pool::close`] does (a fence, then the clean
    /// flag) but keeps it mapped: what a simulated pool's media image shows
    /// afterwards is what a clean close leaves (for tests). Later writes are
    /// not made durable by the drop.
    ///
    /// # Errors
    /// [`PmemError::Io`] if the final msync fails.
    pub fn close_in_place(&self) -> Result<()> {
        self.close_inner()
    }

    /// Marks the pool as needing recovery at its next open: dropping or
    /// closing it will not set the clean-shutdown flag. An engine calls it
    /// when its recovery failed, so the next open recovers again instead of
    /// trusting a pool that was never repaired.
    pub fn keep_unclean(&self) {
        self.closed.store(true, Ordering::Release);
    }

    fn close_inner(&self) -> Result<()> {
        if self.closed.swap(true, Ordering::AcqRel) {
            return Ok(());
        }
        // Whatever an engine flushed without a fence yet (frees made
        // durable at its next fence, `Pool::free_many_deferred`), and the
        // frees left for the close (`Pool::free_many_lazy`), are durable
        // before the clean flag can be.
        self.flush_lazy_frees();
        self.fence();
        if matches!(self.backend, Backend::Msync { .. }) {
            self.region.msync(0, self.size() as usize)?;
        }
        self.store_header_word(OFF_CLEAN, encode_word(WordField::Clean as u8, &[], 1));
        if matches!(self.backend, Backend::Msync { .. }) {
            self.region.msync(0, HEADER_BYTES as usize)?;
        }
        Ok(())
    }
}

impl Drop for Pool {
    fn drop(&mut self) {
        let _ = self.close_inner();
        if let Some(file) = &self.file {
            unlock_file(file);
        }
    }
}

/// Allocates the blocks of a pool file's first `size` bytes, so that no
/// store to the mapping can find the filesystem full (see
/// `map::reserve_file_space`).
fn reserve_pages(file: &File, path: &Path, size: u64) -> Result<()> {
    map::reserve_file_space(file, 0, size).map_err(|e| {
        let why = if map::is_no_space(&e) {
            format!(
                "reserving {size} bytes for pool file {}: the filesystem is full (free space there, or choose a smaller pool size)",
                path.display()
            )
        } else {
            format!("reserving {size} bytes for pool file {}", path.display())
        };
        PmemError::io(why, e)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_maximum_of_a_huge_pool_is_the_limit_not_an_error() {
        let limit = WORD_VALUE_MAX / PAGE_BYTES * PAGE_BYTES;
        let size = 100 << 40;
        assert_eq!(create_sizes(&PoolOptions { size, ..PoolOptions::default() }).unwrap(), (size, limit));
        // Asked for explicitly, a maximum over the limit is refused.
        let over = PoolOptions { size, max_size: Some(limit + 1), ..PoolOptions::default() };
        assert!(matches!(create_sizes(&over), Err(PmemError::TooLarge { .. })));
        assert_eq!(create_sizes(&PoolOptions::default()).unwrap(), (64 << 20, 1 << 30));
    }
}
