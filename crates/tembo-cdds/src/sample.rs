//! Uniform random pairs of a key range at one version
//! ([`TreeCore::sample`]), in O(height) expected node reads.
//!
//! The algorithm is `tembo_pmem::sample` (acceptance/rejection on node
//! capacity); this module reads the tree for it. The draw pins the current
//! version and reads every node at it, so a concurrent writer changes
//! nothing the draw sees (what a retained version sees is neither
//! overwritten nor freed), and only entries visible at that version count
//! as present: each of a node's [`NODE_SLOTS`] slots is "a child" only if
//! an entry visible at the version is there, so dead versions waiting for
//! the GC make draws fail more often but never skew them.
//!
//! A node carries the key range it covers (from its parent's entries)
//! only while that range straddles a bound of the sampled range: a node
//! wholly inside needs no key read to know all its children count.

use std::cell::OnceCell;
use std::ops::{Bound, Range, RangeBounds};
use std::sync::Arc;

use rand::RngCore;
use tembo_pmem::sample::{self, Pair, RangeTree, Step};
use tembo_pmem::Pool;

use crate::entry::{key_prefix_at, ReadAt};
use crate::error::{CddsError, Result};
use crate::node::{self, NodeCopy, NODE_SLOTS};
use crate::record;
use crate::scan::LeafRange;
use crate::search;
use crate::tree::TreeCore;

impl TreeCore {
    /// Up to `draws` pairs with keys in `(lo, hi)`, each drawn uniformly
    /// and independently (with replacement) from the current version,
    /// spending at most `max_attempts` descents; fewer come back when they
    /// run out (a range that is a small part of the nodes it spans), none
    /// when the range is empty. See `tembo_pmem::sample`.
    ///
    /// # Errors
    /// Invariant or pool errors (a damaged pool).
    pub fn sample(
        &self,
        lo: Bound<&[u8]>,
        hi: Bound<&[u8]>,
        draws: usize,
        max_attempts: usize,
        rng: &mut dyn RngCore,
    ) -> Result<Vec<Pair>> {
        let pin = self.pin()?;
        let lazy = self.lazy_aborted();
        let mut reader = Reader { tree: self, version: pin.version, lazy, lo, hi };
        sample::draw(&mut reader, draws, max_attempts, rng)
    }
}

/// Times [`Reader::step_in_place`] rereads a node a writer changed
/// meanwhile before it reads a copy instead.
const IN_PLACE_TRIES: usize = 8;

/// The tree at one version, restricted to `(lo, hi)`.
struct Reader<'t, 'k> {
    tree: &'t TreeCore,
    version: u64,
    /// The aborted versions while a lazy recovery runs (nodes are then
    /// read checked, trusting nothing; see `recover`).
    lazy: Option<Arc<Vec<u64>>>,
    lo: Bound<&'k [u8]>,
    hi: Bound<&'k [u8]>,
}

/// A node met by a draw: where it lies, and its copy once read.
struct Sampled {
    node: u64,
    level: u8,
    /// The node's whole key range lies in the sampled range.
    inside: bool,
    /// The node's key range, `[lower, upper)` (`None`: unbounded); known
    /// only when not `inside`.
    lower: Option<Vec<u8>>,
    upper: Option<Vec<u8>>,
    /// The node's copy and the indexes into `copy.entries()` of the
    /// entries visible at the version, in key order (its children or
    /// pairs): read when first needed. A node wholly inside the range is
    /// usually stepped through without one ([`Reader::step_in_place`]).
    read: OnceCell<(Box<NodeCopy>, Vec<u8>)>,
}

impl Sampled {
    fn new(node: u64, level: u8, inside: bool, lower: Option<Vec<u8>>, upper: Option<Vec<u8>>) -> Sampled {
        Sampled { node, level, inside, lower, upper, read: OnceCell::new() }
    }
}

impl Reader<'_, '_> {
    fn pool(&self) -> &Pool {
        self.tree.pool()
    }

