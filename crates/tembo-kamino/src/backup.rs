//! The backup copies: making one, rolling it forward, restoring from it,
//! and (Kamino-Tx-Dynamic, §4 and §6.4 of the paper) the partial backup:
//! a persistent directory of the objects that have a copy, and an LRU of
//! the most recently written ones in DRAM.
//!
//! Where the paper keeps a persistent hash table from object to copy, an
//! object here records its copy's offset in its own header (word 0): the
//! lookup is one load with no table lock (the paper blames its latency on
//! the hash table's coarse lock). The directory only lists the objects
//! that have a copy, so an open can rebuild the LRU and the byte count
//! without walking the heap.
//!
//! A miss at the budget evicts the least recently written copies and,
//! when the last one evicted sits in a block of the size the new copy
//! needs, writes the new copy into that block and reuses its directory
//! entry (`Dynamic::insert_for_write`): in a steady state of same-size
//! objects no miss calls the allocator, whose lock every thread's misses
//! used to take twice (a free, then an allocation).
//!
//! Promises:
//! - `backup.entry_first`: a directory entry is persisted before the
//!   object's header points to its copy; an open drops entries whose object
//!   no longer points to a copy;
//! - `backup.never_busy`: an object that is locked or has a pending
//!   roll-forward is never evicted.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicU64, Ordering};

use crossbeam_utils::CachePadded;
use parking_lot::Mutex;
use tembo_pmem::{Pool, PoolOffset};

use crate::error::{invariant, KaminoError, Result};
use crate::layout::{payload, BACKUP_MAGIC, CHUNK_HEADER, CHUNK_MAGIC, H_BACKUP, H_LEN, OBJ_HEADER, R_DIRECTORY};
use crate::locks::LockTable;

const DIR_CHUNK: u64 = 4096;

/// Copies `len` bytes at `off` of a payload from `from` to `to`, flushing
/// the destination (the caller fences).
pub(crate) fn copy_range(pool: &Pool, from: PoolOffset, to: PoolOffset, off: u64, len: u64) -> Result<()> {
    // Through a stack buffer: this runs for every roll-forward and restore,
    // and a heap allocation per copy showed in profiles.
    let mut buf = [0u8; 2048];
    let mut done = 0;
    while done < len {
        let n = (len - done).min(buf.len() as u64);
        let b = &mut buf[..n as usize];
        pool.read(from + off + done, b)?;
        pool.write(to + off + done, b)?;
        done += n;
    }
    pool.flush(to + off, len);
    Ok(())
}

/// The object's backup offset (0: none).
pub(crate) fn backup_of(pool: &Pool, obj: PoolOffset) -> Result<PoolOffset> {
    Ok(pool.load_u64(obj + H_BACKUP)?)
}

/// Allocates a backup for `obj`, copies the payload into it and persists
/// it; does not link it (the caller does, after the directory entry).
pub(crate) fn make_copy(pool: &Pool, obj: PoolOffset, len: u64) -> Result<PoolOffset> {
    // Cold: copies are read only by recovery and aborts.
    let b = pool.alloc_cold(OBJ_HEADER + len)?;
    let made = pool
        .store_u64(b + H_BACKUP, 0)
        .and_then(|()| pool.store_u64(b + H_LEN, BACKUP_MAGIC << 32 | len))
        .map_err(KaminoError::from)
        .and_then(|()| {
            pool.flush(b, OBJ_HEADER);
            copy_range(pool, payload(obj), payload(b), 0, len)
        });
    if let Err(e) = made {
        let _ = pool.free(b);
        return Err(e);
    }
    pool.fence();
    Ok(b)
}

