//! The writer lock, and writes that ride in another thread's commit.
//!
//! The tree has one writer at a time. When several threads write at once,
//! handing the lock from one to the next costs more than the writes: each
//! hand-off moves the hot nodes' cache lines to another core and often
//! wakes a sleeping thread, and each write pays a commit of its own. On a
//! 16-core machine, 16 threads each writing its own keys ran at 0.6x one
//! thread's rate (`docs/results/kamino.md`, session 20).
//!
//! So a write that finds the lock taken does not queue on the mutex. It
//! copies its operations into a [`Request`] on the combining queue and
//! waits. Whoever holds the lock for a write next takes every queued
//! request and applies them after its own operations in the same batch:
//! one version, one commit store, then each request gets its own outcome
//! (flat combining). Each request stays atomic: a batch is all or nothing,
//! and if a combined batch fails (a full pool) it is undone and every
//! request runs again alone, with the full-pool handling of a lone write.
//! No request is answered before the commit that holds it is persisted.
//!
//! Waiting: a waiter spins while the writer runs, then parks. The lock's
//! guard, when dropped, wakes the first waiter still queued, which then
//! takes the lock and serves the queue itself, so a request never waits
//! on a lock holder that does not combine (GC, snapshots, recovery).
//!
//! Promises: a request is answered exactly once, by the thread that
//! applied it or with an error if that thread panicked; requests are
//! taken from the queue only under the writer lock, and answered before
//! that lock is released.

use std::collections::VecDeque;
use std::ops::{Deref, DerefMut, Range};
use std::sync::atomic::{fence, AtomicU32, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::Thread;
use std::time::Duration;

use parking_lot::{Mutex, MutexGuard};

use crate::error::{CddsError, Result};
use crate::tree::WriterState;
use crate::write::{Op, WriteOutcome};

/// Largest request (keys and values together) that is copied to ride in
/// another thread's batch; a bigger one waits for the lock itself, as
/// copying it would cost more than the wait.
pub(crate) const MAX_COMBINED_BYTES: usize = 64 * 1024;
/// Most requests one batch takes from the queue: bounds the leader's
/// latency and the batch's size.
pub(crate) const MAX_COMBINED_REQUESTS: usize = 64;

/// Spins on a waiter's state before it parks (a batch of a few writes
/// takes some microseconds; parking and waking costs about as much).
const SPINS: u32 = 2_000;
/// A parked waiter looks at the lock again after this long even if no one
/// woke it (a safety net: every release wakes the first waiter); each
/// further nap doubles, up to `MAX_PARK`.
const PARK: Duration = Duration::from_millis(1);
const MAX_PARK: Duration = Duration::from_millis(8);

const WAITING: u32 = 0;
const PARKED: u32 = 1;
const DONE: u32 = 2;

/// The writer lock and the combining queue.
#[derive(Debug, Default)]
pub(crate) struct Writer {
    state: Mutex<WriterState>,
    queue: Mutex<VecDeque<Arc<Request>>>,
    /// Requests in `queue` (read without its mutex on every release).
    queued: AtomicU64,
    /// Requests applied in another thread's batch, since open.
    combined: AtomicU64,
    /// Why writes are refused, once a batch stopped midway (see
    /// [`Writer::poison`]).
    poisoned: Mutex<Option<String>>,
    /// Whether `poisoned` holds a reason (read on every write).
    is_poisoned: std::sync::atomic::AtomicBool,
}

/// The writer lock held: the writer's state. Dropping it releases the
/// lock and wakes the first queued waiter.
pub(crate) struct WriterGuard<'a> {
    guard: Option<MutexGuard<'a, WriterState>>,
    writer: &'a Writer,
}

impl Deref for WriterGuard<'_> {
    type Target = WriterState;
    fn deref(&self) -> &WriterState {
        self.guard.as_ref().expect("held until drop")
    }
}

