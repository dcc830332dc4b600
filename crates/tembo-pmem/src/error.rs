//! Typed errors of the pool layer.
//!
//! Every variant carries the facts a user needs to act (the path where the
//! error arises at open, the offset, what was found and what was expected).
//! Errors found inside an open pool (`Corrupted`, `PoolFull`) have no path:
//! the caller holding the pool adds it as context. Bytes read from a pool file are
//! input: a bad byte becomes one of these errors, never a panic.

use std::path::PathBuf;

/// Everything that can go wrong in `tembo-pmem`.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PmemError {
    /// The file does not start with Tembo's pool magic.
    #[error("{path}: not a Tembo pool (bad magic); create one with `tembo pool create`")]
    NotAPool {
        /// The file that was opened.
        path: PathBuf,
    },
    /// The pool was written by a different on-media format version.
    #[error("{path}: pool format version {found}, this build reads version {expected} (or the header is corrupted)")]
    FormatVersionMismatch {
        /// The file that was opened.
        path: PathBuf,
        /// Version recorded in the header.
        found: u32,
        /// Version this build understands.
        expected: u32,
    },
    /// The file is shorter than its header says.
    #[error("{path}: truncated pool: the header records {expected} bytes but the file has {found}")]
    Truncated {
        /// The file that was opened.
        path: PathBuf,
        /// Size recorded in the header.
        expected: u64,
        /// Actual file length.
        found: u64,
    },
    /// The header's static checksum does not match its contents.
    #[error(
        "{path}: header checksum mismatch (stored {stored:#010x}, computed {computed:#010x}): the pool is corrupted"
    )]
    ChecksumMismatch {
        /// The file that was opened.
        path: PathBuf,
        /// Checksum stored in the header.
        stored: u32,
        /// Checksum computed over the header bytes.
        computed: u32,
    },
    /// A structure inside the pool failed validation.
    #[error(
        "corrupted pool: {what} at offset {offset:#x}; run `tembo pool check` on it for a full report, and restore it from a backup or replica"
    )]
    Corrupted {
        /// What failed to validate.
        what: String,
        /// Pool offset of the bad bytes.
        offset: u64,
    },
    /// Another process (or another handle in this one) holds the pool's lock.
    #[error("{path}: pool is locked by another process; stop it first (only one process may open a pool)")]
    Locked {
        /// The file that was opened.
        path: PathBuf,
    },
    /// No free space is left and the pool may not grow further: it is at
    /// its maximum size, or the filesystem holding its file is full.
    #[error("pool full: cannot allocate {requested} bytes (pool size {size}, maximum {max_size}); {}", full_hint(*.filesystem_full))]
    PoolFull {
        /// Bytes of pool space the request needed: a whole slab or page run,
        /// so it can exceed the bytes the caller asked for.
        requested: u64,
        /// Current pool size in bytes.
        size: u64,
        /// Configured maximum size in bytes.
        max_size: u64,
        /// The pool is below its maximum, but the filesystem holding its
        /// file has no room to grow it.
        filesystem_full: bool,
    },
    /// A requested pool size is below what a pool needs.
    #[error("pool size {requested} bytes is too small: at least {minimum} bytes are needed")]
    SizeTooSmall {
        /// Bytes asked for.
        requested: u64,
        /// Smallest size accepted.
        minimum: u64,
    },
    /// A requested size is above a limit (allocation or pool maximum).
    #[error("{what}: {requested} bytes exceeds the limit of {limit} bytes")]
    TooLarge {
        /// What was too large.
        what: &'static str,
        /// Bytes asked for.
        requested: u64,
        /// The limit.
        limit: u64,
    },
    /// An offset or range lies outside the pool or is misaligned.
    #[error("bad pool reference: {what} (offset {offset:#x}, length {len})")]
    BadReference {
        /// Why the reference is invalid.
        what: &'static str,
        /// Offset given.
        offset: u64,
        /// Length given.
        len: u64,
    },
    /// `free` was given something that is not an allocated block.
    #[error("invalid free of offset {offset:#x}: {why}")]
    InvalidFree {
        /// Offset given to free.
        offset: u64,
        /// Why it was rejected.
        why: &'static str,
    },
    /// A root name is empty, too long or contains NUL bytes; or no slot is free.
    #[error("root {name:?}: {why}")]
    BadRoot {
        /// The root name given.
        name: String,
        /// Why it was rejected.
        why: &'static str,
    },
    /// The requested durability mode is not available for this file.
    #[error("{path}: mode {requested} is not available: {why}")]
    ModeUnavailable {
        /// The file that was opened.
        path: PathBuf,
        /// The mode asked for.
        requested: &'static str,
        /// Why it cannot be had.
        why: String,
    },
    /// An internal invariant does not hold: a bug in Tembo, please report it.
    #[error("invariant {name} violated: {detail} (this is a bug in Tembo; please report it)")]
    Invariant {
        /// The invariant's name, as listed in the module docs.
        name: &'static str,
        /// What was observed.
        detail: String,
    },
    /// An operating-system call failed.
    #[error("{context}: {source}")]
    Io {
        /// What was being done.
        context: String,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
}

impl PmemError {
    pub(crate) fn io(context: impl Into<String>, source: std::io::Error) -> Self {
        PmemError::Io { context: context.into(), source }
    }

    pub(crate) fn corrupted(what: impl Into<String>, offset: u64) -> Self {
        PmemError::Corrupted { what: what.into(), offset }
    }
}

/// Result alias for this crate.
pub type Result<T, E = PmemError> = std::result::Result<T, E>;

fn full_hint(filesystem_full: bool) -> &'static str {
    if filesystem_full {
        "the filesystem holding the pool file has no room to grow it: free space there"
    } else {
        "raise the maximum with `tembo pool grow`"
    }
}
