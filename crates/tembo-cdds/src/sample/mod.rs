//! Uniform random pairs of a key range at one version
//! ([`TreeCore::sample`]), in O(height) expected node reads.
//!
//! The algorithm is `tembo_pmem::sample` (acceptance/rejection on node
//! capacity); this module reads the tree for it. The draw pins the current
//! version and reads every node at it, so a concurrent writer changes
//! nothing the draw sees (what a retained version sees is neither
//! overwritten nor freed), and only entries visible at that version count
//! as present: a node's position holds "a child" only if an entry visible
//! at the version is there, so dead versions waiting for the GC make
//! draws fail more often but never skew them.
//!
//! The top of a draw and the nodes above it are read as copies
//! (`copied`), and so is every node while a lazy recovery runs (checked
//! copies then). Below the top, an attempt's steps read nodes in place on
//! the lock-free path point reads take (`in_place`), each step in one
//! validated read that decodes only the entry it lands on.
//!
//! A node carries the key range it covers (from its parent's entries)
//! only while that range straddles a bound of the sampled range: a node
//! wholly inside needs no key read to know all its children count.

mod copied;
mod in_place;

use std::cell::OnceCell;
use std::ops::{Bound, Range, RangeBounds};
use std::sync::Arc;

use rand::RngCore;
use tembo_pmem::sample::{self, Pair, RangeTree, Step};
use tembo_pmem::Pool;

use crate::entry::ReadAt;
use crate::error::{CddsError, Result};
use crate::node::{self, NodeCopy, NODE_SLOTS};
use crate::record;
use crate::tree::TreeCore;

impl TreeCore {
    /// Up to `draws` pairs with keys in `(lo, hi)`, each drawn uniformly
    /// and independently (with replacement) from the current version,
    /// spending descents from `budget` (decreased by those made); fewer
    /// come back when it runs out (a range that is a small part of the
    /// nodes it spans), none when the range is empty. See
    /// `tembo_pmem::sample`.
    ///
    /// # Errors
    /// Invariant or pool errors (a damaged pool).
    pub fn sample(
        &self,
        lo: Bound<&[u8]>,
        hi: Bound<&[u8]>,
        draws: usize,
        budget: &mut usize,
        rng: &mut dyn RngCore,
    ) -> Result<Vec<Pair>> {
        let pin = self.pin()?;
        let lazy = self.lazy_aborted();
        let mut reader = Reader { tree: self, version: pin.version, lazy, lo, hi };
        sample::draw(&mut reader, draws, budget, rng)
    }
}

/// The tree at one version, restricted to `(lo, hi)`.
struct Reader<'t, 'k> {
    tree: &'t TreeCore,
    version: u64,
    /// The aborted versions while a lazy recovery runs: nodes are then
    /// read as checked copies, trusting nothing (see `recover`).
    lazy: Option<Arc<Vec<u64>>>,
    lo: Bound<&'k [u8]>,
    hi: Bound<&'k [u8]>,
}

/// A node met by a draw.
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
    /// pairs), read when first needed (see `copied`).
    copy: OnceCell<(Box<NodeCopy>, Vec<u8>)>,
}

impl Sampled {
    fn new(node: u64, level: u8, inside: bool, lower: Option<Vec<u8>>, upper: Option<Vec<u8>>) -> Sampled {
        Sampled { node, level, inside, lower, upper, copy: OnceCell::new() }
    }
}

impl Reader<'_, '_> {
    fn pool(&self) -> &Pool {
        self.tree.pool()
    }

