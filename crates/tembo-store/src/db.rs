//! [`Db`]: open or create a database on a pool, and every operation on it.
//!
//! Invariants:
//! - `store.db.engine`: a `Db` holds exactly one engine, the one its pool's
//!   engine record names (the CDDS tree, or the in-place tree of the
//!   `kamino`, `kamino-dynamic` and `undo` engines);
//! - `store.db.open`: the engine is present from construction until `close`
//!   or drop consumes the `Db`; no method sees it absent.

use std::ops::{Bound, RangeBounds};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use tembo_cdds::{GcStats, GcStep, Limits, NamedSnapshot, RecoveryReport, Tree, TreeCheck, TreeStats, WriteOutcome};
use tembo_kamino::tree::{KTreeStats, Tree as KTree, TreeOp};
use tembo_pmem::{AllocStats, CheckReport, FlushInstruction, Mode, OrderingMode, Pool, WriteStats};

use crate::batch::WriteBatch;
use crate::error::{DbError, Result};
use crate::options::{Engine, Options};
use crate::read::{owned_bounds, prefix_range, Iter, KeyValue, Snapshot};
use crate::record;

/// An open database: an ordered map from byte-string keys to byte-string
/// values, kept in a persistent-memory pool.
///
/// `Send + Sync`: share it between threads with `Arc`. Reads never wait for
/// writes; writes (each call of `put`, `delete`, `write`) run one at a time.
/// Dropping it closes it as [`Db::close`] does, ignoring errors.
#[derive(Debug)]
pub struct Db {
    /// `Some` until `close` or drop (invariant `store.db.open`).
    backend: Option<Backend>,
    engine: Engine,
    path: PathBuf,
}

/// The engine behind a [`Db`].
#[derive(Debug)]
enum Backend {
    Cdds(Tree),
    /// The in-place tree, and what its recovery did in the CDDS report's terms.
    InPlace(Box<KTree>, RecoveryReport),
}

/// What [`Db::stats`] reports.
#[derive(Clone, Debug, PartialEq)]
pub struct Stats {
    /// The engine.
    pub engine: Engine,
    /// The pool's path (`<memory>` and the like for pools without a file).
    pub path: PathBuf,
    /// The durability mode obtained (see [`Mode::guarantee`]).
    pub mode: Mode,
    /// The ordering mode in force.
    pub ordering: OrderingMode,
    /// The flush instruction in use.
    pub flush: FlushInstruction,
    /// Current pool size in bytes.
    pub pool_size: u64,
    /// Largest size the pool may grow to.
    pub max_size: u64,
    /// The engine's counts (keys, entries, nodes, bytes, the current version;
    /// for the in-place engines keys, nodes, height and bytes).
    pub tree: TreeStats,
    /// The in-place engines' counts: transactions, copies in and out of the
    /// critical path, backup hits, backup bytes against object bytes.
    pub in_place: Option<KTreeStats>,
    /// `cdds`: what the incremental GC has done since open.
    pub gc: Option<GcStats>,
    /// Heap usage and fragmentation.
    pub alloc: AllocStats,
    /// Flushes, fences and msyncs since the pool was opened.
    pub writes: WriteStats,
}

/// What [`Db::check`] found.
#[derive(Clone, Debug)]
pub struct DbCheck {
    /// The engine's walk: every structural invariant, leaks, and (again)
    /// the allocator's violations, each with where.
    pub tree: TreeCheck,
    /// The allocator's own check.
    pub alloc: CheckReport,
    /// Why the engine record does not validate, if it does not.
    pub record: Option<String>,
}

impl DbCheck {
    /// Whether every invariant held.
    pub fn is_ok(&self) -> bool {
        self.tree.is_ok() && self.alloc.is_ok() && self.record.is_none()
    }

    /// Every violation, one line each.
    pub fn violations(&self) -> Vec<String> {
        let mut v: Vec<String> = self.record.iter().map(|r| format!("engine record: {r}")).collect();
        v.extend(self.tree.violations.iter().cloned());
        v.extend(self.alloc.violations.iter().map(|x| format!("allocator: {}: {}", x.name, x.detail)));
        v
    }
}

