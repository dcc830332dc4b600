//! [`Heap`]: the transactional object heap on a pool — creation, open and
//! crash recovery of the log, the Transaction Coordinator, statistics,
//! leak tracing and `check`.
//!
//! Invariants (checked by [`Heap::check`]):
//! - `kamino.object_header`: every object's header carries the magic and a
//!   length that fits its block;
//! - `kamino.backup_current`: an object that is neither locked nor pending
//!   and has a backup equals it byte for byte;
//! - `kamino.full_backup`: in `kamino` mode every such object has a backup;
//! - `kamino.log_idle`: no slot is Running while no transaction runs.

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crossbeam_queue::{ArrayQueue, SegQueue};
use parking_lot::{Condvar, Mutex};
use tembo_pmem::{LeakTracer, Marker, PPtr, PmemError, Pool, PoolOffset, ReclaimReport};

use crate::backup::{self, Dynamic};
use crate::error::{invariant, KaminoError, Result};
use crate::layout::*;
use crate::locks::{Claim, LockTable};
use crate::log::{self, SlotReader, SlotTable};
use crate::tx::Tx;

/// How transactions are made atomic.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum TxMode {
    /// Kamino-Tx-Simple: write intents, in-place stores, a full backup
    /// rolled forward off the critical path.
    Kamino,
    /// Kamino-Tx-Dynamic: as `Kamino`, with copies of only the most
    /// recently written objects (a fraction α of the heap).
    KaminoDynamic,
    /// The baseline: copy each object to an undo log before its first
    /// store (PMDK's semantics).
    Undo,
}

impl TxMode {
    fn id(self) -> u64 {
        match self {
            TxMode::Kamino => 1,
            TxMode::KaminoDynamic => 2,
            TxMode::Undo => 3,
        }
    }
    fn from_id(id: u64) -> Option<TxMode> {
        match id {
            1 => Some(TxMode::Kamino),
            2 => Some(TxMode::KaminoDynamic),
            3 => Some(TxMode::Undo),
            _ => None,
        }
    }
    /// Lower-case name.
    pub fn name(self) -> &'static str {
        match self {
            TxMode::Kamino => "kamino",
            TxMode::KaminoDynamic => "kamino-dynamic",
            TxMode::Undo => "undo",
        }
    }
    pub(crate) fn has_backup(self) -> bool {
        self != TxMode::Undo
    }
}

/// Who rolls committed objects forward into the backup.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Coordinator {
    /// A background thread (the paper's Transaction Coordinator).
    Background,
    /// Only [`Heap::coordinate`] and transactions that need a log slot
    /// (deterministic: the crash simulator's campaigns use it).
    Manual,
}

/// How to create or open a [`Heap`].
#[derive(Clone, Debug)]
pub struct HeapOptions {
    /// The atomicity mode of a new heap (an existing heap keeps its own).
    pub mode: TxMode,
    /// α: the dynamic backup's budget as a fraction of the heap's object
    /// bytes (0 < α ≤ 1; `KaminoDynamic` only; create only).
    pub alpha: f64,
    /// Log slots: how many transactions can be running or awaiting
    /// roll-forward at once (create only).
    pub slots: u32,
    /// How long a transaction waits for a lock before it aborts.
    pub lock_timeout: Duration,
    /// Who rolls the backup forward.
    pub coordinator: Coordinator,
}

impl Default for HeapOptions {
    fn default() -> Self {
        HeapOptions {
            mode: TxMode::Kamino,
            alpha: 1.0,
            slots: 64,
            lock_timeout: Duration::from_secs(2),
            coordinator: Coordinator::Background,
        }
    }
}

/// Counters of a heap since it was opened ([`Heap::stats`]).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct HeapStats {
    /// The mode.
    pub mode: Option<TxMode>,
    /// α (dynamic mode).
    pub alpha: f64,
    /// Transactions committed.
    pub committed: u64,
    /// Transactions aborted (errors, panics, lock timeouts).
    pub aborted: u64,
    /// Objects copied in the critical path: a dependent transaction's
    /// roll-forward, a dynamic backup miss, an undo-log image.
    pub copies_critical: u64,
    /// Objects copied to the backup off the critical path (the coordinator).
    pub copies_background: u64,
    /// Committed transactions whose thread rolled its objects forward
    /// itself because the coordinator was behind (their copies count in
    /// `copies_background`: the transaction was already durable).
    pub self_rolled: u64,
    /// Write intents whose object had a current backup.
    pub backup_hits: u64,
    /// Write intents whose object needed a copy first.
    pub backup_misses: u64,
    /// Copies evicted from the dynamic backup.
    pub evictions: u64,
    /// Misses that could not stay within α (every copy was locked).
    pub over_budget: u64,
    /// Misses at the budget whose copy took the block (and directory
    /// entry) of the copy they evicted: no allocator call.
    pub reused_blocks: u64,
    /// Lock acquisitions that waited for another transaction.
    pub lock_waits: u64,
    /// Bytes of backup copies (dynamic mode: exact; `kamino`: see the engine's walk).
    pub backup_bytes: u64,
    /// Bytes of live objects, headers included (estimated at open from the allocator).
    pub object_bytes: u64,
}

