//! The executor's view of the database: committed state plus the writes of
//! the current commit group.
//!
//! Commands run one at a time against this view. Their writes go to an
//! in-memory overlay that later commands in the same group read through
//! (read-your-writes), and the whole overlay becomes durable with one
//! [`WriteBatch`] — one persisted version store in the engine — before any
//! reply of the group is sent (group commit). [`Store::discard`] forgets a
//! group that could not commit.
//!
//! A command is atomic inside its group as well. One refused midway — a
//! key or value over the engine's limits, found after some of its writes
//! were staged — must apply nothing. At the top level that costs nothing
//! until it happens: the executor reruns the group one command per commit
//! and drops the refused one (`State::torn`). A command run by another
//! (inside EXEC or a script, between [`Store::begin_command`] and
//! [`Store::end_command`]) has its staged writes journaled instead, so that
//! it alone is undone ([`Store::undo_command`]) and the others stand.

use std::cmp::Ordering;
use std::collections::BTreeMap;
use std::iter::Peekable;
use std::ops::Bound;
use std::sync::Arc;

use tembo_store::{Db, DbError, KeyValue, WriteBatch};

use crate::encoding::{be64, GLOBAL};
use crate::ranks::{delta, Change, RankIndexes, MIN_KEYS};

/// How many engine draws [`Store::sample`] makes per pair it returns
/// before it gives up: a draw that pending deletes hide is drawn again.
const SAMPLE_OVERDRAW: usize = 16;

/// Past this many pending writes under an indexed range, a rank query
/// walks instead (each pending write costs it one engine lookup).
const RANK_PENDING_MAX: usize = 1024;

/// Versions are reserved in blocks so that creating a collection rarely writes the high-water mark.
const VERSION_BLOCK: u64 = 4096;

/// Committed database plus pending writes.
#[derive(Debug)]
pub struct Store {
    db: Arc<Db>,
    overlay: BTreeMap<Vec<u8>, Option<Vec<u8>>>,
    next_version: u64,
    version_limit: u64,
    persisted_limit: u64,
    /// The first version handed out since the last commit or discard. No
    /// committed key belongs to it or to a later one: every committed
    /// version is below the high-water mark persisted with it, and
    /// versions are never handed out twice.
    fresh_from: u64,
    max_key: usize,
    max_value: usize,
    /// What the nested commands running staged, oldest first.
    journal: Vec<Staged>,
    /// How many commands are running (EXEC and scripts nest them); writes
    /// are journaled only while a nested one is.
    depth: u32,
    /// A put was refused since the running command began.
    refused: bool,
    /// Writes staged so far (ever): a command staged some when this moved.
    staged: u64,
    /// Rank indexes of the committed state of big sorted sets (see
    /// `ranks`); behind a lock only because queries take `&self`.
    ranks: std::sync::Mutex<RankIndexes>,
}

/// A journaled write: the key, and what the overlay held for it before
/// (`None`: nothing pending).
type Staged = (Vec<u8>, Option<Option<Vec<u8>>>);

/// Where a command began: what [`Store::undo_command`] returns to.
#[derive(Clone, Copy, Debug)]
pub struct Savepoint {
    journal_len: usize,
    version_limit: u64,
    refused: bool,
    staged: u64,
}

/// A write refused before it reached the engine.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The engine failed.
    #[error(transparent)]
    Db(#[from] DbError),
    /// A key over the engine's limit.
    #[error("key too large: {0} bytes as stored (the key, with its field or member if any) exceed the pool's limit of {1} bytes")]
    KeyTooLarge(usize, usize),
    /// A value over the engine's limit.
    #[error("value too large: {0} bytes as stored exceed the pool's limit of {1} bytes")]
    ValueTooLarge(usize, usize),
}

fn version_key() -> Vec<u8> {
    let mut k = vec![GLOBAL];
    k.extend_from_slice(b"version-limit");
    k
}

impl Store {
    /// Wraps an open database, reading the version high-water mark.
    pub fn new(db: Arc<Db>) -> Result<Store, DbError> {
        let limit = match db.get(&version_key())? {
            Some(v) if v.len() == 8 => be64(&v),
            _ => 1,
        };
        let limits = db.limits();
        Ok(Store {
            db,
            overlay: BTreeMap::new(),
            next_version: limit,
            version_limit: limit,
            persisted_limit: limit,
            fresh_from: limit,
            max_key: limits.max_key_bytes,
            max_value: limits.max_value_bytes,
            journal: Vec::new(),
            depth: 0,
            refused: false,
            staged: 0,
            ranks: std::sync::Mutex::new(RankIndexes::default()),
        })
    }

