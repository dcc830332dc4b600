//! Object locks and roll-forward bookkeeping, in DRAM (the intent log is
//! enough to rebuild what recovery needs, §6.2 of the paper).
//!
//! Each object that is locked or has a committed change not yet copied to
//! its backup has an entry: the writer (a txid), the number of readers, and
//! `pending`, the txid of the last committed writer whose roll-forward is
//! still to do. The table is sharded by object offset. A waiter first
//! spins on its shard's release counter, without the shard's mutex, for up
//! to [`SPIN_FOR`] (a transaction holds a lock for a few microseconds, and
//! on a virtual machine a sleep and wake-up costs several times that: with
//! 16 writers the sleeping version spent more time waking than working),
//! then sleeps on the shard's condition variable; it gives up after the
//! heap's timeout (deadlock or a very long transaction:
//! [`KaminoError::LockTimeout`]).
//!
//! Promises:
//! - `locks.exclusive`: at most one writer per object, never together with
//!   readers other than the writer itself;
//! - `locks.pending_before_write`: a writer that takes an object with a
//!   pending roll-forward is told so and copies the object to its backup
//!   before its first store (the paper's dependent transaction).

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use parking_lot::{Condvar, Mutex};
use tembo_pmem::PoolOffset;

use crate::error::{KaminoError, Result};

const SHARDS: usize = 256;

#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct ObjState {
    pub writer: u64,
    pub readers: u32,
    pub pending: u64,
    /// The coordinator is copying the object to its backup: writers wait,
    /// readers do not (the copy only reads the main copy, as they do).
    pub copying: bool,
}

impl ObjState {
    fn idle(&self) -> bool {
        self.writer == 0 && self.readers == 0 && self.pending == 0 && !self.copying
    }
}

/// Hashes an object offset (8-byte aligned, already spread over the pool)
/// with one multiplication: the default SipHash cost more than the lookup.
#[derive(Debug, Default)]
struct OffsetHasher(u64);

impl Hasher for OffsetHasher {
    fn finish(&self) -> u64 {
        // Another multiplier than the shard index's, and rotated: the map
        // takes its tag from the top bits, which the shard index fixes.
        (self.0 >> 3).wrapping_mul(0xD6E8_FEB8_6659_FD93).rotate_left(32)
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = self.0.rotate_left(8) ^ u64::from(b);
        }
    }
    fn write_u64(&mut self, v: u64) {
        self.0 = v;
    }
}

type Map = HashMap<PoolOffset, ObjState, BuildHasherDefault<OffsetHasher>>;

#[derive(Debug, Default)]
struct Shard {
    map: Mutex<Map>,
    cv: Condvar,
    /// Bumped under `map` by every release: what spinning waiters watch.
    releases: AtomicU64,
}

impl Shard {
    /// Records a release (the caller holds `map`) and wakes the sleepers.
    fn released(&self, map: parking_lot::MutexGuard<'_, Map>) {
        self.releases.fetch_add(1, Ordering::Release);
        drop(map);
        self.cv.notify_all();
    }
}

/// How long a waiter spins before it sleeps.
const SPIN_FOR: Duration = Duration::from_micros(50);

/// The lock table.
#[derive(Debug)]
pub(crate) struct LockTable {
    shards: Vec<Shard>,
    timeout: Duration,
}

/// What [`LockTable::claim_roll_forward`] found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Claim {
    /// The caller copies the object, then calls `end_roll_forward`.
    Claimed { own_lock: bool },
    /// Nothing to do: a dependent transaction copied it, or a later commit's
    /// roll-forward covers it.
    Done,
    /// Another transaction holds it without having copied it yet: try
    /// again later (the log slot must stay until the copy is made).
    Busy,
}

/// What a writer found when it took an object.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Taken {
    /// A committed change not yet copied to the backup (its txid).
    pub pending: u64,
    /// Whether the caller waited for another transaction.
    pub waited: bool,
}

/// Waits for a release in the shard: first by spinning with the lock
/// released until the shard's release counter moves (yielding the core
/// after a while, so a lock holder that shares it can finish), for up to
/// [`SPIN_FOR`]; then on the condition variable.
fn wait(
    sh: &Shard,
    map: &mut parking_lot::MutexGuard<'_, Map>,
    timeout: Duration,
    start: &mut Option<Instant>,
    obj: PoolOffset,
) -> Result<()> {
    // The clock is read only once there is something to wait for.
    let start = *start.get_or_insert_with(Instant::now);
    let left = timeout.saturating_sub(start.elapsed());
    if left.is_zero() {
        return Err(KaminoError::LockTimeout { object: obj, waited_ms: start.elapsed().as_millis() as u64 });
    }
    if start.elapsed() < SPIN_FOR {
        let seen = sh.releases.load(Ordering::Acquire);
        parking_lot::MutexGuard::unlocked(map, || {
            let mut spins = 0u32;
            while sh.releases.load(Ordering::Acquire) == seen {
                if spins < 64 {
                    std::hint::spin_loop();
                } else {
                    std::thread::yield_now();
                    if start.elapsed() >= SPIN_FOR {
                        break;
                    }
                }
                spins += 1;
            }
        });
        return Ok(());
    }
    sh.cv.wait_for(map, left);
    Ok(())
}

