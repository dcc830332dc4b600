//! Searching a node copy: entries are sorted by key, then start version.

use std::cmp::Ordering;

use tembo_pmem::Pool;

use crate::entry::{Entry, ReadAt};
use crate::error::{CddsError, Result};
use crate::node::{NodeCopy, RawNode};
use crate::record;

/// The first of `len` sorted positions whose key is `>= key` (`strict`:
/// `> key`), given the comparison of position `i`'s key with `key`.
fn partition(len: usize, strict: bool, mut cmp: impl FnMut(usize) -> Result<Ordering>) -> Result<usize> {
    let (mut lo, mut hi) = (0, len);
    while lo < hi {
        let mid = (lo + hi) / 2;
        let c = cmp(mid)?;
        let go_right = if strict { c != Ordering::Greater } else { c == Ordering::Less };
        if go_right {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    Ok(lo)
}

/// Index of the first entry whose key is `>= key` (`strict`: `> key`).
///
/// As [`bound_raw`]: the prefix words narrow the answer to the run of
/// entries that tie with the key's, and only those records are read,
/// their first lines fetched together before the search among them.
pub fn bound(pool: &Pool, entries: &[Entry], key: &[u8], pfx: u64, strict: bool) -> Result<usize> {
    let n = entries.len();
    let lo = partition_by(n, |i| entries[i].prefix < pfx);
    let ties = partition_by(n - lo, |i| entries[lo + i].prefix <= pfx);
    if ties > 1 {
        for e in &entries[lo..lo + ties] {
            pool.prefetch(e.rec, 64);
        }
    }
    Ok(lo + partition(ties, strict, |i| record::cmp_entry(pool, &entries[lo + i], key, pfx))?)
}

/// The inner entry visible at `v` whose child covers `key`: the first
/// visible entry with a key above `key` (`inclusive_hi`: at or above, for
/// reverse scans that want keys strictly below `key`).
pub fn child_index(
    pool: &Pool,
    copy: &NodeCopy,
    node: u64,
    key: &[u8],
    pfx: u64,
    at: ReadAt<'_>,
    at_or_above: bool,
) -> Result<usize> {
    let start = bound(pool, copy.entries(), key, pfx, !at_or_above)?;
    (start..copy.entries().len()).find(|&i| at.sees(&copy.entries()[i])).ok_or_else(|| {
        CddsError::invariant(format!("no inner entry visible at version {} covers the key", at.version), node)
    })
}

/// The child node an inner entry points to.
pub fn child_of(pool: &Pool, e: &Entry) -> Result<u64> {
    let h = record::header(pool, e.rec)?;
    if h.flags & record::FLAG_INNER == 0 {
        return Err(CddsError::invariant("inner entry points to a leaf record", e.rec));
    }
    Ok(h.word)
}

/// The index of the entry for `key` visible at `v` in a leaf copy.
pub fn leaf_find(pool: &Pool, copy: &NodeCopy, key: &[u8], pfx: u64, at: ReadAt<'_>) -> Result<Option<usize>> {
    let mut i = bound(pool, copy.entries(), key, pfx, false)?;
    while i < copy.entries().len() {
        let e = &copy.entries()[i];
        if record::cmp_entry(pool, e, key, pfx)? != Ordering::Equal {
            break;
        }
        if at.sees(e) {
            return Ok(Some(i));
        }
        i += 1;
    }
    Ok(None)
}

/// The key bytes of an entry, borrowed from its record (`None`: the sentinel).
pub fn entry_key_ref<'p>(pool: &'p Pool, e: &Entry) -> Result<Option<&'p [u8]>> {
    let h = record::header(pool, e.rec)?;
    if h.is_sentinel() {
        return Ok(None);
    }
    Ok(Some(record::key(pool, e.rec, &h)?))
}

/// The key bytes of an entry (`None`: the sentinel).
pub fn entry_key(pool: &Pool, e: &Entry) -> Result<Option<Vec<u8>>> {
    let h = record::header(pool, e.rec)?;
    if h.is_sentinel() {
        return Ok(None);
    }
    Ok(Some(record::key(pool, e.rec, &h)?.to_vec()))
}