/// What recovery did when a heap was opened after an unclean shutdown.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct HeapRecovery {
    /// Whether it ran.
    pub ran: bool,
    /// Transactions found running and rolled back.
    pub rolled_back: u64,
    /// Committed transactions whose objects were rolled forward.
    pub rolled_forward: u64,
    /// Objects restored (from the backup or the undo log).
    pub objects_restored: u64,
    /// Objects copied to the backup.
    pub objects_copied: u64,
    /// Wall time.
    pub time: Duration,
}

/// What the heap counts (indices into [`Counters`]).
#[derive(Clone, Copy, Debug)]
pub(crate) enum Count {
    Committed,
    Aborted,
    CopiesCritical,
    CopiesBackground,
    Hits,
    Misses,
    LockWaits,
    SelfRolled,
}

/// The heap's counters, per-thread sharded: every transaction bumps a few,
/// and one shared line bumped by every writer was a point all cores met.
#[derive(Debug, Default)]
pub(crate) struct Counters(tembo_pmem::ShardedCounts<8>);

impl Counters {
    #[inline]
    pub fn add(&self, c: Count, n: u64) {
        self.0.add(c as usize, n);
    }
    pub fn get(&self, c: Count) -> u64 {
        self.0.get(c as usize)
    }
}

/// A committed transaction's roll-forward work.
#[derive(Debug)]
pub(crate) struct Job {
    pub slot: u32,
    pub txid: u64,
    pub objects: Vec<PoolOffset>,
}

#[derive(Debug)]
pub(crate) struct Inner {
    pub pool: Arc<Pool>,
    pub root: PoolOffset,
    pub mode: TxMode,
    pub alpha: f64,
    pub slots: SlotTable,
    pub locks: LockTable,
    /// Log slots no transaction or job holds (lock-free: every transaction
    /// takes one and gives one back, from every core).
    pub free_slots: ArrayQueue<u32>,
    /// Transactions waiting for a free slot sleep on `slot_cv` under this
    /// lock, which guards nothing but the sleep.
    pub slot_wait: Mutex<()>,
    pub slot_waiters: AtomicUsize,
    pub slot_cv: Condvar,
    /// Committed transactions to roll forward, oldest first.
    pub jobs: SegQueue<Job>,
    /// The coordinator sleeps on `jobs_cv` under this lock.
    pub coordinator_wait: Mutex<()>,
    pub jobs_cv: Condvar,
    pub next_txid: AtomicU64,
    pub counters: Counters,
    pub dynamic: Option<Dynamic>,
    pub object_bytes: AtomicU64,
    pub shutdown: AtomicBool,
    /// The coordinator sleeps (commits wake it only then: a wake-up is a
    /// system call the committing thread would pay every time).
    pub coordinator_idle: AtomicBool,
    /// Jobs the coordinator has taken off the queue and not yet finished
    /// (what `Heap::settle` waits for besides the queue).
    pub coordinator_holding: AtomicUsize,
    pub timeout: Duration,
}

/// A transactional persistent object heap on a pool.
///
/// Objects are pool blocks with a 16-byte header; references between them
/// are pool offsets ([`PPtr`]). Every change goes through a transaction
/// ([`Heap::transaction`]). `Send + Sync`: transactions on different
/// objects run in parallel from many threads.
#[derive(Debug)]
pub struct Heap {
    inner: Arc<Inner>,
    thread: Option<JoinHandle<()>>,
    recovery: HeapRecovery,
}

impl Inner {
    /// Gives a log slot back and wakes a transaction waiting for one.
    pub(crate) fn release_slot(&self, slot: u32) {
        // Never full: a slot is in the queue, in a transaction or in a job,
        // never in two of them.
        let pushed = self.free_slots.push(slot);
        debug_assert!(pushed.is_ok(), "log slot {slot} released twice");
        // Pairs with the waiter's count-then-look (`Tx::take_slot`).
        std::sync::atomic::fence(Ordering::SeqCst);
        if self.slot_waiters.load(Ordering::SeqCst) > 0 {
            let _g = self.slot_wait.lock();
            self.slot_cv.notify_one();
        }
    }

    /// Queues a committed transaction's roll-forward; wakes the sleeping
    /// coordinator only when half the log slots wait for it (a wake-up is
    /// a system call the committing thread would pay every time).
    pub(crate) fn queue_job(&self, job: Job) {
        self.jobs.push(job);
        if self.jobs.len() * 2 >= self.slots.count as usize && self.coordinator_idle.load(Ordering::SeqCst) {
            let _g = self.coordinator_wait.lock();
            self.jobs_cv.notify_one();
        }
    }

