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

use crate::entry::key_prefix;
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
    pub limbo: Vec<(u64, Vec<u64>)>,
    /// Where the incremental GC resumes (see `gc`).
    pub gc: crate::gc::GcCursor,
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
    pub(crate) writer: Arc<Mutex<WriterState>>,
    /// Versions pinned by snapshots (version → holders).
    pub(crate) snapshots: Mutex<BTreeMap<u64, usize>>,
    pub(crate) limits: Limits,
    /// The repair walk's report; the sweep's part is merged in when it ends.
    pub(crate) recovery: crate::recover::RecoveryReport,
    pub(crate) recovery_done: std::sync::OnceLock<crate::recover::RecoveryReport>,
    pub(crate) sweep: Mutex<Option<std::thread::JoinHandle<crate::recover::SweepOutcome>>>,
    /// What the incremental GC has done (steps run by the thread or by
    /// [`TreeCore::gc_step`]).
    pub(crate) gc_stats: Mutex<crate::gc::GcStats>,
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
        let root = node::create(&pool, 0, &[])?;
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
    }
}

impl TreeCore {
    fn finish_open(pool: Arc<Pool>, meta: Meta, limits: Limits) -> Result<TreeCore> {
        let session = meta.next_session(&pool)?;
        let mut tree = TreeCore {
            pool,
            meta,
            session,
            pins: Pins::default(),
            writer: Arc::new(Mutex::new(WriterState::default())),
            snapshots: Mutex::new(BTreeMap::new()),
            limits,
            recovery: Default::default(),
            recovery_done: std::sync::OnceLock::new(),
            sweep: Mutex::new(None),
            gc_stats: Default::default(),
        };
        if tree.pool.opened_unclean() {
            match tree.recover() {
                Ok(r) => tree.recovery = r,
                Err(e) => {
                    // Never let a failed recovery's pool be marked clean.
                    tree.pool.keep_unclean();
                    return Err(e);
                }
            }
            tree.load_named_snapshots()?;
            // Reads are served from here on; writes wait for the sweep.
            *tree.sweep.lock() = Some(tree.start_sweep());
            return Ok(tree);
        }
        tree.load_named_snapshots()?;
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

    /// What recovery did at open (all zero after a clean shutdown). The
    /// tree serves reads as soon as the repair walk is done; the leak sweep
    /// runs in the background holding the writer lock, and this call waits
    /// for it to finish (as does the first write).
    pub fn recovery_report(&self) -> &crate::recover::RecoveryReport {
        self.recovery_done.get_or_init(|| {
            let mut r = self.recovery.clone();
            if let Some(h) = self.sweep.lock().take() {
                match h.join() {
                    Ok(out) => {
                        r.sweep_time = out.time;
                        match out.result {
                            Ok(rep) => {
                                r.leaks_freed = rep.reclaimed_blocks;
                                r.leak_bytes = rep.reclaimed_bytes;
                            }
                            Err(e) => r.sweep_error = Some(e),
                        }
                    }
                    Err(_) => r.sweep_error = Some("the leak sweep thread panicked".into()),
                }
            }
            r
        })
    }

    pub(crate) fn version_word(&self) -> Result<&AtomicU64> {
        self.meta.version_word(&self.pool)
    }

    /// The current (last committed) version.
    pub fn current_version(&self) -> Result<u64> {
        Ok(self.version_word()?.load(std::sync::atomic::Ordering::SeqCst))
    }

    /// Pins the current version for one read op.
    pub(crate) fn pin(&self) -> Result<PinGuard<'_>> {
        Ok(self.pins.pin(self.version_word()?))
    }

    /// The value of `key` in the current version.
    ///
    /// # Errors
    /// Invariant or pool errors (a corrupted pool), never for a missing key.
    pub fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        let pin = self.pin()?;
        self.get_pinned(key, pin.version)
    }

    /// The value of `key` at version `v`, which the caller keeps retained
    /// (through a snapshot).
    ///
    /// # Errors
    /// As [`TreeCore::get`].
    pub fn get_at(&self, key: &[u8], v: u64) -> Result<Option<Vec<u8>>> {
        let _pin = self.pin()?;
        self.get_pinned(key, v)
    }

    fn get_pinned(&self, key: &[u8], v: u64) -> Result<Option<Vec<u8>>> {
        let pool = &*self.pool;
        let pfx = key_prefix(key);
        let mut n = self.meta.root(pool)?;
        let mut raw = node::RawNode::default();
        let mut depth = 0;
        while depth < 64 {
            raw.load(pool, n, self.session)?;
            if raw.level() == 0 {
                let found = search::leaf_raw(pool, &raw, key, pfx, v);
                if !raw.validate() {
                    continue;
                }
                return match found? {
                    Some(e) => {
                        let h = record::header(pool, e.rec)?;
                        Ok(Some(record::value(pool, e.rec, &h)?))
                    }
                    None => Ok(None),
                };
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

impl Drop for TreeCore {
    /// Frees what batches retired while readers ran: no reader outlives the
    /// tree it borrows, so nothing can still reach those blocks. Without
    /// this a clean close would leave them allocated and unreachable.
    fn drop(&mut self) {
        let _ = self.recovery_report(); // joins a sweep still running
        let mut ws = self.writer.lock();
        for (_, blocks) in ws.limbo.drain(..) {
            for b in blocks {
                let _ = self.pool.free(b);
            }
        }
    }
}
