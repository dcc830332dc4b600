//! Range scans at a version, forward and reverse.
//!
//! An iterator keeps the version it reads, the bound where the next leaf
//! starts and a copy of the last leaf's parent: the next leaf is the child
//! of the parent's next (reverse: previous) entry visible at the version,
//! and only when the parent has none does the scan descend from the root
//! again. A version never changes once committed and what it sees is
//! neither overwritten nor freed while it is retained, so both ways are
//! exact however the writer reshapes the tree meanwhile.
//!
//! A leaf visit keeps only the *records* of the matching entries; each
//! pair is copied out when the caller asks for it. A short scan (YCSB E
//! takes 1–100 pairs) so pays for the pairs it reads, not for the whole
//! leaf's values and their checksums. The matching entries are found by
//! binary search on the slots' prefix words (no record is read to decide
//! that an entry is in range), their records' first lines are prefetched
//! together, and each value is prefetched while the one before it is
//! copied. The records stay valid in between: a record visible at a
//! retained version is never reclaimed (the version is pinned by the
//! iterator, or retained by the caller of `scan_at`), and node copies
//! share records rather than move them.

use std::collections::VecDeque;
use std::ops::Bound;
use std::sync::Arc;

use crate::entry::{key_prefix_at, Entry, ReadAt};
use crate::error::{CddsError, Result};
use crate::node::{self, NodeCopy};
use crate::pins::PinGuard;
use crate::record;
use crate::search;
use crate::tree::TreeCore;

/// A key and its value.
pub type KeyValue = (Vec<u8>, Vec<u8>);

/// Iterator over a key range at one version.
#[derive(Debug)]
pub struct Iter<'t> {
    tree: &'t TreeCore,
    version: u64,
    _pin: Option<PinGuard<'t>>,
    lo: Bound<Vec<u8>>,
    hi: Bound<Vec<u8>>,
    reverse: bool,
    /// The original value of the bound the scan moves as it goes (`lo`
    /// forward, `hi` in reverse): every pair is checked against the whole
    /// range, so a damaged leaf's misplaced key is an error, not a key
    /// outside what the caller asked for.
    start: Bound<Vec<u8>>,
    /// The key last returned (see `returned`): each next one must
    /// follow it, so that a damaged leaf's keys out of order are an error
    /// rather than a scan that goes back (a caller resuming after the last
    /// key it got would loop for ever).
    prev: Vec<u8>,
    /// Whether a key was returned (`prev` holds it).
    returned: bool,
    /// Records of the matching entries of the last leaf visited, in order.
    buf: VecDeque<u64>,
    done: bool,
    /// The last leaf's parent, so the next leaf is found from there
    /// instead of by a descent from the root.
    parent: Option<Parent>,
}

/// A copy of a leaf's parent, the index of the entry that led to the leaf,
/// and the aborted versions of a lazy recovery it was read under: a copy
/// read while one ran holds entries as the crash left them (an entry ended
/// by the aborted batch still carries that end), so its entries are judged
/// with that list, even once the recovery has finished.
#[derive(Debug)]
struct Parent {
    copy: Box<NodeCopy>,
    index: usize,
    aborted: Option<Arc<Vec<u64>>>,
    /// The parent's own lower bound (the lower bound of its first child).
    lower: Option<Vec<u8>>,
}

impl Parent {
    fn sees(&self, v: u64, e: &Entry) -> bool {
        e.visible_at(v, self.aborted.as_deref().map_or(&[], |a| a.as_slice()))
    }

    /// The entry visible at `v` after entry `i` (`reverse`: before it).
    fn step(&self, v: u64, i: usize, reverse: bool) -> Option<usize> {
        let entries = self.copy.entries();
        if reverse {
            (0..i).rev().find(|&j| self.sees(v, &entries[j]))
        } else {
            (i + 1..entries.len()).find(|&j| self.sees(v, &entries[j]))
        }
    }
}

