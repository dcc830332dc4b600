//! [`WriteBatch`]: puts and deletes applied atomically by [`Db::write`](crate::Db::write).

/// One operation of a [`WriteBatch`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum BatchOp {
    /// Insert or overwrite `key`.
    Put {
        /// The key.
        key: Vec<u8>,
        /// Its new value.
        value: Vec<u8>,
    },
    /// Remove `key` (nothing happens if it is absent).
    Delete {
        /// The key.
        key: Vec<u8>,
    },
}

impl BatchOp {
    /// The key the operation writes.
    pub fn key(&self) -> &[u8] {
        match self {
            BatchOp::Put { key, .. } | BatchOp::Delete { key } => key,
        }
    }
}

/// Puts and deletes that [`Db::write`](crate::Db::write) applies in order,
/// atomically and durably with one commit: after a crash either all of them
/// are visible or none.
///
/// A batch is a plain list; building it touches no database, and it can be
/// reused after [`WriteBatch::clear`].
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct WriteBatch {
    ops: Vec<BatchOp>,
}

impl WriteBatch {
    /// An empty batch.
    pub fn new() -> Self {
        WriteBatch::default()
    }

    /// An empty batch with room for `n` operations.
    pub fn with_capacity(n: usize) -> Self {
        WriteBatch { ops: Vec::with_capacity(n) }
    }

    /// Adds a put of `key` = `value`.
    pub fn put(&mut self, key: impl Into<Vec<u8>>, value: impl Into<Vec<u8>>) -> &mut Self {
        self.ops.push(BatchOp::Put { key: key.into(), value: value.into() });
        self
    }

    /// Adds a delete of `key`.
    pub fn delete(&mut self, key: impl Into<Vec<u8>>) -> &mut Self {
        self.ops.push(BatchOp::Delete { key: key.into() });
        self
    }

    /// Number of operations.
    pub fn len(&self) -> usize {
        self.ops.len()
    }

    /// Whether the batch has no operation.
    pub fn is_empty(&self) -> bool {
        self.ops.is_empty()
    }

    /// Removes every operation, keeping the allocation.
    pub fn clear(&mut self) {
        self.ops.clear();
    }

    /// The operations, in the order they apply.
    pub fn ops(&self) -> &[BatchOp] {
        &self.ops
    }

    pub(crate) fn engine_ops(&self) -> Vec<tembo_cdds::Op<'_>> {
        self.ops
            .iter()
            .map(|op| match op {
                BatchOp::Put { key, value } => tembo_cdds::Op::Put(key, value),
                BatchOp::Delete { key } => tembo_cdds::Op::Delete(key),
            })
            .collect()
    }
}

impl Extend<BatchOp> for WriteBatch {
    fn extend<I: IntoIterator<Item = BatchOp>>(&mut self, iter: I) {
        self.ops.extend(iter);
    }
}

impl FromIterator<BatchOp> for WriteBatch {
    fn from_iter<I: IntoIterator<Item = BatchOp>>(iter: I) -> Self {
        WriteBatch { ops: iter.into_iter().collect() }
    }
}
