//! One range's rank index: its committed keys cut into blocks, each named
//! by its first key (its *fence*) with the number of keys it holds.
//!
//! Blocks live in *pages* of at most `2 * PAGE` blocks, each page with
//! its own total, so that cutting or joining a block shifts one page's
//! vectors and sums nothing beyond the page totals: a flat array rebuilt
//! on every cut cost O(blocks) per ~64 inserts, which at 180,000 blocks
//! (a 5.8-million-member set whose scores only grow, every insert in the
//! last block) tripled a ZADD's CPU. A position is a sum over the page
//! totals before it (a few hundred at most, by [`super::block_for`]) and
//! over the counts before it in its page.

use std::collections::BTreeSet;
use std::ops::Bound;

use tembo_store::Db;

use super::{head, Miss, FENCE_OVERHEAD, MAX_BYTES};

/// Blocks per page when pages are formed; a page is split past twice
/// this, and one under a quarter of it joins a neighbour. (Unit tests
/// use pages of 4 blocks, so that their ranges of a few thousand keys
/// split and join pages too.)
const PAGE: usize = if cfg!(test) { 4 } else { 256 };

#[derive(Debug, Default)]
struct Page {
    /// Each block's first key, ascending.
    fences: Vec<Vec<u8>>,
    /// The first 8 bytes of each fence past the prefix, as a big-endian
    /// number (zero-padded): a key's block is found by comparing these,
    /// and whole fences only where they tie (a sorted set's fences begin
    /// with the score, so rarely), instead of memcmps of keys that share
    /// their first ~20 bytes.
    heads: Vec<u64>,
    /// The committed keys of each block.
    counts: Vec<u64>,
    total: u64,
}

impl Page {
    fn from_blocks(fences: Vec<Vec<u8>>, heads: Vec<u64>, counts: Vec<u64>) -> Page {
        let total = counts.iter().sum();
        Page { fences, heads, counts, total }
    }

    /// Moves the blocks from `at` on into a new page.
    fn split_off(&mut self, at: usize) -> Page {
        let p = Page::from_blocks(self.fences.split_off(at), self.heads.split_off(at), self.counts.split_off(at));
        self.total -= p.total;
        p
    }

    fn append(&mut self, mut other: Page) {
        self.fences.append(&mut other.fences);
        self.heads.append(&mut other.heads);
        self.counts.append(&mut other.counts);
        self.total += other.total;
    }
}