    /// Whether the coordinator is behind: so many jobs wait that a
    /// committing thread does better to roll its own forward now, while
    /// its objects are in its core's cache, than to queue it behind the
    /// others. With every core writing there is no idle core for the
    /// coordinator, and its copies read each object from another core.
    pub(crate) fn coordinator_behind(&self) -> bool {
        self.jobs.len() as u64 * BEHIND_DIVISOR >= u64::from(self.slots.count)
    }

    /// The dynamic backup's budget now: α × the heap's object bytes.
    pub(crate) fn dynamic_budget(&self) -> u64 {
        (self.alpha * self.object_bytes.load(Ordering::Relaxed) as f64) as u64
    }
}

/// Length of `obj`'s payload, validating its header.
pub(crate) fn object_len(pool: &Pool, obj: PoolOffset) -> Result<u64> {
    if obj == 0 || obj % 8 != 0 {
        return Err(KaminoError::BadAccess { what: "not an object reference".into(), object: obj });
    }
    let w = pool.load_u64(obj + H_LEN)?;
    if w >> 32 != OBJ_MAGIC {
        return Err(invariant("kamino.object_header", obj, format!("bad object header word {w:#x}")));
    }
    Ok(w & 0xffff_ffff)
}

/// The payload length of `obj` if it is the start of an allocated block
/// holding a live object header (recovery's test for log entries of
/// transactions whose objects may since have been freed: a freed object's
/// header is cleared before the free, and every other kind of block of the
/// heap carries its own tag at the same word).
pub(crate) fn live_object(pool: &Pool, obj: PoolOffset) -> Option<u64> {
    let usable = pool.usable_size(obj).ok()?;
    let len = object_len(pool, obj).ok()?;
    (OBJ_HEADER + len <= usable).then_some(len)
}

impl Heap {
    /// Creates an empty heap on `pool` (which must hold none) and records
    /// it under the pool root `kamino`.
    ///
    /// # Errors
    /// [`KaminoError::Layout`] if the pool already has a heap or the options
    /// are out of range; [`KaminoError::Pmem`] if the pool is full.
    pub fn create(pool: Arc<Pool>, opts: &HeapOptions) -> Result<Heap> {
        if pool.root(ROOT_NAME).is_some() {
            return Err(KaminoError::Layout("the pool already holds a Kamino heap".into()));
        }
        if !(opts.alpha > 0.0 && opts.alpha <= 1.0) {
            return Err(KaminoError::Layout(format!("alpha must be in (0, 1], not {}", opts.alpha)));
        }
        if opts.slots == 0 || opts.slots > 4096 {
            return Err(KaminoError::Layout(format!("slots must be in 1..=4096, not {}", opts.slots)));
        }
        let table_bytes = u64::from(opts.slots) * SLOT_BYTES;
        let table = pool.alloc(table_bytes)?;
        pool.fill(table, table_bytes, 0)?;
        pool.persist(table, table_bytes);
        let root = pool.alloc(ROOT_BYTES)?;
        let mut words = [0u64; 8];
        words[(R_MAGIC / 8) as usize] = MAGIC;
        words[(R_LAYOUT / 8) as usize] = LAYOUT;
        words[(R_MODE / 8) as usize] = opts.mode.id();
        words[(R_ALPHA / 8) as usize] = opts.alpha.to_bits();
        words[(R_SLOTS / 8) as usize] = u64::from(opts.slots);
        words[(R_SLOT_TABLE / 8) as usize] = table;
        let bytes: Vec<u8> = words.iter().flat_map(|w| w.to_le_bytes()).collect();
        pool.write(root, &bytes)?;
        pool.persist(root, ROOT_BYTES);
        pool.set_root(ROOT_NAME, root)?;
        Heap::start(pool, root, opts, HeapRecovery::default())
    }

    /// Opens the heap on `pool`, first recovering the log if the pool was
    /// not closed cleanly: running transactions are rolled back (from the
    /// backup, or the undo log), committed ones rolled forward. Leaks are
    /// reclaimed separately ([`Heap::reclaim_leaks`]), since only the
    /// application knows which objects it reaches.
    ///
    /// # Errors
    /// [`KaminoError::Layout`] if the pool holds no heap or one of another
    /// layout; [`KaminoError::Invariant`] if the log is damaged.
    pub fn open(pool: Arc<Pool>, opts: &HeapOptions) -> Result<Heap> {
        let root = pool.root(ROOT_NAME).ok_or_else(|| KaminoError::Layout("the pool holds no Kamino heap".into()))?;
        if pool.load_u64(root + R_MAGIC)? != MAGIC {
            return Err(KaminoError::Layout(format!("the `{ROOT_NAME}` root at {root:#x} is not a Kamino heap")));
        }
        let layout = pool.load_u64(root + R_LAYOUT)?;
        if layout != LAYOUT {
            return Err(KaminoError::Layout(format!("heap layout {layout}, this build reads {LAYOUT}")));
        }
        let recovery = if pool.opened_unclean() { recover(&pool, root)? } else { HeapRecovery::default() };
        Heap::start(pool, root, opts, recovery)
    }