    /// The database underneath.
    pub fn db(&self) -> &Arc<Db> {
        &self.db
    }

    /// The value of `key`, pending writes included.
    pub fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>, DbError> {
        match self.overlay.get(key) {
            Some(v) => Ok(v.clone()),
            None => self.db.get(key),
        }
    }

    /// At most `limit` bytes of `key`'s value from byte `offset` on, and
    /// the value's whole length, pending writes included: a metadata
    /// record's header without the string it holds, or a big string
    /// without the header.
    pub fn get_range(&self, key: &[u8], offset: u64, limit: usize) -> Result<Option<(Vec<u8>, u64)>, DbError> {
        let mut part = Vec::new();
        Ok(self.get_range_into(key, offset, limit, &mut part)?.map(|len| (part, len)))
    }

    /// [`Store::get_range`] into `buf` (cleared first; its capacity kept,
    /// which a caller may have sized for what it will add): the value's
    /// length.
    pub fn get_range_into(
        &self,
        key: &[u8],
        offset: u64,
        limit: usize,
        buf: &mut Vec<u8>,
    ) -> Result<Option<u64>, DbError> {
        buf.clear();
        match self.overlay.get(key) {
            Some(v) => Ok(v.as_ref().map(|v| {
                let from = (offset.min(v.len() as u64)) as usize;
                buf.extend_from_slice(&v[from..from + (v.len() - from).min(limit)]);
                v.len() as u64
            })),
            None => Ok(self.db.get_range_into(key, offset, limit, buf)?),
        }
    }

    /// The value of `key`, an element key of collection version `version`.
    /// A version handed out since the last commit has nothing committed
    /// (see `fresh_from`), so then only the pending writes are read: a
    /// new hash, set or sorted set skips one engine lookup per element.
    pub fn get_element(&self, key: &[u8], version: u64) -> Result<Option<Vec<u8>>, DbError> {
        if version >= self.fresh_from {
            return Ok(self.overlay.get(key).cloned().flatten());
        }
        self.get(key)
    }

    /// Whether element `key` of collection version `version` exists:
    /// [`Store::get_element`] without copying its value.
    pub fn contains_element(&self, key: &[u8], version: u64) -> Result<bool, DbError> {
        match self.overlay.get(key) {
            Some(v) => Ok(v.is_some()),
            None if version >= self.fresh_from => Ok(false),
            None => self.db.contains(key),
        }
    }

    /// Stages a put; refuses keys and values over the engine's limits now
    /// rather than failing the whole group at commit.
    pub fn put(&mut self, key: Vec<u8>, value: Vec<u8>) -> Result<(), StoreError> {
        self.check_sizes(key.len(), value.len())?;
        self.stage(key, Some(value));
        Ok(())
    }

    /// Refuses a key or value length over the engine's limits, as `put`
    /// would; the running command is then undone (see [`Store::refused`]).
    pub fn check_sizes(&mut self, key_len: usize, value_len: usize) -> Result<(), StoreError> {
        if key_len > self.max_key {
            self.refused = true;
            return Err(StoreError::KeyTooLarge(key_len, self.max_key));
        }
        if value_len > self.max_value {
            self.refused = true;
            return Err(StoreError::ValueTooLarge(value_len, self.max_value));
        }
        Ok(())
    }

    /// Stages a delete.
    pub fn delete(&mut self, key: Vec<u8>) {
        self.stage(key, None);
    }

    fn stage(&mut self, key: Vec<u8>, value: Option<Vec<u8>>) {
        self.staged += 1;
        if self.depth < 2 {
            self.overlay.insert(key, value);
        } else {
            let before = self.overlay.insert(key.clone(), value);
            self.journal.push((key, before));
        }
    }

    /// A command starts; if another command runs it, its writes are
    /// journaled until the matching [`end_command`](Self::end_command).
    pub fn begin_command(&mut self) -> Savepoint {
        self.depth += 1;
        let sp = Savepoint {
            journal_len: self.journal.len(),
            version_limit: self.version_limit,
            refused: self.refused,
            staged: self.staged,
        };
        self.refused = false;
        sp
    }

