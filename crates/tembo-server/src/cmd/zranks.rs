//! Ranks of a big sorted set's score index in O(log n), through the rank
//! index the store keeps of it (`ranks`): ZRANK, ZREVRANK, ZCOUNT,
//! ZLEXCOUNT, ZRANGE by rank (and ZREVRANGE, ZREMRANGEBYRANK, ZRANGESTORE)
//! and the LIMIT offset of ZRANGEBYSCORE ask here first. Each answer is
//! `None` when the caller should walk the index instead, as it does for
//! sets under `ranks::MIN_KEYS` members: walking those is as cheap.

use std::ops::Bound;

use crate::encoding::{sub_prefix, Meta, ZIDX};
use crate::exec::Ctx;
use crate::keyspace::Res;

/// Positions this close to either end are walked to: the walk reads no
/// more than the index's own block walk would.
pub(super) const NEAR_END: u64 = 256;

fn prefix(cx: &Ctx, key: &[u8], m: &Meta) -> Vec<u8> {
    sub_prefix(ZIDX, cx.db(), key, m.version)
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
    let after_hi = match hi {
        Bound::Unbounded => None,
        Bound::Included(f) => Some(Bound::Excluded(f.clone())),
        Bound::Excluded(f) => Some(Bound::Included(f.clone())),
    };
    let upto_hi = match after_hi {
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