impl LockTable {
    pub fn new(timeout: Duration) -> LockTable {
        LockTable { shards: (0..SHARDS).map(|_| Shard::default()).collect(), timeout }
    }

    fn shard(&self, obj: PoolOffset) -> &Shard {
        let h = (obj >> 4).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 56;
        &self.shards[h as usize % SHARDS]
    }

    /// Takes `obj` for writing by `txid` (upgrading the caller's own read
    /// lock when `holds_read`).
    pub fn lock_write(&self, obj: PoolOffset, txid: u64, holds_read: bool) -> Result<Taken> {
        let sh = self.shard(obj);
        let mut map = sh.map.lock();
        let mut start = None;
        let mut waited = false;
        loop {
            let st = map.entry(obj).or_default();
            let readers_ok = st.readers == u32::from(holds_read);
            if st.writer == txid {
                return Ok(Taken { pending: 0, waited });
            }
            if st.writer == 0 && readers_ok && !st.copying {
                st.writer = txid;
                if holds_read {
                    st.readers -= 1;
                }
                return Ok(Taken { pending: st.pending, waited });
            }
            waited = true;
            wait(sh, &mut map, self.timeout, &mut start, obj)?;
        }
    }

    /// Takes `obj` for reading.
    pub fn lock_read(&self, obj: PoolOffset) -> Result<()> {
        let sh = self.shard(obj);
        let mut map = sh.map.lock();
        let mut start = None;
        loop {
            let st = map.entry(obj).or_default();
            if st.writer == 0 {
                st.readers += 1;
                return Ok(());
            }
            wait(sh, &mut map, self.timeout, &mut start, obj)?;
        }
    }

    pub fn unlock_read(&self, obj: PoolOffset) {
        let sh = self.shard(obj);
        let mut map = sh.map.lock();
        if let Some(st) = map.get_mut(&obj) {
            st.readers = st.readers.saturating_sub(1);
            if st.idle() {
                map.remove(&obj);
            }
        }
        sh.released(map);
    }

    /// Releases a write lock; `pending` (non-zero) records a committed change
    /// whose roll-forward is still to do.
    pub fn unlock_write(&self, obj: PoolOffset, pending: u64) {
        let sh = self.shard(obj);
        let mut map = sh.map.lock();
        if let Some(st) = map.get_mut(&obj) {
            st.writer = 0;
            if pending != 0 {
                st.pending = pending;
            }
            if st.idle() {
                map.remove(&obj);
            }
        }
        sh.released(map);
    }

    /// Clears `pending` (the caller, holding the write lock, copied the object).
    pub fn clear_pending(&self, obj: PoolOffset) {
        if let Some(st) = self.shard(obj).map.lock().get_mut(&obj) {
            st.pending = 0;
        }
    }

    /// For whoever rolls `txid`'s objects forward: takes `obj` if its
    /// pending roll-forward is `txid`'s. A transaction `me` that holds the
    /// object's lock itself may do the copy under its own lock.
    pub fn claim_roll_forward(&self, obj: PoolOffset, txid: u64, me: u64) -> Claim {
        let mut map = self.shard(obj).map.lock();
        match map.get_mut(&obj) {
            Some(st) if st.pending == txid => {
                if st.writer == 0 && !st.copying {
                    st.copying = true;
                    Claim::Claimed { own_lock: false }
                } else if me != 0 && st.writer == me {
                    Claim::Claimed { own_lock: true }
                } else {
                    Claim::Busy
                }
            }
            _ => Claim::Done,
        }
    }

    /// Ends a claim. `copied`: the backup is current, so the roll-forward
    /// is done; otherwise (the copy failed) it stays pending, for a retry
    /// or the next recovery.
    pub fn end_roll_forward(&self, obj: PoolOffset, own_lock: bool, copied: bool) {
        let sh = self.shard(obj);
        let mut map = sh.map.lock();
        if let Some(st) = map.get_mut(&obj) {
            if !own_lock {
                st.copying = false;
            }
            if copied {
                st.pending = 0;
            }
            if st.idle() {
                map.remove(&obj);
            }
        }
        sh.released(map);
    }

    /// Whether `obj` is locked or pending (so its backup must stay).
    pub fn busy(&self, obj: PoolOffset) -> bool {
        self.shard(obj).map.lock().get(&obj).is_some_and(|st| !st.idle())
    }

    /// Objects with a lock or a pending roll-forward (for `check`).
    pub fn busy_objects(&self) -> Vec<PoolOffset> {
        let mut v = Vec::new();
        for sh in &self.shards {
            v.extend(sh.map.lock().iter().filter(|(_, s)| !s.idle()).map(|(o, _)| *o));
        }
        v
    }
}