/// How many of the `n` items ordered by (head, fence) lie at or below
/// `key` (whose head is `h`), minus one: the last such item (0 if none).
fn last_at_or_below<'a>(
    n: usize,
    head_at: impl Fn(usize) -> u64,
    fence_at: impl Fn(usize) -> &'a [u8],
    h: u64,
    key: &[u8],
) -> usize {
    let (mut lo, mut hi) = (0, n);
    while lo < hi {
        let mid = (lo + hi) / 2;
        let at_or_below = match head_at(mid).cmp(&h) {
            std::cmp::Ordering::Less => true,
            std::cmp::Ordering::Greater => false,
            std::cmp::Ordering::Equal => fence_at(mid) <= key,
        };
        if at_or_below {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    lo.saturating_sub(1)
}

/// The rank index of one range.
#[derive(Debug)]
pub(super) struct Counted {
    /// The range's prefix (the first block's fence).
    pub(super) prefix: Vec<u8>,
    pages: Vec<Page>,
    /// Keys per block when one is cut; a block holds up to twice as many
    /// before it is cut again, and one down to a quarter of it joins a
    /// neighbour (if the two together fit in one block).
    block: u64,
    pub(super) total: u64,
    pub(super) bytes: usize,
    /// When it last answered (for eviction).
    pub(super) used: u64,
}

impl Counted {
    /// Indexes every committed key under `prefix` (one scan) in blocks of
    /// `block` keys, or of a larger power of two if the fences would take
    /// more than a quarter of [`MAX_BYTES`].
    pub(super) fn build(db: &Db, prefix: &[u8], block: u64) -> Result<Counted, Miss> {
        let (mut fences, mut counts) = (vec![prefix.to_vec()], vec![0u64]);
        let mut bytes = prefix.len() + FENCE_OVERHEAD;
        let mut block = block.max(1);
        for kv in db.scan_prefix(prefix) {
            let (k, _) = kv?;
            if *counts.last().unwrap_or(&0) >= block {
                bytes += k.len() + FENCE_OVERHEAD;
                fences.push(k);
                counts.push(0);
                if bytes > MAX_BYTES / 4 {
                    // Longer keys than the block size assumed: join pairs of blocks.
                    block *= 2;
                    (fences, counts, bytes) = halve(fences, counts);
                }
            }
            if let Some(n) = counts.last_mut() {
                *n += 1;
            }
        }
        let heads: Vec<u64> = fences.iter().map(|f| head(f, prefix.len())).collect();
        let mut c = Counted { prefix: prefix.to_vec(), pages: Vec::new(), block, total: 0, bytes, used: 0 };
        let (mut fences, mut heads, mut counts) = (fences.into_iter(), heads.into_iter(), counts.into_iter());
        loop {
            let page = Page::from_blocks(
                fences.by_ref().take(PAGE).collect(),
                heads.by_ref().take(PAGE).collect(),
                counts.by_ref().take(PAGE).collect(),
            );
            if page.fences.is_empty() {
                break;
            }
            c.total += page.total;
            c.pages.push(page);
        }
        Ok(c)
    }

    /// The (page, block) whose range holds `key` (a key under the prefix).
    fn locate(&self, key: &[u8]) -> (usize, usize) {
        let h = head(key, self.prefix.len());
        let pages = &self.pages;
        let p = last_at_or_below(pages.len(), |i| pages[i].heads[0], |i| &pages[i].fences[0], h, key);
        let pg = &pages[p];
        (p, last_at_or_below(pg.fences.len(), |i| pg.heads[i], |i| &pg.fences[i], h, key))
    }

    /// The keys in the blocks before block `b` of page `p`.
    fn keys_before(&self, p: usize, b: usize) -> u64 {
        self.pages[..p].iter().map(|pg| pg.total).sum::<u64>() + self.pages[p].counts[..b].iter().sum::<u64>()
    }

    /// The bound past the keys of block `b` of page `p`.
    fn block_end(&self, p: usize, b: usize) -> Bound<Vec<u8>> {
        let next = match self.pages[p].fences.get(b + 1) {
            Some(f) => Some(f),
            None => self.pages.get(p + 1).map(|pg| &pg.fences[0]),
        };
        match next {
            Some(f) => Bound::Excluded(f.clone()),
            None => match crate::encoding::prefix_end(&self.prefix) {
                Some(end) => Bound::Excluded(end),
                None => Bound::Unbounded,
            },
        }
    }

    /// The committed keys of block `b` of page `p` (at most its count,
    /// plus one to show that it holds more).
    fn block_keys(&self, db: &Db, p: usize, b: usize, upto: Bound<Vec<u8>>) -> Result<u64, Miss> {
        let limit = self.pages[p].counts[b];
        let mut n = 0u64;
        let mut it = db.scan((Bound::Included(self.pages[p].fences[b].clone()), upto));
        let (mut k, mut v) = (Vec::new(), Vec::new());
        while let Some(kv) = it.next_into(&mut k, &mut v) {
            kv?;
            n += 1;
            if n > limit {
                return Err(Miss::Stale);
            }
        }
        Ok(n)
    }

    /// The committed keys before `at` (a range's start bound: before
    /// `Included(x)` are the keys below x; before `Excluded(x)`, those up
    /// to x).
    pub(super) fn before(&self, db: &Db, at: Bound<&[u8]>) -> Result<u64, Miss> {
        let (x, upper) = match at {
            Bound::Unbounded => return Ok(0),
            Bound::Included(x) => (x, Bound::Excluded(x.to_vec())),
            Bound::Excluded(x) => (x, Bound::Included(x.to_vec())),
        };
        if !x.starts_with(&self.prefix) {
            return Ok(if x < self.prefix.as_slice() { 0 } else { self.total });
        }
        let (p, b) = self.locate(x);
        Ok(self.keys_before(p, b) + self.block_keys(db, p, b, upper)?)
    }

    /// The committed key at position `pos`, `None` past the end.
    pub(super) fn nth(&self, db: &Db, pos: u64) -> Result<Option<Vec<u8>>, Miss> {
        if pos >= self.total {
            return Ok(None);
        }
        let mut left = pos;
        for (p, pg) in self.pages.iter().enumerate() {
            if left >= pg.total {
                left -= pg.total;
                continue;
            }
            for (b, &n) in pg.counts.iter().enumerate() {
                if left >= n {
                    left -= n;
                    continue;
                }
                let range = (Bound::Included(pg.fences[b].clone()), self.block_end(p, b));
                // Two buffers for the whole walk, not two vectors a key.
                let mut it = db.scan(range);
                let (mut k, mut v) = (Vec::new(), Vec::new());
                for _ in 0..=left {
                    match it.next_into(&mut k, &mut v) {
                        Some(kv) => kv?,
                        None => return Err(Miss::Stale),
                    }
                }
                return Ok(Some(k));
            }
            return Err(Miss::Stale);
        }
        Err(Miss::Stale)
    }

    /// Applies committed changes: `(key, +1)` for a key added, `(key, -1)`
    /// for one removed; then cuts blocks grown too big and joins ones
    /// grown too small.
    pub(super) fn apply(&mut self, db: &Db, changes: &[(Vec<u8>, i64)]) -> Result<(), Miss> {
        let mut touched = BTreeSet::new();
        for (k, d) in changes {
            let (p, b) = self.locate(k);
            let pg = &mut self.pages[p];
            let (Some(n), Some(t), Some(total)) = (
                pg.counts[b].checked_add_signed(*d),
                pg.total.checked_add_signed(*d),
                self.total.checked_add_signed(*d),
            ) else {
                return Err(Miss::Stale);
            };
            (pg.counts[b], pg.total, self.total) = (n, t, total);
            touched.insert((p, b));
        }
        // From the last block down, so that reshaping one leaves the
        // positions of those still to visit as they were; pages are
        // reshaped after all blocks.
        let mut reshaped = false;
        for (p, b) in touched.into_iter().rev() {
            let Some(n) = self.pages.get(p).and_then(|pg| pg.counts.get(b)).copied() else { continue };
            if n > 2 * self.block {
                self.cut(db, p, b)?;
                reshaped = true;
            } else if n < self.block / 4 {
                reshaped |= self.join(p, b);
            }
        }
        if reshaped {
            self.repage();
        }
        Ok(())
    }

    /// Splits pages of more than twice [`PAGE`] blocks into pages of
    /// [`PAGE`], and joins pages under a quarter of it to a neighbour
    /// where the two fit in twice [`PAGE`].
    fn repage(&mut self) {
        let len = |pages: &[Page], p: usize| pages[p].fences.len();
        let mut p = 0;
        while p < self.pages.len() {
            if len(&self.pages, p) > 2 * PAGE {
                let rest = self.pages[p].split_off(PAGE);
                self.pages.insert(p + 1, rest);
            } else if len(&self.pages, p) < PAGE / 4
                && p + 1 < self.pages.len()
                && len(&self.pages, p) + len(&self.pages, p + 1) <= 2 * PAGE
            {
                let next = self.pages.remove(p + 1);
                self.pages[p].append(next);
                continue;
            } else if len(&self.pages, p) < PAGE / 4
                && p > 0
                && len(&self.pages, p - 1) + len(&self.pages, p) <= 2 * PAGE
            {
                let page = self.pages.remove(p);
                self.pages[p - 1].append(page);
                continue;
            }
            p += 1;
        }
    }

    /// Cuts block `b` of page `p` into blocks of `block` keys (reads its
    /// keys); the page may grow past twice [`PAGE`] blocks until `repage`.
    fn cut(&mut self, db: &Db, p: usize, b: usize) -> Result<(), Miss> {
        let range = (Bound::Included(self.pages[p].fences[b].clone()), self.block_end(p, b));
        let (mut fences, mut counts) = (Vec::new(), Vec::new());
        let mut n = 0u64;
        for kv in db.scan(range) {
            let (k, _) = kv?;
            if n % self.block == 0 {
                // The block keeps its own fence (the prefix, for the first block).
                fences.push(if n == 0 { self.pages[p].fences[b].clone() } else { k });
                counts.push(0);
            }
            if let Some(c) = counts.last_mut() {
                *c += 1;
            }
            n += 1;
        }
        let pg = &mut self.pages[p];
        if n != pg.counts[b] {
            return Err(Miss::Stale);
        }
        self.bytes += fences[1..].iter().map(|f| f.len() + FENCE_OVERHEAD).sum::<usize>();
        let heads: Vec<u64> = fences.iter().map(|f| head(f, self.prefix.len())).collect();
        pg.heads.splice(b..=b, heads);
        pg.fences.splice(b..=b, fences);
        pg.counts.splice(b..=b, counts);
        Ok(())
    }

    /// Joins block `b` of page `p` with a neighbour in its page if the two
    /// fit in one block; whether it did.
    fn join(&mut self, p: usize, b: usize) -> bool {
        let pg = &mut self.pages[p];
        let into = if b > 0 && pg.counts[b - 1] + pg.counts[b] <= self.block {
            b - 1
        } else if b + 1 < pg.counts.len() && pg.counts[b] + pg.counts[b + 1] <= self.block {
            b
        } else {
            return false;
        };
        let gone = pg.counts.remove(into + 1);
        pg.counts[into] += gone;
        pg.heads.remove(into + 1);
        self.bytes -= pg.fences.remove(into + 1).len() + FENCE_OVERHEAD;
        true
    }

    /// Checks the index against the pool: fences ascending from the
    /// prefix with their heads, every block's count what the pool holds
    /// there and within its bound, page totals, total and size the
    /// counts' and fences'.
    pub(super) fn check(&self, db: &Db) -> Result<(), String> {
        let name = String::from_utf8_lossy(&self.prefix);
        let err = |what: String| Err(format!("rank index {name}: {what}"));
        if self.pages.first().and_then(|pg| pg.fences.first()) != Some(&self.prefix) {
            return err("the first fence is not the prefix".into());
        }
        let (mut total, mut bytes, mut last): (u64, usize, Option<&[u8]>) = (0, 0, None);
        for (p, pg) in self.pages.iter().enumerate() {
            let n = pg.fences.len();
            if n == 0 || n > 2 * PAGE || pg.heads.len() != n || pg.counts.len() != n {
                return err(format!("page {p} holds {n} blocks, {} heads, {} counts", pg.heads.len(), pg.counts.len()));
            }
            if pg.total != pg.counts.iter().sum::<u64>() {
                return err(format!("page {p}'s total is not its blocks' sum"));
            }
            for b in 0..n {
                let f = &pg.fences[b];
                if last.is_some_and(|l| l >= f.as_slice()) || !f.starts_with(&self.prefix) {
                    return err(format!("fence {p}.{b} out of order or outside the range"));
                }
                if pg.heads[b] != head(f, self.prefix.len()) {
                    return err(format!("fence {p}.{b}'s head disagrees with it"));
                }
                let held = db.scan((Bound::Included(f.clone()), self.block_end(p, b))).count() as u64;
                if held != pg.counts[b] || held > 2 * self.block {
                    return err(format!("block {p}.{b} counts {}, the pool holds {held}", pg.counts[b]));
                }
                last = Some(f);
                bytes += f.len() + FENCE_OVERHEAD;
            }
            total += pg.total;
        }
        if total != self.total || bytes != self.bytes {
            return err(format!(
                "total {} and size {} disagree with the blocks' {total} and {bytes}",
                self.total, self.bytes
            ));
        }
        Ok(())
    }
}

/// Every other fence of `fences` (the first kept), each block with the
/// next one's count added: blocks twice as big.
fn halve(fences: Vec<Vec<u8>>, counts: Vec<u64>) -> (Vec<Vec<u8>>, Vec<u64>, usize) {
    let counts: Vec<u64> = counts.chunks(2).map(|c| c.iter().sum()).collect();
    let fences: Vec<Vec<u8>> = fences.into_iter().step_by(2).collect();
    let bytes = fences.iter().map(|f| f.len() + FENCE_OVERHEAD).sum();
    (fences, counts, bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_last_item_at_or_below_a_key_breaks_head_ties_by_the_whole_key() {
        let fences: Vec<&[u8]> = vec![b"", b"a", b"b\x00", b"b\x01", b"b\x02", b"c"];
        let heads: Vec<u64> = fences.iter().map(|f| head(f, 0)).collect();
        let find = |key: &[u8]| last_at_or_below(fences.len(), |i| heads[i], |i| fences[i], head(key, 0), key);
        assert_eq!(find(b""), 0);
        assert_eq!(find(b"a"), 1);
        assert_eq!(find(b"b"), 1);
        assert_eq!(find(b"b\x00"), 2);
        assert_eq!(find(b"b\x01\xff"), 3);
        assert_eq!(find(b"b\x03"), 4);
        assert_eq!(find(b"zz"), 5);
    }
}
