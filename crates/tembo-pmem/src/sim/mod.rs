//! The crash simulator.
//!
//! A simulated pool keeps two images: the *CPU image* — the pool's memory,
//! which every load and store sees — and the *media image* — what has
//! reached persistent media. `flush` marks cache lines as written back;
//! `fence` copies them to the media image. Any other line whose CPU contents
//! differ from the media is dirty: it may or may not have been evicted when
//! the power fails. A crash therefore produces the media image plus any subset
//! of the dirty lines (see [`CrashPolicy`]).
//!
//! A crash point is a fence: crash point *k* is the machine state just before
//! fence *k* completes (fences counted from 0 since the pool was made). A
//! [`FenceHook`] sees every fence and can build crash images there; the sweep
//! harness ([`sweep`]) uses it to check every (or a sample of the) crash
//! points of a workload in one run.
//!
//! Crash images are copies, so a simulated workload must be single-threaded
//! (or quiet at its fences) for an image to be a state the machine was in.

mod image;
mod points;
mod sweep;

pub use image::{build_crash_image, CrashPolicy};
pub use points::CrashPoints;
pub use sweep::{sweep, AckCounter, CrashState, SweepConfig, SweepReport};

use std::cell::OnceCell;
use std::collections::BTreeSet;
use std::sync::atomic::{AtomicU64, Ordering};

use parking_lot::Mutex;

use crate::persist::CACHE_LINE_BYTES;
use crate::Pool;

/// Called at every fence of a simulated pool, before the fence takes effect.
pub type FenceHook = Box<dyn FnMut(&FenceEvent<'_>) + Send>;

/// A fence about to complete: a crash point.
#[derive(Debug)]
pub struct FenceEvent<'a> {
    /// Index of this fence (0-based, since the pool was made or imaged).
    pub fence_index: u64,
    pool: &'a Pool,
    media: &'a [u8],
    /// The CPU image and its dirty lines, read once however many crash
    /// images (one per policy) are built at this fence.
    dirty: OnceCell<(Vec<u8>, Vec<usize>)>,
}

impl FenceEvent<'_> {
    /// The pool file a crash here would leave, under `policy`.
    pub fn crash_image(&self, policy: CrashPolicy, rng: &mut impl rand::Rng) -> Vec<u8> {
        let (cpu, dirty) = self.cpu_and_dirty();
        image::build_from_dirty(cpu, self.media, dirty, policy, rng)
    }

    /// Number of dirty (CPU differs from media) cache lines.
    pub fn dirty_lines(&self) -> usize {
        self.cpu_and_dirty().1.len()
    }

    fn cpu_and_dirty(&self) -> &(Vec<u8>, Vec<usize>) {
        self.dirty.get_or_init(|| {
            let cpu = cpu_image(self.pool, self.pool.size() as usize);
            let dirty = image::dirty_lines(&cpu, self.media).collect();
            (cpu, dirty)
        })
    }
}

/// The simulator's side of a simulated pool.
pub struct SimState {
    media: Mutex<Vec<u8>>,
    pending: Mutex<BTreeSet<u64>>,
    fences: AtomicU64,
    hook: Mutex<Option<FenceHook>>,
    line_writes: Mutex<Vec<u32>>,
}

impl std::fmt::Debug for SimState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SimState")
            .field("media_bytes", &self.media.lock().len())
            .field("fences", &self.fences.load(Ordering::Relaxed))
            .finish()
    }
}

impl SimState {
    pub(crate) fn new(media: Vec<u8>) -> SimState {
        let lines = media.len() / CACHE_LINE_BYTES as usize;
        SimState {
            media: Mutex::new(media),
            pending: Mutex::new(BTreeSet::new()),
            fences: AtomicU64::new(0),
            hook: Mutex::new(None),
            line_writes: Mutex::new(vec![0; lines]),
        }
    }

    pub(crate) fn flush(&self, offset: u64, len: u64) -> u64 {
        let first = offset / CACHE_LINE_BYTES;
        let last = (offset + len - 1) / CACHE_LINE_BYTES;
        self.pending.lock().extend(first..=last);
        last - first + 1
    }

    pub(crate) fn fence(&self, pool: &Pool) {
        let index = self.fences.fetch_add(1, Ordering::AcqRel);
        let size = pool.size() as usize;
        let mut hook = self.hook.lock();
        let mut media = self.media.lock();
        if let Some(h) = hook.as_mut() {
            h(&FenceEvent { fence_index: index, pool, media: &media, dirty: OnceCell::new() });
        }
        let pending = std::mem::take(&mut *self.pending.lock());
        let mut writes = self.line_writes.lock();
        for line in pending {
            let a = (line * CACHE_LINE_BYTES) as usize;
            let b = (a + CACHE_LINE_BYTES as usize).min(size).min(media.len());
            if a < b {
                pool.read_any(a as u64, &mut media[a..b]);
                if let Some(w) = writes.get_mut(line as usize) {
                    *w = w.saturating_add(1);
                }
            }
        }
    }

    pub(crate) fn grow(&self, new_size: usize) {
        self.media.lock().resize(new_size, 0);
        self.line_writes.lock().resize(new_size / CACHE_LINE_BYTES as usize, 0);
    }

    /// Installs (or removes, with `None`) the hook called at every fence.
    pub fn set_fence_hook(&self, hook: Option<FenceHook>) {
        *self.hook.lock() = hook;
    }

    /// Fences executed so far.
    pub fn fence_count(&self) -> u64 {
        self.fences.load(Ordering::Acquire)
    }

    /// A copy of the media image.
    pub fn media_image(&self) -> Vec<u8> {
        self.media.lock().clone()
    }

    /// The pool file a crash now would leave, under `policy`.
    pub fn crash_image(&self, pool: &Pool, policy: CrashPolicy, rng: &mut impl rand::Rng) -> Vec<u8> {
        let cpu = cpu_image(pool, pool.size() as usize);
        build_crash_image(&cpu, &self.media.lock(), policy, rng)
    }

    /// How often each cache line reached the media (fences that carried a
    /// flush of it): the raw data of a write heat map.
    pub fn line_write_counts(&self) -> Vec<u32> {
        self.line_writes.lock().clone()
    }

    /// Line write counts summed per 4 KiB page.
    pub fn page_write_counts(&self) -> Vec<u64> {
        let per_page = (crate::header::PAGE_BYTES / CACHE_LINE_BYTES) as usize;
        self.line_writes.lock().chunks(per_page).map(|c| c.iter().map(|w| u64::from(*w)).sum()).collect()
    }
}

fn cpu_image(pool: &Pool, size: usize) -> Vec<u8> {
    let mut cpu = vec![0u8; size];
    pool.read_any(0, &mut cpu);
    cpu
}
