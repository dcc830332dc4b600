//! Uniform random draws from a key range of a B+tree, without counts.
//!
//! Redis's SPOP, SRANDMEMBER, HRANDFIELD and ZRANDMEMBER pick random
//! members of a collection, and Tembo keeps a collection's members as one
//! key range of an engine's B+tree. Neither engine keeps subtree counts
//! (they would cost a write on every level of every insert), so a rank
//! cannot be looked up; walking to a random rank is O(n). This module
//! draws in O(height) expected node reads instead, and exactly uniformly,
//! by acceptance/rejection on the tree's *capacity* (Olken and Rotem,
//! "Random sampling from B+ trees", VLDB 1989):
//!
//! - Descend from the root while one child covers the whole range; the
//!   node reached (the *top*) has several children that overlap it, or is
//!   a leaf.
//! - An attempt picks one of the top's overlapping children uniformly (they
//!   have the same capacity, being at the same level), then at every node
//!   below picks a *slot* uniformly among all the node's slots, present or
//!   not, and fails if the slot holds nothing or nothing in the range.
//!
//! Every in-range pair is so reached with the same probability,
//! `1 / (k · S^h · L)` for `k` overlapping children at the top, `S` slots
//! per inner node, `h` inner levels below the top and `L` slots per leaf,
//! because all leaves lie at the same depth. The price of exactness is
//! the failed attempts: about `(capacity / fill)^h`, a handful for a
//! collection that fills the subtrees it spans. A range that is a sliver
//! of its top's subtrees fails more often, so callers bound the attempts
//! ([`draw`]'s `budget`) and fall back to an exact walk, which for
//! such a range is short.
//!
//! The engines supply the node reads ([`RangeTree`]) under whatever keeps
//! them consistent for the whole draw (a pinned version, a shared lock).

use std::ops::Range;

use rand::{Rng, RngCore};

/// A key and its value.
pub type Pair = (Vec<u8>, Vec<u8>);

/// Deepest tree a draw descends (a deeper one is a cycle: a damaged pool).
pub const MAX_DEPTH: usize = 64;

/// A B+tree restricted to one key range, as [`draw`] reads it.
pub trait RangeTree {
    /// A node as read for the draw, knowing where it lies relative to the range.
    type Node;
    /// The engine's error.
    type Error;

    /// The root.
    fn root(&mut self) -> Result<Self::Node, Self::Error>;
    /// Whether `n` is a leaf.
    fn is_leaf(&self, n: &Self::Node) -> bool;
    /// How many slots a node of this kind has room for (children of an
    /// inner node, pairs of a leaf): the same for every node of the kind.
    fn slots(&self, leaf: bool) -> usize;
    /// The positions of `n`'s children (pairs) that overlap (lie in) the
    /// range: `n` has `slots` positions, from 0 on, and those past its
    /// last child (pair) are empty. An engine may count positions whose
    /// entries are not there for the draw (a multi-version node's other
    /// versions): [`RangeTree::at`] answers [`Step::Miss`] for them.
    fn overlap(&mut self, n: &Self::Node) -> Result<Range<usize>, Self::Error>;
    /// What position `i` of `n` (inside `overlap`, [`RangeTree::overlap`]
    /// of `n`) holds: a child to descend into, a pair of the range, or
    /// nothing.
    fn at(&mut self, n: &Self::Node, i: usize, overlap: &Range<usize>) -> Result<Step<Self::Node>, Self::Error>;
    /// The error for a tree deeper than [`MAX_DEPTH`].
    fn too_deep(&self) -> Self::Error;

    /// One step of an attempt below the top: what slot `slot` (drawn
    /// uniformly from `0..slots`) of `n` holds in the range. An engine may
    /// answer without reading all of `n` where it knows `n` lies wholly
    /// in the range (then any present child or pair counts).
    ///
    /// # Errors
    /// Whatever the tree's reads return.
    fn step(&mut self, n: &Self::Node, slot: usize) -> Result<Step<Self::Node>, Self::Error> {
        let over = self.overlap(n)?;
        if !over.contains(&slot) {
            return Ok(Step::Miss);
        }
        self.at(n, slot, &over)
    }
}

/// What a slot of a node holds, for an attempt.
#[derive(Debug)]
pub enum Step<N> {
    /// A child in (or overlapping) the range: descend.
    Child(N),
    /// A pair in the range: the attempt succeeds.
    Pair(Pair),
    /// Nothing there, or nothing in the range: the attempt fails.
    Miss,
}

