//! [`Tx`]: one transaction — write intents, in-place stores, commit and
//! abort, for all three modes.
//!
//! A write intent ([`Tx::write`]) locks the object, makes sure its backup
//! is current (copying it now if a committed change is still pending, or,
//! in dynamic mode, if it has no copy), and persists the intent (Kamino-Tx)
//! or the object's image (undo) before it returns the token that allows
//! stores. Commit flushes what was stored, fences, and persists the
//! outcome; only then are frees carried out and locks released.

use std::sync::atomic::Ordering;

use tembo_pmem::{PPtr, PoolOffset};

use crate::backup;
use crate::error::{KaminoError, Result};
use crate::heap::{object_len, process_job, process_jobs, roll_forward, Count, Inner, Job, TxMode};
use crate::layout::{obj_len_word, payload, SlotState, ALLOC_TAG, H_BACKUP, H_LEN, MAX_OBJECT_BYTES, OBJ_HEADER};
use crate::log::SlotWriter;

/// Proof that the transaction declared its intent to write an object:
/// the only way to store into it.
#[derive(Debug)]
pub struct Writable<T> {
    obj: PPtr<T>,
    idx: usize,
}

impl<T> Clone for Writable<T> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<T> Copy for Writable<T> {}

impl<T> Writable<T> {
    /// The object.
    pub fn obj(&self) -> PPtr<T> {
        self.obj
    }
}

#[derive(Debug)]
struct Written {
    obj: PoolOffset,
    len: u64,
    /// Dirty byte range of the payload (`lo >= hi`: nothing stored).
    lo: u64,
    hi: u64,
    /// Allocated by this transaction.
    fresh: bool,
    /// The intent is logged (stores allowed).
    intent: bool,
    /// A committed change still to roll forward, found at lock time.
    pending: u64,
}

/// A running transaction (see [`crate::Heap::transaction`]).
#[derive(Debug)]
pub struct Tx<'h> {
    heap: &'h Inner,
    txid: u64,
    log: Option<SlotWriter>,
    written: Vec<Written>,
    freed: Vec<PoolOffset>,
    read_locked: Vec<PoolOffset>,
    done: bool,
}