    fn at(&self) -> ReadAt<'_> {
        ReadAt { version: self.version, aborted: self.lazy.as_deref().map_or(&[], |a| a.as_slice()) }
    }

    /// `n`'s copy and visible entries, read on first use.
    fn copy<'n>(&self, n: &'n Sampled) -> Result<(&'n NodeCopy, &'n [u8])> {
        if let Some((copy, visible)) = n.read.get() {
            return Ok((copy, visible));
        }
        let pool = self.pool();
        let copy = match self.lazy {
            Some(_) => node::read_checked(pool, n.node, self.tree.session, self.at())?,
            None => node::read(pool, n.node, self.tree.session)?,
        };
        if copy.level != n.level {
            return Err(CddsError::invariant("a child is not one level below its parent", n.node));
        }
        let at = self.at();
        let visible = (0..copy.entries().len()).filter(|&i| at.sees(&copy.entries()[i])).map(|i| i as u8).collect();
        let (copy, visible) = n.read.get_or_init(|| (copy, visible));
        Ok((copy, visible))
    }

    /// [`RangeTree::step`] for a node wholly inside the range, on the
    /// lock-free path point reads take ([`node::RawNode`]): `slot` is a
    /// rank in the node's order line, and only that entry is decoded. Each
    /// entry visible at the version has one rank, so each is still chosen
    /// with probability `1 / NODE_SLOTS`. `None` when a writer kept
    /// changing the node (the caller then reads a copy).
    fn step_in_place(&self, n: &Sampled, slot: usize) -> Result<Option<Step<Sampled>>> {
        let pool = self.pool();
        let mut raw = node::RawNode::default();
        for _ in 0..IN_PLACE_TRIES {
            raw.load(pool, n.node, self.tree.session)?;
            if raw.level() != n.level {
                if raw.validate() {
                    return Err(CddsError::invariant("a child is not one level below its parent", n.node));
                }
                continue;
            }
            let e = (slot < raw.used()).then(|| raw.entry(slot)).filter(|e| e.visible_at(self.version, &[]));
            let Some(e) = e else {
                if raw.validate() {
                    return Ok(Some(Step::Miss));
                }
                continue;
            };
            if n.level == 0 {
                if raw.validate() {
                    // Records are immutable, and kept while the version is pinned.
                    return self.record_pair(e.rec).map(|p| Some(Step::Pair(p)));
                }
                continue;
            }
            let child = search::child_of(pool, &e);
            if raw.validate() {
                return Ok(Some(Step::Child(Sampled::new(child?, n.level - 1, true, None, None))));
            }
        }
        Ok(None)
    }

    /// The pair in record `rec`, which must lie in the range.
    fn record_pair(&self, rec: u64) -> Result<Pair> {
        let pool = self.pool();
        let h = record::header(pool, rec)?;
        let key = record::key(pool, rec, &h)?.to_vec();
        if !self.in_range(&key) {
            return Err(CddsError::invariant("a random draw met a key outside its range (a damaged node)", rec));
        }
        Ok((key, record::value(pool, rec, &h)?))
    }

    /// Whether `[lower, upper)` lies in the sampled range.
    fn covers(&self, lower: Option<&[u8]>, upper: Option<&[u8]>) -> bool {
        let lo_ok = match (self.lo, lower) {
            (Bound::Unbounded, _) => true,
            (_, None) => false,
            (Bound::Included(l), Some(k)) => k >= l,
            (Bound::Excluded(l), Some(k)) => k > l,
        };
        let hi_ok = match (self.hi, upper) {
            (Bound::Unbounded, _) => true,
            (_, None) => false,
            // Keys below `u` are at most `h` when `u <= h`, or `u` is h's successor.
            (Bound::Included(h), Some(u)) => u <= h,
            (Bound::Excluded(h), Some(u)) => u <= h,
        };
        lo_ok && hi_ok
    }

    /// The visible position of the first entry at or after entry index `i`.
    fn position(visible: &[u8], i: usize) -> usize {
        visible.partition_point(|&v| (v as usize) < i)
    }

    /// An inner node's children overlapping the range (visible positions).
    fn inner_overlap(&self, n: &Sampled) -> Result<Range<usize>> {
        let pool = self.pool();
        let (copy, visible) = self.copy(n)?;
        let (lower, upper) = (n.lower.as_deref(), n.upper.as_deref());
        let len = visible.len();
        // Within [lower, upper) a key shares the node's prefix, so its
        // slots' prefix words place it; outside, it is below or above all.
        let within = |k: &[u8]| lower.map_or(true, |l| k >= l) && upper.map_or(true, |u| k < u);
        let at = self.at();
        let child_at = |k: &[u8], at_or_above: bool| -> Result<usize> {
            let pfx = key_prefix_at(k, copy.plen);
            let i = search::child_index(pool, copy, n.node, k, pfx, at, at_or_above)?;
            Ok(Self::position(visible, i))
        };
        let start = match self.lo {
            Bound::Unbounded => 0,
            Bound::Included(l) | Bound::Excluded(l) if within(l) => child_at(l, false)?,
            Bound::Included(l) | Bound::Excluded(l) => {
                if upper.is_some_and(|u| l >= u) {
                    return Ok(0..0);
                }
                0
            }
        };
        let last = match self.hi {
            Bound::Unbounded => len.saturating_sub(1),
            Bound::Included(h) if within(h) => child_at(h, false)?,
            Bound::Excluded(h) if within(h) => child_at(h, true)?,
            Bound::Included(h) | Bound::Excluded(h) => {
                if lower.is_some_and(|l| h < l) {
                    return Ok(0..0);
                }
                len.saturating_sub(1)
            }
        };
        Ok(start..(last + 1).max(start).min(len))
    }

    /// A leaf's pairs in the range (visible positions).
    fn leaf_overlap(&self, n: &Sampled) -> Result<Range<usize>> {
        let pool = self.pool();
        let (copy, visible) = self.copy(n)?;
        let range = LeafRange { lower: n.lower.as_deref(), upper: n.upper.as_deref(), plen: copy.plen };
        let entries = copy.entries();
        let start = match self.lo {
            Bound::Unbounded => 0,
            Bound::Included(l) => range.position(pool, entries, l, false)?,
            Bound::Excluded(l) => range.position(pool, entries, l, true)?,
        };
        let end = match self.hi {
            Bound::Unbounded => entries.len(),
            Bound::Included(h) => range.position(pool, entries, h, true)?,
            Bound::Excluded(h) => range.position(pool, entries, h, false)?,
        };
        let (a, b) = (Self::position(visible, start), Self::position(visible, end));
        Ok(a..b.max(a))
    }

    fn in_range(&self, k: &[u8]) -> bool {
        (self.lo, self.hi).contains(k)
    }
}

