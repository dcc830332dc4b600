//! The tree handle: open/create on a pool, the commit word, reader pins,
//! point reads at a version.
//!
//! [`Tree`] owns a [`TreeCore`] behind an `Arc` (every operation is a
//! method of the core, reached through `Deref`) so that the background GC
//! thread (`gc`) can share it; dropping the `Tree` stops that thread first.

use std::collections::BTreeMap;
use std::sync::atomic::AtomicU64;
use std::sync::Arc;

use parking_lot::Mutex;
use tembo_pmem::Pool;

use crate::entry::{key_prefix, key_prefix_at, ReadAt};
use crate::error::{CddsError, Result};
use crate::meta::{Meta, ROOT_NAME};
use crate::node;
use crate::pins::{PinGuard, Pins};
use crate::record;
use crate::search;

/// Size limits enforced on every write.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// Longest key in bytes (default 64 KiB).
    pub max_key_bytes: usize,
    /// Longest value in bytes (default 512 MiB).
    pub max_value_bytes: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits { max_key_bytes: 64 * 1024, max_value_bytes: 512 * 1024 * 1024 }
    }
}

/// State only the writer touches.
#[derive(Debug, Default)]
pub(crate) struct WriterState {
    /// Blocks retired by the batch that committed at the tag, waiting until
    /// no read op older than it runs.
    pub limbo: crate::limbo::Limbo,
    /// Where the incremental GC resumes (see `gc`).
    pub gc: crate::gc::GcCursor,
    /// Buffers batches reuse.
    pub scratch: crate::write::BatchScratch,
}

/// A CDDS B+tree on a pool: the handle applications hold. Every operation
/// is a method of [`TreeCore`], reached through `Deref`.
#[derive(Debug)]
pub struct Tree {
    core: Arc<TreeCore>,
    gc: Option<crate::gc::GcThread>,
}

impl std::ops::Deref for Tree {
    type Target = TreeCore;
    fn deref(&self) -> &TreeCore {
        &self.core
    }
}

/// The state of a tree, shared by its [`Tree`] handle and the background
/// GC thread.
#[derive(Debug)]
pub struct TreeCore {
    pub(crate) pool: Arc<Pool>,
    pub(crate) meta: Meta,
    pub(crate) session: u64,
    pub(crate) pins: Pins,
    /// The writer lock, and writes waiting to ride in its holder's batch.
    pub(crate) writer: crate::combine::Writer,
    /// Versions pinned by snapshots (version → holders).
    pub(crate) snapshots: Mutex<BTreeMap<u64, usize>>,
    pub(crate) limits: Limits,
    /// Recovery after an unclean shutdown: aborted versions, the background
    /// repair and sweep, and what they did (see `recover`).
    pub(crate) recovery: crate::recover::RecoveryState,
    /// What the incremental GC has done (steps run by the thread or by
    /// [`TreeCore::gc_step`]).
    pub(crate) gc_stats: Mutex<crate::gc::GcStats>,
    /// Nodes whose order line an insert stored without flushing it.
    pub(crate) dirty_orders: crate::lazy_order::DirtyOrders,
    /// Entries ended in leaves since the tree was opened (see `gc`).
    pub(crate) leaf_ends: std::sync::atomic::AtomicU64,
    /// Descents of a batch that started below the root, on the batch's
    /// previous path (see `write`'s `finger_start`).
    pub(crate) finger_descents: std::sync::atomic::AtomicU64,
    /// The last version whose commit word is durable: what readers pin.
    /// The commit word itself is stored before it is persisted (on a disk,
    /// an msync later), and a reader that pinned it in between could
    /// return data that a power failure then takes away; this DRAM copy is
    /// stored only after the persist (`commit_version`). Outside a commit
    /// it equals the commit word.
    pub(crate) durable_version: AtomicU64,
    /// A caller asked for space back ([`Tree::wake_gc`]): the GC thread's
    /// steps compact every node they visit, busy writers or not, until a
    /// pass completes.
    pub(crate) gc_thorough: std::sync::atomic::AtomicBool,
}

impl Tree {
    /// Creates an empty tree on `pool` and records it as the pool root `cdds`.
    ///
    /// # Errors
    /// [`CddsError::NotATree`] if the pool already has a tree; pool errors.
    pub fn create(pool: Arc<Pool>, limits: Limits) -> Result<Tree> {
        if pool.root(ROOT_NAME).is_some() {
            return Err(CddsError::NotATree("the pool already holds a CDDS tree; open it instead".into()));
        }
        // Born at version 1, the first batch's.
        let root = node::create(&pool, 0, 0, 1, &[])?;
        let meta = Meta::create(&pool, root)?;
        pool.set_root(ROOT_NAME, meta.off)?;
        TreeCore::finish_open(pool, meta, limits).map(Tree::wrap)
    }

