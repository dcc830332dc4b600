//! Draw steps on copies of nodes: the top of a draw (whose overlapping
//! children every attempt chooses among, so they must not move between
//! attempts) and the nodes above it, and every node while a lazy recovery
//! runs. A position is one among the node's entries visible at the draw's
//! version. While a lazy recovery runs the copies are checked
//! ([`node::read_checked`]: slots verified, aborted versions honoured), so
//! nothing a crash left half-written is trusted.

use std::ops::Range;

use tembo_pmem::sample::Step;

use super::{Reader, Sampled};
use crate::entry::key_prefix_at;
use crate::error::{CddsError, Result};
use crate::node::{self, NodeCopy};
use crate::search;

impl Reader<'_, '_> {
    /// `n`'s copy and the indexes of its visible entries, read on first use.
    fn copy<'n>(&self, n: &'n Sampled) -> Result<(&'n NodeCopy, &'n [u8])> {
        if let Some((copy, visible)) = n.copy.get() {
            return Ok((copy, visible));
        }
        let at = self.at_version();
        let copy = match self.lazy {
            Some(_) => node::read_checked(self.pool(), n.node, self.tree.session, at)?,
            None => node::read(self.pool(), n.node, self.tree.session)?,
        };
        if copy.level != n.level {
            return Err(CddsError::invariant("a child is not one level below its parent", n.node));
        }
        let visible = (0..copy.entries().len()).filter(|&i| at.sees(&copy.entries()[i])).map(|i| i as u8).collect();
        let (copy, visible) = n.copy.get_or_init(|| (copy, visible));
        Ok((copy, visible))
    }

    /// [`RangeTree::overlap`](tembo_pmem::sample::RangeTree::overlap)
    /// among the visible entries.
    pub(super) fn overlap_copied(&self, n: &Sampled) -> Result<Range<usize>> {
        let pool = self.pool();
        let (copy, visible) = self.copy(n)?;
        let len = visible.len();
        if n.inside {
            return Ok(0..len);
        }
        // The visible position of the first entry at or after index `i`.
        let position = |i: usize| visible.partition_point(|&x| (x as usize) < i);
        let (entries, at) = (copy.entries(), self.at_version());
        let pfx = |k: &[u8]| key_prefix_at(k, copy.plen);
        self.overlap_by(n, len, |k, flag| {
            let i = match n.level {
                0 => search::bound(pool, entries, k, pfx(k), flag)?,
                _ => search::child_index(pool, copy, n.node, k, pfx(k), at, flag)?,
            };
            Ok(position(i))
        })
    }

    /// [`RangeTree::at`](tembo_pmem::sample::RangeTree::at) among the
    /// visible entries.
    pub(super) fn at_copied(&self, n: &Sampled, i: usize, overlap: &Range<usize>) -> Result<Step<Sampled>> {
        let (copy, visible) = self.copy(n)?;
        let Some(&index) = visible.get(i) else { return Ok(Step::Miss) };
        let e = copy.entries()[index as usize];
        if n.level == 0 {
            return self.record_pair(e.rec).map(Step::Pair);
        }
        let prev = i.checked_sub(1).map(|p| copy.entries()[visible[p] as usize]);
        let child = search::child_of(self.pool(), &e)?;
        let interior = i > overlap.start && i + 1 < overlap.end;
        self.child_of(n, child, &e, prev.as_ref(), interior).map(Step::Child)
    }
}
