//! Ranks of a big sorted set's score index in O(log n), through the rank
//! index the store keeps of it (`ranks`): ZRANK, ZREVRANK, ZCOUNT,
//! ZLEXCOUNT, ZRANGE by rank (and ZREVRANGE, ZREMRANGEBYRANK, ZRANGESTORE)
//! and the LIMIT offset of ZRANGEBYSCORE ask here first. Each answer is
//! `None` when the caller should walk the index instead, as it does for
//! sets under `ranks::MIN_KEYS` members: walking those is as cheap. A set
//! without an index yet is walked first for up to [`WALK_FIRST`] entries
//! (building the index is a scan of the whole set).

use std::ops::Bound;

use super::lists::{bounds_empty, Walk};
use crate::encoding::{sub_prefix, Meta, ZIDX};
use crate::exec::Ctx;
use crate::keyspace::Res;

/// Positions this close to either end are walked to: the walk reads no
/// more than the index's own block walk would.
pub(super) const NEAR_END: u64 = 256;

/// A set without an index yet is walked up to this far first: building
/// the index scans the whole set, which a short walk would not repay.
pub(super) const WALK_FIRST: u64 = 2048;

fn prefix(cx: &Ctx, key: &[u8], m: &Meta) -> Vec<u8> {
    sub_prefix(ZIDX, cx.db(), key, m.version)
}

/// Whether `key`'s set has a rank index now.
pub(super) fn indexed(cx: &Ctx, key: &[u8], m: &Meta) -> bool {
    cx.st.store.has_rank_index(&prefix(cx, key, m))
}

/// Whether a walk of `steps` entries should go through the rank index
/// instead: one far from either end, and either beyond [`WALK_FIRST`] or
/// in a set that has its index already.
pub(super) fn worth_it(cx: &Ctx, key: &[u8], m: &Meta, steps: u64) -> bool {
    steps > NEAR_END && (steps > WALK_FIRST || indexed(cx, key, m))
}

/// How many index entries lie before start bound `at` (a field bound:
/// `Included(f)`, the entries below f; `Excluded(f)`, those up to f).
pub(super) fn before(cx: &Ctx, key: &[u8], m: &Meta, at: &Bound<Vec<u8>>) -> Res<Option<u64>> {
    let p = prefix(cx, key, m);
    let at = match at {
        Bound::Unbounded => return Ok(Some(0)),
        Bound::Included(f) => Bound::Included([&p[..], f].concat()),
        Bound::Excluded(f) => Bound::Excluded([&p[..], f].concat()),
    };
    Ok(cx.st.store.rank_before(&p, m.size, at.as_ref().map(Vec::as_slice))?)
}

/// How many index entries lie within `[lo, hi]` (field bounds).
pub(super) fn count(cx: &Ctx, key: &[u8], m: &Meta, lo: &Bound<Vec<u8>>, hi: &Bound<Vec<u8>>) -> Res<Option<u64>> {
    // The entries before the end of `hi` are those before the start of what follows it.
    let upto_hi = match flip(hi) {
        None => m.size,
        Some(b) => match before(cx, key, m, &b)? {
            Some(n) => n,
            None => return Ok(None),
        },
    };
    let Some(below_lo) = before(cx, key, m, lo)? else { return Ok(None) };
    Ok(Some(upto_hi.saturating_sub(below_lo)))
}

/// The index field at position `pos` (from the lowest score); `Some(None)`
/// past the end.
pub(super) fn nth(cx: &Ctx, key: &[u8], m: &Meta, pos: u64) -> Res<Option<Option<Vec<u8>>>> {
    let p = prefix(cx, key, m);
    let got = cx.st.store.rank_nth(&p, m.size, pos)?;
    Ok(got.map(|k| k.map(|mut k| k.split_off(p.len().min(k.len())))))
}

/// The number of index entries within the bounds: from the rank index
/// if the set has one; otherwise by a walk of up to [`WALK_FIRST`]
/// entries, then from the index (built now), then by walking on.
pub(super) fn count_in(cx: &Ctx, key: &[u8], m: &Meta, lo: Bound<Vec<u8>>, hi: Bound<Vec<u8>>) -> Res<u64> {
    if bounds_empty(&lo, &hi) {
        return Ok(0);
    }
    if indexed(cx, key, m) {
        if let Some(n) = count(cx, key, m, &lo, &hi)? {
            return Ok(n);
        }
    }
    let mut walk = CountWalk::new(key, m, lo.clone(), hi.clone());
    if let Some(n) = walk.run(cx, m, WALK_FIRST)? {
        return Ok(n);
    }
    if let Some(n) = count(cx, key, m, &lo, &hi)? {
        return Ok(n);
    }
    Ok(walk.run(cx, m, u64::MAX)?.unwrap_or(0))
}

/// Flips a bound to the complementary side: the part of the index outside
/// `[lo, ...` is `... , flip(lo))`; `None` for an open end.
fn flip(b: &Bound<Vec<u8>>) -> Option<Bound<Vec<u8>>> {
    match b {
        Bound::Included(x) => Some(Bound::Excluded(x.clone())),
        Bound::Excluded(x) => Some(Bound::Included(x.clone())),
        Bound::Unbounded => None,
    }
}

/// Counts the entries inside bounds and those outside them in turns,
/// stopping at whichever side ends first, so that the cost is the
/// smaller of the two (the set's `size` is exact); it can pause and go on.
struct CountWalk {
    inside: Walk,
    outside: Vec<Walk>,
    n_in: u64,
    n_out: u64,
}

impl CountWalk {
    fn new(key: &[u8], m: &Meta, lo: Bound<Vec<u8>>, hi: Bound<Vec<u8>>) -> CountWalk {
        let mut outside = Vec::new();
        if let Some(b) = flip(&lo) {
            outside.push(Walk::new(ZIDX, key, m, Bound::Unbounded, b, true));
        }
        if let Some(b) = flip(&hi) {
            outside.push(Walk::new(ZIDX, key, m, b, Bound::Unbounded, false));
        }
        CountWalk { inside: Walk::new(ZIDX, key, m, lo, hi, false), outside, n_in: 0, n_out: 0 }
    }

    /// Walks on until one side ends (the count) or `budget` entries have
    /// been walked in all (`None`).
    fn run(&mut self, cx: &Ctx, m: &Meta, budget: u64) -> Res<Option<u64>> {
        loop {
            match self.inside.count_chunk(cx)? {
                Some(n) => self.n_in += n,
                None => return Ok(Some(self.n_in)),
            }
            let mut i = 0;
            while i < self.outside.len() {
                match self.outside[i].count_chunk(cx)? {
                    Some(n) => {
                        self.n_out += n;
                        i += 1;
                    }
                    None => {
                        self.outside.swap_remove(i);
                    }
                }
            }
            if self.outside.is_empty() {
                return Ok(Some(m.size.saturating_sub(self.n_out)));
            }
            if self.n_in + self.n_out >= budget {
                return Ok(None);
            }
        }
    }
}