    fn start(pool: Arc<Pool>, root: PoolOffset, opts: &HeapOptions, recovery: HeapRecovery) -> Result<Heap> {
        let (mode, slots) = read_root(&pool, root)?;
        let alpha = f64::from_bits(pool.load_u64(root + R_ALPHA)?);
        let count = u64::from(slots.count);
        let mut max_txid = 0;
        for s in 0..slots.count {
            let (txid, state) = slots.state(&pool, s)?;
            if state == Some(SlotState::Running) && !pool.opened_unclean() {
                return Err(invariant("kamino.log_idle", slots.line(s), "a slot is Running after a clean shutdown"));
            }
            max_txid = max_txid.max(txid);
        }
        if !pool.opened_unclean() {
            // After a clean close every slot is retired, but its chunks may
            // still hold entries with ids above every slot word (a slot is
            // reused by whichever transaction takes it next, older or not).
            // Clearing them keeps this life's ids from ever matching a stale
            // entry, as recovery does after a crash.
            log::reset_all(&slots, &pool, max_txid)?;
        }
        let dynamic = match mode {
            TxMode::KaminoDynamic => Some(Dynamic::load(&pool, root)?),
            _ => None,
        };
        let backup_bytes = dynamic.as_ref().map_or(0, Dynamic::bytes);
        let used = pool.used_bytes();
        let object_bytes = match mode {
            TxMode::Kamino => used / 2,
            _ => used.saturating_sub(backup_bytes),
        };
        let inner = Arc::new(Inner {
            pool,
            root,
            mode,
            alpha,
            slots,
            locks: LockTable::new(opts.lock_timeout),
            free_slots: {
                let q = ArrayQueue::new(count.max(1) as usize);
                for s in 0..count as u32 {
                    let _ = q.push(s);
                }
                q
            },
            slot_wait: Mutex::new(()),
            slot_waiters: AtomicUsize::new(0),
            slot_cv: Condvar::new(),
            jobs: SegQueue::new(),
            coordinator_wait: Mutex::new(()),
            jobs_cv: Condvar::new(),
            next_txid: AtomicU64::new(max_txid + 1),
            counters: Counters::default(),
            dynamic,
            object_bytes: AtomicU64::new(object_bytes),
            shutdown: AtomicBool::new(false),
            coordinator_idle: AtomicBool::new(false),
            coordinator_holding: AtomicUsize::new(0),
            timeout: opts.lock_timeout,
        });
        let thread = match (opts.coordinator, mode.has_backup()) {
            (Coordinator::Background, true) => {
                let i = inner.clone();
                Some(
                    std::thread::Builder::new()
                        .name("kamino-coordinator".into())
                        .spawn(move || coordinator_loop(&i))
                        .map_err(|e| {
                        KaminoError::Pmem(PmemError::Io {
                            context: "starting the kamino coordinator thread".into(),
                            source: e,
                        })
                    })?,
                )
            }
            _ => None,
        };
        Ok(Heap { inner, thread, recovery })
    }

    /// Runs `f` as one transaction: commits when it returns `Ok` (durable
    /// when this returns), aborts when it returns `Err` or panics (every
    /// object it wrote is restored, every object it allocated freed).
    ///
    /// # Errors
    /// `f`'s error; [`KaminoError::LockTimeout`] when a lock was not had in
    /// time; [`KaminoError::Pmem`] when the pool is full.
    pub fn transaction<R>(&self, f: impl FnOnce(&mut Tx<'_>) -> Result<R>) -> Result<R> {
        let mut tx = Tx::new(&self.inner);
        match f(&mut tx) {
            Ok(r) => {
                tx.commit()?;
                Ok(r)
            }
            Err(e) => {
                tx.abort()?;
                Err(e)
            }
        }
    }

    /// The mode.
    pub fn mode(&self) -> TxMode {
        self.inner.mode
    }

    /// The pool.
    pub fn pool(&self) -> &Arc<Pool> {
        &self.inner.pool
    }

    /// What recovery did at open.
    pub fn recovery(&self) -> &HeapRecovery {
        &self.recovery
    }

    /// The application's root object (0 until set).
    pub fn app_root(&self) -> Result<PoolOffset> {
        Ok(self.inner.pool.load_u64(self.inner.root + R_APP_ROOT)?)
    }

    /// Sets the application's root object, durably. Outside transactions:
    /// meant for creating a data structure's fixed anchor object once.
    pub fn set_app_root(&self, obj: PoolOffset) -> Result<()> {
        let at = self.inner.root + R_APP_ROOT;
        self.inner.pool.store_u64(at, obj)?;
        self.inner.pool.persist(at, 8);
        Ok(())
    }

    /// Payload length of `obj`.
    pub fn len<T>(&self, obj: PPtr<T>) -> Result<u64> {
        object_len(&self.inner.pool, obj.offset())
    }

    /// Reads the 8-byte word at `off` of `obj`'s payload. The caller
    /// provides isolation (a lock or a transaction).
    #[inline]
    pub fn get_u64<T>(&self, obj: PPtr<T>, off: u64) -> Result<u64> {
        Ok(self.inner.pool.load_u64(payload(obj.offset()) + off)?)
    }

    /// Reads `dst.len()` bytes at `off` of `obj`'s payload.
    #[inline]
    pub fn read<T>(&self, obj: PPtr<T>, off: u64, dst: &mut [u8]) -> Result<()> {
        Ok(self.inner.pool.read(payload(obj.offset()) + off, dst)?)
    }

    /// Takes a read lock on `obj` for a reader outside any transaction;
    /// released when the guard drops.
    ///
    /// # Errors
    /// [`KaminoError::LockTimeout`].
    pub fn read_lock<T>(&self, obj: PPtr<T>) -> Result<ReadGuard<'_>> {
        self.inner.locks.lock_read(obj.offset())?;
        Ok(ReadGuard { heap: &self.inner, obj: obj.offset() })
    }

