//! The store's typed errors.
//!
//! Mistakes a caller can make (a key over the limit, an unknown snapshot)
//! get variants of their own, so they can be matched without looking into
//! the engine. Everything else keeps the layer's own error as its source and
//! adds the pool's path, which the lower layers leave out for errors found
//! inside an open pool.

use std::path::{Path, PathBuf};

use tembo_cdds::CddsError;
use tembo_kamino::KaminoError;
use tembo_pmem::PmemError;

/// Result of store operations.
pub type Result<T, E = DbError> = std::result::Result<T, E>;

/// Everything that can go wrong in `tembo-store`.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum DbError {
    /// The pool failed: it cannot be created or opened (not a pool, locked
    /// by another process, corrupted header...), it is full, or I/O failed.
    #[error("{}", with_path(path, &source.to_string()))]
    Pool {
        /// The pool's path (`<memory>`, `<simulated>` or `<image>` for pools without a file).
        path: PathBuf,
        /// What the pool reported.
        #[source]
        source: PmemError,
    },
    /// The engine found its structures damaged or exhausted (an invariant
    /// violation, no tree where the engine record promised one, no versions left).
    #[error("{}", with_path(path, &source.to_string()))]
    Engine {
        /// The pool's path.
        path: PathBuf,
        /// What the engine reported.
        #[source]
        source: CddsError,
    },
    /// The in-place engine failed (a damaged structure, a lock not had in
    /// time: the transaction was aborted and can be retried).
    #[error("{}", with_path(path, &source.to_string()))]
    Kamino {
        /// The pool's path.
        path: PathBuf,
        /// What the engine reported.
        #[source]
        source: KaminoError,
    },
    /// The operation needs something the database's engine does not have
    /// (snapshots and versions are the CDDS engine's).
    #[error("{what} is not supported by the {engine} engine; use the cdds engine for it")]
    Unsupported {
        /// The engine's name.
        engine: &'static str,
        /// What was asked.
        what: &'static str,
    },
    /// The pool holds no database: it has no `tembo-db` root.
    #[error(
        "{path}: the pool holds no Tembo database (no `tembo-db` root); create one with `Db::create` or `Db::open_or_create`"
    )]
    NoDatabase {
        /// The pool's path.
        path: PathBuf,
    },
    /// The pool's engine record names an engine this build does not know.
    #[error("{path}: the database was created with engine id {id}, which this build of Tembo does not know; open it with the version that created it")]
    UnknownEngine {
        /// The pool's path.
        path: PathBuf,
        /// The engine id recorded in the pool.
        id: u64,
    },
    /// The pool's engine record (the block the `tembo-db` root points to) does not validate.
    #[error("{path}: corrupted engine record at offset {offset:#x}: {why}; run `tembo pool check` on it")]
    BadEngineRecord {
        /// The pool's path.
        path: PathBuf,
        /// Pool offset of the record.
        offset: u64,
        /// What failed to validate.
        why: String,
    },
    /// A key longer than [`Limits::max_key_bytes`](crate::Limits::max_key_bytes).
    #[error("key of {len} bytes exceeds the limit of {max} bytes (Options::limits.max_key_bytes)")]
    KeyTooLarge {
        /// Length given.
        len: usize,
        /// Configured limit.
        max: usize,
    },
    /// A value longer than [`Limits::max_value_bytes`](crate::Limits::max_value_bytes).
    #[error("value of {len} bytes exceeds the limit of {max} bytes (Options::limits.max_value_bytes)")]
    ValueTooLarge {
        /// Length given.
        len: usize,
        /// Configured limit.
        max: usize,
    },
    /// The empty key is reserved and cannot be written.
    #[error("the empty key is not allowed")]
    EmptyKey,
    /// No named snapshot of that name.
    #[error("no snapshot named {0:?}")]
    NoSuchSnapshot(String),
    /// A named snapshot cannot be created: bad or taken name, or the table is full.
    #[error("named snapshot: {0}")]
    SnapshotName(String),
    /// A backup ([`Db::backup`](crate::Db::backup)) could not be written
    /// where asked, or was cancelled; its partial file is removed.
    #[error("backup to {}: {why}", path.display())]
    Backup {
        /// The destination (or, once cancelled, the partial file).
        path: PathBuf,
        /// What went wrong.
        why: String,
    },
}

impl DbError {
    /// The pool error underneath, if any (e.g. to match [`PmemError::Locked`]).
    pub fn pmem(&self) -> Option<&PmemError> {
        match self {
            DbError::Pool { source, .. } => Some(source),
            DbError::Engine { source: CddsError::Pmem(p), .. } => Some(p),
            DbError::Kamino { source: KaminoError::Pmem(p), .. } => Some(p),
            _ => None,
        }
    }

    pub(crate) fn pool(path: &Path, source: PmemError) -> DbError {
        DbError::Pool { path: path.to_path_buf(), source }
    }

    /// As [`DbError::engine`], for the in-place engines.
    pub(crate) fn kamino(path: &Path, e: KaminoError) -> DbError {
        match e {
            KaminoError::TooLarge { what: "key", len, limit } => DbError::KeyTooLarge { len, max: limit },
            KaminoError::TooLarge { len, limit, .. } => DbError::ValueTooLarge { len, max: limit },
            KaminoError::Pmem(source) => DbError::pool(path, source),
            other => DbError::Kamino { path: path.to_path_buf(), source: other },
        }
    }

    /// Lifts caller mistakes to variants of their own; keeps the rest as
    /// engine or pool errors with the path.
    pub(crate) fn engine(path: &Path, e: CddsError) -> DbError {
        match e {
            CddsError::KeyTooLarge { len, max } => DbError::KeyTooLarge { len, max },
            CddsError::ValueTooLarge { len, max } => DbError::ValueTooLarge { len, max },
            CddsError::EmptyKey => DbError::EmptyKey,
            CddsError::NoSuchSnapshot(name) => DbError::NoSuchSnapshot(name),
            CddsError::SnapshotTable(why) => DbError::SnapshotName(why),
            CddsError::Pmem(source) => DbError::pool(path, source),
            other => DbError::Engine { path: path.to_path_buf(), source: other },
        }
    }
}

/// Prefixes `message` with the path unless it already names it (errors at
/// open carry their path; errors inside an open pool do not).
fn with_path(path: &Path, message: &str) -> String {
    let shown = path.display().to_string();
    if shown.is_empty() || message.contains(&shown) {
        message.to_string()
    } else {
        format!("{shown}: {message}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn path_is_added_once() {
        let p = Path::new("/tmp/a.pool");
        let e = DbError::pool(p, PmemError::Locked { path: p.to_path_buf() });
        assert_eq!(e.to_string().matches("/tmp/a.pool").count(), 1);
        let e = DbError::pool(p, PmemError::Corrupted { what: "x".into(), offset: 8 });
        assert!(e.to_string().starts_with("/tmp/a.pool: corrupted pool"), "{e}");
        assert!(matches!(DbError::engine(p, CddsError::EmptyKey), DbError::EmptyKey));
        assert!(matches!(e.pmem(), Some(PmemError::Corrupted { .. })));
    }
}