impl TreeCore {
    /// Iterates `range` at the current version (pinned while the iterator lives).
    pub fn scan(&self, lo: Bound<Vec<u8>>, hi: Bound<Vec<u8>>, reverse: bool) -> Result<Iter<'_>> {
        let pin = self.pin()?;
        let mut it = self.scan_at(pin.version, lo, hi, reverse);
        it._pin = Some(pin);
        Ok(it)
    }

    /// Iterates `range` at version `v`, which the caller keeps retained.
    pub fn scan_at(&self, v: u64, lo: Bound<Vec<u8>>, hi: Bound<Vec<u8>>, reverse: bool) -> Iter<'_> {
        let start = if reverse { hi.clone() } else { lo.clone() };
        Iter {
            tree: self,
            version: v,
            _pin: None,
            lo,
            hi,
            reverse,
            start,
            prev: Vec::new(),
            returned: false,
            buf: VecDeque::new(),
            done: false,
            parent: None,
        }
    }
}

fn above_lo(k: &[u8], lo: &Bound<Vec<u8>>) -> bool {
    match lo {
        Bound::Unbounded => true,
        Bound::Included(l) => k >= l.as_slice(),
        Bound::Excluded(l) => k > l.as_slice(),
    }
}

fn below_hi(k: &[u8], hi: &Bound<Vec<u8>>) -> bool {
    match hi {
        Bound::Unbounded => true,
        Bound::Included(h) => k <= h.as_slice(),
        Bound::Excluded(h) => k < h.as_slice(),
    }
}