impl Db {
    /// Creates a new pool file at `path` (which must not exist) holding an
    /// empty database of `opts.engine`.
    ///
    /// # Errors
    /// [`DbError::Pool`]: the file exists, the size is too small, the mode
    /// is unavailable, I/O. On error no file is left behind.
    pub fn create(path: impl AsRef<Path>, opts: &Options) -> Result<Db> {
        let path = path.as_ref();
        let pool = Pool::create(path, &opts.pool_options()).map_err(|e| DbError::pool(path, e))?;
        Db::create_on(Arc::new(pool), opts).inspect_err(|_| {
            // The pool (and its lock) went with the error; the file is ours.
            let _ = std::fs::remove_file(path);
        })
    }

    /// Opens the database in the pool file at `path`, recovering it first if
    /// it was not closed cleanly (see [`Db::recovery_report`]).
    ///
    /// `opts.size`, `opts.max_size` and `opts.engine` are ignored: the pool
    /// records them.
    ///
    /// # Errors
    /// [`DbError::Pool`] (no such file, not a pool, locked by another
    /// process or handle, corrupted, I/O); [`DbError::NoDatabase`] for a
    /// pool without a database; [`DbError::UnknownEngine`],
    /// [`DbError::BadEngineRecord`]; [`DbError::Engine`] if recovery finds
    /// the engine's structures damaged.
    pub fn open(path: impl AsRef<Path>, opts: &Options) -> Result<Db> {
        let path = path.as_ref();
        let pool = Pool::open(path, &opts.pool_options()).map_err(|e| DbError::pool(path, e))?;
        Db::open_on(Arc::new(pool), opts)
    }

    /// Opens `path` if it exists, else creates it. A pool that exists but
    /// holds no database yet (made by `tembo pool create`, or a creation
    /// cut short between the pool and its database) gets one, as
    /// [`Db::from_pool`] does.
    ///
    /// # Errors
    /// As [`Db::open`] and [`Db::create`].
    pub fn open_or_create(path: impl AsRef<Path>, opts: &Options) -> Result<Db> {
        let path = path.as_ref();
        if path.exists() {
            let pool = Pool::open(path, &opts.pool_options()).map_err(|e| DbError::pool(path, e))?;
            Db::from_pool(Arc::new(pool), opts)
        } else {
            Db::create(path, opts)
        }
    }

    /// An empty database in a volatile pool in anonymous memory: nothing
    /// survives the process (tests and measurements).
    ///
    /// # Errors
    /// [`DbError::Pool`] for a size below the minimum or out of memory.
    pub fn in_memory(opts: &Options) -> Result<Db> {
        let pool = Pool::in_memory(&opts.pool_options()).map_err(|e| DbError::pool(Path::new("<memory>"), e))?;
        Db::create_on(Arc::new(pool), opts)
    }

    /// The database on an already open pool: opened if the pool records one
    /// (recovering it if the pool was opened unclean), else created with
    /// `opts.engine` and `opts.limits` (the other options are the pool's
    /// business and are ignored). Crash tests use it with simulated pools
    /// and [`Pool::from_image`].
    ///
    /// A pool holding a bare engine root but no engine record (a creation
    /// cut short by a crash, or a tree made with `tembo-cdds` directly) has
    /// its engine adopted and the record written.
    ///
    /// # Errors
    /// As [`Db::open`]; [`DbError::Pool`] if the pool is full.
    pub fn from_pool(pool: Arc<Pool>, opts: &Options) -> Result<Db> {
        let path = pool.path().to_path_buf();
        match record::read(&pool, &path)? {
            Some(_) => Db::open_on(pool, opts),
            None => Db::create_on(pool, opts),
        }
    }

    fn open_on(pool: Arc<Pool>, opts: &Options) -> Result<Db> {
        let path = pool.path().to_path_buf();
        let engine = record::read(&pool, &path)?.ok_or_else(|| DbError::NoDatabase { path: path.clone() })?;
        let backend = match engine.tx_mode() {
            None => Backend::Cdds(with_gc(Tree::open(pool, opts.limits).map_err(|e| DbError::engine(&path, e))?, opts)),
            Some(mode) => {
                let t = KTree::open(pool, &opts.heap_options(mode), opts.tree_limits())
                    .map_err(|e| DbError::kamino(&path, e))?;
                let r = in_place_report(&t);
                Backend::InPlace(Box::new(t), r)
            }
        };
        Ok(Db { backend: Some(backend), engine, path })
    }