impl DerefMut for WriterGuard<'_> {
    fn deref_mut(&mut self) -> &mut WriterState {
        self.guard.as_mut().expect("held until drop")
    }
}

impl WriterGuard<'_> {
    /// Releases the lock to a thread waiting on the mutex, if any, before
    /// this one can take it again (a background step yielding to writes).
    pub(crate) fn unlock_fair(mut self) {
        if let Some(g) = self.guard.take() {
            MutexGuard::unlock_fair(g);
        }
    }
}

impl Drop for WriterGuard<'_> {
    fn drop(&mut self) {
        if let Some(g) = self.guard.take() {
            drop(g);
        }
        // Pairs with the fence in `Writer::enqueue`: either the waiter sees
        // the lock free, or this sees its request.
        fence(Ordering::SeqCst);
        if self.writer.queued.load(Ordering::Relaxed) > 0 {
            if let Some(first) = self.writer.queue.lock().front() {
                first.wake();
            }
        }
    }
}

impl Writer {
    /// Takes the writer lock, waiting for it.
    pub(crate) fn lock(&self) -> WriterGuard<'_> {
        WriterGuard { guard: Some(self.state.lock()), writer: self }
    }

    /// Takes the writer lock if it is free.
    pub(crate) fn try_lock(&self) -> Option<WriterGuard<'_>> {
        self.state.try_lock().map(|g| WriterGuard { guard: Some(g), writer: self })
    }

    /// Refuses every later write: a batch stopped midway (a panic, or an
    /// undo that failed) may have left entries at the version the next
    /// batch would commit, and only recovery (a reopen) removes them.
    pub(crate) fn poison(&self, why: &str) {
        self.poisoned.lock().get_or_insert_with(|| why.to_string());
        self.is_poisoned.store(true, Ordering::Release);
    }

    /// Whether [`Writer::poison`] was called.
    pub(crate) fn is_poisoned(&self) -> bool {
        self.is_poisoned.load(Ordering::Acquire)
    }

    /// The error for writes once [`Writer::poison`]ed.
    pub(crate) fn check_poisoned(&self) -> Result<()> {
        if !self.is_poisoned() {
            return Ok(());
        }
        let why = self.poisoned.lock().clone().unwrap_or_default();
        Err(CddsError::WriterPoisoned(why))
    }

    /// Requests applied in another thread's batch since open.
    pub(crate) fn combined(&self) -> u64 {
        self.combined.load(Ordering::Relaxed)
    }

    fn enqueue(&self, req: Arc<Request>) {
        let mut q = self.queue.lock();
        q.push_back(req);
        self.queued.store(q.len() as u64, Ordering::Relaxed);
        drop(q);
        fence(Ordering::SeqCst);
    }

    /// Takes up to [`MAX_COMBINED_REQUESTS`] queued requests (the caller
    /// holds the lock, through `_held`).
    pub(crate) fn take_queued(&self, _held: &mut WriterState) -> Served<'_> {
        if !self.has_queued() {
            return Served { requests: Vec::new(), writer: self };
        }
        let mut q = self.queue.lock();
        let n = q.len().min(MAX_COMBINED_REQUESTS);
        let taken: Vec<Arc<Request>> = q.drain(..n).collect();
        self.queued.store(q.len() as u64, Ordering::Relaxed);
        Served { requests: taken, writer: self }
    }

    /// Whether writes wait in the queue.
    pub(crate) fn has_queued(&self) -> bool {
        self.queued.load(Ordering::Relaxed) > 0
    }

    /// Makes [`Writer::has_queued`] true until the queue is next served
    /// (tests of what gives way to waiting writers).
    #[cfg(test)]
    pub(crate) fn pretend_queued(&self) {
        self.queued.store(1, Ordering::Relaxed);
    }

    /// Runs `ops` through another thread's batch, or leads a batch of the
    /// queue itself once the lock is free. `lead` is the write path with
    /// the lock held and the queue to serve.
    pub(crate) fn ride(&self, ops: &[Op<'_>], lead: impl Fn(&mut WriterGuard<'_>)) -> Result<WriteOutcome> {
        let req = Arc::new(Request::new(ops));
        self.enqueue(req.clone());
        let mut spins = 0u32;
        let mut park = PARK;
        loop {
            if let Some(r) = req.take_if_done() {
                return r;
            }
            if !self.state.is_locked() {
                if let Some(mut ws) = self.try_lock() {
                    if let Some(r) = req.take_if_done() {
                        return r; // answered by the last holder
                    }
                    // Still queued (answered requests are gone before the
                    // lock is released): serve the queue, this one in it.
                    lead(&mut ws);
                    drop(ws);
                    if let Some(r) = req.take_if_done() {
                        return r;
                    }
                    continue;
                }
            }
            spins += 1;
            if spins < SPINS {
                std::hint::spin_loop();
                if spins % 64 == 0 {
                    std::thread::yield_now();
                }
                continue;
            }
            // After the first nap, no more spinning, and longer naps: a
            // release wakes the first waiter, and an answer its owner, so
            // the time-out is only a safety net, and a long hold (GC,
            // `check`) should not cost every waiter a core.
            req.park(&self.state, park);
            park = (park * 2).min(MAX_PARK);
        }
    }

    /// Counts requests that were applied in a batch of another thread.
    pub(crate) fn count_combined(&self, n: usize) {
        self.combined.fetch_add(n as u64, Ordering::Relaxed);
    }
}

