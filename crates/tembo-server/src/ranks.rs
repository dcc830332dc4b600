//! Order statistics over the committed keys of chosen key ranges: how many
//! keys of a range lie before a given key, and which key is the n-th,
//! without walking the range.
//!
//! Neither engine keeps subtree counts (the CDDS tree is multi-version: a
//! count would be one per version), so ZRANK, ZCOUNT and ZRANGE by rank
//! walked the sorted-set index, O(n). This module keeps, in DRAM, a
//! *rank index* per range that asked for one: the range cut into blocks of
//! about [`BLOCK`] keys, each block named by its first key (its *fence*)
//! with the number of committed keys it holds, and a Fenwick tree over
//! those counts. A rank is then a prefix sum plus a walk of at most one
//! block, O(log blocks + BLOCK); the n-th key is a Fenwick search plus the
//! same walk. (A range so big that its blocks would not fit the memory
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

use std::collections::{BTreeMap, BTreeSet};
use std::ops::Bound;

use tembo_store::{Db, DbError};

/// Keys per block when a block is cut (ranges up to about 6 million
/// keys; bigger ones get bigger blocks, see [`block_for`]). A block holds
/// up to twice as many before it is cut again, and one down to a quarter
/// of it joins a neighbour (if the two together fit in one block).
const BLOCK: u64 = 32;
/// Ranges with fewer keys than this are walked, not indexed.
pub const MIN_KEYS: u64 = 1024;
/// What all indexes together may hold (fence keys and counts), in bytes.
const MAX_BYTES: usize = 64 << 20;
/// Bookkeeping per fence besides its key bytes (the key's vector, its
/// head, the count, the Fenwick cell).
const FENCE_OVERHEAD: usize = 24 + 8 + 8 + 8;

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

/// Prefix sums of block counts, with search by position.
#[derive(Debug, Default)]
struct Fenwick {
    /// 1-based cells.
    cells: Vec<u64>,
}

impl Fenwick {
    fn build(counts: &[u64]) -> Fenwick {
        let n = counts.len();
        let mut cells = vec![0u64; n + 1];
        for i in 1..=n {
            cells[i] = cells[i].wrapping_add(counts[i - 1]);
            let up = i + (i & i.wrapping_neg());
            if up <= n {
                cells[up] = cells[up].wrapping_add(cells[i]);
            }
        }
        Fenwick { cells }
    }

    /// Adds `delta` to block `i`'s count.
    fn add(&mut self, i: usize, delta: i64) {
        let mut i = i + 1;
        while i < self.cells.len() {
            self.cells[i] = self.cells[i].wrapping_add(delta as u64);
            i += i & i.wrapping_neg();
        }
    }

    /// The sum of the counts of blocks `0..i`.
    fn before(&self, i: usize) -> u64 {
        let (mut sum, mut i) = (0u64, i.min(self.cells.len().saturating_sub(1)));
        while i > 0 {
            sum = sum.wrapping_add(self.cells[i]);
            i -= i & i.wrapping_neg();
        }
        sum
    }

    /// The block holding position `pos` (counting from 0 over all blocks'
    /// keys) and the number of keys in the blocks before it; `pos` must be
    /// below the total.
    fn find(&self, pos: u64) -> (usize, u64) {
        let n = self.cells.len().saturating_sub(1);
        let mut step = if n == 0 { 0 } else { 1usize << (usize::BITS - 1 - n.leading_zeros()) };
        let (mut at, mut left) = (0usize, pos);
        while step > 0 {
            if at + step <= n && self.cells[at + step] <= left {
                at += step;
                left -= self.cells[at];
            }
            step >>= 1;
        }
        (at, pos - left)
    }
}

/// The rank index of one range.
#[derive(Debug)]
struct Counted {
    /// The range's prefix.
    prefix: Vec<u8>,
    /// Each block's first key, ascending; the first is the prefix itself.
    fences: Vec<Vec<u8>>,
    /// The first 8 bytes of each fence past the prefix, as a big-endian
    /// number (zero-padded): the search for a key's block compares these
    /// and reads whole fences only where they tie (a sorted set's fences
    /// begin with the score, so rarely), instead of ~14 memcmps of keys
    /// that share their first ~20 bytes.
    heads: Vec<u64>,
    /// The committed keys in `[fences[i], fences[i + 1])`.
    counts: Vec<u64>,
    /// Keys per block when one is cut.
    block: u64,
    sums: Fenwick,
    total: u64,
    bytes: usize,
    /// When it last answered (for eviction).
    used: u64,
}