    fn at_version(&self) -> ReadAt<'_> {
        ReadAt { version: self.version, aborted: self.lazy.as_deref().map_or(&[], |a| a.as_slice()) }
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
            // Keys below `u` are all at most (below) `h` when `u <= h`.
            (Bound::Included(h) | Bound::Excluded(h), Some(u)) => u <= h,
        };
        lo_ok && hi_ok
    }

    /// Child `child` of `n`, reached through `entry` (its upper bound)
    /// after `prev` (the visible entry before it, whose key is its lower
    /// bound; `None`: `n`'s own lower bound); `interior`: it lies between
    /// the children that hold the range's bounds, wholly inside it.
    fn child_of(
        &self,
        n: &Sampled,
        child: u64,
        entry: &crate::entry::Entry,
        prev: Option<&crate::entry::Entry>,
        interior: bool,
    ) -> Result<Sampled> {
        if n.inside || interior {
            return Ok(Sampled::new(child, n.level - 1, true, None, None));
        }
        let pool = self.pool();
        let lower = match prev {
            Some(p) => crate::search::entry_key(pool, p)?,
            None => n.lower.clone(),
        };
        let upper = crate::search::entry_key(pool, entry)?;
        let inside = self.covers(lower.as_deref(), upper.as_deref());
        Ok(Sampled::new(child, n.level - 1, inside, lower, upper))
    }

    /// The pair in record `rec`, which must lie in the range.
    fn record_pair(&self, rec: u64) -> Result<Pair> {
        let pool = self.pool();
        let h = record::header(pool, rec)?;
        let key = record::key(pool, rec, &h)?.to_vec();
        if !(self.lo, self.hi).contains(key.as_slice()) {
            return Err(CddsError::invariant("a random draw met a key outside its range (a damaged node)", rec));
        }
        Ok((key, record::value(pool, rec, &h)?))
    }

    /// The positions of `n`'s children (pairs) that overlap (lie in) the
    /// range, among `len`, given `place(key, flag)`, the node's own search:
    /// in a leaf the first pair at or above `key` (above it: `flag`), in an
    /// inner node the child covering `key` (the first visible entry above
    /// it; at or above it: `flag`). The search holds only for keys of the
    /// node's range `[lower, upper)`, which share its prefix; a key
    /// outside is below or above every position.
    fn overlap_by(
        &self,
        n: &Sampled,
        len: usize,
        place: impl Fn(&[u8], bool) -> Result<usize>,
    ) -> Result<Range<usize>> {
        let (lower, upper) = (n.lower.as_deref(), n.upper.as_deref());
        let below = |k: &[u8]| lower.is_some_and(|l| k < l);
        let above = |k: &[u8]| upper.is_some_and(|u| k >= u);
        if n.level == 0 {
            let pos = |k: &[u8], strict: bool| match () {
                _ if below(k) => Ok(0),
                _ if above(k) => Ok(len),
                _ => place(k, strict),
            };
            let start = match self.lo {
                Bound::Unbounded => 0,
                Bound::Included(l) => pos(l, false)?,
                Bound::Excluded(l) => pos(l, true)?,
            };
            let end = match self.hi {
                Bound::Unbounded => len,
                Bound::Included(h) => pos(h, true)?,
                Bound::Excluded(h) => pos(h, false)?,
            };
            return Ok(start..end.max(start));
        }
        let start = match self.lo {
            Bound::Included(l) | Bound::Excluded(l) if above(l) => return Ok(0..0),
            Bound::Included(l) | Bound::Excluded(l) if !below(l) => place(l, false)?,
            _ => 0,
        };
        let last = match self.hi {
            Bound::Included(h) | Bound::Excluded(h) if below(h) => return Ok(0..0),
            Bound::Included(h) if !above(h) => place(h, false)?,
            Bound::Excluded(h) if !above(h) => place(h, true)?,
            _ => len.saturating_sub(1),
        };
        Ok(start..(last + 1).max(start).min(len))
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
        self.overlap_copied(n)
    }

    fn at(&mut self, n: &Sampled, i: usize, overlap: &Range<usize>) -> Result<Step<Sampled>> {
        self.at_copied(n, i, overlap)
    }

    fn too_deep(&self) -> CddsError {
        CddsError::invariant("tree deeper than 64 levels (a cycle?)", 0)
    }

    fn step(&mut self, n: &Sampled, slot: usize) -> Result<Step<Sampled>> {
        if self.lazy.is_none() {
            return self.step_in_place(n, slot);
        }
        let over = self.overlap(n)?;
        if !over.contains(&slot) {
            return Ok(Step::Miss);
        }
        self.at(n, slot, &over)
    }
}
