//! # tembo-store — the embedded API
//!
//! A [`Db`] is an ordered map from byte-string keys to byte-string values,
//! kept in a persistent-memory pool (`tembo-pmem`) by a storage engine
//! (today the CDDS multi-version B+tree, `tembo-cdds`). This crate is the
//! one API applications, the server and the benchmarks use; they never
//! touch the pool or the engine directly.
//!
//! ```
//! use tembo_store::{Db, Options, WriteBatch};
//!
//! let db = Db::in_memory(&Options::with_size(1 << 20))?;
//! db.put(b"user:1", b"ada")?;
//! let mut batch = WriteBatch::new();
//! batch.put("user:2", "grace").delete("user:1");
//! db.write(&batch)?;
//! assert_eq!(db.get(b"user:1")?, None);
//! let users: Vec<_> = db.scan_prefix(b"user:").collect::<Result<_, _>>()?;
//! assert_eq!(users, vec![(b"user:2".to_vec(), b"grace".to_vec())]);
//! // A part of a value (3 bytes from offset 1) and the value's whole length.
//! let mut part = Vec::new();
//! assert_eq!(db.get_range_into(b"user:2", 1, 3, &mut part)?, Some(5));
//! assert_eq!(part, b"rac");
//! db.close()?;
//! # Ok::<(), tembo_store::DbError>(())
//! ```
//!
//! ## What it promises
//! - **Durability.** When `put`, `delete` or `write` returns `Ok`, the change
//!   survives what the pool's [`Mode`] promises ([`Mode::guarantee`]): a
//!   process crash in every file mode, power failure in `dax` and `msync`.
//!   [`Db::stats`] reports the mode obtained; nothing is silently weaker,
//!   except the measurement-only ordering `none` ([`Options::ordering`]).
//! - **Atomic batches.** A [`WriteBatch`] commits with one store: after a
//!   crash it is visible entirely or not at all, and readers never see part
//!   of it.
//! - **Consistent reads.** Every read sees one committed version; an
//!   iterator sees the version current when it was made, a [`Snapshot`]
//!   the version current when it was taken. Reads take no locks and never
//!   wait for the writer.
//! - **Recovery.** Opening a pool that was not closed cleanly repairs the
//!   engine to its last committed version and frees space a crash leaked
//!   ([`Db::recovery_report`] says what it did).
//! - **The engine is recorded in the pool** (root `tembo-db`, see
//!   [`DB_ROOT`]) at creation; opening uses the recorded one, and a pool
//!   naming an unknown engine or holding no database is refused with a
//!   typed error.
//! - **Typed errors, no panics on bad input.** Every failure is a
//!   [`DbError`]: over-limit keys or values, a file that is not a pool, a
//!   pool locked by another process, corruption.
//! - **Random draws.** [`Db::sample`] draws pairs of a key range
//!   uniformly at random in O(tree height) expected node reads, on every
//!   engine, however large the range (the server's SPOP and
//!   SRANDMEMBER); it may give up on a range that fills little of the
//!   nodes it spans, and says so by returning fewer pairs.
//! - **Online backups.** [`Db::backup`] copies one committed version into a
//!   new pool file while writers go on, and replaces the destination only
//!   with a complete copy (`cdds` only; see `backup`).
//!
//! ## What it does not do
//! - Share a pool between processes: a file pool is locked by the process
//!   that opened it (a second open gets [`PmemError::Locked`]).
//! - Read-modify-write transactions: a batch is blind (no conditional
//!   operations), so callers that need read-then-write atomicity
//!   serialize themselves. Concurrent writes are safe and each is atomic:
//!   on `cdds` one writer runs at a time and writes that find it busy
//!   share its next commit; the in-place engines run writers on
//!   different leaves in parallel.
//! - Accept the empty key: it is reserved ([`DbError::EmptyKey`]).
//!
//! ## Map
//! [`Db`] and its reports (`db`), [`Options`] and [`Engine`] (`options`),
//! [`WriteBatch`] (`batch`), [`Iter`] and [`Snapshot`] (`read`), the engine
//! record (`record`), [`DbError`] (`error`), [`Db::backup`] and
//! [`BackupReport`] (`backup`).

#![forbid(unsafe_code)]

mod backup;
mod batch;
mod db;
mod error;
mod options;
mod read;
mod record;

pub use backup::{BackupControl, BackupReport};
pub use batch::{BatchOp, WriteBatch};
pub use db::{Db, DbCheck, Stats};
pub use error::{DbError, Result};
pub use options::{Engine, Options};
pub use read::{prefix_range, Iter, KeyValue, Snapshot};
pub use record::{RECORD_BYTES as ENGINE_RECORD_BYTES, ROOT_NAME as DB_ROOT};

pub use tembo_cdds::{
    CddsError, GcConfig, GcStats, GcStep, Limits, NamedSnapshot, RecoveryReport, TreeCheck, TreeStats, WriteOutcome,
    MAX_SNAPSHOT_NAME,
};
pub use tembo_pmem::{
    AllocStats, CheckReport, FlushInstruction, Mode, ModeRequest, OrderingMode, PmemError, Pool, WriteStats,
};
