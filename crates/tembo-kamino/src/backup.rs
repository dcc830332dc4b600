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
//! Promises:
//! - `backup.entry_first`: a directory entry is persisted before the
//!   object's header points to its copy; an open drops entries whose object
//!   no longer points to a copy;
//! - `backup.never_busy`: an object that is locked or has a pending
//!   roll-forward is never evicted.

use std::collections::{BTreeMap, HashMap};

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
    let b = pool.alloc(OBJ_HEADER + len)?;
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

/// The partial backup of Kamino-Tx-Dynamic.
#[derive(Debug)]
pub(crate) struct Dynamic {
    root: PoolOffset,
    chunks: Vec<PoolOffset>,
    free: Vec<PoolOffset>,
    map: HashMap<PoolOffset, DynEntry>,
    lru: BTreeMap<u64, PoolOffset>,
    clock: u64,
    /// Bytes of the copies.
    pub bytes: u64,
    pub evictions: u64,
    pub over_budget: u64,
}

impl Dynamic {
    /// Loads the directory, dropping entries whose object has no copy.
    pub fn load(pool: &Pool, root: PoolOffset) -> Result<Dynamic> {
        let mut d = Dynamic {
            root,
            chunks: Vec::new(),
            free: Vec::new(),
            map: HashMap::new(),
            lru: BTreeMap::new(),
            clock: 0,
            bytes: 0,
            evictions: 0,
            over_budget: 0,
        };
        let mut c = pool.load_u64(root + R_DIRECTORY)?;
        while c != 0 {
            if d.chunks.len() > 1 << 24 {
                return Err(invariant("backup.directory_chain", c, "directory chain does not end"));
            }
            d.chunks.push(c);
            for i in 0..(DIR_CHUNK - CHUNK_HEADER) / 8 {
                let at = c + CHUNK_HEADER + i * 8;
                let obj = pool.load_u64(at)?;
                let live = obj != 0 && crate::heap::live_object(pool, obj).is_some() && {
                    let b = backup_of(pool, obj)?;
                    if b != 0 {
                        let len = crate::heap::object_len(pool, obj)?;
                        d.clock += 1;
                        d.map.insert(obj, DynEntry { backup: b, len, at, stamp: d.clock });
                        d.lru.insert(d.clock, obj);
                        d.bytes += len;
                    }
                    b != 0
                };
                if !live {
                    if obj != 0 {
                        pool.store_u64(at, 0)?;
                        pool.flush(at, 8);
                    }
                    d.free.push(at);
                }
            }
            c = pool.load_u64(c)?;
        }
        pool.fence();
        Ok(d)
    }

    /// The directory's chunks (for the leak tracer).
    pub fn chunks(&self) -> &[PoolOffset] {
        &self.chunks
    }

    /// Records a use of `obj`'s copy; whether it has one.
    pub fn touch(&mut self, obj: PoolOffset) -> bool {
        let Some(e) = self.map.get_mut(&obj) else { return false };
        self.lru.remove(&e.stamp);
        self.clock += 1;
        e.stamp = self.clock;
        self.lru.insert(self.clock, obj);
        true
    }

    /// Makes room for `need` bytes within `budget`, evicting the least
    /// recently written copies of objects nobody holds.
    pub fn make_room(&mut self, pool: &Pool, locks: &LockTable, need: u64, budget: u64) -> Result<()> {
        let mut skipped = Vec::new();
        while self.bytes + need > budget {
            let Some((&stamp, &obj)) = self.lru.iter().next() else { break };
            self.lru.remove(&stamp);
            if locks.busy(obj) {
                skipped.push((stamp, obj));
                continue;
            }
            self.drop_copy(pool, obj)?;
            self.evictions += 1;
        }
        if self.bytes + need > budget {
            self.over_budget += 1;
        }
        for (s, o) in skipped {
            self.lru.insert(s, o);
        }
        Ok(())
    }

    /// Unlinks and frees `obj`'s copy and its directory entry.
    fn drop_copy(&mut self, pool: &Pool, obj: PoolOffset) -> Result<()> {
        let Some(e) = self.map.remove(&obj) else { return Ok(()) };
        self.lru.remove(&e.stamp);
        link(pool, obj, 0)?;
        pool.free(e.backup)?;
        pool.store_u64(e.at, 0)?;
        pool.persist(e.at, 8);
        self.free.push(e.at);
        self.bytes -= e.len;
        Ok(())
    }

    /// Gives `obj` a copy (the caller holds its write lock).
    pub fn insert(&mut self, pool: &Pool, obj: PoolOffset, len: u64) -> Result<PoolOffset> {
        if self.free.is_empty() {
            let c = pool.alloc(DIR_CHUNK)?;
            pool.fill(c, DIR_CHUNK, 0)?;
            pool.store_u64(c + 8, CHUNK_MAGIC)?;
            pool.persist(c, DIR_CHUNK);
            let link_at = match self.chunks.last() {
                Some(&last) => last,
                None => self.root + R_DIRECTORY,
            };
            pool.store_u64(link_at, c)?;
            pool.persist(link_at, 8);
            self.chunks.push(c);
            self.free.extend((0..(DIR_CHUNK - CHUNK_HEADER) / 8).rev().map(|i| c + CHUNK_HEADER + i * 8));
        }
        let b = make_copy(pool, obj, len)?;
        let at = self.free.pop().expect("a free directory entry was just made");
        pool.store_u64(at, obj)?;
        pool.persist(at, 8);
        link(pool, obj, b)?;
        self.clock += 1;
        self.map.insert(obj, DynEntry { backup: b, len, at, stamp: self.clock });
        self.lru.insert(self.clock, obj);
        self.bytes += len;
        Ok(b)
    }

    /// Forgets `obj` (being freed): its entry goes before the object does.
    pub fn remove(&mut self, pool: &Pool, obj: PoolOffset) -> Result<()> {
        self.drop_copy(pool, obj)
    }
}
