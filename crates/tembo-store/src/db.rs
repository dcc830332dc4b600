//! [`Db`]: open or create a database on a pool, and every operation on it.
//!
//! Invariants:
//! - `store.db.engine`: a `Db` holds exactly one engine, the one its pool's
//!   engine record names;
//! - `store.db.open`: the engine is present from construction until `close`
//!   or drop consumes the `Db`; no method sees it absent.

use std::ops::{Bound, RangeBounds};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use tembo_cdds::{Limits, NamedSnapshot, RecoveryReport, Tree, TreeCheck, TreeStats, WriteOutcome};
use tembo_pmem::{AllocStats, CheckReport, FlushInstruction, Mode, OrderingMode, Pool, WriteStats};

use crate::batch::WriteBatch;
use crate::error::{DbError, Result};
use crate::options::{Engine, Options};
use crate::read::{owned_bounds, prefix_range, Iter, Snapshot};
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
    tree: Option<Tree>,
    engine: Engine,
    path: PathBuf,
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
    /// The engine's counts (keys, entries, nodes, bytes, the current version).
    pub tree: TreeStats,
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

    /// Opens `path` if it exists, else creates it.
    ///
    /// # Errors
    /// As [`Db::open`] and [`Db::create`].
    pub fn open_or_create(path: impl AsRef<Path>, opts: &Options) -> Result<Db> {
        let path = path.as_ref();
        if path.exists() {
            Db::open(path, opts)
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
        let tree = match engine {
            Engine::Cdds => Tree::open(pool, opts.limits),
        }
        .map_err(|e| DbError::engine(&path, e))?;
        Ok(Db { tree: Some(tree), engine, path })
    }

    fn create_on(pool: Arc<Pool>, opts: &Options) -> Result<Db> {
        let path = pool.path().to_path_buf();
        let engine = opts.engine;
        let tree = match engine {
            Engine::Cdds if pool.root(tembo_cdds::ROOT_NAME).is_some() => Tree::open(pool, opts.limits),
            Engine::Cdds => Tree::create(pool, opts.limits),
        }
        .map_err(|e| DbError::engine(&path, e))?;
        // The record goes last (invariant `store.record.last`).
        record::write(tree.pool(), engine).map_err(|e| DbError::pool(&path, e))?;
        Ok(Db { tree: Some(tree), engine, path })
    }

    fn tree(&self) -> &Tree {
        match &self.tree {
            Some(t) => t,
            None => unreachable!("invariant store.db.open: only close and drop take the engine"),
        }
    }

    fn err(&self) -> impl Fn(tembo_cdds::CddsError) -> DbError + '_ {
        |e| DbError::engine(&self.path, e)
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
        self.tree().pool().mode()
    }

    /// The size limits in force.
    pub fn limits(&self) -> Limits {
        self.tree().limits()
    }

    /// The pool (for tools and crash tests; writing to it directly can
    /// corrupt the database).
    pub fn pool(&self) -> &Arc<Pool> {
        self.tree().pool()
    }

    /// The last committed version: it grows by one with every write that
    /// changes something.
    ///
    /// # Errors
    /// [`DbError::Engine`] or [`DbError::Pool`] if the pool is damaged.
    pub fn version(&self) -> Result<u64> {
        self.tree().current_version().map_err(self.err())
    }

    /// What recovery did when the database was opened (`ran == false` after
    /// a clean shutdown).
    pub fn recovery_report(&self) -> &RecoveryReport {
        self.tree().recovery_report()
    }

    // ----- point operations ---------------------------------------------------

    /// The value of `key`, if present.
    ///
    /// # Errors
    /// [`DbError::Engine`] or [`DbError::Pool`] if the pool is damaged; never
    /// for a missing key.
    pub fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        self.tree().get(key).map_err(self.err())
    }

    /// Sets `key` to `value`; durable when it returns.
    ///
    /// # Errors
    /// [`DbError::EmptyKey`], [`DbError::KeyTooLarge`],
    /// [`DbError::ValueTooLarge`] (nothing written); [`DbError::Pool`] when
    /// the pool is full (nothing changed).
    pub fn put(&self, key: &[u8], value: &[u8]) -> Result<()> {
        self.tree().write(&[tembo_cdds::Op::Put(key, value)]).map(|_| ()).map_err(self.err())
    }

    /// Removes `key`; durable when it returns. Returns whether it existed.
    ///
    /// # Errors
    /// As [`Db::put`].
    pub fn delete(&self, key: &[u8]) -> Result<bool> {
        let out = self.tree().write(&[tembo_cdds::Op::Delete(key)]).map_err(self.err())?;
        Ok(out.existed.first().copied().unwrap_or(false))
    }

    /// Applies `batch` in order, atomically and durably, with one commit:
    /// after a crash either every operation is visible or none. Returns the
    /// version committed and, per operation, whether its key existed
    /// before it.
    ///
    /// # Errors
    /// As [`Db::put`], for any operation; then nothing of the batch is applied.
    pub fn write(&self, batch: &WriteBatch) -> Result<WriteOutcome> {
        self.tree().write(&batch.engine_ops()).map_err(self.err())
    }

    // ----- ranges ----------------------------------------------------------------

    /// The pairs with keys in `range`, in key order, at the version current
    /// now. Keys are compared as byte strings; the bounds may be any
    /// `AsRef<[u8]>` type: `"a"..="m"`, `k.to_vec()..`, `..&k[..]`,
    /// `(Bound::Excluded(k), Bound::Unbounded)`. (Byte-string literals are
    /// arrays and need slicing, `&b"a"[..]..`, for the key type to be inferred.)
    pub fn scan<K: AsRef<[u8]>, R: RangeBounds<K>>(&self, range: R) -> Iter<'_> {
        let (lo, hi) = owned_bounds(&range);
        Iter::new(self.tree().scan(lo, hi, false), &self.path)
    }

    /// As [`Db::scan`], from the largest key down.
    pub fn scan_rev<K: AsRef<[u8]>, R: RangeBounds<K>>(&self, range: R) -> Iter<'_> {
        let (lo, hi) = owned_bounds(&range);
        Iter::new(self.tree().scan(lo, hi, true), &self.path)
    }

    /// The pairs whose key starts with `prefix`, in key order.
    pub fn scan_prefix(&self, prefix: &[u8]) -> Iter<'_> {
        let (lo, hi) = prefix_range(prefix);
        Iter::new(self.tree().scan(lo, hi, false), &self.path)
    }

    /// Every pair, in key order.
    pub fn iter(&self) -> Iter<'_> {
        Iter::new(self.tree().scan(Bound::Unbounded, Bound::Unbounded, false), &self.path)
    }

    // ----- snapshots --------------------------------------------------------------

    /// A consistent view of the current version, kept until dropped.
    ///
    /// # Errors
    /// [`DbError::Engine`] or [`DbError::Pool`] if the pool is damaged.
    pub fn snapshot(&self) -> Result<Snapshot<'_>> {
        let s = self.tree().snapshot().map_err(self.err())?;
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
        self.tree().create_named_snapshot(name).map_err(self.err())
    }

    /// The named snapshots, oldest first.
    ///
    /// # Errors
    /// [`DbError::Pool`] if the pool is damaged.
    pub fn named_snapshots(&self) -> Result<Vec<NamedSnapshot>> {
        self.tree().named_snapshots().map_err(self.err())
    }

    /// Drops the named snapshot `name`, releasing its version.
    ///
    /// # Errors
    /// [`DbError::NoSuchSnapshot`].
    pub fn drop_named_snapshot(&self, name: &str) -> Result<()> {
        self.tree().drop_named_snapshot(name).map_err(self.err())
    }

    /// Makes the current contents equal to those of the named snapshot, as
    /// one new committed version (the snapshot stays); writes wait while it
    /// runs.
    ///
    /// # Errors
    /// [`DbError::NoSuchSnapshot`]; as [`Db::write`].
    pub fn rollback_to(&self, name: &str) -> Result<WriteOutcome> {
        self.tree().rollback_to(name).map_err(self.err())
    }

    // ----- inspection ---------------------------------------------------------------

    /// Counts of the engine and the pool. Walks the whole tree: O(data).
    ///
    /// # Errors
    /// [`DbError::Engine`] or [`DbError::Pool`] if the walk cannot proceed.
    pub fn stats(&self) -> Result<Stats> {
        let pool = self.tree().pool();
        Ok(Stats {
            engine: self.engine,
            path: self.path.clone(),
            mode: pool.mode(),
            ordering: pool.ordering(),
            flush: pool.flush_instruction(),
            pool_size: pool.size(),
            max_size: pool.max_size(),
            tree: self.tree().stats().map_err(self.err())?,
            alloc: pool.alloc_stats(),
            writes: pool.write_stats(),
        })
    }

    /// Validates every invariant of the engine record, the engine and the
    /// allocator, and reports each violation. Walks everything: O(data).
    ///
    /// # Errors
    /// [`DbError::Engine`] or [`DbError::Pool`] only if damage stops the walk.
    pub fn check(&self) -> Result<DbCheck> {
        let pool = self.tree().pool();
        let record = match record::read(pool, &self.path) {
            Ok(Some(e)) if e == self.engine => None,
            Ok(Some(e)) => Some(format!("names engine {e}, but {} is open", self.engine)),
            Ok(None) => Some(format!("the `{}` root is missing", record::ROOT_NAME)),
            Err(e) => Some(e.to_string()),
        };
        let tree = self.tree().check().map_err(self.err())?;
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
        let Some(tree) = self.tree.take() else { return Ok(()) };
        // Dropping the tree frees what batches retired while readers ran.
        let pool = Arc::clone(tree.pool());
        drop(tree);
        match Arc::try_unwrap(pool) {
            Ok(pool) => pool.close().map_err(|e| DbError::pool(&self.path, e)),
            Err(_shared) => Ok(()),
        }
    }
}

impl Drop for Db {
    fn drop(&mut self) {
        let _ = self.shutdown();
    }
}