/// Allocates the backup block of a new object and links it, neither
/// written nor flushed beyond that: the full backup's space is taken when
/// the object's is, inside its transaction, so a full pool fails that
/// transaction rather than the roll-forward (or a recovery) that would
/// otherwise allocate the copy after the commit. The commit flushes the
/// object's header (the link) and fences; the roll-forward writes the
/// copy's header ([`stamp_header`]) and payload before any later
/// transaction may write the object. The block's contents matter to
/// nobody until then.
pub(crate) fn reserve_copy(pool: &Pool, obj: PoolOffset, len: u64) -> Result<PoolOffset> {
    // Deferred: durable at the commit's fence, before anything committed
    // can point here; an uncommitted one is leaked with its object and swept.
    let b = pool.alloc_cold_deferred(OBJ_HEADER + len)?;
    if let Err(e) = pool.store_u64(obj + H_BACKUP, b) {
        let _ = pool.free(b);
        return Err(e.into());
    }
    Ok(b)
}

/// Writes a backup block's header if it does not hold it yet (a copy
/// [`reserve_copy`] allocated), flushed (the caller fences).
pub(crate) fn stamp_header(pool: &Pool, b: PoolOffset, len: u64) -> Result<()> {
    let want = BACKUP_MAGIC << 32 | len;
    if pool.load_u64(b + H_LEN)? != want || pool.load_u64(b + H_BACKUP)? != 0 {
        pool.store_u64(b + H_BACKUP, 0)?;
        pool.store_u64(b + H_LEN, want)?;
        pool.flush(b, OBJ_HEADER);
    }
    Ok(())
}

/// Points `obj`'s header at `backup` (0 to unlink) and persists it.
pub(crate) fn link(pool: &Pool, obj: PoolOffset, backup: PoolOffset) -> Result<()> {
    pool.store_u64(obj + H_BACKUP, backup)?;
    pool.persist(obj + H_BACKUP, 8);
    Ok(())
}

#[derive(Clone, Copy, Debug)]
struct DynEntry {
    backup: PoolOffset,
    len: u64,
    at: PoolOffset,
    stamp: u64,
}

/// Whether copies of `a` and `b` payload bytes take blocks of one size (a
/// slab size class; large blocks are not reused).
fn same_block(a: u64, b: u64) -> bool {
    let class = |len: u64| tembo_pmem::alloc::class_of(OBJ_HEADER + len);
    a == b || class(a).is_some_and(|c| class(b) == Some(c))
}

/// Partitions of the partial backup: each has its own lock, map and LRU.
const PARTS: usize = 16;
/// Directory entries a partition takes from the shared directory at once.
const ENTRY_BATCH: usize = 64;

/// One partition: the copies of the objects that hash to it.
#[derive(Debug, Default)]
struct Part {
    map: HashMap<PoolOffset, DynEntry>,
    lru: BTreeMap<u64, PoolOffset>,
    clock: u64,
    /// Free directory entries this partition holds.
    free: Vec<PoolOffset>,
    evictions: u64,
    over_budget: u64,
    /// Misses that took an evicted copy's block (`insert_for_write`).
    reused: u64,
}

impl Part {
    fn stamp(&mut self, obj: PoolOffset, e: DynEntry) {
        self.clock += 1;
        self.map.insert(obj, DynEntry { stamp: self.clock, ..e });
        self.lru.insert(self.clock, obj);
    }
}

/// The directory's chunk chain and the entries no partition holds.
#[derive(Debug, Default)]
struct Directory {
    chunks: Vec<PoolOffset>,
    free: Vec<PoolOffset>,
}

/// The partial backup of Kamino-Tx-Dynamic.
///
/// Partitioned by object: a write intent locks one of [`PARTS`]
/// partitions, and a miss copies the object with no lock held, so writers
/// on different objects no longer queue on one lock (the paper's latency
/// problem, and a single lock here kept 16 writers at one writer's pace).
/// The budget is global (one byte count); eviction takes the least
/// recently written copies of the missing object's own partition first,
/// then of the others: an LRU per partition approximates the global one.
/// The budget is soft: misses that make room at the same moment may each
/// see the same room, so it can be exceeded by about one object per
/// concurrent miss (`over_budget` counts misses that found no room).
#[derive(Debug)]
pub(crate) struct Dynamic {
    root: PoolOffset,
    dir: Mutex<Directory>,
    parts: Box<[CachePadded<Mutex<Part>>]>,
    /// Bytes of the copies.
    bytes: AtomicU64,
}