    /// Rolls forward the backup of up to `max` committed transactions now;
    /// returns how many finished. The background coordinator does this by
    /// itself; with [`Coordinator::Manual`] only this and log-slot pressure
    /// do. Objects a running transaction holds are left for later.
    pub fn coordinate(&self, max: usize) -> Result<usize> {
        let mut done = 0;
        let mut tries = self.inner.jobs.len();
        while done < max && tries > 0 {
            tries -= 1;
            let Some(job) = self.inner.jobs.pop() else { break };
            if process_job(&self.inner, job, 0)? {
                done += 1;
            }
        }
        Ok(done)
    }

    /// Rolls every committed transaction's objects forward into the backup
    /// now, on this thread, waiting for running transactions to let go of
    /// what they hold: afterwards the coordinator has nothing queued.
    ///
    /// # Errors
    /// [`KaminoError::Pmem`] if a copy fails (the pool is full).
    pub fn settle(&self) -> Result<()> {
        let holding = || self.inner.coordinator_holding.load(Ordering::SeqCst) > 0;
        while !self.inner.jobs.is_empty() || holding() {
            if self.coordinate(usize::MAX)? == 0 {
                std::thread::sleep(Duration::from_micros(200));
            }
        }
        Ok(())
    }

    /// Counters since open.
    pub fn stats(&self) -> HeapStats {
        let c = &self.inner.counters;
        let (backup_bytes, (evictions, over_budget, reused_blocks)) =
            self.inner.dynamic.as_ref().map_or((0, (0, 0, 0)), |d| (d.bytes(), d.eviction_counts()));
        HeapStats {
            mode: Some(self.inner.mode),
            alpha: self.inner.alpha,
            committed: c.get(Count::Committed),
            aborted: c.get(Count::Aborted),
            copies_critical: c.get(Count::CopiesCritical),
            copies_background: c.get(Count::CopiesBackground),
            self_rolled: c.get(Count::SelfRolled),
            backup_hits: c.get(Count::Hits),
            backup_misses: c.get(Count::Misses),
            evictions,
            over_budget,
            reused_blocks,
            lock_waits: c.get(Count::LockWaits),
            backup_bytes,
            object_bytes: self.inner.object_bytes.load(Ordering::Relaxed),
        }
    }

    /// The payload length and backup offset of `obj` (0: none).
    pub fn object_info<T>(&self, obj: PPtr<T>) -> Result<(u64, PoolOffset)> {
        let pool = &self.inner.pool;
        Ok((object_len(pool, obj.offset())?, backup::backup_of(pool, obj.offset())?))
    }

    /// Marks `obj` and its backup as reachable (for the application's
    /// [`LeakTracer`]).
    ///
    /// # Errors
    /// [`PmemError::Corrupted`] if either is not an allocated block.
    pub fn mark_object(pool: &Pool, marker: &mut Marker<'_>, obj: PoolOffset) -> Result<bool, PmemError> {
        let first = marker.mark(obj)?;
        if first {
            let b = pool.load_u64(obj + H_BACKUP)?;
            if b != 0 {
                marker.mark(b)?;
            }
        }
        Ok(first)
    }