impl Iter<'_> {
    /// The version this iterator reads.
    pub fn version(&self) -> u64 {
        self.version
    }

    /// Loads the next leaf's matching pairs into `buf`.
    fn fill(&mut self) -> Result<()> {
        let _op = self.tree.pin()?; // keeps blocks this fill touches from being freed
        let pool = &**self.tree.pool();
        let v = self.version;
        // While a lazy recovery runs, slots are verified and aborted
        // versions honoured (see `recover`).
        let lazy = self.tree.lazy_aborted();
        let ab: &[u64] = lazy.as_deref().map_or(&[], |a| a.as_slice());
        let at = ReadAt { version: v, aborted: ab };
        let (copy, edge, lower) = match self.next_sibling(pool, at, lazy.is_some())? {
            Some(found) => found,
            None => self.descend(pool, at, &lazy)?,
        };
        self.take_leaf(pool, &copy, edge, lower, at)?;
        self.prefetch_next_leaf(pool);
        Ok(())
    }

    /// Starts fetching the next leaf (1 KiB) while the caller consumes
    /// this one: its parent entry's record was prefetched when this leaf
    /// was found, so reading the child pointer rarely waits.
    fn prefetch_next_leaf(&self, pool: &tembo_pmem::Pool) {
        if self.done {
            return;
        }
        let Some(parent) = &self.parent else { return };
        if let Some(j) = parent.step(self.version, parent.index, self.reverse) {
            if let Ok(child) = search::child_of(pool, &parent.copy.entries()[j]) {
                pool.prefetch(child, node::NODE_BYTES);
            }
        }
    }

    /// Reads node `n`; `checked` while a lazy recovery runs (trusting nothing).
    fn read_node(&self, pool: &tembo_pmem::Pool, n: u64, at: ReadAt<'_>, checked: bool) -> Result<Box<NodeCopy>> {
        if checked {
            node::read_checked(pool, n, self.tree.session, at)
        } else {
            node::read(pool, n, self.tree.session)
        }
    }

    /// The leaf after the last one (`reverse`: before it), found in the
    /// last leaf's parent (`None` when the parent has no further entry
    /// visible at the scan's version, or none is known): with its upper and
    /// lower bounds.
    ///
    /// The parent's copy stays exact for the scan's version: entries
    /// visible at a version are never overwritten while it is retained
    /// (the scan pins it, or its caller retains it), and neither is a node
    /// reachable at it freed, so its child pointers still lead to what
    /// that version holds.
    fn next_sibling(&mut self, pool: &tembo_pmem::Pool, at: ReadAt<'_>, checked: bool) -> Result<Option<Found>> {
        let Some(parent) = self.parent.take() else { return Ok(None) };
        let (v, i) = (at.version, parent.index);
        let entries = parent.copy.entries();
        let Some(j) = parent.step(v, i, self.reverse) else { return Ok(None) };
        let e = entries[j];
        // A child's range: from the previous visible entry's key (or the
        // parent's own lower bound) up to its entry's key.
        let upper = search::entry_key(pool, &e)?;
        let lower = if self.reverse {
            match parent.step(v, j, true) {
                Some(q) => search::entry_key(pool, &entries[q])?,
                None => parent.lower.clone(),
            }
        } else {
            search::entry_key(pool, &entries[i])?
        };
        let child = search::child_of(pool, &e)?;
        // The entry after it leads to the next leaf: fetch its record now.
        if let Some(k) = parent.step(v, j, self.reverse) {
            pool.prefetch(entries[k].rec, 64);
        }
        let copy = self.read_node(pool, child, at, checked)?;
        if copy.level != 0 {
            return Err(CddsError::invariant("a level-1 node's child is not a leaf", child));
        }
        self.parent = Some(Parent { index: j, ..parent });
        Ok(Some((copy, Some(upper), lower)))
    }

    /// Descends from the root to the leaf where the scan goes on, with its
    /// upper and lower bounds; remembers the leaf's parent.
    ///
    /// Nodes above level 1 are searched in place on the lock-free path
    /// point reads take ([`node::RawNode`], retried if a writer changed the
    /// node meanwhile): only the level-1 node (kept as the parent) and the
    /// leaf are copied. The bounds' keys are read once, from the deepest
    /// entries that give them, rather than at every level.
    fn descend(&mut self, pool: &tembo_pmem::Pool, at: ReadAt<'_>, lazy: &Option<Arc<Vec<u64>>>) -> Result<Found> {
        let (v, ab) = (at.version, at.aborted);
        let mut n = self.tree.meta.root(pool)?;
        // Forward: the leaf holding the smallest key >= lo; its upper bound
        // is the deepest chosen entry's key. Reverse: the leaf holding the
        // largest key <= hi; its lower bound is the deepest previous entry's key.
        let (seek, at_or_above): (Option<&[u8]>, bool) = if self.reverse {
            match &self.hi {
                Bound::Unbounded => (None, false),
                Bound::Included(h) => (Some(h.as_slice()), false),
                Bound::Excluded(h) => (Some(h.as_slice()), true),
            }
        } else {
            match &self.lo {
                Bound::Unbounded => (Some(&[][..]), false),
                Bound::Included(l) | Bound::Excluded(l) => (Some(l.as_slice()), false),
            }
        };
        // The entries whose keys bound the leaf: the deepest chosen one
        // (forward: its upper bound; `None`: none chosen yet, +inf) and the
        // deepest previous visible one (its lower bound).
        let mut edge: Option<Entry> = None;
        let mut lower: Option<Entry> = None;
        // In place down to level 2 (the child of a level-2 node is the
        // parent to copy); while a lazy recovery runs every node is read
        // checked (copied).
        let mut in_place = lazy.is_none();
        let mut raw = node::RawNode::default();
        let mut depth = 0;
        let copy = loop {
            depth += 1;
            if depth > 64 {
                return Err(CddsError::invariant("tree deeper than 64 levels (a cycle?)", n));
            }
            if in_place {
                raw.load(pool, n, self.tree.session)?;
                if raw.level() >= 2 {
                    let step = raw_inner_step(pool, &raw, n, seek, at_or_above, v);
                    if !raw.validate() {
                        depth -= 1;
                        continue;
                    }
                    let (e, prev) = step?;
                    edge = Some(e);
                    lower = prev.or(lower);
                    n = search::child_of(pool, &e)?;
                    in_place = raw.level() > 2;
                    continue;
                }
                in_place = false;
            }
            let copy = self.read_node(pool, n, at, lazy.is_some())?;
            if copy.level == 0 {
                break copy;
            }
            let i = match seek {
                Some(k) => search::child_index(
                    pool,
                    &copy,
                    n,
                    k,
                    key_prefix_at(k, copy.plen),
                    ReadAt { version: v, aborted: ab },
                    at_or_above,
                )?,
                None => (0..copy.entries().len())
                    .rev()
                    .find(|&i| copy.entries()[i].visible_at(v, ab))
                    .ok_or_else(|| CddsError::invariant("inner node with no visible entry", n))?,
            };
            let e = copy.entries()[i];
            edge = Some(e);
            // A level-1 node's own lower bound, kept with its copy below.
            let node_lower = if copy.level == 1 { key_of(pool, lower.as_ref())? } else { None };
            if let Some(p) = (0..i).rev().find(|&j| copy.entries()[j].visible_at(v, ab)) {
                lower = Some(copy.entries()[p]);
            }
            n = search::child_of(pool, &e)?;
            if copy.level == 1 {
                self.parent = Some(Parent { copy, index: i, aborted: lazy.clone(), lower: node_lower });
            }
        };
        let edge = edge.map(|e| search::entry_key(pool, &e)).transpose()?;
        Ok((copy, edge, key_of(pool, lower.as_ref())?))
    }

    /// Keeps the records of `copy`'s entries in range, and moves the scan's
    /// bound past the leaf (or ends it).
    fn take_leaf(
        &mut self,
        pool: &tembo_pmem::Pool,
        copy: &NodeCopy,
        edge: Option<Option<Vec<u8>>>,
        lower: Option<Vec<u8>>,
        at: ReadAt<'_>,
    ) -> Result<()> {
        // The leaf was read under `at`'s aborted list; judge it by the same.
        let (v, ab) = (at.version, at.aborted);
        // The leaf's keys lie in [lower, upper): the bounds' positions are
        // found by binary search on the slots' prefix words, so only the
        // records the scan returns are read, and those are prefetched
        // together (their misses overlap instead of queueing one by one).
        let upper = edge.clone().flatten();
        let range = LeafRange { lower: lower.as_deref(), upper: upper.as_deref(), plen: copy.plen };
        let entries = copy.entries();
        let start = match &self.lo {
            Bound::Unbounded => 0,
            Bound::Included(l) => range.position(pool, entries, l, false)?,
            Bound::Excluded(l) => range.position(pool, entries, l, true)?,
        };
        let end = match &self.hi {
            Bound::Unbounded => entries.len(),
            Bound::Included(h) => range.position(pool, entries, h, true)?,
            Bound::Excluded(h) => range.position(pool, entries, h, false)?,
        };
        let mut got: Vec<u64> = entries
            .get(start..end.max(start))
            .unwrap_or(&[])
            .iter()
            .filter(|e| e.visible_at(v, ab))
            .map(|e| e.rec)
            .collect();
        for &rec in &got {
            pool.prefetch(rec, RECORD_PREFETCH);
        }
        if self.reverse {
            got.reverse();
            match lower {
                Some(l) if above_lo(&l, &self.lo) => self.hi = Bound::Excluded(l),
                _ => self.done = true,
            }
        } else {
            match edge.flatten() {
                Some(u) if below_hi(&u, &self.hi) => self.lo = Bound::Included(u),
                _ => self.done = true,
            }
        }
        self.buf.extend(got);
        Ok(())
    }
}

