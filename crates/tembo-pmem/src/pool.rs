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
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

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

/// Where the pool lives and what "durable" means for it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Mode {
    /// A DAX file mapped with `MAP_SYNC`: flush + fence is power-fail durable.
    Dax,
    /// A file mapped shared without `MAP_SYNC` (e.g. on `/dev/shm`): flush +
    /// fence is the same code and cost; data survives a process crash, not
    /// power loss.
    Emulated,
    /// A file on an ordinary filesystem: a fence also `msync`s the pages
    /// flushed since the last fence; power-fail durable, page-granular cost.
    Msync,
    /// Anonymous memory: nothing survives the process (tests, measurements).
    Volatile,
    /// The crash simulator: a CPU image and a media image in memory.
    Simulated,
}

impl Mode {
    /// Lower-case name, as shown by `stat` and `INFO persistence`.
    pub fn name(self) -> &'static str {
        match self {
            Mode::Dax => "dax",
            Mode::Emulated => "emulated",
            Mode::Msync => "msync",
            Mode::Volatile => "volatile",
            Mode::Simulated => "simulated",
        }
    }

    /// What an acknowledged write survives in this mode.
    pub fn guarantee(self) -> &'static str {
        match self {
            Mode::Dax => "power failure and process crash (MAP_SYNC on a DAX filesystem)",
            Mode::Emulated => "process crash (kill -9), not power failure or OS crash",
            Mode::Msync => "power failure and process crash (msync of dirty pages at each fence)",
            Mode::Volatile => "nothing: the pool lives in anonymous memory",
            Mode::Simulated => "simulated crashes only (crash simulator)",
        }
    }
}

impl std::fmt::Display for Mode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// The mode asked for when opening or creating a file pool.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum ModeRequest {
    /// `dax` if `MAP_SYNC` is granted, else `emulated` on a RAM filesystem,
    /// else `msync`.
    #[default]
    Auto,
    /// `dax` or an error.
    Dax,
    /// Shared mapping with flush + fence only.
    Emulated,
    /// Flush + `msync` at fences.
    Msync,
}

impl std::str::FromStr for ModeRequest {
    type Err = String;
    fn from_str(s: &str) -> std::result::Result<Self, String> {
        match s.to_ascii_lowercase().as_str() {
            "auto" => Ok(ModeRequest::Auto),
            "dax" => Ok(ModeRequest::Dax),
            "emulated" => Ok(ModeRequest::Emulated),
            "msync" => Ok(ModeRequest::Msync),
            o => Err(format!("unknown mode {o:?}: use auto, dax, emulated or msync")),
        }
    }
}

/// How to create or open a pool.
#[derive(Clone, Debug)]
pub struct PoolOptions {
    /// Initial size in bytes (create only); rounded up to whole pages.
    pub size: u64,
    /// Largest size the pool may grow to (create only; `None`: 16 × size, at
    /// least 1 GiB).
    pub max_size: Option<u64>,
    /// Durability mode wanted (file pools).
    pub mode: ModeRequest,
    /// How engines order their dependent stores.
    pub ordering: OrderingMode,
    /// Flush instruction; `None`: `TEMBO_FLUSH` if set, else the best available.
    pub flush: Option<FlushInstruction>,
}

impl Default for PoolOptions {
    fn default() -> Self {
        PoolOptions {
            size: 64 << 20,
            max_size: None,
            mode: ModeRequest::Auto,
            ordering: OrderingMode::Fast,
            flush: None,
        }
    }
}

impl PoolOptions {
    /// Options for a pool of `size` bytes, everything else default.
    pub fn with_size(size: u64) -> Self {
        PoolOptions { size, ..PoolOptions::default() }
    }

    fn flush_instruction(&self) -> Result<FlushInstruction> {
        match self.flush {
            Some(i) if i.is_available() => Ok(i),
            Some(i) => Err(PmemError::ModeUnavailable {
                path: PathBuf::new(),
                requested: "flush instruction",
                why: format!("this CPU has no {i} instruction"),
            }),
            None => FlushInstruction::from_env_or_detect().map_err(|why| PmemError::ModeUnavailable {
                path: PathBuf::new(),
                requested: "flush instruction",
                why,
            }),
        }
    }
}

