//! Order statistics over the committed keys of chosen key ranges: how many
//! keys of a range lie before a given key, and which key is the n-th,
//! without walking the range.
//!
//! Neither engine keeps subtree counts (the CDDS tree is multi-version: a
//! count would be one per version), so ZRANK, ZCOUNT and ZRANGE by rank
//! walked the sorted-set index, O(n). This module keeps, in DRAM, a
//! *rank index* per range that asked for one: the range cut into blocks of
//! about [`BLOCK`] keys, each block named by its first key (its *fence*)
//! with the number of committed keys it holds, in pages of a few hundred
//! blocks with their totals (`counted`). A rank is then a sum over page
//! totals and block counts plus a walk of at most one block; the n-th key
//! the same. (A range so big that its blocks would not fit the memory
//! budget gets bigger blocks: slower answers, never a refusal.)
//!
//! The index is a cache of what the pool holds, never the truth: it lives
//! and dies with the executor, is built on first use by one scan of the
//! range, and is kept current by [`RankIndexes::apply`] after every
//! commit, from the engine's report of which keys each write found (the
//! executor's store is the pool's only writer). Like the volatile inner nodes of hybrid
//! DRAM/NVM trees (FPTree, NV-Tree), it costs nothing to recover: a
//! restart simply starts without it. An index found to disagree with the
//! pool — a block holding other than its count, a total other than the
//! collection's size — is dropped and rebuilt, and a caller that still
//! cannot trust it walks, as before.
//!
//! Memory is bounded: [`MAX_BYTES`] for all indexes together, the least
//! recently used dropped first; ranges under [`MIN_KEYS`] keys get none
//! (walking them is as cheap).

mod counted;

use std::collections::BTreeMap;
use std::ops::Bound;

use counted::Counted;
use tembo_store::{Db, DbError};

/// Keys per block when a block is cut (ranges up to about 7 million
/// keys; bigger ones get bigger blocks, see [`block_for`]). A block holds
/// up to twice as many before it is cut again, and one down to a quarter
/// of it joins a neighbour (if the two together fit in one block).
const BLOCK: u64 = 32;
/// Ranges with fewer keys than this are walked, not indexed.
pub const MIN_KEYS: u64 = 1024;
/// What all indexes together may hold (fence keys and counts), in bytes.
const MAX_BYTES: usize = 64 << 20;
/// Bookkeeping per fence besides its key bytes (the key's vector, its
/// head, its count).
const FENCE_OVERHEAD: usize = 24 + 8 + 8;

/// The block size for a range of `size` keys under a prefix of
/// `prefix_len` bytes: [`BLOCK`], or the power of two that keeps its
/// index within a quarter of [`MAX_BYTES`] (fences of ~16 bytes past the
/// prefix assumed).
fn block_for(size: u64, prefix_len: usize) -> u64 {
    let per_fence = (FENCE_OVERHEAD + prefix_len + 16) as u64;
    let fences_allowed = (MAX_BYTES / 4) as u64 / per_fence;
    size.div_ceil(fences_allowed.max(1)).next_power_of_two().max(BLOCK)
}

/// Why an index cannot answer.
#[derive(Debug)]
pub enum Miss {
    /// The engine failed.
    Db(DbError),
    /// The index disagrees with the pool (it has been dropped).
    Stale,
}

impl From<DbError> for Miss {
    fn from(e: DbError) -> Miss {
        Miss::Db(e)
    }
}

/// The rank indexes of the ranges that asked for one.
#[derive(Debug, Default)]
pub struct RankIndexes {
    by_prefix: BTreeMap<Vec<u8>, Counted>,
    bytes: usize,
    clock: u64,
    /// Indexes built (a scan of a whole range each): once per set and
    /// restart, unless some were evicted or found stale.
    builds: u64,
}

/// A pending change to a range: its key and +1 (added) or -1 (removed),
/// relative to what is committed.
pub type Change<'a> = (&'a [u8], i64);

impl RankIndexes {
    /// Whether no range is indexed.
    pub fn is_empty(&self) -> bool {
        self.by_prefix.is_empty()
    }

    /// What all indexes hold, in bytes.
    pub fn bytes(&self) -> usize {
        self.bytes
    }

    /// How many indexes were built.
    pub fn builds(&self) -> u64 {
        self.builds
    }

    /// The indexed range holding `key`, if any (indexed prefixes never
    /// nest: callers index whole collections).
    fn holder(&self, key: &[u8]) -> Option<&[u8]> {
        let (p, _) = self.by_prefix.range::<[u8], _>((Bound::Unbounded, Bound::Included(key))).next_back()?;
        key.starts_with(p).then_some(p.as_slice())
    }