    /// Whether a put was refused (a key or value over the engine's limits)
    /// since the running command began (not counting commands it ran).
    pub fn refused(&self) -> bool {
        self.refused
    }

    /// Whether the command of `sp` (and those it ran) staged any write.
    pub fn staged_since(&self, sp: &Savepoint) -> bool {
        self.staged != sp.staged
    }

    /// Whether the command running now runs inside another one (EXEC's,
    /// a script's).
    pub fn nested_now(&self) -> bool {
        self.depth >= 2
    }

    /// Whether the command of `sp` runs inside another one (its writes are
    /// journaled and [`undo_command`](Self::undo_command) can take them back).
    pub fn nested(&self, _sp: &Savepoint) -> bool {
        self.depth >= 2
    }

    /// Puts the overlay back as it was at `sp`, a nested command's: the
    /// command staged nothing. Versions it took are not handed out again,
    /// but the high-water mark is restaged by the next command that needs one.
    pub fn undo_command(&mut self, sp: &Savepoint) {
        while self.journal.len() > sp.journal_len {
            let Some((key, before)) = self.journal.pop() else { break };
            match before {
                Some(v) => {
                    self.overlay.insert(key, v);
                }
                None => {
                    self.overlay.remove(&key);
                }
            }
        }
        self.version_limit = sp.version_limit;
    }

    /// The command of `sp` ended; the journal is dropped once no command runs.
    pub fn end_command(&mut self, sp: Savepoint) {
        self.depth = self.depth.saturating_sub(1);
        // The outermost command's refusal has been dealt with by now.
        self.refused = sp.refused && self.depth > 0;
        if self.depth < 2 {
            self.journal.clear();
        }
    }

    /// A fresh collection version, never handed out before (also across restarts).
    pub fn new_version(&mut self) -> u64 {
        if self.next_version >= self.version_limit {
            self.version_limit = self.next_version + VERSION_BLOCK;
            self.stage(version_key(), Some(self.version_limit.to_be_bytes().to_vec()));
        }
        self.next_version += 1;
        self.next_version - 1
    }

    /// Whether `version` was handed out to a collection, now or in an
    /// earlier run, and can never be handed out again: below the next
    /// version of this run and below the high-water mark persisted (a
    /// restart hands out versions from that mark on, even ones this run
    /// took in a command later undone or a group not committed).
    pub fn handed_out(&self, version: u64) -> bool {
        version < self.next_version.min(self.persisted_limit)
    }

    /// Whether writes are pending.
    pub fn is_dirty(&self) -> bool {
        !self.overlay.is_empty()
    }

    /// Number of pending writes.
    pub fn pending(&self) -> usize {
        self.overlay.len()
    }

    /// How the pending writes under `prefix` change the number of committed
    /// keys there: (keys they add, keys they remove). Reads each such key's
    /// committed state, so it is for small, rare prefixes (dropped
    /// collections), not for every write.
    pub fn pending_delta(&self, prefix: &[u8]) -> Result<(u64, u64), DbError> {
        let hi = match crate::encoding::prefix_end(prefix) {
            Some(end) => Bound::Excluded(end),
            None => Bound::Unbounded,
        };
        let (mut added, mut removed) = (0, 0);
        for (k, v) in self.overlay.range::<Vec<u8>, _>((Bound::Included(prefix.to_vec()), hi)) {
            let exists = self.db.get(k)?.is_some();
            match (exists, v.is_some()) {
                (false, true) => added += 1,
                (true, false) => removed += 1,
                _ => {}
            }
        }
        Ok((added, removed))
    }

