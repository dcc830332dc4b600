//! The tree's typed errors.

use tembo_pmem::PmemError;

/// Result of tree operations.
pub type Result<T, E = CddsError> = std::result::Result<T, E>;

/// What can go wrong in the tree.
#[derive(Debug, thiserror::Error)]
pub enum CddsError {
    /// The pool below failed (full, bad reference, I/O...).
    #[error(transparent)]
    Pmem(#[from] PmemError),
    /// A key longer than the configured limit.
    #[error("key of {len} bytes exceeds the limit of {max} bytes (Options::max_key_bytes)")]
    KeyTooLarge {
        /// Length given.
        len: usize,
        /// Configured limit.
        max: usize,
    },
    /// A value longer than the configured limit.
    #[error("value of {len} bytes exceeds the limit of {max} bytes (Options::max_value_bytes)")]
    ValueTooLarge {
        /// Length given.
        len: usize,
        /// Configured limit.
        max: usize,
    },
    /// The empty key is reserved.
    #[error("the empty key is not allowed")]
    EmptyKey,
    /// Versions are 47 bits; this tree has used them all.
    #[error("the tree has reached its last version ({0}); dump and reload it")]
    VersionsExhausted(u64),
    /// The pool has no tree, or the tree's metadata does not validate.
    #[error("not a CDDS tree: {0}")]
    NotATree(String),
    /// A structural invariant failed: a bug or media corruption.
    #[error("tree invariant violated at pool offset {offset:#x}: {what}; run `tembo pool check` and report it")]
    Invariant {
        /// The invariant and what was found.
        what: String,
        /// Where.
        offset: u64,
    },
    /// The version asked for is not retained (older than every pin).
    #[error("version {0} is not retained any more")]
    VersionNotRetained(u64),
    /// No named snapshot of that name.
    #[error("no snapshot named {0:?}")]
    NoSuchSnapshot(String),
    /// Named-snapshot table full or name too long.
    #[error("snapshot table: {0}")]
    SnapshotTable(String),
    /// An earlier write stopped midway (it panicked, or its failed batch
    /// could not be undone), so the tree accepts no more writes until it
    /// is reopened; reopening recovers, as after a crash.
    #[error("no write is accepted: {0}; close and reopen the database (its recovery repairs what that write left)")]
    WriterPoisoned(String),
}

impl CddsError {
    pub(crate) fn invariant(what: impl Into<String>, offset: u64) -> Self {
        CddsError::Invariant { what: what.into(), offset }
    }
}