    /// Whether `key` lies in an indexed range.
    pub fn holds(&self, key: &[u8]) -> bool {
        self.holder(key).is_some()
    }

    /// Applies committed `changes` — (key, +1) for a key the commit added
    /// to an indexed range, (key, -1) for one it removed, in key order —
    /// as the engine reported them; an index they show to be stale is
    /// dropped, and one the engine fails to read as well (it is rebuilt
    /// when next asked for).
    pub fn apply(&mut self, db: &Db, changes: &[(Vec<u8>, i64)]) {
        let mut start = 0;
        while start < changes.len() {
            let Some(prefix) = self.holder(&changes[start].0).map(<[u8]>::to_vec) else {
                start += 1;
                continue;
            };
            let end = start + changes[start..].iter().take_while(|(k, _)| k.starts_with(&prefix)).count();
            let ok = match self.by_prefix.get_mut(&prefix) {
                Some(c) => {
                    let before = c.bytes;
                    let ok = c.apply(db, &changes[start..end]).is_ok();
                    self.bytes = self.bytes - before + c.bytes;
                    ok
                }
                None => true,
            };
            if !ok {
                self.forget(&prefix);
            }
            start = end;
        }
        self.evict();
    }

    /// Checks every index against the pool (see [`Counted::check`]) and
    /// the byte count against theirs.
    pub fn check(&self, db: &Db) -> Result<(), String> {
        for c in self.by_prefix.values() {
            c.check(db)?;
        }
        let bytes: usize = self.by_prefix.values().map(|c| c.bytes).sum();
        if bytes != self.bytes || bytes > MAX_BYTES {
            return Err(format!("rank indexes hold {bytes} bytes, counted {}", self.bytes));
        }
        Ok(())
    }

    /// Drops the index of `prefix` (its collection is gone).
    pub fn forget(&mut self, prefix: &[u8]) {
        if let Some(c) = self.by_prefix.remove(prefix) {
            self.bytes -= c.bytes;
        }
    }

    /// Drops the indexes of every range under `prefix` (a flushed database's).
    pub fn forget_under(&mut self, prefix: &[u8]) {
        let gone: Vec<Vec<u8>> = self
            .by_prefix
            .range::<[u8], _>((Bound::Included(prefix), Bound::Unbounded))
            .take_while(|(p, _)| p.starts_with(prefix))
            .map(|(p, _)| p.clone())
            .collect();
        for p in gone {
            self.forget(&p);
        }
    }

    /// Whether `prefix` has an index now.
    pub fn has(&self, prefix: &[u8]) -> bool {
        self.by_prefix.contains_key(prefix)
    }

    /// Drops the least recently used indexes until all fit in [`MAX_BYTES`].
    fn evict(&mut self) {
        while self.bytes > MAX_BYTES {
            let Some(oldest) = self.by_prefix.iter().min_by_key(|(_, c)| c.used).map(|(p, _)| p.clone()) else {
                return;
            };
            self.forget(&oldest);
        }
    }

    /// The index of `prefix`, built if there is none, checked against the
    /// range's size in the view (`size`, which `pending` changes): `None`
    /// when even a fresh one disagrees (the caller walks).
    fn index(&mut self, db: &Db, prefix: &[u8], size: u64, pending: &[Change]) -> Result<Option<&Counted>, DbError> {
        let delta: i64 = pending.iter().map(|(_, d)| d).sum();
        let agrees = |c: &Counted| c.total as i64 + delta == size as i64;
        if self.by_prefix.get(prefix).is_some_and(|c| !agrees(c)) {
            self.forget(prefix);
        }
        self.clock += 1;
        let clock = self.clock;
        if !self.by_prefix.contains_key(prefix) {
            let mut c = match Counted::build(db, prefix, block_for(size, prefix.len())) {
                Ok(c) => c,
                Err(Miss::Db(e)) => return Err(e),
                Err(Miss::Stale) => return Ok(None),
            };
            self.builds += 1;
            if !agrees(&c) {
                return Ok(None);
            }
            c.used = clock;
            self.bytes += c.bytes;
            self.by_prefix.insert(prefix.to_vec(), c);
            // Older indexes make room (a new one takes a quarter of the budget at most).
            self.evict();
        }
        Ok(self.by_prefix.get_mut(prefix).map(|c| {
            c.used = clock;
            &*c
        }))
    }

