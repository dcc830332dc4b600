//! Uniform random pairs of a key range ([`Tree::sample`]) in O(height)
//! expected node reads: `tembo_pmem::sample`'s acceptance/rejection on
//! node capacity, over this tree's nodes.
//!
//! The draw holds the structure lock shared, so no inner node changes
//! under it, and reads each leaf under the leaf's read lock, one leaf at a
//! time (as point reads do), so a writer's in-place update is never seen
//! half done. An inner node has [`MAXK`]` + 1` child slots and a leaf
//! [`MAXK`] pair slots.

use std::ops::{Bound, Range, RangeBounds};

use rand::RngCore;
use tembo_pmem::sample::{self, Pair, RangeTree, Step};
use tembo_pmem::{PPtr, PoolOffset};

use super::node::{Reader, MAXK};
use super::{root_of, Tree};
use crate::error::{invariant, KaminoError, Result};
use crate::heap::ReadGuard;

impl Tree {
    /// Up to `draws` pairs with keys in `(lo, hi)`, each drawn uniformly
    /// and independently (with replacement), spending descents from
    /// `budget` (decreased by those made); fewer come back when it runs
    /// out, none when the range is empty. See `tembo_pmem::sample`. The
    /// structure lock is taken for [`SAMPLE_CHUNK`] descents at a time, so
    /// that a long draw holds back no split or merge for long; each leaf
    /// is read as it is then.
    ///
    /// # Errors
    /// [`KaminoError::Invariant`] or [`KaminoError::Pmem`] if the tree is
    /// damaged; [`KaminoError::LockTimeout`] if a leaf stays locked.
    pub fn sample(
        &self,
        lo: Bound<&[u8]>,
        hi: Bound<&[u8]>,
        draws: usize,
        budget: &mut usize,
        rng: &mut dyn RngCore,
    ) -> Result<Vec<Pair>> {
        let mut out = Vec::new();
        while out.len() < draws && *budget > 0 {
            let mut chunk = (*budget).min(SAMPLE_CHUNK);
            let before = chunk;
            let got = {
                let _s = self.shared();
                let mut r = Sampler { tree: self, rd: self.rd(), lo, hi };
                sample::draw(&mut r, draws - out.len(), &mut chunk, rng)?
            };
            *budget -= before - chunk;
            if got.is_empty() && chunk == before {
                break; // the range is empty
            }
            out.extend(got);
        }
        Ok(out)
    }
}

/// Descents a draw makes per hold of the structure lock.
pub const SAMPLE_CHUNK: usize = 256;

struct Sampler<'t, 'k> {
    tree: &'t Tree,
    rd: Reader<'t>,
    lo: Bound<&'k [u8]>,
    hi: Bound<&'k [u8]>,
}

/// A node as read for a draw; a leaf keeps its read lock.
struct Node<'t> {
    off: PoolOffset,
    level: u32,
    count: usize,
    /// The node lies wholly in the range (a child strictly between the
    /// overlapping children of its parent).
    inside: bool,
    _guard: Option<ReadGuard<'t>>,
}

impl<'t> Sampler<'t, '_> {
    /// Children of an inner node, pairs of a leaf.
    fn len(&self, n: &Node<'t>) -> usize {
        if n.level == 0 {
            n.count
        } else {
            n.count + 1
        }
    }

    /// Reads node `off`, one level below `parent` (none for the root); a
    /// leaf is locked, and its count read under the lock.
    fn read(&self, off: PoolOffset, inside: bool, parent: Option<u32>) -> Result<Node<'t>> {
        let (level, count) = self.rd.meta(off)?;
        if parent.is_some_and(|p| p.checked_sub(1) != Some(level)) {
            return Err(invariant("kamino.tree.balanced", off, "a child not one level below its parent"));
        }
        if level > 0 {
            return Ok(Node { off, level, count, inside, _guard: None });
        }
        let guard = self.tree.heap.read_lock(PPtr::<()>::new(off))?;
        let (_, count) = self.rd.meta(off)?;
        Ok(Node { off, level, count, inside, _guard: Some(guard) })
    }
}

impl<'t> RangeTree for Sampler<'t, '_> {
    type Node = Node<'t>;
    type Error = KaminoError;

    fn root(&mut self) -> Result<Node<'t>> {
        let root = root_of(self.rd.pool, self.tree.anchor)?;
        let inside = matches!((self.lo, self.hi), (Bound::Unbounded, Bound::Unbounded));
        self.read(root, inside, None)
    }

    fn is_leaf(&self, n: &Node<'t>) -> bool {
        n.level == 0
    }

    fn slots(&self, leaf: bool) -> usize {
        if leaf {
            MAXK
        } else {
            MAXK + 1
        }
    }

    fn overlap(&mut self, n: &Node<'t>) -> Result<Range<usize>> {
        let len = self.len(n);
        if n.inside {
            return Ok(0..len);
        }
        let rd = self.rd;
        let (start, end) = if n.level == 0 {
            let start = match self.lo {
                Bound::Unbounded => 0,
                Bound::Included(l) => rd.search(n.off, n.count, l, false)?.0,
                Bound::Excluded(l) => rd.search(n.off, n.count, l, true)?.0,
            };
            let end = match self.hi {
                Bound::Unbounded => n.count,
                Bound::Included(h) => rd.search(n.off, n.count, h, true)?.0,
                Bound::Excluded(h) => rd.search(n.off, n.count, h, false)?.0,
            };
            (start, end)
        } else {
            let start = match self.lo {
                Bound::Unbounded => 0,
                Bound::Included(l) | Bound::Excluded(l) => rd.route(n.off, n.count, l, false)?,
            };
            let last = match self.hi {
                Bound::Unbounded => n.count,
                Bound::Included(h) => rd.route(n.off, n.count, h, false)?,
                Bound::Excluded(h) => rd.route(n.off, n.count, h, true)?,
            };
            (start, last + 1)
        };
        Ok(start.min(len)..end.max(start).min(len))
    }

    fn at(&mut self, n: &Node<'t>, i: usize, overlap: &Range<usize>) -> Result<Step<Node<'t>>> {
        if n.level == 0 {
            let rec = self.rd.rec(n.off, i)?;
            let key = self.rd.rec_key(rec)?;
            if !(self.lo, self.hi).contains(key.as_slice()) {
                return Err(invariant("kamino.tree.sorted", n.off, "a random draw met a key outside its range"));
            }
            return Ok(Step::Pair((key, self.rd.rec_value(rec)?)));
        }
        let inside = n.inside || (i > overlap.start && i + 1 < overlap.end);
        let child = self.rd.child(n.off, i)?;
        self.read(child, inside, Some(n.level)).map(Step::Child)
    }

    fn too_deep(&self) -> KaminoError {
        invariant("kamino.tree.depth", self.tree.anchor, "tree deeper than 64 levels")
    }
}