impl Counted {
    /// Indexes every committed key under `prefix` (one scan), about
    /// `size` of them.
    fn build(db: &Db, prefix: &[u8], size: u64) -> Result<Counted, DbError> {
        let mut c = Counted {
            prefix: prefix.to_vec(),
            fences: vec![prefix.to_vec()],
            heads: Vec::new(),
            counts: vec![0],
            block: block_for(size, prefix.len()),
            sums: Fenwick::default(),
            total: 0,
            bytes: 0,
            used: 0,
        };
        for kv in db.scan_prefix(prefix) {
            let (k, _) = kv?;
            if *c.counts.last().unwrap_or(&0) == c.block {
                c.fences.push(k);
                c.counts.push(0);
            }
            if let Some(n) = c.counts.last_mut() {
                *n += 1;
            }
        }
        c.reindex();
        Ok(c)
    }

    /// Recomputes the sums, total and size after the blocks changed.
    fn reindex(&mut self) {
        let skip = self.prefix.len();
        self.heads = self.fences.iter().map(|f| head(f, skip)).collect();
        self.sums = Fenwick::build(&self.counts);
        self.total = self.counts.iter().sum();
        self.bytes = self.fences.iter().map(|f| f.len() + FENCE_OVERHEAD).sum();
    }

    /// The block whose range holds `key` (a key under the prefix).
    fn block_of(&self, key: &[u8]) -> usize {
        let h = head(key, self.prefix.len());
        let lo = self.heads.partition_point(|&x| x < h);
        let ties = self.heads[lo..].partition_point(|&x| x == h);
        (lo + self.fences[lo..lo + ties].partition_point(|f| f.as_slice() <= key)).saturating_sub(1)
    }

    /// The bound past block `i`'s keys.
    fn block_end(&self, i: usize) -> Bound<Vec<u8>> {
        match self.fences.get(i + 1) {
            Some(f) => Bound::Excluded(f.clone()),
            None => match crate::encoding::prefix_end(&self.prefix) {
                Some(end) => Bound::Excluded(end),
                None => Bound::Unbounded,
            },
        }
    }

    /// The committed keys before `at` (a range's start bound: before
    /// `Included(x)` are the keys below x; before `Excluded(x)`, those up
    /// to x).
    fn before(&self, db: &Db, at: Bound<&[u8]>) -> Result<u64, Miss> {
        let (x, upper) = match at {
            Bound::Unbounded => return Ok(0),
            Bound::Included(x) => (x, Bound::Excluded(x.to_vec())),
            Bound::Excluded(x) => (x, Bound::Included(x.to_vec())),
        };
        if !x.starts_with(&self.prefix) {
            return Ok(if x < self.prefix.as_slice() { 0 } else { self.total });
        }
        let i = self.block_of(x);
        let limit = self.counts[i];
        let mut n = 0u64;
        for kv in db.scan((Bound::Included(self.fences[i].clone()), upper)) {
            kv?;
            n += 1;
            if n > limit {
                return Err(Miss::Stale);
            }
        }
        Ok(self.sums.before(i) + n)
    }

    /// The committed key at position `pos`, `None` past the end.
    fn nth(&self, db: &Db, pos: u64) -> Result<Option<Vec<u8>>, Miss> {
        if pos >= self.total {
            return Ok(None);
        }
        let (i, base) = self.sums.find(pos);
        let skip = (pos - base) as usize;
        let range = (Bound::Included(self.fences[i].clone()), self.block_end(i));
        match db.scan(range).nth(skip) {
            Some(kv) => Ok(Some(kv?.0)),
            None => Err(Miss::Stale),
        }
    }

