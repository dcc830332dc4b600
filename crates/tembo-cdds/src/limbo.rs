//! The limbo: blocks a batch unlinked, kept until no read op that might
//! still reach them runs, then freed a bounded number at a time.
//!
//! Why bounded: a delete that empties an inner node retires its whole
//! subtree — every node under it and the record of every dead entry in
//! them. Near the end of a mass delete one such commit retired 372,000
//! blocks, and walking and freeing them inside the commit held the writer
//! for 80 ms. So a retired subtree is kept as its root node and walked
//! later, and every commit (and every GC step) frees at most a budget of
//! blocks, walking just enough of the retired subtrees to fill it. The
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

/// Retired blocks and subtrees waiting for readers (see the module docs).
#[derive(Debug, Default)]
pub(crate) struct Limbo {
    /// (tag, blocks), tags ascending.
    blocks: VecDeque<(u64, Vec<u64>)>,
    /// (tag, nodes still to walk), tags ascending: every node listed, and
    /// what its owned dead entries reach, is retired.
    trees: VecDeque<(u64, Vec<u64>)>,
    /// The first tag pushed by [`Limbo::hold_until_fence`] since the last
    /// [`Limbo::fenced`]: blocks of that tag or later wait for a fence
    /// whatever the readers do, since what unlinked them is only flushed.
    unfenced_from: Option<u64>,
}

fn freeable(tag: u64, min_pinned: Option<u64>, unfenced_from: Option<u64>) -> bool {
    !matches!(min_pinned, Some(m) if m < tag) && !matches!(unfenced_from, Some(u) if tag >= u)
}

impl Limbo {
    /// Adds what the batch committing at `tag` retired.
    pub(crate) fn push(&mut self, tag: u64, blocks: Vec<u64>, trees: Vec<u64>) {
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

    /// Holds back what is pushed at `tag` or later, whose unlinking stores
    /// are flushed but not yet fenced (a GC step's compactions), until
    /// [`Limbo::fenced`]. `tag` is at least every tag pushed before.
    pub(crate) fn hold_until_fence(&mut self, tag: u64) {
        self.unfenced_from.get_or_insert(tag);
    }

    /// Whether something waits for [`Limbo::fenced`].
    pub(crate) fn needs_fence(&self) -> bool {
        self.unfenced_from.is_some()
    }

    /// A fence has made every flushed unlink durable.
    pub(crate) fn fenced(&mut self) {
        self.unfenced_from = None;
    }

    /// Whether nothing waits.
    pub(crate) fn is_empty(&self) -> bool {
        self.blocks.is_empty() && self.trees.is_empty()
    }

    /// Whether something could be freed now.
    pub(crate) fn has_freeable(&self, min_pinned: Option<u64>) -> bool {
        self.blocks.front().is_some_and(|(t, _)| freeable(*t, min_pinned, self.unfenced_from))
            || self.trees.front().is_some_and(|(t, _)| freeable(*t, min_pinned, self.unfenced_from))
    }

    /// Takes up to about `budget` freeable blocks (a walked node adds its
    /// whole content, so up to a node's slots more), walking retired
    /// subtrees as needed. A node that cannot be read is left out (a leak
    /// for the next recovery, never a wrong free).
    pub(crate) fn take_freeable(&mut self, pool: &Pool, min_pinned: Option<u64>, budget: usize) -> Vec<u64> {
        let mut out = Vec::new();
        while out.len() < budget {
            let Some((tag, blocks)) = self.blocks.front_mut() else { break };
            if !freeable(*tag, min_pinned, self.unfenced_from) {
                break;
            }
            let take = (budget - out.len()).min(blocks.len());
            out.extend(blocks.drain(blocks.len() - take..));
            if blocks.is_empty() {
                self.blocks.pop_front();
            }
        }
        while out.len() < budget {
            let Some((tag, nodes)) = self.trees.front_mut() else { break };
            if !freeable(*tag, min_pinned, self.unfenced_from) {
                break;
            }
            match nodes.pop() {
                Some(n) => {
                    // The next node's lines load while this one is walked.
                    if let Some(&next) = nodes.last() {
                        pool.prefetch(next, node::NODE_BYTES);
                    }
                    let _ = walk_one(pool, n, &mut out, nodes);
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
            // Keep tag order: insert among the block lists. What was
            // walked before a node that cannot be read stays listed (that
            // node's own blocks are a leak for the next recovery, never a
            // wrong free).
            let at = self.blocks.partition_point(|(t, _)| *t <= tag);
            if at > 0 && self.blocks[at - 1].0 == tag {
                self.blocks[at - 1].1.extend(out);
            } else {
                self.blocks.insert(at, (tag, out));
            }
            walked?;
        }
        Ok(())
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
    }
}