    /// Makes every pending write durable with one batch.
    pub fn commit(&mut self) -> Result<(), DbError> {
        // Also after a failed write: the versions it held are never handed out again.
        self.fresh_from = self.next_version;
        if self.overlay.is_empty() {
            return Ok(());
        }
        self.journal.clear();
        let ranks = self.ranks.get_mut().unwrap_or_else(|e| e.into_inner());
        // The writes to indexed ranges (position in the batch, key, put?):
        // the engine reports whether each key existed, so the indexes learn
        // what changed without a lookup of their own.
        let mut indexed = Vec::new();
        if !ranks.is_empty() {
            for (i, (k, v)) in self.overlay.iter().enumerate() {
                if ranks.holds(k) {
                    indexed.push((i, k.clone(), v.is_some()));
                }
            }
        }
        let mut batch = WriteBatch::with_capacity(self.overlay.len());
        for (k, v) in std::mem::take(&mut self.overlay) {
            match v {
                Some(v) => batch.put(k, v),
                None => batch.delete(k),
            };
        }
        match self.db.write(&batch) {
            Ok(outcome) => {
                self.persisted_limit = self.version_limit;
                if !indexed.is_empty() {
                    let mut changes = Vec::with_capacity(indexed.len());
                    for (i, k, put) in indexed {
                        let Some(&existed) = outcome.existed.get(i) else {
                            // The indexes are a cache: without the outcome they go, the commit stays.
                            *ranks = RankIndexes::default();
                            return Ok(());
                        };
                        match delta(put, existed) {
                            0 => {}
                            d => changes.push((k, d)),
                        }
                    }
                    ranks.apply(&self.db, &changes);
                }
                Ok(())
            }
            Err(e) => {
                self.version_limit = self.persisted_limit;
                Err(e)
            }
        }
    }

    /// Forgets every pending write.
    pub fn discard(&mut self) {
        self.overlay.clear();
        self.journal.clear();
        self.fresh_from = self.next_version;
        self.version_limit = self.persisted_limit;
    }