    /// Applies committed changes: `(key, +1)` for a key added, `(key, -1)`
    /// for one removed; then cuts blocks grown too big and joins ones
    /// grown too small.
    fn apply(&mut self, db: &Db, changes: &[(Vec<u8>, i64)]) -> Result<(), Miss> {
        let mut touched = BTreeSet::new();
        for (k, d) in changes {
            let i = self.block_of(k);
            let n = self.counts[i] as i64 + d;
            if n < 0 {
                return Err(Miss::Stale);
            }
            self.counts[i] = n as u64;
            self.sums.add(i, *d);
            self.total = (self.total as i64 + d) as u64;
            touched.insert(i);
        }
        let mut reshaped = false;
        // From the last block down, so that reshaping one leaves the
        // indices of those still to visit as they were.
        for i in touched.into_iter().rev() {
            if i >= self.counts.len() {
                continue;
            }
            if self.counts[i] > 2 * self.block {
                self.cut(db, i)?;
                reshaped = true;
            } else if self.counts[i] < self.block / 4 {
                if i > 0 && self.counts[i - 1] + self.counts[i] <= self.block {
                    self.join(i - 1);
                    reshaped = true;
                } else if i + 1 < self.counts.len() && self.counts[i] + self.counts[i + 1] <= self.block {
                    self.join(i);
                    reshaped = true;
                }
            }
        }
        if reshaped {
            self.reindex();
        }
        Ok(())
    }

    /// Cuts block `i` into blocks of `block` keys (reads its keys).
    fn cut(&mut self, db: &Db, i: usize) -> Result<(), Miss> {
        let range = (Bound::Included(self.fences[i].clone()), self.block_end(i));
        let (mut fences, mut counts) = (Vec::new(), Vec::new());
        let mut n = 0u64;
        for kv in db.scan(range) {
            let (k, _) = kv?;
            if n % self.block == 0 {
                // The block keeps its own fence (the prefix, for the first block).
                fences.push(if n == 0 { self.fences[i].clone() } else { k });
                counts.push(0);
            }
            if let Some(c) = counts.last_mut() {
                *c += 1;
            }
            n += 1;
        }
        if n != self.counts[i] {
            return Err(Miss::Stale);
        }
        self.fences.splice(i..=i, fences);
        self.counts.splice(i..=i, counts);
        Ok(())
    }

    /// Joins block `i + 1` into block `i`.
    fn join(&mut self, i: usize) {
        let next = self.counts.remove(i + 1);
        self.fences.remove(i + 1);
        self.counts[i] += next;
    }
}

impl Counted {
    /// Checks the index against the pool: fences ascending from the
    /// prefix, every block's count what the pool holds there and within
    /// its bound, the sums and the total those counts'.
    fn check(&self, db: &Db) -> Result<(), String> {
        let name = String::from_utf8_lossy(&self.prefix);
        if self.fences.first() != Some(&self.prefix) || self.fences.len() != self.counts.len() {
            return Err(format!("rank index {name}: the first fence is not the prefix"));
        }
        if self.fences.windows(2).any(|w| w[0] >= w[1] || !w[1].starts_with(&self.prefix)) {
            return Err(format!("rank index {name}: fences out of order or outside the range"));
        }
        if self.heads.len() != self.fences.len()
            || self.fences.iter().zip(&self.heads).any(|(f, &h)| head(f, self.prefix.len()) != h)
        {
            return Err(format!("rank index {name}: the fences' heads disagree with the fences"));
        }
        for (i, &n) in self.counts.iter().enumerate() {
            let held = db.scan((Bound::Included(self.fences[i].clone()), self.block_end(i))).count() as u64;
            if held != n || n > 2 * self.block {
                return Err(format!("rank index {name}: block {i} counts {n}, the pool holds {held}"));
            }
            if self.sums.before(i + 1) - self.sums.before(i) != n {
                return Err(format!("rank index {name}: the sums disagree at block {i}"));
            }
        }
        if self.total != self.counts.iter().sum::<u64>() {
            return Err(format!("rank index {name}: the total is not the blocks' sum"));
        }
        Ok(())
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
            let mut c = Counted::build(db, prefix, size)?;
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

    #[test]
    fn fenwick_sums_and_finds_positions_across_empty_blocks() {
        let counts = [3u64, 0, 5, 0, 0, 2, 7];
        let f = Fenwick::build(&counts);
        let mut sum = 0;
        for (i, c) in counts.iter().enumerate() {
            assert_eq!(f.before(i), sum);
            sum += c;
        }
        assert_eq!(f.before(counts.len()), sum);
        let mut pos = 0;
        for (i, c) in counts.iter().enumerate() {
            for _ in 0..*c {
                assert_eq!(f.find(pos), (i, f.before(i)), "position {pos}");
                pos += 1;
            }
        }
    }
}
