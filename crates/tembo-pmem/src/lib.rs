//! # tembo-pmem — the persistent-memory pool
//!
//! Everything in Tembo stands on this crate: a pool is one file (or anonymous
//! memory) mapped into the process, holding a header, named roots and a heap
//! managed by a crash-consistent allocator. Data structures live in the heap
//! and are updated in place with loads and stores; they become durable only
//! through this crate's persist primitives, which are the one place where
//! Tembo touches durability.
//!
//! ## What "durable" means ([`Mode`])
//! - `dax`: the file is on a DAX filesystem and mapped with `MAP_SYNC`
//!   (granted by the kernel, not assumed): flush + fence reaches the
//!   persistence domain, so data survives power failure.
//! - `emulated`: any other shared mapping, e.g. on `/dev/shm` as the CDDS
//!   thesis did with DRAM: the same code path and cost; data survives a
//!   process crash (`kill -9`) but not power loss or an OS crash.
//! - `msync`: a file on an ordinary filesystem: each fence also `msync`s the
//!   pages flushed since the previous fence, so it is power-fail durable at
//!   page granularity.
//! - `volatile` (anonymous memory) and `simulated` (the crash simulator) for
//!   tests and measurements.
//!
//! ## Assumptions about the media
//! Aligned 8-byte stores are failure-atomic; nothing is ordered without a
//! fence; a cache line may be written back at any time (eviction), so data
//! not yet flushed may or may not be on media after a crash. The crash
//! simulator ([`sim`]) models exactly this.
//!
//! ## Map
//! - [`persist`]: CLWB / CLFLUSHOPT / CLFLUSH chosen at run time, fences,
//!   [`OrderingMode`] (`none`, `fast`, `full`); [`OrderedWrites`] applies
//!   the mode at a data structure's ordering points.
//! - [`Pool`] (`pool/`): create / open / close, flock, mode detection,
//!   online growth within a reserved address range, named roots, checked
//!   memory access, write statistics.
//! - [`header`]: the header's byte layout and validation.
//! - [`alloc`]: size-class slabs and page runs, leak reclamation by
//!   mark-and-sweep from engine-described roots ([`LeakTracer`]), `check`.
//! - [`sim`]: the crash simulator and the crash-sweep harness.
//! - [`sample`]: uniform random draws from a key range of an engine's
//!   B+tree without subtree counts (acceptance/rejection on node
//!   capacity); both engines supply the node reads.
//!
//! Paper sections: CDDS thesis §4.1 (flushing on current processors) and
//! §5.2 (flush performance); the NVM B-tree ordering study (ordering modes).
//!
//! `unsafe` lives in `map.rs`, `persist.rs` and the memory-access and header
//! modules of `pool/` (`access`, `roots`), each block with its `// SAFETY:` argument.

pub mod alloc;
mod error;
pub mod header;
mod huge;
mod map;
mod offset_hash;
mod ordered;
pub mod persist;
mod pool;
mod pptr;
pub mod sample;
pub mod sim;
mod stats;

pub use alloc::{AllocStats, CheckReport, LeakReport, LeakTracer, Marker, ReclaimReport, SweepFreeStep, Violation};
pub use error::{PmemError, Result};
pub use offset_hash::{OffsetHasher, OffsetMap, OffsetSet};
pub use ordered::OrderedWrites;
pub use persist::{FlushInstruction, OrderingMode, CACHE_LINE_BYTES};
pub use pool::{Mode, ModeRequest, Pool, PoolOptions, Root, DEFAULT_MAX_FACTOR, MIN_POOL_BYTES};
pub use pptr::{PPtr, PoolOffset};
pub use stats::{ShardedCounts, WriteStats};