/// One write waiting to ride in a batch: its operations, copied, and the
/// slot for its outcome.
#[derive(Debug)]
pub(crate) struct Request {
    bytes: Vec<u8>,
    ops: Vec<(Range<usize>, Option<Range<usize>>)>,
    state: AtomicU32,
    outcome: Mutex<Option<Result<WriteOutcome>>>,
    waiter: Thread,
}

impl Request {
    fn new(ops: &[Op<'_>]) -> Request {
        let mut bytes = Vec::with_capacity(op_bytes(ops));
        let mut copied = Vec::with_capacity(ops.len());
        let mut push = |b: &[u8]| {
            let at = bytes.len();
            bytes.extend_from_slice(b);
            at..bytes.len()
        };
        for op in ops {
            copied.push(match op {
                Op::Put(k, v) => (push(k), Some(push(v))),
                Op::Delete(k) => (push(k), None),
            });
        }
        Request {
            bytes,
            ops: copied,
            state: AtomicU32::new(WAITING),
            outcome: Mutex::new(None),
            waiter: std::thread::current(),
        }
    }

    /// The request's operations, borrowed from its copy.
    pub(crate) fn ops(&self) -> impl Iterator<Item = Op<'_>> {
        self.ops.iter().map(|(k, v)| match v {
            Some(v) => Op::Put(&self.bytes[k.clone()], &self.bytes[v.clone()]),
            None => Op::Delete(&self.bytes[k.clone()]),
        })
    }

    /// How many operations the request holds.
    pub(crate) fn len(&self) -> usize {
        self.ops.len()
    }

    /// Answers the request and wakes its thread if it sleeps.
    pub(crate) fn finish(&self, r: Result<WriteOutcome>) {
        *self.outcome.lock() = Some(r);
        if self.state.swap(DONE, Ordering::AcqRel) == PARKED {
            self.waiter.unpark();
        }
    }

    fn done(&self) -> bool {
        self.state.load(Ordering::Acquire) == DONE
    }

    fn take_if_done(&self) -> Option<Result<WriteOutcome>> {
        if !self.done() {
            return None;
        }
        self.outcome.lock().take()
    }

    /// Wakes the waiter (to take the lock), if it sleeps.
    fn wake(&self) {
        if self.state.load(Ordering::Acquire) == PARKED {
            self.waiter.unpark();
        }
    }