/// A leaf, its upper bound (`Some(None)`: none) and its lower bound.
type Found = (Box<NodeCopy>, Option<Option<Vec<u8>>>, Option<Vec<u8>>);

/// Bytes of each returned record prefetched when its leaf is visited: the
/// header, the key and the start of the value.
const RECORD_PREFETCH: u64 = 128;
/// Most bytes of the next record's value prefetched while one is copied.
const VALUE_PREFETCH: u64 = 4096;

/// Where a leaf's key range lies, for placing scan bounds among its entries.
struct LeafRange<'a> {
    /// Smallest key the leaf may hold (`None`: no lower limit).
    lower: Option<&'a [u8]>,
    /// The leaf holds keys below this (`None`: no upper limit).
    upper: Option<&'a [u8]>,
    /// Bytes every key of the range shares (the slots' prefix words start after them).
    plen: usize,
}

impl LeafRange<'_> {
    /// The first entry whose key is `>= key` (`strict`: `> key`). A key
    /// outside the leaf's range is below or above every entry; one inside
    /// shares the range's prefix, so the slots' prefix words order it.
    fn position(
        &self,
        pool: &tembo_pmem::Pool,
        entries: &[crate::entry::Entry],
        key: &[u8],
        strict: bool,
    ) -> Result<usize> {
        if self.lower.is_some_and(|low| key < low) {
            return Ok(0);
        }
        if self.upper.is_some_and(|up| key >= up) {
            return Ok(entries.len());
        }
        search::bound(pool, entries, key, key_prefix_at(key, self.plen), strict)
    }
}