fn part_of(obj: PoolOffset) -> usize {
    ((obj >> 4).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 58) as usize % PARTS
}

impl Dynamic {
    /// Loads the directory, dropping entries whose object has no copy.
    pub fn load(pool: &Pool, root: PoolOffset) -> Result<Dynamic> {
        let mut dir = Directory::default();
        let mut parts: Vec<Part> = (0..PARTS).map(|_| Part::default()).collect();
        let mut bytes = 0;
        let mut c = pool.load_u64(root + R_DIRECTORY)?;
        while c != 0 {
            if dir.chunks.len() > 1 << 24 {
                return Err(invariant("backup.directory_chain", c, "directory chain does not end"));
            }
            dir.chunks.push(c);
            for i in 0..(DIR_CHUNK - CHUNK_HEADER) / 8 {
                let at = c + CHUNK_HEADER + i * 8;
                let obj = pool.load_u64(at)?;
                let live = obj != 0 && crate::heap::live_object(pool, obj).is_some() && {
                    let b = backup_of(pool, obj)?;
                    if b != 0 {
                        let len = crate::heap::object_len(pool, obj)?;
                        parts[part_of(obj)].stamp(obj, DynEntry { backup: b, len, at, stamp: 0 });
                        bytes += len;
                    }
                    b != 0
                };
                if !live {
                    if obj != 0 {
                        pool.store_u64(at, 0)?;
                        pool.flush(at, 8);
                    }
                    dir.free.push(at);
                }
            }
            c = pool.load_u64(c)?;
        }
        pool.fence();
        Ok(Dynamic {
            root,
            dir: Mutex::new(dir),
            parts: parts.into_iter().map(|p| CachePadded::new(Mutex::new(p))).collect(),
            bytes: AtomicU64::new(bytes),
        })
    }

    /// The directory's chunks (for the leak tracer).
    pub fn chunks(&self) -> Vec<PoolOffset> {
        self.dir.lock().chunks.clone()
    }

    /// Bytes of the copies.
    pub fn bytes(&self) -> u64 {
        self.bytes.load(Ordering::Relaxed)
    }

    /// (copies evicted, misses that could not stay within the budget,
    /// misses that took an evicted copy's block).
    pub fn eviction_counts(&self) -> (u64, u64, u64) {
        self.parts.iter().fold((0, 0, 0), |(e, o, r), p| {
            let p = p.lock();
            (e + p.evictions, o + p.over_budget, r + p.reused)
        })
    }

    /// Records a use of `obj`'s copy; whether it has one.
    pub fn touch(&self, obj: PoolOffset) -> bool {
        let mut p = self.parts[part_of(obj)].lock();
        let Some(&e) = p.map.get(&obj) else { return false };
        p.lru.remove(&e.stamp);
        p.stamp(obj, e);
        true
    }

    /// Makes room for `need` more bytes within `budget`, evicting the least
    /// recently written copies of objects nobody holds: of `obj`'s own
    /// partition first, then of the others (one partition lock at a time).
    pub fn make_room(&self, pool: &Pool, locks: &LockTable, obj: PoolOffset, need: u64, budget: u64) -> Result<()> {
        self.evict(pool, locks, obj, need, budget, false)?;
        if self.bytes() + need > budget {
            self.parts[part_of(obj)].lock().over_budget += 1;
        }
        Ok(())
    }

