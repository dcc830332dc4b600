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

use std::ops::{Bound, Range};
use std::sync::Arc;

use rand::RngCore;
use tembo_pmem::sample::{self, Pair, RangeTree};
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

/// A node read for a draw.
struct Sampled {
    node: u64,
    copy: Box<NodeCopy>,
    /// Indexes into `copy.entries()` of the entries visible at the version,
    /// in key order: the node's children (pairs).
    visible: Vec<u8>,
    /// The node's whole key range lies in the sampled range.
    inside: bool,
    /// The node's key range, `[lower, upper)` (`None`: unbounded); known
    /// only when not `inside`.
    lower: Option<Vec<u8>>,
    upper: Option<Vec<u8>>,
}

impl Reader<'_, '_> {
    fn pool(&self) -> &Pool {
        self.tree.pool()
    }

    fn at(&self) -> ReadAt<'_> {
        ReadAt { version: self.version, aborted: self.lazy.as_deref().map_or(&[], |a| a.as_slice()) }
    }

    fn read(&self, n: u64, lower: Option<Vec<u8>>, upper: Option<Vec<u8>>, inside: bool) -> Result<Sampled> {
        let pool = self.pool();
        let copy = match self.lazy {
            Some(_) => node::read_checked(pool, n, self.tree.session, self.at())?,
            None => node::read(pool, n, self.tree.session)?,
        };
        let at = self.at();
        let visible = (0..copy.entries().len()).filter(|&i| at.sees(&copy.entries()[i])).map(|i| i as u8).collect();
        Ok(Sampled { node: n, copy, visible, inside, lower, upper })
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
    fn position(n: &Sampled, i: usize) -> usize {
        n.visible.partition_point(|&v| (v as usize) < i)
    }

    /// An inner node's children overlapping the range (visible positions).
    fn inner_overlap(&self, n: &Sampled) -> Result<Range<usize>> {
        let pool = self.pool();
        let (lower, upper) = (n.lower.as_deref(), n.upper.as_deref());
        let len = n.visible.len();
        // Within [lower, upper) a key shares the node's prefix, so its
        // slots' prefix words place it; outside, it is below or above all.
        let within = |k: &[u8]| lower.map_or(true, |l| k >= l) && upper.map_or(true, |u| k < u);
        let at = self.at();
        let child_at = |k: &[u8], at_or_above: bool| -> Result<usize> {
            let pfx = key_prefix_at(k, n.copy.plen);
            let i = search::child_index(pool, &n.copy, n.node, k, pfx, at, at_or_above)?;
            Ok(Self::position(n, i))
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
        let range = LeafRange { lower: n.lower.as_deref(), upper: n.upper.as_deref(), plen: n.copy.plen };
        let entries = n.copy.entries();
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
        let (a, b) = (Self::position(n, start), Self::position(n, end));
        Ok(a..b.max(a))
    }

    fn in_range(&self, k: &[u8]) -> bool {
        let lo_ok = match self.lo {
            Bound::Unbounded => true,
            Bound::Included(l) => k >= l,
            Bound::Excluded(l) => k > l,
        };
        let hi_ok = match self.hi {
            Bound::Unbounded => true,
            Bound::Included(h) => k <= h,
            Bound::Excluded(h) => k < h,
        };
        lo_ok && hi_ok
    }
}

impl RangeTree for Reader<'_, '_> {
    type Node = Sampled;
    type Error = CddsError;

    fn root(&mut self) -> Result<Sampled> {
        let root = self.tree.meta.root(self.pool())?;
        let inside = self.covers(None, None);
        self.read(root, None, None, inside)
    }

    fn is_leaf(&self, n: &Sampled) -> bool {
        n.copy.level == 0
    }

    fn slots(&self, _leaf: bool) -> usize {
        NODE_SLOTS
    }

    fn len(&self, n: &Sampled) -> usize {
        n.visible.len()
    }

    fn overlap(&mut self, n: &Sampled) -> Result<Range<usize>> {
        if n.inside {
            Ok(0..n.visible.len())
        } else if n.copy.level == 0 {
            self.leaf_overlap(n)
        } else {
            self.inner_overlap(n)
        }
    }

    fn child(&mut self, n: &Sampled, i: usize, overlap: &Range<usize>) -> Result<Sampled> {
        let pool = self.pool();
        let entries = n.copy.entries();
        let e = entries[n.visible[i] as usize];
        let child = search::child_of(pool, &e)?;
        let interior = n.inside || (i > overlap.start && i + 1 < overlap.end);
        let got = if interior {
            self.read(child, None, None, true)?
        } else {
            // A child's range: from the previous visible entry's key (or the
            // node's own lower bound) up to its entry's key.
            let lower = match i {
                0 => n.lower.clone(),
                _ => search::entry_key(pool, &entries[n.visible[i - 1] as usize])?,
            };
            let upper = search::entry_key(pool, &e)?;
            let inside = self.covers(lower.as_deref(), upper.as_deref());
            self.read(child, lower, upper, inside)?
        };
        if got.copy.level + 1 != n.copy.level {
            return Err(CddsError::invariant("a child is not one level below its parent", child));
        }
        Ok(got)
    }

    fn pair(&mut self, n: &Sampled, i: usize) -> Result<Pair> {
        let pool = self.pool();
        let rec = n.copy.entries()[n.visible[i] as usize].rec;
        let h = record::header(pool, rec)?;
        let key = record::key(pool, rec, &h)?.to_vec();
        if !self.in_range(&key) {
            return Err(CddsError::invariant("a random draw met a key outside its range (a damaged node)", rec));
        }
        Ok((key, record::value(pool, rec, &h)?))
    }

    fn too_deep(&self) -> CddsError {
        CddsError::invariant("tree deeper than 64 levels (a cycle?)", 0)
    }
}