    /// Frees every block neither the heap's own structures nor `app`
    /// reach (after a crash: objects of transactions that never committed,
    /// copies and frees cut short). `app` must mark every live object with
    /// [`Heap::mark_object`].
    ///
    /// # Errors
    /// [`KaminoError::Pmem`] if marking finds a reference to something that
    /// is not a block.
    pub fn reclaim_leaks(&self, app: &dyn LeakTracer) -> Result<ReclaimReport> {
        self.settle()?;
        let inner = &self.inner;
        let dir: Vec<PoolOffset> = inner.dynamic.as_ref().map_or_else(Vec::new, Dynamic::chunks);
        let meta = |pool: &Pool, m: &mut Marker<'_>| -> Result<(), PmemError> {
            for r in pool.roots() {
                if r.offset != 0 {
                    let _ = m.mark(r.offset);
                }
            }
            m.mark(inner.slots.table)?;
            for s in 0..inner.slots.count {
                for c in inner.slots.chunks(pool, s).map_err(to_pmem)? {
                    m.mark(c)?;
                }
            }
            for &c in &dir {
                m.mark(c)?;
            }
            Ok(())
        };
        Ok(inner.pool.reclaim_leaks(&[&meta, app])?)
    }

    /// Validates the heap's invariants for the objects `objects` (the
    /// application's live set) and returns each violation. Runs the
    /// coordinator to completion first, so it needs no transaction running.
    ///
    /// # Errors
    /// [`KaminoError::Pmem`] if reading stops.
    pub fn check(&self, objects: &[PoolOffset]) -> Result<Vec<String>> {
        self.settle()?;
        let inner = &self.inner;
        let pool = &inner.pool;
        let mut v = Vec::new();
        // The free slots, put back at once (transactions wanting one wait).
        let mut free = Vec::new();
        while let Some(s) = inner.free_slots.pop() {
            free.push(s);
        }
        for &s in &free {
            inner.release_slot(s);
        }
        for s in 0..inner.slots.count {
            if let (_, Some(SlotState::Running)) = inner.slots.state(pool, s)? {
                if !free.contains(&s) {
                    continue; // a transaction is running in it now
                }
                v.push(format!("kamino.log_idle: slot {s} is Running with no transaction"));
            }
        }
        let busy: std::collections::HashSet<PoolOffset> = inner.locks.busy_objects().into_iter().collect();
        for &o in objects {
            let len = match object_len(pool, o) {
                Ok(l) => l,
                Err(e) => {
                    v.push(format!("kamino.object_header: {e}"));
                    continue;
                }
            };
            if let Ok(us) = pool.usable_size(o) {
                if us < OBJ_HEADER + len {
                    v.push(format!("kamino.object_header: object {o:#x} of {len} bytes in a block of {us}"));
                }
            }
            if !inner.mode.has_backup() || busy.contains(&o) {
                continue;
            }
            let b = backup::backup_of(pool, o)?;
            if b == 0 {
                if inner.mode == TxMode::Kamino {
                    v.push(format!("kamino.full_backup: object {o:#x} has no backup"));
                }
                continue;
            }
            let mut m = vec![0u8; len as usize];
            let mut c = vec![0u8; len as usize];
            pool.read(payload(o), &mut m)?;
            pool.read(payload(b), &mut c)?;
            if m != c {
                v.push(format!("kamino.backup_current: object {o:#x} differs from its backup {b:#x}"));
            }
        }
        Ok(v)
    }
}

impl Drop for Heap {
    fn drop(&mut self) {
        self.inner.shutdown.store(true, Ordering::Release);
        {
            let _g = self.inner.coordinator_wait.lock();
            self.inner.jobs_cv.notify_all();
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        // Leave the backup current, so a clean reopen has no work.
        let _ = self.settle();
    }
}

/// A read lock held outside any transaction.
#[derive(Debug)]
pub struct ReadGuard<'h> {
    heap: &'h Inner,
    obj: PoolOffset,
}

impl Drop for ReadGuard<'_> {
    fn drop(&mut self) {
        self.heap.locks.unlock_read(self.obj);
    }
}

fn to_pmem(e: KaminoError) -> PmemError {
    match e {
        KaminoError::Pmem(p) => p,
        other => PmemError::Corrupted { what: other.to_string(), offset: 0 },
    }
}

/// The coordinator is behind when this fraction (1/n) of the log slots
/// hold jobs waiting for it.
const BEHIND_DIVISOR: u64 = 4;

/// The coordinator's first nap after work (it doubles while idle, to 1 ms).
const POLL_NAP: Duration = Duration::from_micros(20);
/// How long the coordinator polls for the next job after work before its
/// first nap: at most this much of a core per burst of transactions.
const POLL_AFTER_WORK: Duration = Duration::from_micros(50);

/// Most jobs the coordinator rolls forward under one fence.
const COORDINATOR_BATCH: usize = 32;

