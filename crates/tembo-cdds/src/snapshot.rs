//! Snapshots: a pinned version that reads see exactly, for as long as the
//! handle lives; named snapshots persist across restarts in a table in the
//! pool and can be listed, dropped and rolled back to.
//!
//! Named table: 64 records of 32 bytes: `version:u64 | name (≤ 23 bytes,
//! NUL padded)`. A record is used when its version word is non-zero; the
//! name is persisted before the version word, and the version word is the
//! one store that creates or drops a snapshot.

use std::ops::Bound;

use crate::error::{CddsError, Result};
use crate::scan::Iter;
use crate::tree::TreeCore;
use crate::write::{Op, WriteOutcome};

const TABLE_RECORDS: u64 = 64;
const RECORD_BYTES: u64 = 32;
/// Longest snapshot name in bytes.
pub const MAX_SNAPSHOT_NAME: usize = 23;

/// A pinned, consistent view of the tree at one version.
#[derive(Debug)]
pub struct Snapshot<'t> {
    tree: &'t TreeCore,
    version: u64,
}

impl Drop for Snapshot<'_> {
    fn drop(&mut self) {
        self.tree.unpin_snapshot(self.version);
    }
}

impl<'t> Snapshot<'t> {
    /// The version it sees.
    pub fn version(&self) -> u64 {
        self.version
    }
    /// The value of `key` at the snapshot.
    ///
    /// # Errors
    /// As [`TreeCore::get`].
    pub fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        self.tree.get_at(key, self.version)
    }
    /// A range scan at the snapshot.
    pub fn scan(&self, lo: Bound<Vec<u8>>, hi: Bound<Vec<u8>>, reverse: bool) -> Iter<'t> {
        self.tree.scan_at(self.version, lo, hi, reverse)
    }
}

/// A named snapshot in the table.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NamedSnapshot {
    /// Its name.
    pub name: String,
    /// The version it keeps.
    pub version: u64,
}

