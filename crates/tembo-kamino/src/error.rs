//! Typed errors of the transactional heap and its B+tree.

use tembo_pmem::{PmemError, PoolOffset};

/// Everything that can go wrong in `tembo-kamino`.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum KaminoError {
    /// The pool layer failed (pool full, corruption found while reading, I/O).
    #[error(transparent)]
    Pmem(#[from] PmemError),
    /// A transaction waited longer than the heap's lock timeout for an
    /// object another transaction holds: a deadlock or a very long
    /// transaction. The transaction was aborted; nothing of it remains.
    #[error("transaction aborted: object {object:#x} stayed locked by another transaction for {waited_ms} ms (deadlock or long transaction); retry it")]
    LockTimeout {
        /// The object waited for.
        object: PoolOffset,
        /// How long it waited.
        waited_ms: u64,
    },
    /// A store outside the object, or an access to something that is not a
    /// live object of this heap.
    #[error("bad object access: {what} (object {object:#x})")]
    BadAccess {
        /// What was wrong.
        what: String,
        /// The object.
        object: PoolOffset,
    },
    /// A persistent structure failed validation: a bug or a damaged pool.
    #[error("invariant `{name}` violated at {offset:#x}: {detail}; run `tembo pool check` for a full report")]
    Invariant {
        /// The invariant's name.
        name: &'static str,
        /// Where.
        offset: PoolOffset,
        /// What was found.
        detail: String,
    },
    /// The pool holds no Kamino heap, or one of another layout.
    #[error("{0}")]
    Layout(String),
    /// The application aborted the transaction with this reason.
    #[error("transaction aborted: {0}")]
    Aborted(String),
    /// A key or value over the tree's limits.
    #[error("{what} of {len} bytes is over the limit of {limit} bytes")]
    TooLarge {
        /// `key` or `value`.
        what: &'static str,
        /// Its length.
        len: usize,
        /// The limit in force.
        limit: usize,
    },
}

/// Result with [`KaminoError`].
pub type Result<T, E = KaminoError> = std::result::Result<T, E>;

pub(crate) fn invariant(name: &'static str, offset: PoolOffset, detail: impl Into<String>) -> KaminoError {
    KaminoError::Invariant { name, offset, detail: detail.into() }
}
