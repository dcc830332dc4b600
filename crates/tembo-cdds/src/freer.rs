//! Frees off the writer's critical path: the writer hands the blocks its
//! limbo may free to the background GC thread, which frees them.
//!
//! Why: freeing a retired block waits for misses in the pool's allocator
//! (the slab's index entry, its bitmap word, its slab record), and walking
//! a retired subtree reads every slot of its nodes. A random delete retires
//! a record, and in a profile of 1M durable random deletes the writer spent
//! 13–14% of its time freeing, after its commit but before returning
//! (batching the frees 32 at a time did not change that). The GC thread is
//! idle on another core meanwhile.
//!
//! What it promises:
//! - only blocks already freeable go over (no read op can reach them), so
//!   the thread frees them whenever it gets to them;
//! - nothing is lost from sight: what waits here is counted by `check`
//!   (not a leak), marked by the recovery's leak sweep before it starts,
//!   and freed by the tree's drop, by `stop_gc`, and by a write that finds
//!   the pool full before it gives up;
//! - the writer never waits for the thread: it hands over only when the
//!   queue's lock is free and the queue short, else keeps the blocks in its
//!   limbo, and frees them itself past [`LIMBO_MAX`] (a thread that does
//!   not keep up costs what freeing inline always cost);
//! - without a GC thread, writers free their own blocks, as before.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

use parking_lot::{Condvar, Mutex};
use tembo_pmem::Pool;

use crate::limbo::Limbo;

/// Most blocks and subtree roots the queue holds before writers stop
/// handing more over.
const QUEUE_MAX: usize = 1 << 14;
/// Most blocks and subtree roots a writer lets wait in its limbo while the
/// queue is busy or full, before it frees them itself.
pub(crate) const LIMBO_MAX: usize = 4096;

/// What wakes the GC thread (under [`Freer::wake`]'s lock).
#[derive(Debug, Default)]
pub(crate) struct WakeState {
    /// The thread is to stop.
    pub stop: bool,
    /// Blocks were handed over since the thread last looked.
    pub work: bool,
}

/// The hand-off between the writer and the GC thread.
#[derive(Debug, Default)]
pub(crate) struct Freer {
    /// Freeable blocks and subtrees; the thread frees them holding this
    /// lock, so whoever else takes it sees each block either here or freed.
    queue: Mutex<Limbo>,
    /// Whether a GC thread runs to free them.
    active: AtomicBool,
    /// Blocks and subtree roots handed over since the tree was opened.
    handed: AtomicU64,
    /// The GC thread's wake-up (its stop request too).
    pub(crate) wake: Arc<(Mutex<WakeState>, Condvar)>,
}

impl Freer {
    /// A GC thread starts (`true`) or has stopped (`false`).
    pub(crate) fn set_active(&self, on: bool) {
        self.active.store(on, Ordering::Release);
    }

    /// With the writer lock: moves what `limbo` may free now to the queue
    /// when a GC thread runs and the queue is free and short, waking the
    /// thread. Returns whether the writer may leave what remains in its
    /// limbo (else it frees it itself).
    pub(crate) fn hand_over(&self, limbo: &mut Limbo, min_pinned: Option<u64>) -> bool {
        if !self.active.load(Ordering::Acquire) {
            return false;
        }
        if let Some(mut q) = self.queue.try_lock() {
            if q.waiting() < QUEUE_MAX {
                let was_empty = q.is_empty();
                let before = limbo.waiting();
                limbo.move_freeable(&mut q, min_pinned);
                self.handed.fetch_add((before - limbo.waiting()) as u64, Ordering::Relaxed);
                drop(q);
                if was_empty {
                    self.wake.0.lock().work = true;
                    self.wake.1.notify_one();
                }
            }
        }
        limbo.waiting() < LIMBO_MAX
    }

    /// Frees everything queued, unless the leak sweep runs (it needs every
    /// block it may reach to stay put). Returns whether it freed anything.
    pub(crate) fn drain(&self, pool: &Pool, sweeping: &AtomicBool) -> bool {
        let mut q = self.queue.lock();
        if q.is_empty() || sweeping.load(Ordering::Acquire) {
            return false;
        }
        let blocks = q.take_freeable(pool, None, usize::MAX);
        // Lazily, as the writer's own frees: see `TreeCore::free_limbo`.
        let _ = pool.free_many_lazy(&blocks);
        true
    }

    /// Frees everything queued, sweep or not (the tree is closing: no
    /// sweep runs any more).
    pub(crate) fn drain_for_close(&self, pool: &Pool) {
        let blocks = self.queue.lock().take_freeable(pool, None, usize::MAX);
        let _ = pool.free_many(&blocks);
    }

    /// The queue, locked: for `check` and the leak sweep, which must see
    /// every waiting block (expand its subtrees with
    /// [`Limbo::expand_all`]).
    pub(crate) fn queue(&self) -> parking_lot::MutexGuard<'_, Limbo> {
        self.queue.lock()
    }

    /// Blocks and subtree roots handed over since the tree was opened.
    pub(crate) fn handed(&self) -> u64 {
        self.handed.load(Ordering::Relaxed)
    }

    /// Blocks and subtree roots queued.
    pub(crate) fn waiting(&self) -> usize {
        self.queue.lock().waiting()
    }
}