/// Up to `draws` pairs of the range, each drawn uniformly and independently
/// (with replacement), spending attempts from `budget` (it is decreased by
/// those made, so that one budget can bound several calls): fewer pairs
/// come back when it runs out, none when the range is empty.
///
/// # Errors
/// Whatever the tree's reads return (a damaged pool), or
/// [`RangeTree::too_deep`].
pub fn draw<T: RangeTree>(
    tree: &mut T,
    draws: usize,
    budget: &mut usize,
    rng: &mut dyn RngCore,
) -> Result<Vec<Pair>, T::Error> {
    let mut out = Vec::new();
    if draws == 0 {
        return Ok(out);
    }
    let mut top = tree.root()?;
    let mut depth = 0;
    let over = loop {
        let over = tree.overlap(&top)?;
        if over.is_empty() {
            return Ok(out);
        }
        if tree.is_leaf(&top) || over.len() > 1 {
            break over;
        }
        depth += 1;
        if depth > MAX_DEPTH {
            return Err(tree.too_deep());
        }
        match tree.at(&top, over.start, &over)? {
            Step::Child(c) => top = c,
            // The one child that could hold the range holds nothing.
            Step::Miss | Step::Pair(_) => return Ok(out),
        }
    };
    while out.len() < draws && *budget > 0 {
        *budget -= 1;
        // The top's overlapping children all have the same capacity:
        // one is chosen uniformly, without rejecting the others.
        let i = rng.gen_range(over.clone());
        match tree.at(&top, i, &over)? {
            Step::Miss => {}
            Step::Pair(p) => out.push(p),
            Step::Child(below) => {
                if let Some(pair) = attempt(tree, below, depth, rng)? {
                    out.push(pair);
                }
            }
        }
    }
    Ok(out)
}