    /// Opens the tree of `pool`, recovering it first if the pool was not
    /// closed cleanly.
    ///
    /// # Errors
    /// [`CddsError::NotATree`] if there is none; invariant errors from recovery.
    pub fn open(pool: Arc<Pool>, limits: Limits) -> Result<Tree> {
        let tree = Tree::open_deferred(pool, limits)?;
        if tree.recovery_pending() {
            let core = tree.core.clone();
            let handle = std::thread::Builder::new()
                .name("tembo-cdds-recovery".into())
                .spawn(move || core.run_recovery())
                .map_err(|e| CddsError::invariant(format!("cannot start the recovery thread: {e}"), 0))?;
            *tree.recovery.thread.lock() = Some(handle);
        }
        Ok(tree)
    }

    /// [`Tree::open`] without the background recovery thread: after an
    /// unclean shutdown the tree serves at once (repairing what writers
    /// touch), and the rest of recovery runs on the first call of
    /// [`TreeCore::recovery_report`] (or `check`, `stats`, `gc_pass`).
    /// For tests and tools that want recovery on their own thread.
    ///
    /// # Errors
    /// As [`Tree::open`].
    pub fn open_deferred(pool: Arc<Pool>, limits: Limits) -> Result<Tree> {
        let off = pool.root(ROOT_NAME).ok_or_else(|| CddsError::NotATree("the pool has no `cdds` root".into()))?;
        let meta = Meta::open(&pool, off)?;
        TreeCore::finish_open(pool, meta, limits).map(Tree::wrap)
    }

    fn wrap(core: TreeCore) -> Tree {
        Tree { core: Arc::new(core), gc: None }
    }

    /// Starts the background, incremental GC thread (see `gc`); a second
    /// call replaces the first thread with one of the new settings.
    pub fn start_gc(&mut self, cfg: crate::gc::GcConfig) {
        self.stop_gc();
        self.gc = Some(crate::gc::GcThread::start(self.core.clone(), cfg));
    }

    /// Has the background GC thread, if one runs, take its next step now
    /// rather than after its pause, and compact every node it visits until
    /// its pass completes (while writers are busy it otherwise compacts only
    /// nearly full nodes, and the records of dead entries elsewhere wait).
    pub fn wake_gc(&self) {
        self.core.gc_thorough.store(true, std::sync::atomic::Ordering::Relaxed);
        if let Some(g) = &self.gc {
            g.wake();
        }
    }

    /// Stops the background GC thread, if one runs (waiting for its step).
    pub fn stop_gc(&mut self) {
        if let Some(g) = self.gc.take() {
            g.stop();
        }
    }

    /// Whether a background GC thread runs.
    pub fn gc_running(&self) -> bool {
        self.gc.is_some()
    }
}

impl Drop for Tree {
    fn drop(&mut self) {
        self.stop_gc();
        // A recovery still running stops between two steps; the pool then
        // stays marked for recovery and the next open resumes it.
        self.core.recovery.cancel.store(true, std::sync::atomic::Ordering::Release);
        if let Some(h) = self.core.recovery.thread.lock().take() {
            let _ = h.join();
        }
        // A poisoned writer may have left entries at the version the next
        // batch would commit: only a recovery at the next open removes them.
        if self.core.recovery_pending() || self.core.lazy_aborted().is_some() || self.core.writer.is_poisoned() {
            self.core.pool.keep_unclean();
        }
    }
}

impl TreeCore {
    fn finish_open(pool: Arc<Pool>, meta: Meta, limits: Limits) -> Result<TreeCore> {
        let session = meta.next_session(&pool)?;
        let durable = meta.version_word(&pool)?.load(std::sync::atomic::Ordering::SeqCst);
        let tree = TreeCore {
            pool,
            meta,
            session,
            pins: Pins::default(),
            writer: crate::combine::Writer::default(),
            snapshots: Mutex::new(BTreeMap::new()),
            limits,
            recovery: Default::default(),
            gc_stats: Default::default(),
            dirty_orders: Default::default(),
            leaf_ends: Default::default(),
            finger_descents: Default::default(),
            durable_version: AtomicU64::new(durable),
            gc_thorough: Default::default(),
        };
        // Named snapshots first: repair keeps what they see (see `recover`).
        let opened = tree.load_named_snapshots().and_then(|of_empty_tree| {
            tree.begin_recovery(tree.pool.opened_unclean())?;
            // An older build's snapshot of the empty tree says version 1:
            // commit it, empty, before any write can (after an unclean
            // open the recovery has already committed it, reading as 0).
            if of_empty_tree && tree.current_version()? == 0 {
                let _ws = tree.writer.lock();
                tree.commit_version(1)?;
            }
            Ok(())
        });
        if let Err(e) = opened {
            // Never let a failed recovery's pool be marked clean.
            tree.pool.keep_unclean();
            return Err(e);
        }
        Ok(tree)
    }