/// How the persist primitives reach durability.
#[derive(Debug)]
enum Backend {
    /// Flush instructions on a DAX or emulated mapping.
    Hardware,
    /// Pages flushed since the last fence, `msync`ed by the fence.
    Msync { dirty: Mutex<Vec<(u64, u64)>> },
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
    let too_large =
        |what, requested| PmemError::TooLarge { what, requested, limit: WORD_VALUE_MAX / PAGE_BYTES * PAGE_BYTES };
    let size =
        round_up_pages(opts.size).filter(|s| *s <= WORD_VALUE_MAX).ok_or_else(|| too_large("pool size", opts.size))?;
    let max = match opts.max_size {
        Some(m) => m,
        None => size.saturating_mul(DEFAULT_MAX_FACTOR).clamp(1 << 30, WORD_VALUE_MAX),
    };
    let max =
        round_up_pages(max).filter(|s| *s <= WORD_VALUE_MAX).ok_or_else(|| too_large("maximum pool size", max))?;
    if max < size {
        return Err(PmemError::SizeTooSmall { requested: max, minimum: size });
    }
    Ok((size, max))
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

impl Pool {
    /// Creates a new pool file at `path` (which must not exist).
    ///
    /// # Errors
    /// [`PmemError::SizeTooSmall`], [`PmemError::Io`] (the file exists, no
    /// space), [`PmemError::ModeUnavailable`] (`dax` asked for on a non-DAX
    /// filesystem).
    pub fn create(path: impl AsRef<Path>, opts: &PoolOptions) -> Result<Pool> {
        let path = path.as_ref();
        let (size, max) = create_sizes(opts)?;
        let instr = opts.flush_instruction()?;
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(path)
            .map_err(|e| PmemError::io(format!("creating pool file {}", path.display()), e))?;
        let made = (|| {
            lock_file(&file, path)?;
            file.set_len(size).map_err(|e| PmemError::io(format!("sizing {} to {size} bytes", path.display()), e))?;
            let (region, mode) = Self::map_with_mode(&file, path, size, max, opts.mode)?;
            let backend = Self::backend_for(mode);
            let pool = Pool::assemble(region, mode, backend, instr, opts.ordering, Some(file), path, max)?;
            pool.format(size, max)
        })();
        if made.is_err() {
            let _ = std::fs::remove_file(path);
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
        let len = file.metadata().map_err(|e| PmemError::io(format!("stat of {}", path.display()), e))?.len();
        let mut head = Vec::with_capacity(HEADER_BYTES as usize);
        (&mut file)
            .take(HEADER_BYTES)
            .read_to_end(&mut head)
            .map_err(|e| PmemError::io(format!("reading header of {}", path.display()), e))?;
        let header = Header::validate(&head, path)?;
        if len < header.size {
            return Err(PmemError::Truncated { path: path.to_path_buf(), expected: header.size, found: len });
        }
        let (region, mode) = Self::map_with_mode(&file, path, header.size, header.max_size, opts.mode)?;
        let backend = Self::backend_for(mode);
        let pool = Pool::assemble(region, mode, backend, instr, opts.ordering, Some(file), path, header.max_size)?;
        pool.finish_open(header)
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
            Mode::Msync => Backend::Msync { dirty: Mutex::new(Vec::new()) },
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
        let state = AllocState::rebuild(&self)?;
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
    pub fn size(&self) -> u64 {
        self.size.load(Ordering::Acquire)
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
            Backend::Msync { dirty } => {
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
            Backend::Msync { dirty } => {
                let ranges = std::mem::take(&mut *dirty.lock());
                self.counters.add_fence();
                for (off, len) in coalesce_pages(ranges) {
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

    // ----- header -------------------------------------------------------------

    fn header_word(&self, off: usize) -> &AtomicU64 {
        debug_assert!(off % 8 == 0 && (off as u64) < HEADER_BYTES);
        // SAFETY: the header page is always mapped; `off` is 8-aligned and
        // inside it (debug-checked; all callers pass header constants).
        unsafe { &*self.region.base().add(off).cast::<AtomicU64>() }
    }

    pub(crate) fn header_load(&self, off: usize) -> u64 {
        self.header_word(off).load(Ordering::Acquire)
    }

    fn store_header_word(&self, off: usize, word: u64) {
        self.header_word(off).store(word, Ordering::Release);
        self.persist_always(off as u64, 8);
    }

    fn header_fill_zero(&self, off: u64, len: u64) {
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

    fn root_slot(&self, slot: usize) -> Option<(String, u64)> {
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

    // ----- growth -----------------------------------------------------------------

    /// Extends the pool's size word after the allocator has laid out the new
    /// pages. Called with the allocator lock held.
    pub(crate) fn extend_mapping(&self, new_size: u64) -> Result<()> {
        let old = self.size();
        debug_assert!(new_size > old && new_size <= self.max_size());
        match (&self.file, &self.backend) {
            (Some(file), _) => {
                file.set_len(new_size)
                    .map_err(|e| PmemError::io(format!("growing {} to {new_size} bytes", self.path.display()), e))?;
                self.region.grow_file(file, old as usize, new_size as usize)?;
            }
            (None, Backend::Sim(sim)) => sim.grow(new_size as usize),
            (None, _) => {}
        }
        // Visible to `raw` (and so to the allocator) before the size word
        // makes the pages part of the pool on media.
        self.size.store(new_size, Ordering::Release);
        Ok(())
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
    pub(crate) fn growth_limit(&self) -> u64 {
        self.max_size().min(self.region.reserved() as u64)
    }

    // ----- close ------------------------------------------------------------------

    /// Closes the pool: persists the clean-shutdown flag and releases the lock.
    ///
    /// # Errors
    /// [`PmemError::Io`] if the final msync fails.
    pub fn close(self) -> Result<()> {
        self.close_inner()
    }

    fn close_inner(&self) -> Result<()> {
        if self.closed.swap(true, Ordering::AcqRel) {
            return Ok(());
        }
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
    }
}

fn validate_root_name(name: &str) -> Result<[u8; ROOT_NAME_MAX]> {
    let b = name.as_bytes();
    if b.len() < ROOT_NAME_MIN || b.len() > ROOT_NAME_MAX || b.contains(&0) {
        return Err(PmemError::BadRoot { name: name.into(), why: "names have 2 to 24 bytes and no NUL" });
    }
    let mut raw = [0u8; ROOT_NAME_MAX];
    raw[..b.len()].copy_from_slice(b);
    Ok(raw)
}

/// Merges byte ranges into sorted, disjoint, page-aligned ranges.
fn coalesce_pages(mut ranges: Vec<(u64, u64)>) -> Vec<(u64, u64)> {
    let page = map::page_size() as u64;
    ranges.sort_unstable();
    let mut out: Vec<(u64, u64)> = Vec::with_capacity(ranges.len());
    for (off, len) in ranges {
        let start = off / page * page;
        let end = (off + len).div_ceil(page) * page;
        match out.last_mut() {
            Some((s, l)) if *s + *l >= start => *l = (*l).max(end - *s),
            _ => out.push((start, end - start)),
        }
    }
    out
}

#[cold]
fn panic_on_lost_durability(e: &PmemError) -> ! {
    // A write that cannot be made durable must never be acknowledged; the
    // fence has no error channel, so the process stops here, before any reply.
    eprintln!("tembo: fatal: msync failed, durability cannot be guaranteed: {e}");
    std::process::abort()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn coalesce_merges_adjacent_pages() {
        let p = map::page_size() as u64;
        let r = coalesce_pages(vec![(p * 3 + 5, 10), (0, 1), (p * 3 + 100, 8), (p, 1)]);
        assert_eq!(r, vec![(0, 2 * p), (3 * p, p)]);
    }
}