/// The Transaction Coordinator: rolls committed transactions forward in
/// commit order. When jobs queue up it takes up to half the queue (at most
/// [`COORDINATOR_BATCH`]) under one fence: with many writers one
/// coordinator serves them all, and a fence per job was its limit. When it
/// keeps up it takes one at a time, because a writer that wants an object
/// of the batch waits for the whole batch. It polls rather than being woken per commit (a wake-up is
/// a system call the committing thread would pay every time): after work
/// it polls, yielding, for [`POLL_AFTER_WORK`], then naps 20 µs, backing
/// off to 1 ms when idle; a commit wakes it only when half the log slots
/// wait for it.
fn coordinator_loop(inner: &Inner) {
    let mut nap = POLL_NAP;
    let mut batch = Vec::with_capacity(COORDINATOR_BATCH);
    loop {
        let job = loop {
            // Counted before it pops: `Heap::settle` must never see an empty
            // queue while a popped job is still unfinished.
            inner.coordinator_holding.fetch_add(1, Ordering::SeqCst);
            if let Some(j) = inner.jobs.pop() {
                break Some(j);
            }
            inner.coordinator_holding.fetch_sub(1, Ordering::SeqCst);
            if inner.shutdown.load(Ordering::Acquire) {
                break None;
            }
            if nap == POLL_NAP {
                // Just busy: poll (yielding the core to any thread that
                // wants it) before sleeping. Sleeping at once let the log
                // slots fill during each nap under a steady writer, which
                // then copied objects itself and waited: write p99 8.9 µs,
                // 2.3 µs with the poll (see `docs/results/kamino.md`).
                let t = std::time::Instant::now();
                while inner.jobs.is_empty() && t.elapsed() < POLL_AFTER_WORK {
                    std::thread::yield_now();
                }
                if !inner.jobs.is_empty() {
                    continue;
                }
            }
            let mut g = inner.coordinator_wait.lock();
            inner.coordinator_idle.store(true, Ordering::SeqCst);
            // Looked at again under the lock: a commit that saw the flag
            // set wakes us under it, so no wake-up is lost.
            if inner.jobs.is_empty() && !inner.shutdown.load(Ordering::Acquire) {
                inner.jobs_cv.wait_for(&mut g, nap);
            }
            inner.coordinator_idle.store(false, Ordering::SeqCst);
            nap = (nap * 2).min(Duration::from_millis(1));
        };
        let Some(job) = job else { return };
        nap = POLL_NAP;
        batch.push(job);
        let want = (inner.jobs.len() / 2).clamp(1, COORDINATOR_BATCH);
        while batch.len() < want {
            match inner.jobs.pop() {
                Some(j) => batch.push(j),
                None => break,
            }
        }
        let n = batch.len();
        let r = process_jobs(inner, &mut batch, 0);
        // Finished or queued again: nothing is held any more.
        inner.coordinator_holding.fetch_sub(1, Ordering::SeqCst);
        match r {
            Ok(done) if done == n => {}
            // Held by a running transaction: let it finish.
            Ok(_) => std::thread::sleep(Duration::from_micros(20)),
            Err(_) => {
                // The job is queued again; should it never succeed, the
                // next open's recovery rolls its objects forward from the log.
                inner.pool.keep_unclean();
                if inner.shutdown.load(Ordering::Acquire) {
                    // A job that keeps failing must not hold the close.
                    return;
                }
                std::thread::sleep(Duration::from_millis(10));
            }
        }
    }
}

/// Rolls one committed transaction's objects forward and frees its slot;
/// objects another transaction holds uncopied are left for a retry, and the
/// job goes back to the queue (its slot must outlive every stale backup it
/// covers). `me`: the transaction calling, if any (it may copy objects it
/// holds itself). Returns whether the job finished.
pub(crate) fn process_job(inner: &Inner, job: Job, me: u64) -> Result<bool> {
    Ok(process_jobs(inner, &mut vec![job], me)? == 1)
}

/// [`process_job`] for a batch of jobs under one fence (the batch is
/// emptied); returns how many finished.
pub(crate) fn process_jobs(inner: &Inner, jobs: &mut Vec<Job>, me: u64) -> Result<usize> {
    let pool = &inner.pool;
    let mut claimed = Vec::new();
    let mut busy: Vec<Vec<PoolOffset>> = Vec::with_capacity(jobs.len());
    let mut result = Ok(());
    'jobs: for job in jobs.iter() {
        let mut held = Vec::new();
        for &o in &job.objects {
            match inner.locks.claim_roll_forward(o, job.txid, me) {
                Claim::Done => {}
                Claim::Busy => held.push(o),
                Claim::Claimed { own_lock } => {
                    if let Err(e) = roll_forward(inner, o) {
                        // Still pending: the job is queued again below.
                        inner.locks.end_roll_forward(o, own_lock, false);
                        result = Err(e);
                        break 'jobs;
                    }
                    claimed.push((o, own_lock));
                }
            }
        }
        busy.push(held);
    }
    pool.fence();
    for &(o, own) in &claimed {
        inner.locks.end_roll_forward(o, own, true);
    }
    inner.counters.add(Count::CopiesBackground, claimed.len() as u64);
    if let Err(e) = result {
        for job in jobs.drain(..) {
            inner.jobs.push(job);
        }
        return Err(e);
    }
    let mut done = 0;
    for (job, held) in jobs.drain(..).zip(busy) {
        if !held.is_empty() {
            inner.jobs.push(Job { objects: held, ..job });
            continue;
        }
        // Retired: no persist needed — a stale Committed slot only makes
        // the next recovery copy committed data again.
        match pool.store_u64(inner.slots.line(job.slot), slot_word(job.txid, SlotState::Idle)) {
            Ok(()) => {
                inner.release_slot(job.slot);
                done += 1;
            }
            Err(e) => {
                inner.jobs.push(job);
                result = Err(e.into());
            }
        }
    }
    result.map(|()| done)
}

