//! The limbo: blocks a batch unlinked, kept until no read op that might
//! still reach them runs, then freed a bounded number at a time.
//!
//! Why bounded: a delete that empties an inner node retires its whole
//! subtree — every node under it and the record of every dead entry in
//! them. Near the end of a mass delete one such commit retired 372,000
//! blocks, and walking and freeing them inside the commit held the writer
//! for 80 ms. So a retired subtree is kept as its root node and walked
//! later, and every commit (and every GC step) frees at most a budget of
//! blocks, walking just enough of the retired subtrees to fill it. A
//! commit frees (or hands to the GC thread, see `freer`) only once
//! [`FREE_BATCH`] wait. The
//! walk may run at any time: a retired node is never written again, and
//! its children (owned by it alone) are freed only by this walk.
//!
//! Blocks wait in tag order (the version of the batch that retired them);
//! a block is freeable once no pinned read op is older than its tag.
//! What the limbo holds is volatile: after a crash it is a leak, which the
//! recovery sweep reclaims, never a double use.

use std::collections::VecDeque;

use tembo_pmem::Pool;

use crate::entry::Slot;
use crate::error::Result;
use crate::{node, search};

/// Blocks freed per commit at least, however little the commit retired.
pub(crate) const FREE_BUDGET: usize = 1024;

/// Blocks and subtree roots a commit leaves waiting before it frees them
/// or hands them to the GC thread (see `freer`): a hand-off, and the
/// thread's wake-up, then come once per 32 retired blocks rather than at
/// every commit of a random delete. (Freeing inline in groups of 32, so
/// that the pool's free path fetches ahead, measured no faster than one
/// block per commit.) What waits is at most this many blocks per tree,
/// freed by a later commit, a GC step, or the tree's drop.
pub(crate) const FREE_BATCH: usize = 32;

/// Retired blocks and subtrees waiting for readers (see the module docs).
#[derive(Debug, Default)]
pub(crate) struct Limbo {
    /// (tag, blocks), tags ascending.
    blocks: VecDeque<(u64, Vec<u64>)>,
    /// (tag, nodes still to walk), tags ascending: every node listed, and
    /// what its owned dead entries reach, is retired.
    trees: VecDeque<(u64, Vec<u64>)>,
    /// Blocks in `blocks` plus nodes in `trees` (what [`Limbo::len`]
    /// counts, kept so that a commit can ask in O(1)).
    waiting: usize,
}

fn freeable(tag: u64, min_pinned: Option<u64>) -> bool {
    !matches!(min_pinned, Some(m) if m < tag)
}

impl Limbo {
    /// Adds what the batch committing at `tag` retired.
    pub(crate) fn push(&mut self, tag: u64, blocks: Vec<u64>, trees: Vec<u64>) {
        self.waiting += blocks.len() + trees.len();
        if !blocks.is_empty() {
            match self.blocks.back_mut() {
                Some((t, b)) if *t == tag => b.extend(blocks),
                _ => self.blocks.push_back((tag, blocks)),
            }
        }
        if !trees.is_empty() {
            match self.trees.back_mut() {
                Some((t, n)) if *t == tag => n.extend(trees),
                _ => self.trees.push_back((tag, trees)),
            }
        }
    }

    /// Whether nothing waits.
    pub(crate) fn is_empty(&self) -> bool {
        self.blocks.is_empty() && self.trees.is_empty()
    }

    /// Whether at least [`FREE_BATCH`] blocks or subtree roots wait, the
    /// point at which a commit frees (see there).
    pub(crate) fn batch_waits(&self) -> bool {
        self.waiting >= FREE_BATCH
    }

    /// Blocks and unwalked subtree nodes waiting ([`Limbo::len`], in O(1)).
    pub(crate) fn waiting(&self) -> usize {
        self.waiting
    }

    /// Moves every list no pinned read op can reach any more to `to`,
    /// unwalked (see `freer`).
    pub(crate) fn move_freeable(&mut self, to: &mut Limbo, min_pinned: Option<u64>) {
        while self.blocks.front().is_some_and(|(t, _)| freeable(*t, min_pinned)) {
            let Some((tag, blocks)) = self.blocks.pop_front() else { break };
            self.waiting -= blocks.len();
            to.push(tag, blocks, Vec::new());
        }
        while self.trees.front().is_some_and(|(t, _)| freeable(*t, min_pinned)) {
            let Some((tag, nodes)) = self.trees.pop_front() else { break };
            self.waiting -= nodes.len();
            to.push(tag, Vec::new(), nodes);
        }
    }

    /// Whether something could be freed now.
    pub(crate) fn has_freeable(&self, min_pinned: Option<u64>) -> bool {
        self.blocks.front().is_some_and(|(t, _)| freeable(*t, min_pinned))
            || self.trees.front().is_some_and(|(t, _)| freeable(*t, min_pinned))
    }

    /// Takes up to about `budget` freeable blocks (a walked node adds its
    /// whole content, so up to a node's slots more), walking retired
    /// subtrees as needed. A node that cannot be read is left out (a leak
    /// for the next recovery, never a wrong free).
    pub(crate) fn take_freeable(&mut self, pool: &Pool, min_pinned: Option<u64>, budget: usize) -> Vec<u64> {
        let mut out = Vec::new();
        while out.len() < budget {
            let Some((tag, blocks)) = self.blocks.front_mut() else { break };
            if !freeable(*tag, min_pinned) {
                break;
            }
            let take = (budget - out.len()).min(blocks.len());
            out.extend(blocks.drain(blocks.len() - take..));
            self.waiting -= take;
            if blocks.is_empty() {
                self.blocks.pop_front();
            }
        }
        while out.len() < budget {
            let Some((tag, nodes)) = self.trees.front_mut() else { break };
            if !freeable(*tag, min_pinned) {
                break;
            }
            let before = nodes.len();
            match nodes.pop() {
                Some(n) => {
                    // The next node's lines load while this one is walked.
                    if let Some(&next) = nodes.last() {
                        pool.prefetch(next, node::NODE_BYTES);
                    }
                    let _ = walk_one(pool, n, &mut out, nodes);
                    // One node fewer, plus the children it pushed.
                    self.waiting = self.waiting + nodes.len() - before;
                }
                None => {
                    self.trees.pop_front();
                }
            }
        }
        out
    }