impl RangeTree for Reader<'_, '_> {
    type Node = Sampled;
    type Error = CddsError;

    fn root(&mut self) -> Result<Sampled> {
        let pool = self.pool();
        let root = self.tree.meta.root(pool)?;
        let level = node::level(pool, root)?;
        Ok(Sampled::new(root, level, self.covers(None, None), None, None))
    }

    fn is_leaf(&self, n: &Sampled) -> bool {
        n.level == 0
    }

    fn slots(&self, _leaf: bool) -> usize {
        NODE_SLOTS
    }

    fn overlap(&mut self, n: &Sampled) -> Result<Range<usize>> {
        if n.inside {
            Ok(0..self.copy(n)?.1.len())
        } else if n.level == 0 {
            self.leaf_overlap(n)
        } else {
            self.inner_overlap(n)
        }
    }

    fn child(&mut self, n: &Sampled, i: usize, overlap: &Range<usize>) -> Result<Sampled> {
        let pool = self.pool();
        let (copy, visible) = self.copy(n)?;
        let entries = copy.entries();
        let e = entries[visible[i] as usize];
        let child = search::child_of(pool, &e)?;
        if n.inside || (i > overlap.start && i + 1 < overlap.end) {
            return Ok(Sampled::new(child, n.level - 1, true, None, None));
        }
        // A child's range: from the previous visible entry's key (or the
        // node's own lower bound) up to its entry's key.
        let lower = match i {
            0 => n.lower.clone(),
            _ => search::entry_key(pool, &entries[visible[i - 1] as usize])?,
        };
        let upper = search::entry_key(pool, &e)?;
        let inside = self.covers(lower.as_deref(), upper.as_deref());
        Ok(Sampled::new(child, n.level - 1, inside, lower, upper))
    }

    fn pair(&mut self, n: &Sampled, i: usize) -> Result<Pair> {
        let (copy, visible) = self.copy(n)?;
        self.record_pair(copy.entries()[visible[i] as usize].rec)
    }

    fn too_deep(&self) -> CddsError {
        CddsError::invariant("tree deeper than 64 levels (a cycle?)", 0)
    }

    fn step(&mut self, n: &Sampled, slot: usize) -> Result<Step<Sampled>> {
        if n.inside && self.lazy.is_none() {
            if let Some(step) = self.step_in_place(n, slot)? {
                return Ok(step);
            }
        }
        let over = self.overlap(n)?;
        if !over.contains(&slot) {
            return Ok(Step::Miss);
        }
        if n.level == 0 {
            self.pair(n, slot).map(Step::Pair)
        } else {
            self.child(n, slot, &over).map(Step::Child)
        }
    }
}