    fn create_on(pool: Arc<Pool>, opts: &Options) -> Result<Db> {
        let path = pool.path().to_path_buf();
        let engine = opts.engine;
        let backend = match engine.tx_mode() {
            None => Backend::Cdds(with_gc(
                if pool.root(tembo_cdds::ROOT_NAME).is_some() {
                    Tree::open(pool, opts.limits)
                } else {
                    Tree::create(pool, opts.limits)
                }
                .map_err(|e| DbError::engine(&path, e))?,
                opts,
            )),
            Some(mode) => {
                let (ho, lim) = (opts.heap_options(mode), opts.tree_limits());
                let t = if pool.root("kamino").is_some() {
                    KTree::open(pool, &ho, lim)
                } else {
                    KTree::create(pool, &ho, lim)
                }
                .map_err(|e| DbError::kamino(&path, e))?;
                let r = in_place_report(&t);
                Backend::InPlace(Box::new(t), r)
            }
        };
        let db = Db { backend: Some(backend), engine, path };
        // The record goes last (invariant `store.record.last`).
        record::write(db.pool(), engine).map_err(|e| DbError::pool(&db.path, e))?;
        Ok(db)
    }

    fn backend(&self) -> &Backend {
        match &self.backend {
            Some(b) => b,
            None => unreachable!("invariant store.db.open: only close and drop take the engine"),
        }
    }

    /// The CDDS tree, or the error saying the engine lacks `what`.
    pub(crate) fn cdds(&self, what: &'static str) -> Result<&Tree> {
        match self.backend() {
            Backend::Cdds(t) => Ok(t),
            Backend::InPlace(..) => Err(DbError::Unsupported { engine: self.engine.name(), what }),
        }
    }

