//! Reads that span more than one key: range iterators and snapshots.
//!
//! An iterator reads the version that was current when it was made, and a
//! [`Snapshot`] pins one version for as long as it lives, so neither sees a
//! batch half-applied or a change made after it started; neither blocks the
//! writer. Both borrow the [`Db`]: it cannot be closed under them.
//!
//! The in-place engines (`kamino`, `kamino-dynamic`, `undo`) keep no old
//! versions: their iterators read in chunks of up to 256 pairs, each chunk
//! under locks (never a batch half-applied within a chunk), and see changes
//! committed between chunks; they have no snapshots.

use std::collections::VecDeque;
use std::ops::{Bound, RangeBounds};
use std::path::Path;

use crate::db::Db;
use crate::error::{DbError, Result};

/// A key and its value.
pub type KeyValue = (Vec<u8>, Vec<u8>);

/// The owned bounds of `range`.
pub(crate) fn owned_bounds<K: AsRef<[u8]>>(range: &impl RangeBounds<K>) -> (Bound<Vec<u8>>, Bound<Vec<u8>>) {
    let own = |b: Bound<&K>| match b {
        Bound::Included(k) => Bound::Included(k.as_ref().to_vec()),
        Bound::Excluded(k) => Bound::Excluded(k.as_ref().to_vec()),
        Bound::Unbounded => Bound::Unbounded,
    };
    (own(range.start_bound()), own(range.end_bound()))
}

/// The range of keys starting with `prefix`: `[prefix, next)` where `next`
/// is the smallest byte string above every key with the prefix (unbounded
/// when the prefix is empty or all `0xff`).
pub fn prefix_range(prefix: &[u8]) -> (Bound<Vec<u8>>, Bound<Vec<u8>>) {
    let mut next = prefix.to_vec();
    while let Some(last) = next.pop() {
        if last < u8::MAX {
            next.push(last + 1);
            return (Bound::Included(prefix.to_vec()), Bound::Excluded(next));
        }
    }
    (Bound::Included(prefix.to_vec()), Bound::Unbounded)
}

/// Iterator over a key range at one version, in key order (or reverse).
///
/// Yields `Err` only if the pool is damaged, and then stops.
#[derive(Debug)]
pub struct Iter<'a> {
    inner: Option<tembo_cdds::Iter<'a>>,
    chunked: Option<Chunked<'a>>,
    error: Option<DbError>,
    path: &'a Path,
}

/// An in-place engine's range, read a chunk at a time.
#[derive(Debug)]
struct Chunked<'a> {
    tree: &'a tembo_kamino::tree::Tree,
    lo: Bound<Vec<u8>>,
    hi: Bound<Vec<u8>>,
    rev: bool,
    buf: VecDeque<KeyValue>,
    done: bool,
}

impl Chunked<'_> {
    fn next(&mut self) -> Option<std::result::Result<KeyValue, tembo_kamino::KaminoError>> {
        if self.buf.is_empty() && !self.done {
            let chunk =
                self.tree.scan_chunk(self.lo.as_ref().map(|v| &v[..]), self.hi.as_ref().map(|v| &v[..]), self.rev);
            match chunk {
                Err(e) => {
                    self.done = true;
                    return Some(Err(e));
                }
                Ok(c) => {
                    match c.last() {
                        None => self.done = true,
                        Some((k, _)) if self.rev => self.hi = Bound::Excluded(k.clone()),
                        Some((k, _)) => self.lo = Bound::Excluded(k.clone()),
                    }
                    self.buf.extend(c);
                }
            }
        }
        self.buf.pop_front().map(Ok)
    }
}

impl<'a> Iter<'a> {
    pub(crate) fn new(inner: std::result::Result<tembo_cdds::Iter<'a>, tembo_cdds::CddsError>, path: &'a Path) -> Self {
        match inner {
            Ok(it) => Iter { inner: Some(it), chunked: None, error: None, path },
            Err(e) => Iter { inner: None, chunked: None, error: Some(DbError::engine(path, e)), path },
        }
    }

    pub(crate) fn in_place(
        tree: &'a tembo_kamino::tree::Tree,
        lo: Bound<Vec<u8>>,
        hi: Bound<Vec<u8>>,
        rev: bool,
        path: &'a Path,
    ) -> Self {
        let chunked = Chunked { tree, lo, hi, rev, buf: VecDeque::new(), done: false };
        Iter { inner: None, chunked: Some(chunked), error: None, path }
    }

    /// The version this iterator reads (`None` if it failed to start, and
    /// for the in-place engines, which have no versions).
    pub fn version(&self) -> Option<u64> {
        self.inner.as_ref().map(|it| it.version())
    }