    /// Walks every retired subtree into plain blocks (for the leak sweep and
    /// `check`, which need the whole list).
    pub(crate) fn expand_all(&mut self, pool: &Pool) -> Result<()> {
        while let Some((tag, mut nodes)) = self.trees.pop_front() {
            let mut out = Vec::new();
            let walked: Result<()> = (|| {
                while let Some(n) = nodes.pop() {
                    walk_one(pool, n, &mut out, &mut nodes)?;
                }
                Ok(())
            })();
            // A node that cannot be read drops out (a leak for the next
            // recovery, never a wrong free); what was walked stays.
            self.insert_blocks(tag, out);
            if let Err(e) = walked {
                self.waiting = self.len();
                return Err(e);
            }
        }
        self.waiting = self.len();
        Ok(())
    }

    /// Adds `out` to the block lists in tag order (counted by the caller).
    fn insert_blocks(&mut self, tag: u64, out: Vec<u64>) {
        let at = self.blocks.partition_point(|(t, _)| *t <= tag);
        if at > 0 && self.blocks[at - 1].0 == tag {
            self.blocks[at - 1].1.extend(out);
        } else {
            self.blocks.insert(at, (tag, out));
        }
    }

    /// Every waiting block, once [`Limbo::expand_all`] has run.
    pub(crate) fn blocks(&self) -> impl Iterator<Item = u64> + '_ {
        self.blocks.iter().flat_map(|(_, b)| b.iter().copied())
    }

    /// Number of blocks and unwalked subtree nodes waiting.
    pub(crate) fn len(&self) -> usize {
        self.blocks.iter().map(|(_, b)| b.len()).sum::<usize>() + self.trees.iter().map(|(_, n)| n.len()).sum::<usize>()
    }
}

/// Retires retired node `n`: the records of its owned dead entries and the
/// node itself go to `out`, the children those entries point to (inner
/// nodes) to `stack`, to be walked in turn.
fn walk_one(pool: &Pool, n: u64, out: &mut Vec<u64>, stack: &mut Vec<u64>) -> Result<()> {
    let level = node::level(pool, n)?;
    for s in node::raw_slots(pool, n)? {
        if let Slot::Valid(e) = s {
            if !e.moved && e.end != 0 {
                if level > 0 {
                    stack.push(search::child_of(pool, &e)?);
                }
                out.push(e.rec);
            }
        }
    }
    out.push(n);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn freeable_blocks_come_in_tag_order_within_the_budget() {
        let pool = Pool::in_memory(&tembo_pmem::PoolOptions::with_size(1 << 20)).unwrap();
        let mut l = Limbo::default();
        l.push(5, vec![1, 2, 3], vec![]);
        l.push(5, vec![4], vec![]);
        l.push(9, vec![10, 11], vec![]);
        assert_eq!(l.len(), 6);
        assert!(!l.has_freeable(Some(4)));
        assert!(l.take_freeable(&pool, Some(4), 100).is_empty());
        let mut got = l.take_freeable(&pool, Some(5), 3);
        got.sort_unstable();
        assert_eq!(got.len(), 3);
        let mut rest = l.take_freeable(&pool, Some(5), 100);
        rest.extend(got);
        rest.sort_unstable();
        assert_eq!(rest, vec![1, 2, 3, 4]);
        assert!(l.has_freeable(None));
        assert_eq!(l.take_freeable(&pool, None, 100), vec![10, 11]);
        assert!(l.is_empty());
        assert_eq!(l.waiting, 0);
    }

    #[test]
    fn a_batch_waits_once_enough_blocks_are_retired() {
        let pool = Pool::in_memory(&tembo_pmem::PoolOptions::with_size(1 << 20)).unwrap();
        let mut l = Limbo::default();
        for b in 0..FREE_BATCH as u64 - 1 {
            l.push(b + 1, vec![b], vec![]);
            assert!(!l.batch_waits());
        }
        l.push(100, vec![99], vec![]);
        assert!(l.batch_waits());
        assert_eq!(l.waiting, l.len());
        let got = l.take_freeable(&pool, None, 10);
        assert_eq!(got.len(), 10);
        assert_eq!(l.waiting, FREE_BATCH - 10);
        assert_eq!(l.waiting, l.len());
        assert!(!l.batch_waits());
    }

    #[test]
    fn moving_freeable_lists_keeps_tags_and_counts() {
        let mut from = Limbo::default();
        from.push(3, vec![1, 2], vec![]);
        from.push(4, vec![], vec![50]);
        from.push(8, vec![9], vec![60]);
        let mut to = Limbo::default();
        from.move_freeable(&mut to, Some(5));
        assert_eq!((from.waiting(), from.len()), (2, 2));
        assert_eq!((to.waiting(), to.len()), (3, 3));
        assert!(!from.has_freeable(Some(5)));
        from.move_freeable(&mut to, None);
        assert!(from.is_empty());
        assert_eq!(from.waiting(), 0);
        assert_eq!((to.waiting(), to.len()), (5, 5));
    }
}