    fn err(&self) -> impl Fn(tembo_cdds::CddsError) -> DbError + '_ {
        |e| DbError::engine(&self.path, e)
    }

    fn kerr(&self) -> impl Fn(tembo_kamino::KaminoError) -> DbError + '_ {
        |e| DbError::kamino(&self.path, e)
    }

    // ----- identity ----------------------------------------------------------

    /// The pool's path (`<memory>`, `<simulated>` or `<image>` for pools without a file).
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The engine.
    pub fn engine(&self) -> Engine {
        self.engine
    }

    /// The durability mode obtained: what a successful write survives.
    pub fn mode(&self) -> Mode {
        self.pool().mode()
    }

    /// The size limits in force.
    pub fn limits(&self) -> Limits {
        match self.backend() {
            Backend::Cdds(t) => t.limits(),
            Backend::InPlace(t, _) => {
                Limits { max_key_bytes: t.limits().max_key, max_value_bytes: t.limits().max_value }
            }
        }
    }

    /// The pool (for tools and crash tests; writing to it directly can
    /// corrupt the database).
    pub fn pool(&self) -> &Arc<Pool> {
        match self.backend() {
            Backend::Cdds(t) => t.pool(),
            Backend::InPlace(t, _) => t.pool(),
        }
    }

    /// The last committed version: it grows by one with every write that
    /// changes something.
    ///
    /// # Errors
    /// [`DbError::Engine`] or [`DbError::Pool`] if the pool is damaged;
    /// [`DbError::Unsupported`] for the in-place engines (no versions).
    pub fn version(&self) -> Result<u64> {
        self.cdds("a version number")?.current_version().map_err(self.err())
    }

    /// What recovery did when the database was opened (`ran == false` after
    /// a clean shutdown). For the in-place engines: `nodes_repaired` counts
    /// transactions rolled back or forward, `slots_removed` objects
    /// restored from the backup or undo log, `repair_time` the log
    /// recovery's time, and the leak fields the sweep's.
    ///
    /// The CDDS engine recovers lazily: it serves at once and repairs and
    /// sweeps in the background; this call waits until that is done (see
    /// [`Db::recovery_progress`] for a look without waiting).
    pub fn recovery_report(&self) -> &RecoveryReport {
        match self.backend() {
            Backend::Cdds(t) => t.recovery_report(),
            Backend::InPlace(_, r) => r,
        }
    }

    /// What recovery has done so far, without waiting for the background
    /// part (`finished` says whether it is over).
    pub fn recovery_progress(&self) -> RecoveryReport {
        match self.backend() {
            Backend::Cdds(t) => t.recovery_progress(),
            Backend::InPlace(_, r) => RecoveryReport { finished: true, ..r.clone() },
        }
    }

    // ----- point operations ---------------------------------------------------

    /// The value of `key`, if present.
    ///
    /// # Errors
    /// [`DbError::Engine`] or [`DbError::Pool`] if the pool is damaged; never
    /// for a missing key.
    pub fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        match self.backend() {
            Backend::Cdds(t) => t.get(key).map_err(self.err()),
            Backend::InPlace(t, _) => t.get(key).map_err(self.kerr()),
        }
    }

    /// Whether `key` is present: [`Db::get`] without copying the value.
    ///
    /// # Errors
    /// As [`Db::get`].
    pub fn contains(&self, key: &[u8]) -> Result<bool> {
        match self.backend() {
            Backend::Cdds(t) => t.contains(key).map_err(self.err()),
            Backend::InPlace(t, _) => t.get(key).map(|v| v.is_some()).map_err(self.kerr()),
        }
    }

    /// [`Db::get`] into `buf`, which is cleared first (and left empty for a
    /// missing key): a loop of reads reuses one allocation instead of
    /// making and freeing one per read. Returns whether `key` is present.
    ///
    /// # Errors
    /// As [`Db::get`].
    pub fn get_into(&self, key: &[u8], buf: &mut Vec<u8>) -> Result<bool> {
        match self.backend() {
            Backend::Cdds(t) => t.get_into(key, buf).map_err(self.err()),
            Backend::InPlace(t, _) => t.get_into(key, buf).map_err(self.kerr()),
        }
    }

    /// At most `limit` bytes of `key`'s value, from byte `offset` on, into
    /// `buf` (cleared first; an offset past the end gives none), and the
    /// value's whole length; `None` for a missing key. A caller that keeps
    /// a small header in front of a large value reads the header without
    /// copying the value, or the value without the header.
    ///
    /// # Errors
    /// As [`Db::get`].
    pub fn get_range_into(&self, key: &[u8], offset: u64, limit: usize, buf: &mut Vec<u8>) -> Result<Option<u64>> {
        match self.backend() {
            Backend::Cdds(t) => t.get_range_into(key, offset, limit, buf).map_err(self.err()),
            Backend::InPlace(t, _) => t.get_range_into(key, offset, limit, buf).map_err(self.kerr()),
        }
    }

    /// A hint that `keys` are about to be read or written: brings what
    /// their lookups will touch into the CPU cache, walking all their paths
    /// together so that the memory latencies overlap (the cdds engine; the
    /// in-place engines ignore it). Changes nothing and cannot fail.
    pub fn prefetch<'k>(&self, keys: impl IntoIterator<Item = &'k [u8]>) {
        if let Backend::Cdds(t) = self.backend() {
            t.prefetch_keys(keys);
        }
    }

    /// Sets `key` to `value`; durable when it returns.
    ///
    /// # Errors
    /// [`DbError::EmptyKey`], [`DbError::KeyTooLarge`],
    /// [`DbError::ValueTooLarge`] (nothing written); [`DbError::Pool`] when
    /// the pool is full (nothing changed).
    pub fn put(&self, key: &[u8], value: &[u8]) -> Result<()> {
        match self.backend() {
            Backend::Cdds(t) => t.write(&[tembo_cdds::Op::Put(key, value)]).map(|_| ()).map_err(self.err()),
            Backend::InPlace(t, _) => {
                non_empty(key)?;
                t.put(key, value).map(|_| ()).map_err(self.kerr())
            }
        }
    }

    /// Removes `key`; durable when it returns. Returns whether it existed.
    ///
    /// # Errors
    /// As [`Db::put`].
    pub fn delete(&self, key: &[u8]) -> Result<bool> {
        match self.backend() {
            Backend::Cdds(t) => {
                let out = t.write(&[tembo_cdds::Op::Delete(key)]).map_err(self.err())?;
                Ok(out.existed.first().copied().unwrap_or(false))
            }
            Backend::InPlace(t, _) => {
                non_empty(key)?;
                t.delete(key).map_err(self.kerr())
            }
        }
    }

    /// Applies `batch` in order, atomically and durably, with one commit:
    /// after a crash either every operation is visible or none. Returns the
    /// version committed (for the in-place engines, which have no
    /// versions: 0) and, per operation, whether its key existed before it.
    ///
    /// # Errors
    /// As [`Db::put`], for any operation; then nothing of the batch is applied.
    pub fn write(&self, batch: &WriteBatch) -> Result<WriteOutcome> {
        match self.backend() {
            Backend::Cdds(t) => t.write(&batch.engine_ops()).map_err(self.err()),
            Backend::InPlace(t, _) => {
                let ops: Vec<TreeOp<'_>> = batch
                    .engine_ops()
                    .into_iter()
                    .map(|o| match o {
                        tembo_cdds::Op::Put(k, v) => TreeOp::Put(k, v),
                        tembo_cdds::Op::Delete(k) => TreeOp::Delete(k),
                    })
                    .collect();
                for o in &ops {
                    let (TreeOp::Put(k, _) | TreeOp::Delete(k)) = o;
                    non_empty(k)?;
                }
                let existed = t.write(&ops).map_err(self.kerr())?;
                Ok(WriteOutcome { version: 0, existed })
            }
        }
    }

    // ----- ranges ----------------------------------------------------------------

    /// The pairs with keys in `range`, in key order, at the version current
    /// now. Keys are compared as byte strings; the bounds may be any
    /// `AsRef<[u8]>` type: `"a"..="m"`, `k.to_vec()..`, `..&k[..]`,
    /// `(Bound::Excluded(k), Bound::Unbounded)`. (Byte-string literals are
    /// arrays and need slicing, `&b"a"[..]..`, for the key type to be inferred.)
    pub fn scan<K: AsRef<[u8]>, R: RangeBounds<K>>(&self, range: R) -> Iter<'_> {
        let (lo, hi) = owned_bounds(&range);
        self.range_iter(lo, hi, false)
    }

    /// As [`Db::scan`], from the largest key down.
    pub fn scan_rev<K: AsRef<[u8]>, R: RangeBounds<K>>(&self, range: R) -> Iter<'_> {
        let (lo, hi) = owned_bounds(&range);
        self.range_iter(lo, hi, true)
    }

    /// The pairs whose key starts with `prefix`, in key order.
    pub fn scan_prefix(&self, prefix: &[u8]) -> Iter<'_> {
        let (lo, hi) = prefix_range(prefix);
        self.range_iter(lo, hi, false)
    }

    /// Every pair, in key order.
    pub fn iter(&self) -> Iter<'_> {
        self.range_iter(Bound::Unbounded, Bound::Unbounded, false)
    }

    /// Up to `draws` pairs with keys in `range`, each drawn uniformly at
    /// random and independently (with replacement), in O(tree height)
    /// expected node reads: no walk of the range, whatever its size.
    /// Spends descents from `budget`, decreasing it by those made (a range
    /// that fills a small part of the nodes it spans fails more of them),
    /// so fewer pairs may come back; none when the range is empty. A
    /// caller that needs the exact number falls back to a scan. The
    /// algorithm (acceptance/rejection on node capacity, exactly uniform)
    /// is in `tembo_pmem::sample`.
    ///
    /// On `cdds` every pair is drawn from the version current at the call.
    /// The in-place engines have no versions: each pair is as its leaf was
    /// when the draw read it.
    ///
    /// # Errors
    /// [`DbError::Engine`] or [`DbError::Pool`] if the pool is damaged.
    pub fn sample<K: AsRef<[u8]>, R: RangeBounds<K>>(
        &self,
        range: R,
        draws: usize,
        budget: &mut usize,
        rng: &mut dyn rand::RngCore,
    ) -> Result<Vec<KeyValue>> {
        fn as_ref<K: AsRef<[u8]>>(b: Bound<&K>) -> Bound<&[u8]> {
            b.map(|k| k.as_ref())
        }
        let (lo, hi) = (as_ref(range.start_bound()), as_ref(range.end_bound()));
        match self.backend() {
            Backend::Cdds(t) => t.sample(lo, hi, draws, budget, rng).map_err(self.err()),
            Backend::InPlace(t, _) => t.sample(lo, hi, draws, budget, rng).map_err(self.kerr()),
        }
    }

    fn range_iter(&self, lo: Bound<Vec<u8>>, hi: Bound<Vec<u8>>, rev: bool) -> Iter<'_> {
        match self.backend() {
            Backend::Cdds(t) => Iter::new(t.scan(lo, hi, rev), &self.path),
            Backend::InPlace(t, _) => Iter::in_place(t, lo, hi, rev, &self.path),
        }
    }

    // ----- snapshots --------------------------------------------------------------

    /// A consistent view of the current version, kept until dropped.
    ///
    /// # Errors
    /// [`DbError::Engine`] or [`DbError::Pool`] if the pool is damaged.
    pub fn snapshot(&self) -> Result<Snapshot<'_>> {
        let s = self.cdds("a snapshot")?.snapshot().map_err(self.err())?;
        Ok(Snapshot::new(s, self))
    }

    /// Persists the current version under `name` (1 to
    /// [`MAX_SNAPSHOT_NAME`](crate::MAX_SNAPSHOT_NAME) bytes); it survives
    /// restarts and keeps its version's data until dropped.
    ///
    /// # Errors
    /// [`DbError::SnapshotName`] for a bad or taken name or a full table
    /// (64 names); [`DbError::Pool`] when the pool is full.
    pub fn create_named_snapshot(&self, name: &str) -> Result<NamedSnapshot> {
        self.cdds("a named snapshot")?.create_named_snapshot(name).map_err(self.err())
    }

    /// The named snapshots, oldest first (none for the in-place engines).
    ///
    /// # Errors
    /// [`DbError::Pool`] if the pool is damaged.
    pub fn named_snapshots(&self) -> Result<Vec<NamedSnapshot>> {
        match self.backend() {
            Backend::Cdds(t) => t.named_snapshots().map_err(self.err()),
            Backend::InPlace(..) => Ok(Vec::new()),
        }
    }

    /// Drops the named snapshot `name`, releasing its version.
    ///
    /// # Errors
    /// [`DbError::NoSuchSnapshot`].
    pub fn drop_named_snapshot(&self, name: &str) -> Result<()> {
        self.cdds("a named snapshot")?.drop_named_snapshot(name).map_err(self.err())
    }

    /// Makes the current contents equal to those of the named snapshot, as
    /// one new committed version (the snapshot stays); writes wait while it
    /// runs.
    ///
    /// # Errors
    /// [`DbError::NoSuchSnapshot`]; as [`Db::write`].
    pub fn rollback_to(&self, name: &str) -> Result<WriteOutcome> {
        self.cdds("rollback to a snapshot")?.rollback_to(name).map_err(self.err())
    }

    // ----- inspection ---------------------------------------------------------------

    /// Counts of the engine and the pool. Walks the whole tree: O(data).
    ///
    /// # Errors
    /// [`DbError::Engine`] or [`DbError::Pool`] if the walk cannot proceed.
    pub fn stats(&self) -> Result<Stats> {
        let pool = self.pool();
        let (tree, in_place) = match self.backend() {
            Backend::Cdds(t) => (t.stats().map_err(self.err())?, None),
            Backend::InPlace(t, _) => {
                let k = t.stats().map_err(self.kerr())?;
                (in_place_tree_stats(&k), Some(k))
            }
        };
        Ok(Stats {
            engine: self.engine,
            path: self.path.clone(),
            mode: pool.mode(),
            ordering: pool.ordering(),
            flush: pool.flush_instruction(),
            pool_size: pool.size(),
            max_size: pool.max_size(),
            tree,
            in_place,
            gc: match self.backend() {
                Backend::Cdds(t) => Some(t.gc_stats()),
                Backend::InPlace(..) => None,
            },
            alloc: pool.alloc_stats(),
            writes: pool.write_stats(),
        })
    }

    /// Has the CDDS engine's background GC take its next step now instead
    /// of after its pause (for a caller that just deleted much and wants
    /// the space back soon). The in-place engines free at commit: nothing
    /// to do.
    pub fn wake_gc(&self) {
        if let Backend::Cdds(t) = self.backend() {
            t.wake_gc();
        }
    }

    /// Runs the CDDS engine's incremental GC over the whole tree now (the
    /// background thread does the same a step at a time): removes every
    /// entry no retained version can see and frees what only it owned.
    /// The in-place engines keep no dead entries: nothing to do there.
    ///
    /// # Errors
    /// [`DbError::Engine`] if the walk meets a corrupted node.
    pub fn gc(&self) -> Result<GcStep> {
        match self.backend() {
            Backend::Cdds(t) => t.gc_pass().map_err(self.err()),
            Backend::InPlace(..) => Ok(GcStep { pass_complete: true, ..GcStep::default() }),
        }
    }

    /// Finishes, now, the background work that writes so far left behind:
    /// the CDDS engine's GC pass (as [`Db::gc`]); for the Kamino-Tx engines,
    /// rolling every committed transaction's objects forward into the
    /// backup. A benchmark calls it between its load and run phases (as
    /// YCSB's separate load and run invocations would), a tool before it
    /// measures space.
    ///
    /// # Errors
    /// [`DbError::Engine`] if the walk meets a corrupted node or a copy
    /// finds the pool full.
    pub fn settle(&self) -> Result<()> {
        match self.backend() {
            Backend::Cdds(t) => t.gc_pass().map(|_| ()).map_err(self.err()),
            Backend::InPlace(t, _) => t.heap().settle().map_err(self.kerr()),
        }
    }

    /// Validates every invariant of the engine record, the engine and the
    /// allocator, and reports each violation. Walks everything: O(data).
    ///
    /// # Errors
    /// [`DbError::Engine`] or [`DbError::Pool`] only if damage stops the walk.
    pub fn check(&self) -> Result<DbCheck> {
        let pool = self.pool();
        let record = match record::read(pool, &self.path) {
            Ok(Some(e)) if e == self.engine => None,
            Ok(Some(e)) => Some(format!("names engine {e}, but {} is open", self.engine)),
            Ok(None) => Some(format!("the `{}` root is missing", record::ROOT_NAME)),
            Err(e) => Some(e.to_string()),
        };
        let tree = match self.backend() {
            Backend::Cdds(t) => t.check().map_err(self.err())?,
            Backend::InPlace(t, _) => {
                let violations = t.check().map_err(self.kerr())?;
                let stats = in_place_tree_stats(&t.stats().map_err(self.kerr())?);
                TreeCheck { stats, violations, ..TreeCheck::default() }
            }
        };
        Ok(DbCheck { tree, alloc: pool.check(), record })
    }

    // ----- close ----------------------------------------------------------------------

    /// Closes the database and its pool cleanly, so the next open needs no
    /// recovery. When the pool is shared (see [`Db::from_pool`]) it is
    /// closed by whoever drops the last handle.
    ///
    /// # Errors
    /// [`DbError::Pool`] if the final `msync` (msync mode) fails.
    pub fn close(mut self) -> Result<()> {
        self.shutdown()
    }

    fn shutdown(&mut self) -> Result<()> {
        let Some(backend) = self.backend.take() else { return Ok(()) };
        // Dropping the tree frees what batches retired while readers ran
        // (CDDS), or rolls the backup forward (Kamino-Tx).
        let pool = match &backend {
            Backend::Cdds(t) => Arc::clone(t.pool()),
            Backend::InPlace(t, _) => Arc::clone(t.pool()),
        };
        drop(backend);
        match Arc::try_unwrap(pool) {
            Ok(pool) => pool.close().map_err(|e| DbError::pool(&self.path, e)),
            Err(_shared) => Ok(()),
        }
    }
}