    /// Keys and values in `[lo, hi)` bounds order (descending if `rev`), pending writes included.
    pub fn scan(&self, lo: Bound<Vec<u8>>, hi: Bound<Vec<u8>>, rev: bool) -> Merged<'_> {
        let range = (lo, hi);
        let mut pending: Vec<_> = self.overlay.range(range.clone()).collect();
        if !rev {
            pending.reverse();
        }
        let db = if rev { self.db.scan_rev(range) } else { self.db.scan(range) };
        Merged { db: db.peekable(), pending, rev }
    }

    /// `draws` pairs starting with `prefix` (the elements of collection
    /// version `version`), each drawn uniformly and
    /// independently from the `total` pairs there (pending writes
    /// included), without walking them ([`Db::sample`]), spending engine
    /// descents from `budget`; `None` when it ran out (a prefix that fills
    /// little of the nodes it spans), or pending deletes hid nearly every
    /// draw (or `total` is above what is there), for the caller to walk
    /// instead.
    ///
    /// Uniform over the merged view: a pending key the engine lacks is
    /// drawn with probability (such keys) / `total`, from among them;
    /// otherwise the engine draws, and a key the pending writes delete is
    /// drawn again. The engine is asked for `draws` pairs whatever that
    /// split, so whether the call fails does not depend on it (a failure
    /// that did would skew the draws that succeed). Reads each pending put
    /// under `prefix` once a call (is it new?), so it is for collections,
    /// whose pending writes are few.
    pub fn sample(
        &self,
        prefix: &[u8],
        version: u64,
        total: u64,
        draws: usize,
        budget: &mut usize,
        rng: &mut dyn rand::RngCore,
    ) -> Result<Option<Vec<KeyValue>>, DbError> {
        use rand::Rng;
        let (lo, hi) = tembo_store::prefix_range(prefix);
        let mut added = Vec::new();
        for (k, v) in self.overlay.range::<Vec<u8>, _>((lo.clone(), hi.clone())) {
            // A collection version handed out since the last commit has
            // nothing committed (see `fresh_from`): no lookup needed.
            if let Some(v) = v {
                if version >= self.fresh_from || !self.db.contains(k)? {
                    added.push((k, v));
                }
            }
        }
        if total == 0 {
            return Ok(Some(Vec::new()));
        }
        let mut engine = Vec::with_capacity(draws);
        if (added.len() as u64) < total {
            // A draw that pending deletes hide is drawn again, up to a bound.
            let mut redraws = draws.saturating_mul(SAMPLE_OVERDRAW).saturating_add(SAMPLE_OVERDRAW);
            while engine.len() < draws {
                let need = draws - engine.len();
                if redraws < need {
                    return Ok(None);
                }
                redraws -= need;
                let got = self.db.sample((lo.clone(), hi.clone()), need, budget, rng)?;
                if got.len() < need {
                    return Ok(None); // the budget ran out
                }
                for (k, v) in got {
                    match self.overlay.get(&k) {
                        Some(None) => {}
                        Some(Some(pending)) => engine.push((k, pending.clone())),
                        None => engine.push((k, v)),
                    }
                }
            }
        }
        let mut engine = engine.into_iter();
        let mut out = Vec::with_capacity(draws);
        for _ in 0..draws {
            if rng.gen_range(0..total) < added.len() as u64 {
                let (k, v) = added[rng.gen_range(0..added.len())];
                out.push((k.clone(), v.clone()));
            } else if let Some(pair) = engine.next() {
                out.push(pair);
            } else {
                return Ok(None); // `total` counts more than the engine holds
            }
        }
        Ok(Some(out))
    }

    /// The pending writes under `prefix` that change what is committed
    /// there, as (key, +1 added | -1 removed), in key order; `None` past
    /// [`RANK_PENDING_MAX`] of them.
    fn rank_changes(&self, prefix: &[u8]) -> Result<Option<Vec<Change<'_>>>, DbError> {
        let (lo, hi) = tembo_store::prefix_range(prefix);
        let mut out = Vec::new();
        for (i, (k, v)) in self.overlay.range::<Vec<u8>, _>((lo, hi)).enumerate() {
            if i == RANK_PENDING_MAX {
                return Ok(None);
            }
            match delta(v.is_some(), self.db.contains(k)?) {
                0 => {}
                d => out.push((k.as_slice(), d)),
            }
        }
        Ok(Some(out))
    }

    fn rank_indexes(&self) -> std::sync::MutexGuard<'_, RankIndexes> {
        self.ranks.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// How many keys under `prefix` (a collection's elements, `size` of
    /// them, pending writes included) lie before start bound `at`
    /// (`Included(x)`: the keys below x; `Excluded(x)`: up to x), from a
    /// rank index (`ranks`) in O(log n); `None` when the caller should
    /// walk instead (a small collection, many pending writes there, or an
    /// index that disagrees with the pool).
    pub fn rank_before(&self, prefix: &[u8], size: u64, at: Bound<&[u8]>) -> Result<Option<u64>, DbError> {
        if size < MIN_KEYS {
            return Ok(None);
        }
        let Some(pending) = self.rank_changes(prefix)? else { return Ok(None) };
        self.rank_indexes().before(&self.db, prefix, size, &pending, at)
    }

    /// The key at position `pos` under `prefix` (as in
    /// [`rank_before`](Self::rank_before)); `Some(None)` past the end,
    /// `None` when the caller should walk instead.
    pub fn rank_nth(&self, prefix: &[u8], size: u64, pos: u64) -> Result<Option<Option<Vec<u8>>>, DbError> {
        if size < MIN_KEYS {
            return Ok(None);
        }
        let Some(pending) = self.rank_changes(prefix)? else { return Ok(None) };
        self.rank_indexes().nth(&self.db, prefix, size, &pending, pos)
    }

    /// Drops the rank index of `prefix`, if any (its collection is being dropped).
    pub fn forget_ranks(&mut self, prefix: &[u8]) {
        self.ranks.get_mut().unwrap_or_else(|e| e.into_inner()).forget(prefix);
    }

    /// Drops the rank indexes of every range under `prefix` (a flushed
    /// database's sorted sets).
    pub fn forget_ranks_under(&mut self, prefix: &[u8]) {
        self.ranks.get_mut().unwrap_or_else(|e| e.into_inner()).forget_under(prefix);
    }

    /// Whether `prefix` has a rank index now (a query through it costs
    /// O(log n); one without builds it first, O(n)).
    pub fn has_rank_index(&self, prefix: &[u8]) -> bool {
        self.rank_indexes().has(prefix)
    }

    /// Checks every rank index against the committed state (DEBUG
    /// CHECK-RANK-INDEXES): an error names the first disagreement.
    pub fn check_ranks(&self) -> Result<(), String> {
        self.rank_indexes().check(&self.db)
    }

    /// Bytes the rank indexes hold (INFO memory).
    pub fn rank_index_bytes(&self) -> usize {
        self.rank_indexes().bytes()
    }

    /// Rank indexes built since the start (INFO stats).
    pub fn rank_index_builds(&self) -> u64 {
        self.rank_indexes().builds()
    }

    /// Everything starting with `prefix`.
    pub fn scan_prefix(&self, prefix: &[u8], rev: bool) -> Merged<'_> {
        let hi = match crate::encoding::prefix_end(prefix) {
            Some(end) => Bound::Excluded(end),
            None => Bound::Unbounded,
        };
        self.scan(Bound::Included(prefix.to_vec()), hi, rev)
    }
}