/// [`bound`] over a raw node's slots.
///
/// Two steps: prefix words alone (in the node, which `RawNode::load` has
/// prefetched) narrow the answer to the run of entries whose prefix equals
/// the key's; only inside that run are records read, and their first lines
/// are prefetched together first. Keys that share their first 8 bytes
/// (`user1234…`) tie on prefixes for most probes, and each probe's record
/// read would otherwise wait for the previous one.
///
/// `sole_bytes`: when exactly one entry ties, how much of its record to
/// prefetch before comparing (a point read passes the lines its value copy
/// will read, so that they arrive with the header rather than after it).
pub fn bound_raw(pool: &Pool, raw: &RawNode, key: &[u8], pfx: u64, strict: bool, sole_bytes: u64) -> Result<usize> {
    let n = raw.used();
    // An entry with prefix u64::MAX (the sentinel, or a key of eight 0xFF
    // bytes) is above every smaller prefix, and ties with u64::MAX.
    let lo = partition_by(n, |i| raw.prefix(i) < pfx);
    let ties = partition_by(n - lo, |i| raw.prefix(lo + i) <= pfx);
    if ties == 0 {
        return Ok(lo);
    }
    if ties > 1 {
        for i in lo..lo + ties {
            pool.prefetch(raw.entry(i).rec, 64);
        }
    } else if sole_bytes > 64 {
        pool.prefetch(raw.entry(lo).rec, sole_bytes);
    }
    Ok(lo + partition(ties, strict, |i| record::cmp_entry(pool, &raw.entry(lo + i), key, pfx))?)
}

/// The index of the only entry of a raw node whose prefix word is `pfx`,
/// if exactly one has it (no record is read).
pub fn sole_prefix_tie(raw: &RawNode, pfx: u64) -> Option<usize> {
    let n = raw.used();
    let lo = partition_by(n, |i| raw.prefix(i) < pfx);
    (lo < n && raw.prefix(lo) == pfx && (lo + 1 == n || raw.prefix(lo + 1) != pfx)).then_some(lo)
}

/// Prefetches the records of a raw leaf's entries whose prefix word is
/// `pfx` (the candidates a lookup of the key compares against): their
/// first lines, which hold the header, the key and the start of the value.
/// For [`crate::prefetch`]: reads nothing it relies on.
pub fn prefetch_ties(pool: &Pool, raw: &RawNode, pfx: u64) {
    let n = raw.used();
    let lo = partition_by(n, |i| raw.prefix(i) < pfx);
    // A key has one entry per retained version; more ties than that are
    // distinct keys sharing 8 bytes, which the real lookup sorts out.
    for i in (lo..n).take(4) {
        if raw.prefix(i) != pfx {
            break;
        }
        pool.prefetch(raw.entry(i).rec, 192);
    }
}

/// The first of `len` positions where `left` is false (`left` must be
/// true on a prefix of the positions and false after it).
fn partition_by(len: usize, mut left: impl FnMut(usize) -> bool) -> usize {
    let (mut lo, mut hi) = (0, len);
    while lo < hi {
        let mid = (lo + hi) / 2;
        if left(mid) {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    lo
}

/// [`child_index`] over a raw node: the child entry covering `key` at `v`.
pub fn child_raw(pool: &Pool, raw: &RawNode, node: u64, key: &[u8], pfx: u64, v: u64) -> Result<Entry> {
    Ok(raw.entry(child_rank_raw(pool, raw, node, key, pfx, v, false)?))
}

/// [`child_index`] over a raw node: the rank of the child entry covering
/// `key` at `v` (`at_or_above` as there).
pub fn child_rank_raw(
    pool: &Pool,
    raw: &RawNode,
    node: u64,
    key: &[u8],
    pfx: u64,
    v: u64,
    at_or_above: bool,
) -> Result<usize> {
    let start = bound_raw(pool, raw, key, pfx, !at_or_above, 0)?;
    (start..raw.used())
        .find(|&i| raw.entry(i).visible_at(v, &[]))
        .ok_or_else(|| CddsError::invariant(format!("no inner entry visible at version {v} covers the key"), node))
}

/// The leaf entry for `key` visible at `v`, in a raw leaf; `rec_bytes` as
/// [`bound_raw`]'s `sole_bytes`.
pub fn leaf_raw(pool: &Pool, raw: &RawNode, key: &[u8], pfx: u64, v: u64, rec_bytes: u64) -> Result<Option<Entry>> {
    let mut i = bound_raw(pool, raw, key, pfx, false, rec_bytes)?;
    while i < raw.used() {
        let e = raw.entry(i);
        if e.prefix != pfx || record::cmp_entry(pool, &e, key, pfx)? != Ordering::Equal {
            break;
        }
        if e.visible_at(v, &[]) {
            return Ok(Some(e));
        }
        i += 1;
    }
    Ok(None)
}