/// Starts the background GC thread when the options ask for one.
fn with_gc(mut tree: Tree, opts: &Options) -> Tree {
    if let Some(cfg) = opts.gc {
        tree.start_gc(cfg);
    }
    tree
}

fn non_empty(key: &[u8]) -> Result<()> {
    if key.is_empty() {
        return Err(DbError::EmptyKey);
    }
    Ok(())
}

/// The in-place engines' counts in the terms of [`TreeStats`] (no
/// versions, no dead entries: the tree is updated in place).
fn in_place_tree_stats(k: &KTreeStats) -> TreeStats {
    TreeStats {
        keys: k.keys,
        live_entries: k.keys,
        nodes: k.nodes,
        live_nodes: k.nodes,
        height: u64::from(k.height),
        data_bytes: k.object_bytes,
        owned_bytes: k.object_bytes + k.backup_bytes,
        ..TreeStats::default()
    }
}

/// The in-place engines' recovery in the terms of [`RecoveryReport`].
fn in_place_report(t: &KTree) -> RecoveryReport {
    let (h, leaks) = t.recovery();
    RecoveryReport {
        ran: h.ran,
        nodes_repaired: h.rolled_back + h.rolled_forward,
        slots_removed: h.objects_restored,
        leaks_freed: leaks.map_or(0, |l| l.reclaimed_blocks),
        leak_bytes: leaks.map_or(0, |l| l.reclaimed_bytes),
        repair_time: h.time,
        finished: true,
        ..RecoveryReport::default()
    }
}

impl Drop for Db {
    fn drop(&mut self) {
        let _ = self.shutdown();
    }
}