    /// [`Dynamic::make_room`]'s evictions. With `keep`, the block and
    /// directory entry of the copy whose eviction makes the room are
    /// returned instead of freed when that block suits a copy of `need`
    /// bytes (the caller writes one there). Victims are unlinked under
    /// their partition's lock, so a writer of one that finds it gone makes
    /// a new copy after the unlink.
    fn evict(
        &self,
        pool: &Pool,
        locks: &LockTable,
        obj: PoolOffset,
        need: u64,
        budget: u64,
        keep: bool,
    ) -> Result<Option<(PoolOffset, PoolOffset)>> {
        let home = part_of(obj);
        for i in 0..PARTS {
            if self.bytes() + need <= budget {
                return Ok(None);
            }
            let mut p = self.parts[(home + i) % PARTS].lock();
            let mut skipped = Vec::new();
            let mut kept = None;
            while self.bytes() + need > budget {
                let Some((&stamp, &victim)) = p.lru.iter().next() else { break };
                p.lru.remove(&stamp);
                if locks.busy(victim) {
                    skipped.push((stamp, victim));
                    continue;
                }
                let Some(e) = p.map.remove(&victim) else { continue };
                p.evictions += 1;
                if keep && same_block(e.len, need) && self.bytes() - e.len + need <= budget {
                    link(pool, victim, 0)?;
                    self.bytes.fetch_sub(e.len, Ordering::Relaxed);
                    p.reused += 1;
                    kept = Some((e.backup, e.at));
                    break;
                }
                self.drop_copy(pool, &mut p, victim, e)?;
            }
            for (s, o) in skipped {
                p.lru.insert(s, o);
            }
            if kept.is_some() {
                return Ok(kept);
            }
        }
        Ok(None)
    }

    /// Unlinks and frees `obj`'s copy and its directory entry (already out
    /// of the partition's map and LRU).
    fn drop_copy(&self, pool: &Pool, p: &mut Part, obj: PoolOffset, e: DynEntry) -> Result<()> {
        link(pool, obj, 0)?;
        pool.free(e.backup)?;
        pool.store_u64(e.at, 0)?;
        pool.persist(e.at, 8);
        p.free.push(e.at);
        self.bytes.fetch_sub(e.len, Ordering::Relaxed);
        Ok(())
    }

    /// A free directory entry for a copy in partition `part`.
    fn take_entry(&self, pool: &Pool, part: usize) -> Result<PoolOffset> {
        if let Some(at) = self.parts[part].lock().free.pop() {
            return Ok(at);
        }
        let mut dir = self.dir.lock();
        if dir.free.is_empty() {
            let c = pool.alloc(DIR_CHUNK)?;
            pool.fill(c, DIR_CHUNK, 0)?;
            pool.store_u64(c + 8, CHUNK_MAGIC)?;
            pool.persist(c, DIR_CHUNK);
            let link_at = match dir.chunks.last() {
                Some(&last) => last,
                None => self.root + R_DIRECTORY,
            };
            pool.store_u64(link_at, c)?;
            pool.persist(link_at, 8);
            dir.chunks.push(c);
            dir.free.extend((0..(DIR_CHUNK - CHUNK_HEADER) / 8).rev().map(|i| c + CHUNK_HEADER + i * 8));
        }
        let at = dir.free.pop().expect("a free directory entry was just made");
        let keep = dir.free.len().saturating_sub(ENTRY_BATCH);
        let batch: Vec<PoolOffset> = dir.free.drain(keep..).collect();
        drop(dir);
        self.parts[part].lock().free.extend(batch);
        Ok(at)
    }

    /// Gives `obj` a copy (the caller holds its write lock, or the
    /// coordinator's claim, so nobody else inserts or evicts it). The copy
    /// is made with no partition locked.
    pub fn insert(&self, pool: &Pool, obj: PoolOffset, len: u64) -> Result<PoolOffset> {
        let part = part_of(obj);
        let b = make_copy(pool, obj, len)?;
        let at = match self.take_entry(pool, part) {
            Ok(at) => at,
            Err(e) => {
                let _ = pool.free(b);
                return Err(e);
            }
        };
        pool.store_u64(at, obj)?;
        pool.persist(at, 8);
        link(pool, obj, b)?;
        self.bytes.fetch_add(len, Ordering::Relaxed);
        self.parts[part].lock().stamp(obj, DynEntry { backup: b, len, at, stamp: 0 });
        Ok(b)
    }