impl Iter<'_> {
    /// Copies the key and value of a record found by `fill` into `key`
    /// and `value` (cleared first).
    fn pair_into(&mut self, rec: u64, key: &mut Vec<u8>, value: &mut Vec<u8>) -> Result<()> {
        let pool = &**self.tree.pool();
        let got = record::header(pool, rec).and_then(|h| {
            key.clear();
            key.extend_from_slice(record::key(pool, rec, &h)?);
            let (lo, hi) = if self.reverse { (&self.lo, &self.start) } else { (&self.start, &self.hi) };
            if !above_lo(key, lo) || !below_hi(key, hi) {
                return Err(CddsError::invariant(
                    "a scan met a key outside its range (a leaf's keys out of order)",
                    rec,
                ));
            }
            let follows = if self.reverse { key.as_slice() < self.prev.as_slice() } else { **key > *self.prev };
            if !follows && self.returned {
                return Err(CddsError::invariant("a scan met keys out of order (a damaged leaf)", rec));
            }
            self.prev.clear();
            self.prev.extend_from_slice(key);
            self.returned = true;
            record::value_into(pool, rec, &h, value)
        });
        if got.is_err() {
            self.done = true;
            self.buf.clear();
        }
        got
    }

    /// The record of the next pair (`None` at the end).
    fn advance(&mut self) -> Option<Result<u64>> {
        loop {
            if let Some(rec) = self.buf.pop_front() {
                // The next record's header is in cache (prefetched by
                // `fill`): fetch its value while this one is copied.
                if let Some(&next) = self.buf.front() {
                    let pool = &**self.tree.pool();
                    if let Ok(h) = record::header(pool, next) {
                        pool.prefetch(next, h.body_len().min(VALUE_PREFETCH));
                    }
                }
                return Some(Ok(rec));
            }
            if self.done {
                return None;
            }
            if let Err(e) = self.fill() {
                self.done = true;
                return Some(Err(e));
            }
        }
    }

    /// The next pair, copied into `key` and `value` (each cleared first),
    /// reusing their allocations: a loop over many pairs pays for no
    /// allocation per pair, as [`Iterator::next`] does. `None` at the end.
    ///
    /// # Errors
    /// As [`Iterator::next`]: invariant or pool errors (a damaged pool),
    /// after which the iterator ends.
    pub fn next_into(&mut self, key: &mut Vec<u8>, value: &mut Vec<u8>) -> Option<Result<()>> {
        Some(self.advance()?.and_then(|rec| self.pair_into(rec, key, value)))
    }
}

/// The key of a bounding entry (`None`: no entry, or the sentinel).
fn key_of(pool: &tembo_pmem::Pool, e: Option<&Entry>) -> Result<Option<Vec<u8>>> {
    match e {
        Some(e) => search::entry_key(pool, e),
        None => Ok(None),
    }
}

/// In a raw inner node: the entry visible at `v` whose child the descent
/// takes (the last visible one when `seek` is `None`), and the visible
/// entry before it. Meaningful only if the node validates afterwards.
fn raw_inner_step(
    pool: &tembo_pmem::Pool,
    raw: &node::RawNode<'_>,
    n: u64,
    seek: Option<&[u8]>,
    at_or_above: bool,
    v: u64,
) -> Result<(Entry, Option<Entry>)> {
    let i = match seek {
        Some(k) => search::child_rank_raw(pool, raw, n, k, key_prefix_at(k, raw.plen()), v, at_or_above)?,
        None => (0..raw.used())
            .rev()
            .find(|&i| raw.entry(i).visible_at(v, &[]))
            .ok_or_else(|| CddsError::invariant("inner node with no visible entry", n))?,
    };
    let prev = (0..i).rev().map(|j| raw.entry(j)).find(|e| e.visible_at(v, &[]));
    Ok((raw.entry(i), prev))
}

impl Iterator for Iter<'_> {
    type Item = Result<KeyValue>;

    fn next(&mut self) -> Option<Self::Item> {
        let (mut key, mut value) = (Vec::new(), Vec::new());
        Some(self.next_into(&mut key, &mut value)?.map(|()| (key, value)))
    }
}