/// Committed entries merged with pending ones (pending wins; pending deletes hide).
#[derive(Debug)]
pub struct Merged<'a> {
    db: Peekable<tembo_store::Iter<'a>>,
    /// Pending entries of the range, the next one last.
    pending: Vec<(&'a Vec<u8>, &'a Option<Vec<u8>>)>,
    rev: bool,
}

impl Iterator for Merged<'_> {
    type Item = Result<(Vec<u8>, Vec<u8>), DbError>;

    fn next(&mut self) -> Option<Self::Item> {
        loop {
            let next_pending = self.pending.last().map(|(k, _)| k.as_slice());
            let next_db = match self.db.peek() {
                Some(Ok((k, _))) => Some(k.as_slice()),
                Some(Err(_)) => return self.db.next(),
                None => None,
            };
            let (take_pending, shadows) = match (next_pending, next_db) {
                (None, None) => return None,
                (Some(_), None) => (true, false),
                (None, Some(_)) => (false, false),
                (Some(p), Some(d)) => {
                    let ord = if self.rev { d.cmp(p) } else { p.cmp(d) };
                    match ord {
                        Ordering::Less => (true, false),
                        Ordering::Equal => (true, true),
                        Ordering::Greater => (false, false),
                    }
                }
            };
            if !take_pending {
                return self.db.next();
            }
            if shadows {
                self.db.next();
            }
            let (k, v) = self.pending.pop()?;
            if let Some(v) = v {
                return Some(Ok((k.clone(), v.clone())));
            }
        }
    }
}

#[cfg(test)]
mod ranks_tests;

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;
    use tembo_store::Options;

    fn store_with(n: u32) -> Store {
        let db = Arc::new(Db::in_memory(&Options::with_size(16 << 20)).unwrap());
        let mut b = WriteBatch::new();
        for i in 0..n {
            b.put(format!("p:{i:05}").into_bytes(), i.to_le_bytes());
        }
        db.write(&b).unwrap();
        Store::new(db).unwrap()
    }

    #[test]
    fn sample_counts_pending_writes_and_gives_up_when_all_are_hidden() {
        let mut rng = rand::rngs::StdRng::seed_from_u64(1);
        let mut st = store_with(500);
        // Pending: 400 deletes, 3 new keys, 1 overwrite: 103 keys remain.
        for i in 0..400 {
            st.delete(format!("p:{i:05}").into_bytes());
        }
        for k in ["p:90000", "p:90001", "p:90002"] {
            st.put(k.as_bytes().to_vec(), b"new".to_vec()).unwrap();
        }
        st.put(b"p:00450".to_vec(), b"over".to_vec()).unwrap();
        let got = st.sample(b"p:", 0, 103, 2000, &mut (1 << 20), &mut rng).unwrap().expect("draws");
        assert_eq!(got.len(), 2000);
        let mut seen = std::collections::BTreeMap::new();
        for (k, v) in got {
            let i: u32 = std::str::from_utf8(&k[2..]).unwrap().parse().unwrap();
            assert!(i >= 400, "a deleted key drawn: {i}");
            match i {
                90000..=90002 => assert_eq!(v, b"new"),
                450 => assert_eq!(v, b"over"),
                _ => assert_eq!(v, i.to_le_bytes()),
            }
            *seen.entry(i).or_insert(0) += 1;
        }
        let missing: Vec<u32> = (400..500).chain(90000..90003).filter(|i| !seen.contains_key(i)).collect();
        assert_eq!(seen.len(), 103, "every remaining key drawn; missing {missing:?}");
        // Every committed key hidden and a count saying otherwise: no
        // draws, so the caller walks.
        for i in 400..500 {
            st.delete(format!("p:{i:05}").into_bytes());
        }
        assert_eq!(st.sample(b"p:", 0, 50, 1, &mut 1000, &mut rng).unwrap(), None);
    }
}