    /// The pool the tree lives in.
    pub fn pool(&self) -> &Arc<Pool> {
        &self.pool
    }

    /// The size limits in force.
    pub fn limits(&self) -> Limits {
        self.limits
    }

    /// Commits version `v`: stores and persists the commit word, then lets
    /// readers pin it. The caller holds the writer lock.
    pub(crate) fn commit_version(&self, v: u64) -> Result<()> {
        self.meta.commit(&self.pool, v)?;
        self.durable_version.store(v, std::sync::atomic::Ordering::SeqCst);
        Ok(())
    }

    /// Writes since open that found the writer busy and were committed in
    /// another thread's batch (see `combine`).
    pub fn combined_writes(&self) -> u64 {
        self.writer.combined()
    }

    /// Descents since open that a batch started on its previous descent's
    /// path instead of at the root (its keys came in ascending runs).
    pub fn finger_descents(&self) -> u64 {
        self.finger_descents.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// The current version: the last one committed and durable.
    pub fn current_version(&self) -> Result<u64> {
        Ok(self.durable_version.load(std::sync::atomic::Ordering::SeqCst))
    }

    /// Pins the current version for one read op.
    pub(crate) fn pin(&self) -> Result<PinGuard<'_>> {
        Ok(self.pins.pin(&self.durable_version))
    }

    /// The value of `key` in the current version.
    ///
    /// # Errors
    /// Invariant or pool errors (a corrupted pool), never for a missing key.
    pub fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        let mut v = Vec::new();
        Ok(self.get_into(key, &mut v)?.then_some(v))
    }

    /// [`TreeCore::get`] into a caller's buffer (cleared first; left empty
    /// for a missing key), so that a loop of reads reuses one allocation.
    /// Returns whether the key exists.
    ///
    /// # Errors
    /// As [`TreeCore::get`].
    pub fn get_into(&self, key: &[u8], buf: &mut Vec<u8>) -> Result<bool> {
        let pin = self.pin()?;
        self.value_at(key, pin.version, buf)
    }

    /// At most `limit` bytes of `key`'s value in the current version, from
    /// byte `offset` on, into `buf` (cleared first), and the value's whole
    /// length; `None` for a missing key. A caller that needs only a value's
    /// head (a header it keeps in front), or a part of a big value, copies
    /// no more than that.
    ///
    /// # Errors
    /// As [`TreeCore::get`].
    pub fn get_range_into(&self, key: &[u8], offset: u64, limit: usize, buf: &mut Vec<u8>) -> Result<Option<u64>> {
        let pin = self.pin()?;
        self.value_range_at(key, pin.version, offset, limit as u64, buf)
    }

    /// Whether `key` exists in the current version: a lookup that copies
    /// no value (a write that only counts new keys needs no more).
    ///
    /// # Errors
    /// As [`TreeCore::get`].
    pub fn contains(&self, key: &[u8]) -> Result<bool> {
        let pin = self.pin()?;
        let rec = match self.lazy_aborted() {
            Some(ab) => self.find_checked(key, pin.version, &ab)?,
            None => self.find_pinned(key, pin.version)?,
        };
        Ok(rec.is_some())
    }

    /// The value of `key` at version `v`, which the caller keeps retained
    /// (through a snapshot).
    ///
    /// # Errors
    /// As [`TreeCore::get`].
    pub fn get_at(&self, key: &[u8], v: u64) -> Result<Option<Vec<u8>>> {
        let _pin = self.pin()?;
        let mut out = Vec::new();
        Ok(self.value_at(key, v, &mut out)?.then_some(out))
    }

    /// Copies the value of `key` at `v` into `buf`; the caller holds a pin
    /// that keeps `v`'s records from being freed until the copy is done.
    fn value_at(&self, key: &[u8], v: u64, buf: &mut Vec<u8>) -> Result<bool> {
        Ok(self.value_range_at(key, v, 0, u64::MAX, buf)?.is_some())
    }

    /// [`Self::value_at`], copying at most `limit` bytes from `offset` on;
    /// gives the value's length.
    fn value_range_at(&self, key: &[u8], v: u64, offset: u64, limit: u64, buf: &mut Vec<u8>) -> Result<Option<u64>> {
        buf.clear();
        let rec = match self.lazy_aborted() {
            Some(ab) => self.find_checked(key, v, &ab)?,
            None => self.find_pinned(key, v)?,
        };
        match rec {
            Some(rec) => {
                let h = record::header(&self.pool, rec)?;
                record::value_range_into(&self.pool, rec, &h, offset, limit, buf)?;
                Ok(Some(h.word))
            }
            None => Ok(None),
        }
    }

    /// The record of `key`'s entry visible at `v`, on the lock-free path.
    fn find_pinned(&self, key: &[u8], v: u64) -> Result<Option<u64>> {
        let pool = &*self.pool;
        let whole = key_prefix(key);
        let mut n = self.meta.root(pool)?;
        let mut raw = node::RawNode::default();
        let mut depth = 0;
        while depth < 64 {
            raw.load(pool, n, self.session)?;
            let pfx = if raw.plen() == 0 { whole } else { key_prefix_at(key, raw.plen()) };
            if raw.level() == 0 {
                let found = search::leaf_raw(pool, &raw, key, pfx, v, READ_PREFETCH_BYTES);
                if !raw.validate() {
                    continue;
                }
                return Ok(found?.map(|e| e.rec));
            }
            let child = search::child_raw(pool, &raw, n, key, pfx, v).and_then(|e| search::child_of(pool, &e));
            if !raw.validate() {
                continue;
            }
            n = child?;
            depth += 1;
        }
        Err(CddsError::invariant("tree deeper than 64 levels (a cycle?)", n))
    }
}