/// Copies `obj`'s payload to its backup (flushed; the caller fences). In
/// `kamino` mode an object without a backup (new) gets one.
pub(crate) fn roll_forward(inner: &Inner, obj: PoolOffset) -> Result<()> {
    let pool = &inner.pool;
    let len = object_len(pool, obj)?;
    let b = backup::backup_of(pool, obj)?;
    if b != 0 {
        backup::stamp_header(pool, b, len)?;
        backup::copy_range(pool, payload(obj), payload(b), 0, len)
    } else if inner.mode == TxMode::Kamino {
        let b = backup::make_copy(pool, obj, len)?;
        backup::link(pool, obj, b)
    } else if let Some(d) = &inner.dynamic {
        // A new object in dynamic mode: copied off the critical path while
        // the budget has room (never evicting for it), so its first update
        // need not copy it.
        if d.bytes() + len <= inner.dynamic_budget() {
            // Optional: at a full pool the object goes without a copy
            // until its first update makes one.
            if let Err(e) = d.insert(pool, obj, len) {
                if !matches!(e, KaminoError::Pmem(PmemError::PoolFull { .. })) {
                    return Err(e);
                }
            }
        }
        Ok(())
    } else {
        Ok(())
    }
}

/// The heap root's mode and slot table, validated.
fn read_root(pool: &Pool, root: PoolOffset) -> Result<(TxMode, SlotTable)> {
    let mode_id = pool.load_u64(root + R_MODE)?;
    let mode = TxMode::from_id(mode_id).ok_or_else(|| KaminoError::Layout(format!("unknown heap mode {mode_id}")))?;
    let count = pool.load_u64(root + R_SLOTS)?;
    if count == 0 || count > 4096 {
        return Err(invariant("kamino.root", root, format!("slot count {count}")));
    }
    let t =
        SlotTable { table: pool.load_u64(root + R_SLOT_TABLE)?, count: count as u32, chunk_bytes: chunk_bytes(mode) };
    pool.check_range(t.table, count * SLOT_BYTES)?;
    Ok((mode, t))
}

/// Log recovery after an unclean shutdown.
fn recover(pool: &Pool, root: PoolOffset) -> Result<HeapRecovery> {
    let t0 = Instant::now();
    let (mode, t) = read_root(pool, root)?;
    let mut r = HeapRecovery { ran: true, ..HeapRecovery::default() };
    let mut max_txid = 0;
    let mut committed = Vec::new();
    // Roll back first: after that the main copy holds committed data only,
    // and rolling forward copies exactly that.
    for s in 0..t.count {
        let (txid, state) = t.state(pool, s)?;
        max_txid = max_txid.max(txid);
        match state {
            Some(SlotState::Running) => {
                r.rolled_back += 1;
                if mode == TxMode::Undo {
                    r.objects_restored += log::apply_undo(&t, pool, s, txid)?;
                } else {
                    let mut rd = SlotReader::new(&t, pool, s, txid)?;
                    while let Some([_, word]) = rd.next_header::<2>()? {
                        if word & ALLOC_TAG != 0 {
                            continue;
                        }
                        let obj = word;
                        let len = object_len(pool, obj)?;
                        let b = backup::backup_of(pool, obj)?;
                        if b == 0 {
                            return Err(invariant(
                                "kamino.intent_backup",
                                obj,
                                "a write intent's object has no backup",
                            ));
                        }
                        backup::copy_range(pool, payload(b), payload(obj), 0, len)?;
                        r.objects_restored += 1;
                    }
                }
            }
            Some(SlotState::Committed) => committed.push((s, txid)),
            Some(SlotState::Idle) => {}
            None => return Err(invariant("kamino.slot_state", t.line(s), "bad slot state")),
        }
    }
    pool.fence();
    if mode.has_backup() {
        for (s, txid) in committed {
            r.rolled_forward += 1;
            let mut rd = SlotReader::new(&t, pool, s, txid)?;
            while let Some([_, word]) = rd.next_header::<2>()? {
                let obj = word & !ALLOC_TAG;
                // A later transaction may have freed the object since: only
                // a live object header is trusted.
                let Some(len) = live_object(pool, obj) else { continue };
                let b = backup::backup_of(pool, obj)?;
                if b != 0 {
                    backup::stamp_header(pool, b, len)?;
                    backup::copy_range(pool, payload(obj), payload(b), 0, len)?;
                    r.objects_copied += 1;
                } else if mode == TxMode::Kamino {
                    // A committed new object's first copy.
                    let b = backup::make_copy(pool, obj, len)?;
                    backup::link(pool, obj, b)?;
                    r.objects_copied += 1;
                }
            }
        }
        pool.fence();
    }
    log::reset_all(&t, pool, max_txid)?;
    r.time = t0.elapsed();
    Ok(r)
}