    /// Sleeps until woken (answered, or the lock released while this is
    /// first in the queue) or for [`PARK`].
    fn park(&self, lock: &Mutex<WriterState>, timeout: Duration) {
        if self.state.compare_exchange(WAITING, PARKED, Ordering::SeqCst, Ordering::Acquire).is_err() {
            return; // done meanwhile
        }
        // Pairs with the fence in `WriterGuard::drop`: either that release
        // sees this waiter parked, or this sees the lock free.
        fence(Ordering::SeqCst);
        if !lock.is_locked() {
            let _ = self.state.compare_exchange(PARKED, WAITING, Ordering::AcqRel, Ordering::Acquire);
            return;
        }
        std::thread::park_timeout(timeout);
        let _ = self.state.compare_exchange(PARKED, WAITING, Ordering::AcqRel, Ordering::Acquire);
    }
}

/// Bytes of keys and values in `ops`.
pub(crate) fn op_bytes(ops: &[Op<'_>]) -> usize {
    ops.iter()
        .map(|op| match op {
            Op::Put(k, v) => k.len() + v.len(),
            Op::Delete(k) => k.len(),
        })
        .sum()
}

/// Requests a batch took from the queue. Each is answered before this is
/// dropped; any left unanswered (the batch panicked) gets an error, and
/// the writer is poisoned, so no waiter waits forever and none is told a
/// write that may be half there did nothing.
pub(crate) struct Served<'a> {
    pub(crate) requests: Vec<Arc<Request>>,
    writer: &'a Writer,
}

impl Drop for Served<'_> {
    fn drop(&mut self) {
        if self.requests.iter().all(|r| r.done()) {
            return;
        }
        let why = "a combined write stopped midway";
        self.writer.poison(why);
        for r in &self.requests {
            if !r.done() {
                r.finish(Err(CddsError::WriterPoisoned(why.into())));
            }
        }
    }
}

/// Poisons the writer if dropped while its thread panics: held across a
/// batch, whose entries a panic leaves in the nodes unundone.
pub(crate) struct PoisonOnPanic<'a>(pub(crate) &'a Writer);

impl Drop for PoisonOnPanic<'_> {
    fn drop(&mut self) {
        if std::thread::panicking() {
            self.0.poison("a write panicked midway");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_request_left_unanswered_gets_an_error_and_poisons_the_writer() {
        let w = Writer::default();
        let req = Arc::new(Request::new(&[Op::Put(b"k", b"v"), Op::Delete(b"x")]));
        assert_eq!(req.len(), 2);
        let ops: Vec<Op<'_>> = req.ops().collect();
        assert!(matches!(ops[0], Op::Put(b"k", b"v")));
        assert!(matches!(ops[1], Op::Delete(b"x")));
        w.check_poisoned().unwrap();
        drop(Served { requests: vec![req.clone()], writer: &w });
        assert!(matches!(req.take_if_done(), Some(Err(CddsError::WriterPoisoned(_)))));
        assert!(matches!(w.check_poisoned(), Err(CddsError::WriterPoisoned(_))));
    }

    #[test]
    fn answered_requests_leave_the_writer_usable() {
        let w = Writer::default();
        let req = Arc::new(Request::new(&[Op::Put(b"k", b"v")]));
        let served = Served { requests: vec![req.clone()], writer: &w };
        req.finish(Ok(WriteOutcome { version: 7, existed: vec![true] }));
        drop(served);
        assert_eq!(req.take_if_done().unwrap().unwrap(), WriteOutcome { version: 7, existed: vec![true] });
        w.check_poisoned().unwrap();
    }

    #[test]
    fn a_panic_under_the_guard_poisons_the_writer() {
        let w = Writer::default();
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            let _g = PoisonOnPanic(&w);
            panic!("midway");
        }));
        assert!(r.is_err());
        assert!(matches!(w.check_poisoned(), Err(CddsError::WriterPoisoned(_))));
        let ok = Writer::default();
        drop(PoisonOnPanic(&ok));
        ok.check_poisoned().unwrap();
    }
}