    /// [`Dynamic::insert`] for a write in the critical path: when the pool
    /// is full, the copies of other objects (least recently written first,
    /// none that a transaction holds) are the room, so they are evicted —
    /// twice the copy's size, then four times, and so on — until the copy
    /// fits or nothing is left to evict. Without this a full pool refused
    /// the very deletes that would empty it.
    pub fn insert_evicting(&self, pool: &Pool, locks: &LockTable, obj: PoolOffset, len: u64) -> Result<PoolOffset> {
        let mut want = len;
        loop {
            match self.insert(pool, obj, len) {
                Err(KaminoError::Pmem(tembo_pmem::PmemError::PoolFull { .. })) if self.bytes() > 0 => {
                    let before = self.bytes();
                    want = want.saturating_mul(2);
                    self.make_room(pool, locks, obj, 0, before.saturating_sub(want))?;
                    if self.bytes() >= before {
                        // Every copy is held by a transaction: give up.
                        return self.insert(pool, obj, len);
                    }
                }
                r => return r,
            }
        }
    }

    /// A miss in a transaction's critical path: gives `obj` (whose write
    /// lock the caller holds) a copy within `budget`. Evicts as
    /// [`Dynamic::make_room`] does (least recently written first, none
    /// that a transaction holds, `obj`'s partition first), except that
    /// when the copy whose eviction makes the room has a block of the
    /// size `obj`'s copy needs (the allocator's size class), that block
    /// and its directory entry become `obj`'s copy: no free, no
    /// allocation, no directory change but the entry's object — where
    /// every miss at the budget used to free a block and allocate one under
    /// the allocator's lock. Otherwise as [`Dynamic::insert_evicting`].
    pub fn insert_for_write(
        &self,
        pool: &Pool,
        locks: &LockTable,
        obj: PoolOffset,
        len: u64,
        budget: u64,
    ) -> Result<()> {
        if let Some((b, at)) = self.evict(pool, locks, obj, len, budget, true)? {
            return self.reuse(pool, obj, len, b, at);
        }
        // `evict` has done what `make_room` would (no second scan).
        if self.bytes() + len > budget {
            self.parts[part_of(obj)].lock().over_budget += 1;
        }
        self.insert_evicting(pool, locks, obj, len).map(|_| ())
    }

    /// Makes block `b` (a copy of `len` bytes that no object points to any
    /// more) `obj`'s copy, listed at directory entry `at`: the payload is
    /// persisted before the entry names `obj`, and the entry before `obj`
    /// points to the copy (`backup.entry_first`). A crash in between leaves
    /// an entry an open drops and a block the recovery's sweep frees.
    fn reuse(&self, pool: &Pool, obj: PoolOffset, len: u64, b: PoolOffset, at: PoolOffset) -> Result<()> {
        let filled = stamp_header(pool, b, len).and_then(|()| copy_range(pool, payload(obj), payload(b), 0, len));
        if let Err(e) = filled {
            // Back to free: the entry still names the victim, whose copy
            // is gone (an open would drop it the same way).
            if pool.store_u64(at, 0).is_ok() {
                pool.persist(at, 8);
                self.parts[part_of(obj)].lock().free.push(at);
            }
            let _ = pool.free(b);
            return Err(e);
        }
        pool.fence();
        pool.store_u64(at, obj)?;
        pool.persist(at, 8);
        link(pool, obj, b)?;
        self.bytes.fetch_add(len, Ordering::Relaxed);
        self.parts[part_of(obj)].lock().stamp(obj, DynEntry { backup: b, len, at, stamp: 0 });
        Ok(())
    }

    /// Forgets `obj` (being freed): its entry goes before the object does.
    pub fn remove(&self, pool: &Pool, obj: PoolOffset) -> Result<()> {
        let mut p = self.parts[part_of(obj)].lock();
        let Some(e) = p.map.remove(&obj) else { return Ok(()) };
        p.lru.remove(&e.stamp);
        self.drop_copy(pool, &mut p, obj, e)
    }
}