    /// The next pair, copied into `key` and `value` (each cleared first)
    /// instead of into new vectors: a loop over many pairs reuses two
    /// allocations. `None` at the end.
    ///
    /// ```
    /// # let db = tembo_store::Db::in_memory(&tembo_store::Options::default()).unwrap();
    /// # db.put(b"a", b"1").unwrap();
    /// let (mut key, mut value) = (Vec::new(), Vec::new());
    /// let mut it = db.scan::<&[u8], _>(..);
    /// while let Some(pair) = it.next_into(&mut key, &mut value) {
    ///     pair?;
    ///     assert_eq!((&key[..], &value[..]), (&b"a"[..], &b"1"[..]));
    /// }
    /// # Ok::<(), tembo_store::DbError>(())
    /// ```
    ///
    /// # Errors
    /// As the iterator's items: the pool is damaged, and the iterator ends.
    pub fn next_into(&mut self, key: &mut Vec<u8>, value: &mut Vec<u8>) -> Option<Result<()>> {
        if let Some(e) = self.error.take() {
            return Some(Err(e));
        }
        let path = self.path;
        if let Some(c) = self.chunked.as_mut() {
            // Chunks are read as owned pairs: hand them over.
            return c.next().map(|r| match r {
                Ok((k, v)) => {
                    *key = k;
                    *value = v;
                    Ok(())
                }
                Err(e) => Err(DbError::kamino(path, e)),
            });
        }
        self.inner.as_mut()?.next_into(key, value).map(|r| r.map_err(|e| DbError::engine(path, e)))
    }
}

impl Iterator for Iter<'_> {
    type Item = Result<KeyValue>;

    fn next(&mut self) -> Option<Self::Item> {
        if let Some(e) = self.error.take() {
            return Some(Err(e));
        }
        let path = self.path;
        if let Some(c) = self.chunked.as_mut() {
            return c.next().map(|r| r.map_err(|e| DbError::kamino(path, e)));
        }
        self.inner.as_mut()?.next().map(|r| r.map_err(|e| DbError::engine(path, e)))
    }
}

/// A consistent, read-only view of the database at one committed version.
///
/// Reads through it see exactly that version, whatever is written later,
/// until it is dropped. It keeps the version's entries from being reclaimed,
/// so a long-lived snapshot holds pool space. It lives only in memory; see
/// [`Db::create_named_snapshot`] for one that survives restarts.
#[derive(Debug)]
pub struct Snapshot<'a> {
    inner: tembo_cdds::Snapshot<'a>,
    path: &'a Path,
}

impl<'a> Snapshot<'a> {
    pub(crate) fn new(inner: tembo_cdds::Snapshot<'a>, db: &'a Db) -> Self {
        Snapshot { inner, path: db.path() }
    }

    /// The version it sees.
    pub fn version(&self) -> u64 {
        self.inner.version()
    }

    /// The value of `key` at the snapshot.
    ///
    /// # Errors
    /// [`DbError::Engine`] or [`DbError::Pool`] if the pool is damaged; never for a missing key.
    pub fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        self.inner.get(key).map_err(|e| DbError::engine(self.path, e))
    }

    /// The pairs with keys in `range`, in key order, at the snapshot.
    pub fn scan<K: AsRef<[u8]>, R: RangeBounds<K>>(&self, range: R) -> Iter<'a> {
        let (lo, hi) = owned_bounds(&range);
        Iter::new(Ok(self.inner.scan(lo, hi, false)), self.path)
    }

    /// As [`Snapshot::scan`], from the largest key down.
    pub fn scan_rev<K: AsRef<[u8]>, R: RangeBounds<K>>(&self, range: R) -> Iter<'a> {
        let (lo, hi) = owned_bounds(&range);
        Iter::new(Ok(self.inner.scan(lo, hi, true)), self.path)
    }

    /// The pairs whose key starts with `prefix`, in key order, at the snapshot.
    pub fn scan_prefix(&self, prefix: &[u8]) -> Iter<'a> {
        let (lo, hi) = prefix_range(prefix);
        Iter::new(Ok(self.inner.scan(lo, hi, false)), self.path)
    }

    /// Every pair, in key order, at the snapshot.
    pub fn iter(&self) -> Iter<'a> {
        Iter::new(Ok(self.inner.scan(Bound::Unbounded, Bound::Unbounded, false)), self.path)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefix_ranges() {
        let b = |v: &[u8]| v.to_vec();
        assert_eq!(prefix_range(b"ab"), (Bound::Included(b(b"ab")), Bound::Excluded(b(b"ac"))));
        assert_eq!(prefix_range(b"a\xff"), (Bound::Included(b(b"a\xff")), Bound::Excluded(b(b"b"))));
        assert_eq!(prefix_range(b"\xff\xff"), (Bound::Included(b(b"\xff\xff")), Bound::Unbounded));
        assert_eq!(prefix_range(b""), (Bound::Included(Vec::new()), Bound::Unbounded));
    }
}