/// How much of a point read's record is prefetched once the leaf search
/// has narrowed to it: the header and key line plus the next three, which
/// the value copy reads (a 256-byte value's record is five lines). Fetched
/// together, their misses overlap instead of following the header's.
const READ_PREFETCH_BYTES: u64 = 256;

impl TreeCore {
    /// [`TreeCore::find_pinned`] on the checked path, while a lazy recovery
    /// runs: node copies with verified slots, aborted versions honoured.
    fn find_checked(&self, key: &[u8], v: u64, aborted: &[u64]) -> Result<Option<u64>> {
        let pool = &*self.pool;
        let mut n = self.meta.root(pool)?;
        for _ in 0..64 {
            let copy = node::read_checked(pool, n, self.session, ReadAt { version: v, aborted })?;
            let pfx = key_prefix_at(key, copy.plen);
            if copy.level == 0 {
                let found = search::leaf_find(pool, &copy, key, pfx, ReadAt { version: v, aborted })?;
                return Ok(found.map(|i| copy.entries()[i].rec));
            }
            let i = search::child_index(pool, &copy, n, key, pfx, ReadAt { version: v, aborted }, false)?;
            n = search::child_of(pool, &copy.entries()[i])?;
        }
        Err(CddsError::invariant("tree deeper than 64 levels (a cycle?)", n))
    }
}

impl Drop for TreeCore {
    /// Frees what batches retired while readers ran: no reader outlives the
    /// tree it borrows, so nothing can still reach those blocks. Without
    /// this a clean close would leave them allocated and unreachable.
    fn drop(&mut self) {
        if self.pool.concurrent_sweep_running() {
            self.pool.abandon_concurrent_sweep();
        }
        let mut ws = self.writer.lock();
        // Before the pool's clean flag (its close fences first): a clean
        // open trusts every order line.
        self.dirty_orders.flush_all(&self.pool);
        self.settle_limbo(&mut ws);
        let blocks = ws.limbo.take_freeable(&self.pool, None, usize::MAX);
        let _ = self.pool.free_many(&blocks);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tembo_pmem::PoolOptions;

    /// A tree dropped with its writer poisoned (a batch stopped midway)
    /// leaves its pool to be recovered at the next open; a healthy one
    /// closes it clean.
    #[test]
    fn a_poisoned_writer_keeps_the_pool_unclean() {
        let dir = std::env::temp_dir().join(format!("tembo-cdds-poison-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let opts = PoolOptions { size: 4 << 20, max_size: Some(16 << 20), ..PoolOptions::default() };
        for poisoned in [false, true] {
            let path = dir.join(format!("p-{poisoned}.pool"));
            let _ = std::fs::remove_file(&path);
            let pool = Arc::new(Pool::create(&path, &opts).unwrap());
            let tree = Tree::create(pool.clone(), Limits::default()).unwrap();
            tree.write(&[crate::Op::Put(b"k", b"v")]).unwrap();
            if poisoned {
                tree.core.writer.poison("a test stopped a batch midway");
                assert!(tree.gc_step(8).is_err(), "the GC leaves a poisoned tree alone");
            }
            drop(tree);
            pool.close_in_place().unwrap();
            drop(pool);
            let pool = Arc::new(Pool::open(&path, &opts).unwrap());
            assert_eq!(pool.opened_unclean(), poisoned);
            let tree = Tree::open(pool, Limits::default()).unwrap();
            assert_eq!(tree.get(b"k").unwrap().as_deref(), Some(&b"v"[..]));
        }
        let _ = std::fs::remove_dir_all(&dir);
    }
}