impl TreeCore {
    /// Pins the current version.
    pub fn snapshot(&self) -> Result<Snapshot<'_>> {
        let mut map = self.snapshots.lock();
        let v = self.current_version()?;
        *map.entry(v).or_default() += 1;
        Ok(Snapshot { tree: self, version: v })
    }

    fn unpin_snapshot(&self, v: u64) {
        let mut map = self.snapshots.lock();
        if let Some(c) = map.get_mut(&v) {
            *c -= 1;
            if *c == 0 {
                map.remove(&v);
            }
        }
    }

    fn table_records(&self) -> Result<Vec<(u64, NamedSnapshot)>> {
        let table = self.meta.snapshots(&self.pool)?;
        if table == 0 {
            return Ok(Vec::new());
        }
        let mut out = Vec::new();
        for i in 0..TABLE_RECORDS {
            let at = table + i * RECORD_BYTES;
            let version = self.pool.load_u64(at)?;
            if version == 0 {
                continue;
            }
            let mut name = [0u8; 24];
            self.pool.read(at + 8, &mut name)?;
            let len = name.iter().position(|&b| b == 0).unwrap_or(24);
            let name = String::from_utf8_lossy(&name[..len]).into_owned();
            out.push((at, NamedSnapshot { name, version }));
        }
        Ok(out)
    }

    /// Pins every named snapshot's version. Returns whether one was taken
    /// of a tree that had committed nothing by a build before session 43:
    /// it records version 1 (0 marks a free record) while the tree is
    /// still at 0, and means the empty tree; the caller makes version 1
    /// committed and empty (see [`TreeCore::create_named_snapshot`]).
    pub(crate) fn load_named_snapshots(&self) -> Result<bool> {
        let current = self.current_version()?;
        let mut map = self.snapshots.lock();
        let mut of_empty_tree = false;
        for (at, s) in self.table_records()? {
            if s.version > current {
                if current == 0 && s.version == 1 {
                    of_empty_tree = true;
                } else {
                    return Err(CddsError::invariant(
                        format!("named snapshot {:?} is newer than the tree", s.name),
                        at,
                    ));
                }
            }
            *map.entry(s.version).or_default() += 1;
        }
        Ok(of_empty_tree)
    }

    /// The named snapshots, oldest first.
    ///
    /// # Errors
    /// Pool errors.
    pub fn named_snapshots(&self) -> Result<Vec<NamedSnapshot>> {
        let mut v: Vec<_> = self.table_records()?.into_iter().map(|(_, s)| s).collect();
        v.sort_by_key(|s| s.version);
        Ok(v)
    }

    /// Persists a snapshot of the current version under `name`.
    ///
    /// # Errors
    /// [`CddsError::SnapshotTable`] for a bad or taken name or a full table.
    pub fn create_named_snapshot(&self, name: &str) -> Result<NamedSnapshot> {
        if name.is_empty() || name.len() > MAX_SNAPSHOT_NAME || name.contains('\0') {
            return Err(CddsError::SnapshotTable(format!("names are 1 to {MAX_SNAPSHOT_NAME} bytes without NUL")));
        }
        let _ws = self.writer.lock();
        // A failed batch's entries may remain at the next version, which
        // the empty commit below would make visible.
        self.writer.check_poisoned()?;
        let records = self.table_records()?;
        if records.iter().any(|(_, s)| s.name == name) {
            return Err(CddsError::SnapshotTable(format!("a snapshot named {name:?} exists; drop it first")));
        }
        let pool = &self.pool;
        let mut table = self.meta.snapshots(pool)?;
        if table == 0 {
            table = pool.alloc(TABLE_RECORDS * RECORD_BYTES)?;
            pool.fill(table, TABLE_RECORDS * RECORD_BYTES, 0)?;
            pool.persist(table, TABLE_RECORDS * RECORD_BYTES);
            self.meta.set_snapshots(pool, table)?;
        }
        let free = (0..TABLE_RECORDS)
            .map(|i| table + i * RECORD_BYTES)
            .find(|&at| pool.load_u64(at).map(|v| v == 0).unwrap_or(false))
            .ok_or_else(|| CddsError::SnapshotTable(format!("all {TABLE_RECORDS} named snapshots are in use")))?;
        let mut bytes = [0u8; 24];
        bytes[..name.len()].copy_from_slice(name.as_bytes());
        pool.write(free + 8, &bytes)?;
        pool.persist(free + 8, 24);
        // A record's version 0 marks it free, so a tree that has committed
        // nothing first commits version 1, empty like version 0: the
        // snapshot then keeps the empty tree. (Recording 1 for version 0
        // made it show the first write's contents once that committed, and
        // made a crash before any commit leave a pool that would not open:
        // "named snapshot is newer than the tree". Found by `tembo
        // crashtest` with seed 307904659.)
        if self.current_version()? == 0 {
            self.commit_version(1)?;
        }
        let v = self.current_version()?;
        *self.snapshots.lock().entry(v).or_default() += 1;
        pool.store_u64(free, v)?;
        pool.persist(free, 8);
        Ok(NamedSnapshot { name: name.to_string(), version: v })
    }

    /// Drops the named snapshot `name`.
    ///
    /// # Errors
    /// [`CddsError::NoSuchSnapshot`].
    pub fn drop_named_snapshot(&self, name: &str) -> Result<()> {
        let _ws = self.writer.lock();
        let (at, s) = self
            .table_records()?
            .into_iter()
            .find(|(_, s)| s.name == name)
            .ok_or_else(|| CddsError::NoSuchSnapshot(name.to_string()))?;
        self.pool.store_u64(at, 0)?;
        self.pool.persist(at, 8);
        self.unpin_snapshot(s.version);
        Ok(())
    }

    /// Makes the current state equal to the named snapshot's, as one new
    /// committed version (the snapshot itself stays). The writer lock is
    /// held from the diff to the commit, so no write can slip in between.
    ///
    /// # Errors
    /// [`CddsError::NoSuchSnapshot`]; write errors.
    pub fn rollback_to(&self, name: &str) -> Result<WriteOutcome> {
        let s = self
            .named_snapshots()?
            .into_iter()
            .find(|s| s.name == name)
            .ok_or_else(|| CddsError::NoSuchSnapshot(name.to_string()))?;
        let mut ws = self.writer.lock();
        let now = self.snapshot()?;
        let mut cur = now.scan(Bound::Unbounded, Bound::Unbounded, false).peekable();
        let mut old = self.scan_at(s.version, Bound::Unbounded, Bound::Unbounded, false).peekable();
        let mut puts: Vec<(Vec<u8>, Vec<u8>)> = Vec::new();
        let mut dels: Vec<Vec<u8>> = Vec::new();
        loop {
            let order = match (cur.peek(), old.peek()) {
                (None, None) => break,
                (Some(Err(_)), _) => return Err(cur.next().and_then(|r| r.err()).expect("peeked an error")),
                (_, Some(Err(_))) => return Err(old.next().and_then(|r| r.err()).expect("peeked an error")),
                (Some(Ok(_)), None) => std::cmp::Ordering::Less,
                (None, Some(Ok(_))) => std::cmp::Ordering::Greater,
                (Some(Ok(a)), Some(Ok(b))) => a.0.cmp(&b.0),
            };
            match order {
                std::cmp::Ordering::Less => dels.push(cur.next().expect("peeked")?.0),
                std::cmp::Ordering::Greater => puts.push(old.next().expect("peeked")?),
                std::cmp::Ordering::Equal => {
                    let (a, b) = (cur.next().expect("peeked")?, old.next().expect("peeked")?);
                    if a.1 != b.1 {
                        puts.push(b);
                    }
                }
            }
        }
        let mut ops: Vec<Op<'_>> = dels.iter().map(|k| Op::Delete(k)).collect();
        ops.extend(puts.iter().map(|(k, v)| Op::Put(k, v)));
        drop(cur);
        self.write_locked(&mut ws, &ops)
    }
}