impl<'h> Tx<'h> {
    pub(crate) fn new(heap: &'h Inner) -> Tx<'h> {
        Tx {
            heap,
            txid: heap.next_txid.fetch_add(1, Ordering::Relaxed),
            log: None,
            written: Vec::new(),
            freed: Vec::new(),
            read_locked: Vec::new(),
            done: false,
        }
    }

    /// This transaction's id.
    pub fn id(&self) -> u64 {
        self.txid
    }

    fn find(&self, obj: PoolOffset) -> Option<usize> {
        self.written.iter().rposition(|w| w.obj == obj)
    }

    /// Locks `obj` for writing without declaring an intent yet (for
    /// isolation: readers wait until this transaction ends). A later
    /// [`Tx::write`] declares the intent.
    ///
    /// # Errors
    /// [`KaminoError::LockTimeout`]; [`KaminoError::BadAccess`].
    pub fn lock<T>(&mut self, obj: PPtr<T>) -> Result<()> {
        self.lock_idx(obj.offset()).map(|_| ())
    }

    fn lock_idx(&mut self, o: PoolOffset) -> Result<usize> {
        if let Some(idx) = self.find(o) {
            return Ok(idx);
        }
        let heap = self.heap;
        let len = object_len(&heap.pool, o)?;
        self.log_writer()?;
        let holds_read = self.read_locked.contains(&o);
        let taken = heap.locks.lock_write(o, self.txid, holds_read)?;
        if holds_read {
            self.read_locked.retain(|&r| r != o);
        }
        if taken.waited {
            heap.counters.add(Count::LockWaits, 1);
        }
        self.written.push(Written {
            obj: o,
            len,
            lo: u64::MAX,
            hi: 0,
            fresh: false,
            intent: false,
            pending: taken.pending,
        });
        Ok(self.written.len() - 1)
    }

    /// Declares the intent to write `obj`: locks it (waiting up to the
    /// heap's timeout), brings its backup up to date, records the intent
    /// durably, and returns the token for stores. Declaring twice is free.
    ///
    /// # Errors
    /// [`KaminoError::LockTimeout`]; [`KaminoError::BadAccess`] for
    /// something that is not an object; [`KaminoError::Pmem`] when the
    /// pool is full (a log chunk or backup copy could not be allocated).
    pub fn write<T>(&mut self, obj: PPtr<T>) -> Result<Writable<T>> {
        let idx = self.lock_idx(obj.offset())?;
        if !self.written[idx].intent && !self.written[idx].fresh {
            self.declare(idx)?;
        }
        Ok(Writable { obj, idx })
    }

    fn declare(&mut self, idx: usize) -> Result<()> {
        let heap = self.heap;
        let pool = &heap.pool;
        let (o, len, pending) = {
            let w = &self.written[idx];
            (w.obj, w.len, w.pending)
        };
        if pending != 0 {
            // A dependent transaction: roll the committed change forward now.
            roll_forward(heap, o)?;
            pool.fence();
            heap.locks.clear_pending(o);
            self.written[idx].pending = 0;
            heap.counters.add(Count::CopiesCritical, 1);
        }
        match heap.mode {
            TxMode::Kamino => {
                if backup::backup_of(pool, o)? == 0 {
                    let b = backup::make_copy(pool, o, len)?;
                    backup::link(pool, o, b)?;
                    heap.counters.add(Count::Misses, 1);
                    heap.counters.add(Count::CopiesCritical, 1);
                } else if pending == 0 {
                    heap.counters.add(Count::Hits, 1);
                }
            }
            TxMode::KaminoDynamic => {
                let d = heap.dynamic.as_ref().expect("dynamic mode has a directory");
                if d.touch(o) {
                    if pending == 0 {
                        heap.counters.add(Count::Hits, 1);
                    }
                } else {
                    d.insert_for_write(pool, &heap.locks, o, len, heap.dynamic_budget())?;
                    heap.counters.add(Count::Misses, 1);
                    heap.counters.add(Count::CopiesCritical, 1);
                }
            }
            TxMode::Undo => {}
        }
        let txid = self.txid;
        let log = self.log_writer()?;
        match heap.mode {
            TxMode::Undo => {
                let mut img = vec![0u8; len as usize];
                pool.read(payload(o), &mut img)?;
                log.append(&heap.slots, pool, &words([txid, o, len, 0]), &img)?;
                heap.counters.add(Count::CopiesCritical, 1);
            }
            _ => {
                log.append(&heap.slots, pool, &words([txid, o]), &[])?;
            }
        }
        // `log.intent_first`: the intent is durable before the first store.
        pool.fence();
        self.written[idx].intent = true;
        Ok(())
    }

    /// The transaction's log slot, taken at its first lock: a transaction
    /// that waits for a slot must hold no lock, or it could wait for a slot
    /// that a transaction waiting for its lock holds.
    fn log_writer(&mut self) -> Result<&mut SlotWriter> {
        if self.log.is_none() {
            let slot = self.take_slot()?;
            match SlotWriter::new(&self.heap.slots, &self.heap.pool, slot, self.txid) {
                Ok(w) => self.log = Some(w),
                Err(e) => {
                    self.heap.release_slot(slot);
                    return Err(e);
                }
            }
        }
        Ok(self.log.as_mut().expect("just set"))
    }

    /// A free log slot: from the free list, else by rolling forward the
    /// oldest committed transaction here, else by waiting for one.
    fn take_slot(&self) -> Result<u32> {
        let heap = self.heap;
        let start = std::time::Instant::now();
        loop {
            if let Some(s) = heap.free_slots.pop() {
                return Ok(s);
            }
            if let Some(job) = heap.jobs.pop() {
                if !process_job(heap, job, self.txid)? {
                    std::thread::yield_now();
                }
                if start.elapsed() >= heap.timeout {
                    return Err(KaminoError::LockTimeout { object: 0, waited_ms: start.elapsed().as_millis() as u64 });
                }
                continue;
            }
            if start.elapsed() >= heap.timeout {
                return Err(KaminoError::LockTimeout { object: 0, waited_ms: start.elapsed().as_millis() as u64 });
            }
            // Count ourselves, then look again under the lock: a release
            // either sees the count (and wakes us under the lock) or
            // happened before the look.
            heap.slot_waiters.fetch_add(1, Ordering::SeqCst);
            let mut g = heap.slot_wait.lock();
            let got = heap.free_slots.pop();
            if got.is_none() {
                heap.slot_cv.wait_for(&mut g, std::time::Duration::from_millis(10));
            }
            drop(g);
            heap.slot_waiters.fetch_sub(1, Ordering::SeqCst);
            if let Some(s) = got {
                return Ok(s);
            }
        }
    }

    /// Allocates a zeroed object with a payload of `len` bytes, writable by
    /// this transaction. It is freed again if the transaction aborts.
    ///
    /// # Errors
    /// [`KaminoError::Pmem`] when the pool is full; [`KaminoError::BadAccess`]
    /// over [`MAX_OBJECT_BYTES`].
    pub fn alloc<T>(&mut self, len: u64) -> Result<Writable<T>> {
        if len > MAX_OBJECT_BYTES {
            return Err(KaminoError::BadAccess {
                what: format!("an object of {len} bytes is over the limit"),
                object: 0,
            });
        }
        let heap = self.heap;
        let pool = &heap.pool;
        let o = pool.alloc(OBJ_HEADER + len)?;
        let init = pool
            .store_u64(o + H_BACKUP, 0)
            .and_then(|()| pool.store_u64(o + H_LEN, obj_len_word(len)))
            .and_then(|()| pool.fill(payload(o), len, 0));
        if let Err(e) = init {
            let _ = pool.free(o);
            return Err(e.into());
        }
        if heap.mode == TxMode::Kamino {
            // Its copy's space now (see `backup::reserve_copy`).
            if let Err(e) = backup::reserve_copy(pool, o, len) {
                let _ = pool.free(o);
                return Err(e);
            }
        }
        // Nobody else can reach it yet: this cannot wait.
        heap.locks.lock_write(o, self.txid, false)?;
        heap.object_bytes.fetch_add(OBJ_HEADER + len, Ordering::Relaxed);
        let idx = self.written.len();
        self.written.push(Written { obj: o, len, lo: 0, hi: len, fresh: true, intent: false, pending: 0 });
        if heap.mode == TxMode::Kamino {
            // The full backup must cover new objects too: recovery of a
            // committed transaction makes their first copies from this
            // entry. It needs no fence of its own (the object is new:
            // nothing rolls it back); the commit's fence covers it.
            let txid = self.txid;
            self.log_writer()?.append(&heap.slots, pool, &words([txid, o | ALLOC_TAG]), &[])?;
        }
        Ok(Writable { obj: PPtr::new(o), idx })
    }

    /// Frees `obj` when the transaction commits (nothing happens if it
    /// aborts). Locks it first, so nobody else holds it.
    ///
    /// # Errors
    /// As [`Tx::write`].
    pub fn free<T>(&mut self, obj: PPtr<T>) -> Result<()> {
        self.lock_idx(obj.offset())?;
        if !self.freed.contains(&obj.offset()) {
            self.freed.push(obj.offset());
        }
        Ok(())
    }

    /// Takes a read lock on `obj` until the transaction ends.
    ///
    /// # Errors
    /// [`KaminoError::LockTimeout`].
    pub fn read_lock<T>(&mut self, obj: PPtr<T>) -> Result<()> {
        let o = obj.offset();
        if self.find(o).is_some() || self.read_locked.contains(&o) {
            return Ok(());
        }
        self.log_writer()?;
        self.heap.locks.lock_read(o)?;
        self.read_locked.push(o);
        Ok(())
    }

    fn span(&mut self, w_idx: usize, off: u64, len: u64) -> Result<PoolOffset> {
        let w = &mut self.written[w_idx];
        if off.checked_add(len).map_or(true, |end| end > w.len) {
            return Err(KaminoError::BadAccess {
                what: format!("store of {len} bytes at {off} in a payload of {}", w.len),
                object: w.obj,
            });
        }
        w.lo = w.lo.min(off);
        w.hi = w.hi.max(off + len);
        Ok(payload(w.obj) + off)
    }

    /// Stores `bytes` at `off` of the object's payload.
    ///
    /// # Errors
    /// [`KaminoError::BadAccess`] past the payload's end.
    pub fn set<T>(&mut self, w: Writable<T>, off: u64, bytes: &[u8]) -> Result<()> {
        let at = self.span(w.idx, off, bytes.len() as u64)?;
        Ok(self.heap.pool.write(at, bytes)?)
    }

    /// Stores the 8-byte word `v` at `off`.
    ///
    /// # Errors
    /// As [`Tx::set`].
    pub fn set_u64<T>(&mut self, w: Writable<T>, off: u64, v: u64) -> Result<()> {
        let at = self.span(w.idx, off, 8)?;
        Ok(self.heap.pool.store_u64(at, v)?)
    }

    /// Moves `len` bytes within the payload from `src` to `dst`.
    ///
    /// # Errors
    /// As [`Tx::set`].
    pub fn copy_within<T>(&mut self, w: Writable<T>, src: u64, dst: u64, len: u64) -> Result<()> {
        if len == 0 {
            return Ok(());
        }
        let mut buf = vec![0u8; len as usize];
        self.read(w.obj, src, &mut buf)?;
        self.set(w, dst, &buf)
    }

    /// Reads the word at `off` of `obj` (isolation is the caller's: a lock
    /// this transaction holds, or a structure lock).
    #[inline]
    pub fn get_u64<T>(&self, obj: PPtr<T>, off: u64) -> Result<u64> {
        Ok(self.heap.pool.load_u64(payload(obj.offset()) + off)?)
    }

    /// Reads bytes at `off` of `obj`.
    #[inline]
    pub fn read<T>(&self, obj: PPtr<T>, off: u64, dst: &mut [u8]) -> Result<()> {
        Ok(self.heap.pool.read(payload(obj.offset()) + off, dst)?)
    }

    /// Makes the transaction durable and releases it (called by
    /// [`crate::Heap::transaction`]).
    pub(crate) fn commit(mut self) -> Result<()> {
        self.done = true;
        let heap = self.heap;
        let pool = &heap.pool;
        for w in &self.written {
            if w.lo < w.hi {
                pool.flush(payload(w.obj) + w.lo, w.hi - w.lo);
            }
            if w.fresh {
                pool.flush(w.obj, OBJ_HEADER);
            }
        }
        pool.fence();
        // A slot taken for locks only: nothing to commit in it.
        if self.log.as_ref().is_some_and(|l| !l.started()) {
            let log = self.log.take().expect("checked");
            heap.release_slot(log.slot);
        }
        // The commit point.
        if let Some(log) = &self.log {
            let outcome = if heap.mode == TxMode::Undo { SlotState::Idle } else { SlotState::Committed };
            heap.slots.set_state(pool, log.slot, self.txid, outcome)?;
        }
        let mut first_err = None;
        for &o in &self.freed {
            if let Err(e) = free_object(heap, o) {
                first_err.get_or_insert(e);
            }
        }
        let keep_pending = heap.mode.has_backup();
        let has_log = self.log.is_some();
        let mut roll = Vec::new();
        for w in &self.written {
            let freed = self.freed.contains(&w.obj);
            // New objects get their first copy from the coordinator too
            // (always in `kamino`, within the budget in `kamino-dynamic`);
            // its jobs ride on the log slot, so only when there is one.
            let pend = keep_pending && has_log && !freed && (w.intent || w.fresh);
            if pend {
                roll.push(w.obj);
            }
            if freed {
                // Its block is gone: no roll-forward may touch it.
                heap.locks.clear_pending(w.obj);
            }
            heap.locks.unlock_write(w.obj, if pend { self.txid } else { 0 });
        }
        for &o in &self.read_locked {
            heap.locks.unlock_read(o);
        }
        if let Some(log) = self.log.take() {
            let job = Job { slot: log.slot, txid: self.txid, objects: roll };
            if keep_pending && heap.coordinator_behind() {
                // The transaction is durable; its roll-forward is done
                // here. What cannot be finished now (an object another
                // thread is rolling forward, an error) is queued again.
                heap.counters.add(Count::SelfRolled, 1);
                let _ = process_jobs(heap, &mut vec![job], self.txid);
            } else if keep_pending {
                heap.queue_job(job);
            } else {
                heap.release_slot(log.slot);
            }
        }
        heap.counters.add(Count::Committed, 1);
        // The transaction is durable; a failed free only leaks a block
        // that the next recovery reclaims.
        match first_err {
            Some(KaminoError::Pmem(_)) | None => Ok(()),
            Some(e) => Err(e),
        }
    }

    /// Undoes every store and allocation and releases the transaction.
    pub(crate) fn abort(mut self) -> Result<()> {
        self.rollback()
    }

    fn rollback(&mut self) -> Result<()> {
        self.done = true;
        let heap = self.heap;
        let pool = &heap.pool;
        let mut result = Ok(());
        if heap.mode == TxMode::Undo {
            if let Some(log) = &self.log {
                result = crate::log::apply_undo(&heap.slots, pool, log.slot, self.txid).map(|_| ());
            }
        } else {
            for w in self.written.iter().filter(|w| w.intent && w.lo < w.hi) {
                let r = backup::backup_of(pool, w.obj)
                    .and_then(|b| backup::copy_range(pool, payload(b), payload(w.obj), w.lo, w.hi - w.lo));
                if let Err(e) = r {
                    result = Err(e);
                }
            }
        }
        pool.fence();
        if result.is_err() {
            // The main copy may be partly restored: leave the log Running
            // so the next open's recovery finishes the job.
            pool.keep_unclean();
        } else if let Some(log) = self.log.as_ref().filter(|l| l.started()) {
            // Persisted before any lock goes: a later transaction's change
            // must never be rolled back by this one's intents. (A slot taken
            // for locks only holds no entry of this transaction: it is
            // given back as it is.)
            heap.slots.set_state(pool, log.slot, self.txid, SlotState::Idle)?;
        }
        for w in &self.written {
            if w.fresh {
                heap.object_bytes.fetch_sub(OBJ_HEADER + w.len, Ordering::Relaxed);
                // Its reserved copy (Kamino mode) goes with it.
                if heap.mode == TxMode::Kamino {
                    match backup::backup_of(pool, w.obj) {
                        Ok(b) if b != 0 => {
                            let _ = pool.free(b);
                        }
                        _ => {}
                    }
                }
                let _ = pool.free(w.obj);
            }
            heap.locks.unlock_write(w.obj, 0);
        }
        for &o in &self.read_locked {
            heap.locks.unlock_read(o);
        }
        if let Some(log) = self.log.take() {
            if result.is_ok() {
                heap.release_slot(log.slot);
            }
        }
        heap.counters.add(Count::Aborted, 1);
        result
    }
}

impl Drop for Tx<'_> {
    fn drop(&mut self) {
        // A panic inside the transaction: abort it.
        if !self.done {
            let _ = self.rollback();
        }
    }
}

/// A log entry header: little-endian words.
fn words<const N: usize>(w: [u64; N]) -> Vec<u8> {
    let mut out = Vec::with_capacity(N * 8);
    for x in w {
        out.extend_from_slice(&x.to_le_bytes());
    }
    out
}

/// Frees a committed transaction's freed object: its copy first, then its
/// header is cleared (so a stale log entry never reads it as an object),
/// then the block.
fn free_object(heap: &Inner, o: PoolOffset) -> Result<()> {
    let pool = &heap.pool;
    let len = object_len(pool, o)?;
    if let Some(d) = &heap.dynamic {
        d.remove(pool, o)?;
    }
    let b = backup::backup_of(pool, o)?;
    if b != 0 {
        backup::link(pool, o, 0)?;
        pool.free(b)?;
    }
    pool.store_u64(o + H_LEN, 0)?;
    pool.persist(o + H_LEN, 8);
    pool.free(o)?;
    heap.object_bytes.fetch_sub(OBJ_HEADER + len, Ordering::Relaxed);
    Ok(())
}
