//! # tembo-cdds — the CDDS multi-version B+tree
//!
//! The B+tree of the CDDS thesis (ch. 4) on a Tembo pool: every entry
//! carries a `[start, end)` version range, the tree has one current version
//! in an 8-byte commit word, and a batch of any size becomes durable with
//! one persisted store of the next version. Readers take no locks: they pin
//! a version, copy nodes under per-node version words (Persistent Masstree)
//! and never see a torn or half-shifted node. Every node records the key
//! prefix its range shares, and its slots' prefix words hold the bytes
//! after it (leaves since tree layout 3, inner nodes since layout 4). A
//! new node is persisted only where it is used, its slots checked with a
//! salt from its birth (layout 5), and order lines are flushed lazily
//! (`lazy_order`): no crash trusts one. See `docs/design/cdds.md`.
//!
//! Map: [`entry`] (self-checking slots), [`record`] (immutable key/value
//! blocks), [`node`] (layout, seqlock copies, births), `lazy_order` (order
//! lines flushed when nodes die or the tree closes), `search`,
//! [`Tree`] (open/create, reads), `write` (batches, split, merge, dead-slot
//! reuse), `combine` (the writer lock; concurrent writes share a commit), `gc` (the background, incremental GC), `scan` (iterators), `sample` (uniform random pairs of a range),
//! `snapshot` (pins, named snapshots, rollback), `recover` (Alg. 6, done lazily:
//! the tree serves at once after a crash and repairs and sweeps behind it), `verify` (`check`, `stats`).

pub mod campaign;
mod combine;
pub mod entry;
mod error;
mod gc;
mod lazy_order;
mod limbo;
mod meta;
pub mod node;
mod pins;
mod prefetch;
pub mod record;
mod recover;
mod sample;
mod scan;
mod search;
mod snapshot;
mod tree;
mod verify;
mod write;

pub use error::{CddsError, Result};
pub use gc::{GcConfig, GcStats, GcStep};
pub use meta::ROOT_NAME;
pub use recover::{BetweenSteps, RecoveryReport, RecoveryTuning, NODES_PER_STEP as RECOVERY_NODES_PER_STEP};
pub use scan::{Iter, KeyValue};
pub use snapshot::{NamedSnapshot, Snapshot, MAX_SNAPSHOT_NAME};
pub use tree::{Limits, Tree, TreeCore};
pub use verify::{TreeCheck, TreeStats};
pub use write::{Op, WriteOutcome, MIN_LIVE, SPLIT_TWO};