/// One descent from `n` choosing slots uniformly: the pair reached, or
/// `None` when a chosen slot is empty or out of the range.
fn attempt<T: RangeTree>(
    tree: &mut T,
    mut n: T::Node,
    mut depth: usize,
    rng: &mut dyn RngCore,
) -> Result<Option<Pair>, T::Error> {
    loop {
        let slot = rng.gen_range(0..tree.slots(tree.is_leaf(&n)));
        match tree.step(&n, slot)? {
            Step::Miss => return Ok(None),
            Step::Pair(p) => return Ok(Some(p)),
            Step::Child(c) => n = c,
        }
        depth += 1;
        if depth > MAX_DEPTH {
            return Err(tree.too_deep());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;
    use rand_chacha::ChaCha8Rng;

    /// A model B+tree: leaves of sorted u32 keys, inner levels grouping
    /// nodes, with uneven fill so that rejection matters.
    struct Model {
        /// levels[0] = leaves (keys), levels[k] = inner nodes (child indexes into level k-1).
        leaves: Vec<Vec<u32>>,
        inner: Vec<Vec<Vec<usize>>>,
        lo: u32,
        hi: u32,
    }

    const SLOTS: usize = 6;

    #[derive(Clone, Copy)]
    struct N {
        level: usize,
        idx: usize,
    }

    impl Model {
        fn build(keys: &[u32], rng: &mut ChaCha8Rng, lo: u32, hi: u32) -> Model {
            let mut leaves = Vec::new();
            let mut i = 0;
            while i < keys.len() {
                let take = rng.gen_range(2..=SLOTS).min(keys.len() - i);
                leaves.push(keys[i..i + take].to_vec());
                i += take;
            }
            let mut inner = Vec::new();
            let mut below = leaves.len();
            while below > 1 {
                let mut level = Vec::new();
                let mut j = 0;
                while j < below {
                    let take = rng.gen_range(2..=SLOTS).min(below - j);
                    level.push((j..j + take).collect());
                    j += take;
                }
                below = level.len();
                inner.push(level);
            }
            Model { leaves, inner, lo, hi }
        }

        fn keys_under(&self, n: N) -> (u32, u32) {
            if n.level == 0 {
                let l = &self.leaves[n.idx];
                return (l[0], l[l.len() - 1]);
            }
            let c = &self.inner[n.level - 1][n.idx];
            let first = self.keys_under(N { level: n.level - 1, idx: c[0] }).0;
            let last = self.keys_under(N { level: n.level - 1, idx: c[c.len() - 1] }).1;
            (first, last)
        }
    }

    impl RangeTree for Model {
        type Node = N;
        type Error = &'static str;
        fn root(&mut self) -> Result<N, &'static str> {
            Ok(N { level: self.inner.len(), idx: 0 })
        }
        fn is_leaf(&self, n: &N) -> bool {
            n.level == 0
        }
        fn slots(&self, _leaf: bool) -> usize {
            SLOTS
        }
        fn overlap(&mut self, n: &N) -> Result<Range<usize>, &'static str> {
            let inside: Vec<bool> = if n.level == 0 {
                self.leaves[n.idx].iter().map(|&k| k >= self.lo && k < self.hi).collect()
            } else {
                self.inner[n.level - 1][n.idx]
                    .iter()
                    .map(|&c| {
                        let (a, b) = self.keys_under(N { level: n.level - 1, idx: c });
                        b >= self.lo && a < self.hi
                    })
                    .collect()
            };
            let start = inside.iter().position(|&x| x).unwrap_or(0);
            let end = inside.iter().rposition(|&x| x).map_or(0, |e| e + 1);
            Ok(start..end.max(start))
        }
        fn at(&mut self, n: &N, i: usize, _o: &Range<usize>) -> Result<Step<N>, &'static str> {
            if n.level == 0 {
                let k = self.leaves[n.idx][i];
                return Ok(Step::Pair((k.to_be_bytes().to_vec(), Vec::new())));
            }
            Ok(Step::Child(N { level: n.level - 1, idx: self.inner[n.level - 1][n.idx][i] }))
        }
        fn too_deep(&self) -> &'static str {
            "too deep"
        }
    }

    fn key_of(p: &Pair) -> u32 {
        u32::from_be_bytes(p.0[..4].try_into().unwrap())
    }

    #[test]
    fn draws_only_keys_in_the_range_and_every_one_of_them() {
        let mut rng = ChaCha8Rng::seed_from_u64(7);
        let keys: Vec<u32> = (0..2000).map(|i| i * 3).collect();
        for (lo, hi) in [(0, 6000), (1000, 1100), (2999, 3003), (5990, 7000), (7000, 8000)] {
            let mut m = Model::build(&keys, &mut rng, lo, hi);
            let want: Vec<u32> = keys.iter().copied().filter(|&k| k >= lo && k < hi).collect();
            let got = draw(&mut m, 40 * want.len().max(1), &mut 1_000_000, &mut rng).unwrap();
            assert!(got.iter().all(|p| (lo..hi).contains(&key_of(p))), "range {lo}..{hi}");
            let mut seen: Vec<u32> = got.iter().map(key_of).collect();
            seen.sort_unstable();
            seen.dedup();
            assert_eq!(seen, want, "range {lo}..{hi}");
        }
    }

    #[test]
    fn draws_are_uniform_across_unevenly_filled_nodes() {
        let mut rng = ChaCha8Rng::seed_from_u64(11);
        let keys: Vec<u32> = (0..400).collect();
        let mut m = Model::build(&keys, &mut rng, 37, 337);
        let draws = 300 * 200;
        let got = draw(&mut m, draws, &mut { usize::MAX }, &mut rng).unwrap();
        assert_eq!(got.len(), draws);
        let mut counts = vec![0u32; 400];
        for p in &got {
            counts[key_of(p) as usize] += 1;
        }
        // Chi-square with 299 degrees of freedom: 420 is beyond p = 1e-5.
        let expect = draws as f64 / 300.0;
        let chi: f64 = counts[37..337].iter().map(|&c| (c as f64 - expect).powi(2) / expect).sum();
        assert!(chi < 420.0, "chi-square {chi}");
    }

    #[test]
    fn attempts_bound_the_work_and_an_empty_range_gives_nothing() {
        let mut rng = ChaCha8Rng::seed_from_u64(3);
        let keys: Vec<u32> = (0..500).collect();
        let mut m = Model::build(&keys, &mut rng, 1000, 2000);
        let mut budget = 100;
        assert!(draw(&mut m, 10, &mut budget, &mut rng).unwrap().is_empty());
        assert_eq!(budget, 100, "an empty range spends nothing");
        let mut m = Model::build(&keys, &mut rng, 0, 500);
        let mut budget = 5;
        assert!(draw(&mut m, 1000, &mut budget, &mut rng).unwrap().len() <= 5);
        assert_eq!(budget, 0);
    }
}
