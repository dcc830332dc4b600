//! An attempt's steps below the top, on nodes read in place
//! ([`RawNode`], the lock-free path point reads take).
//!
//! A step chooses a rank of the node's order line, entries of other
//! versions included, and decodes only the entry there. Each entry visible
//! at the draw's version has one rank, so choosing ranks uniformly
//! chooses visible entries uniformly; a rank whose entry is not visible,
//! or not in the range, is a miss. Ranks move when a writer inserts into
//! the node, so everything a step needs of a node — which ranks lie in
//! the range, the chosen entry, the one before it — comes from one read,
//! and counts only if the node's version word is unchanged afterwards;
//! otherwise the node is read again, as point reads do.

use std::ops::Range;

use tembo_pmem::sample::Step;

use super::{Reader, Sampled};
use crate::entry::{key_prefix_at, Entry};
use crate::error::{CddsError, Result};
use crate::node::RawNode;
use crate::search;

/// What a step found in a node: the entry, the visible one before it
/// (for a child's lower bound), the child it leads to, and whether that
/// child lies between the ones holding the range's bounds.
type Found = (Entry, Option<Entry>, u64, bool);

impl Reader<'_, '_> {
    /// [`RangeTree::step`](tembo_pmem::sample::RangeTree::step) in place.
    pub(super) fn step_in_place(&self, n: &Sampled, slot: usize) -> Result<Step<Sampled>> {
        let pool = self.pool();
        let v = self.version;
        let found = self.in_place(n, |raw| -> Result<Option<Found>> {
            let used = raw.used();
            if slot >= used {
                return Ok(None);
            }
            let over = if n.inside { 0..used } else { self.ranks_in_range(n, raw)? };
            let e = raw.entry(slot);
            if !over.contains(&slot) || !e.visible_at(v, &[]) {
                return Ok(None);
            }
            if n.level == 0 {
                return Ok(Some((e, None, 0, true)));
            }
            let interior = slot > over.start && slot + 1 < over.end;
            let prev = match n.inside || interior {
                true => None,
                false => (0..slot).rev().map(|j| raw.entry(j)).find(|p| p.visible_at(v, &[])),
            };
            Ok(Some((e, prev, search::child_of(pool, &e)?, interior)))
        })?;
        let Some((e, prev, child, interior)) = found else { return Ok(Step::Miss) };
        if n.level == 0 {
            // Records are immutable, and kept while the version is pinned.
            return self.record_pair(e.rec).map(Step::Pair);
        }
        self.child_of(n, child, &e, prev.as_ref(), interior).map(Step::Child)
    }

    /// `f` of `n` read in place, from a read no writer changed meanwhile.
    fn in_place<T>(&self, n: &Sampled, mut f: impl FnMut(&RawNode<'_>) -> Result<T>) -> Result<T> {
        let pool = self.pool();
        let mut raw = RawNode::default();
        loop {
            raw.load(pool, n.node, self.tree.session)?;
            let got = if raw.level() == n.level {
                f(&raw)
            } else {
                Err(CddsError::invariant("a child is not one level below its parent", n.node))
            };
            if raw.validate() {
                return got;
            }
        }
    }

    /// The ranks of `raw` (node `n`, not wholly inside the range) whose
    /// children or pairs overlap the range; those of entries of other
    /// versions among them are misses.
    fn ranks_in_range(&self, n: &Sampled, raw: &RawNode<'_>) -> Result<Range<usize>> {
        let pool = self.pool();
        let pfx = |k: &[u8]| key_prefix_at(k, raw.plen());
        self.overlap_by(n, raw.used(), |k, flag| match n.level {
            0 => search::bound_raw(pool, raw, k, pfx(k), flag, 0),
            _ => search::child_rank_raw(pool, raw, n.node, k, pfx(k), self.version, flag),
        })
    }
}