    /// How many keys under `prefix` lie before `at` (a start bound, as in
    /// [`Counted::before`]) in the view: committed keys changed by
    /// `pending` (sorted by key), `size` in all. `None`: walk instead.
    pub fn before(
        &mut self,
        db: &Db,
        prefix: &[u8],
        size: u64,
        pending: &[Change],
        at: Bound<&[u8]>,
    ) -> Result<Option<u64>, DbError> {
        let Some(c) = self.index(db, prefix, size, pending)? else { return Ok(None) };
        let committed = match c.before(db, at) {
            Ok(n) => n,
            Err(Miss::Db(e)) => return Err(e),
            Err(Miss::Stale) => {
                self.forget(prefix);
                return Ok(None);
            }
        };
        let shift: i64 = pending.iter().filter(|(k, _)| precedes(k, at)).map(|(_, d)| d).sum();
        Ok(u64::try_from(committed as i64 + shift).ok())
    }

    /// The key at position `pos` of the view under `prefix` (committed
    /// keys changed by `pending`, sorted by key; `size` in all); `Some(None)`
    /// past the end; `None`: walk instead.
    pub fn nth(
        &mut self,
        db: &Db,
        prefix: &[u8],
        size: u64,
        pending: &[Change],
        pos: u64,
    ) -> Result<Option<Option<Vec<u8>>>, DbError> {
        if pos >= size {
            return Ok(Some(None));
        }
        let Some(c) = self.index(db, prefix, size, pending)? else { return Ok(None) };
        let got = nth_in_view(c, db, pending, pos);
        match got {
            Ok(k) => Ok(Some(k)),
            Err(Miss::Db(e)) => Err(e),
            Err(Miss::Stale) => {
                self.forget(prefix);
                Ok(None)
            }
        }
    }
}

/// The 8 bytes of `key` after its first `skip`, zero-padded, as a
/// big-endian number: ordered as the keys are, ties aside.
fn head(key: &[u8], skip: usize) -> u64 {
    let mut b = [0u8; 8];
    let rest = key.get(skip..).unwrap_or(&[]);
    let n = rest.len().min(8);
    b[..n].copy_from_slice(&rest[..n]);
    u64::from_be_bytes(b)
}

/// What a write does to a range's key count: +1 for a put of a key that
/// was not there, -1 for a delete of one that was, else 0.
pub fn delta(put: bool, existed: bool) -> i64 {
    match (put, existed) {
        (true, false) => 1,
        (false, true) => -1,
        _ => 0,
    }
}

/// Whether `key` lies before start bound `at`.
fn precedes(key: &[u8], at: Bound<&[u8]>) -> bool {
    match at {
        Bound::Unbounded => false,
        Bound::Included(x) => key < x,
        Bound::Excluded(x) => key <= x,
    }
}

/// The view's key at `pos` (< its size): between two pending changes the
/// view is the committed keys shifted by the changes before them, so the
/// answer is either a pending key added or a committed key at a shifted
/// position. The first pending key at or past `pos` is found by binary
/// search (the view position of each is monotone), O(log pending) block
/// walks.
fn nth_in_view(c: &Counted, db: &Db, pending: &[Change], pos: u64) -> Result<Option<Vec<u8>>, Miss> {
    // shift[i]: the sum of the changes before pending[i].
    let mut shift = Vec::with_capacity(pending.len() + 1);
    let mut s = 0i64;
    for (_, d) in pending {
        shift.push(s);
        s += d;
    }
    shift.push(s);
    // View keys up to and including pending[i]: those before it, plus it if added.
    let through = |i: usize| -> Result<i64, Miss> {
        let (k, d) = pending[i];
        Ok(c.before(db, Bound::Included(k))? as i64 + shift[i] + i64::from(d > 0))
    };
    let (mut lo, mut hi) = (0usize, pending.len());
    while lo < hi {
        let mid = (lo + hi) / 2;
        if (pos as i64) < through(mid)? {
            hi = mid;
        } else {
            lo = mid + 1;
        }
    }
    if lo < pending.len() {
        let (k, d) = pending[lo];
        if d > 0 && pos as i64 == through(lo)? - 1 {
            return Ok(Some(k.to_vec()));
        }
    }
    let committed = pos as i64 - shift[lo];
    if committed < 0 {
        return Err(Miss::Stale);
    }
    c.nth(db, committed as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn huge_ranges_get_bigger_blocks_within_the_budget() {
        assert_eq!(block_for(0, 20), BLOCK);
        assert_eq!(block_for(1_000_000, 20), BLOCK);
        for size in [10_000_000u64, 100_000_000, 1 << 40] {
            let block = block_for(size, 20);
            assert!(block.is_power_of_two() && block > BLOCK, "{size}: {block}");
            let fences = size.div_ceil(block);
            assert!(fences * (FENCE_OVERHEAD as u64 + 36) <= (MAX_BYTES / 4) as u64, "{size}: {block}");
            assert!(fences * 2 * (FENCE_OVERHEAD as u64 + 36) > (MAX_BYTES / 4) as u64 || block == BLOCK);
        }
    }
}
