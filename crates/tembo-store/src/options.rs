//! How a database is created and opened: [`Options`] and [`Engine`].

use tembo_cdds::Limits;
use tembo_pmem::{FlushInstruction, ModeRequest, OrderingMode, PoolOptions};

/// The storage engine behind a [`Db`](crate::Db). Chosen at creation and
/// recorded in the pool; opening always uses the recorded one.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
#[non_exhaustive]
pub enum Engine {
    /// The CDDS multi-version B+tree (`tembo-cdds`): lock-free readers,
    /// snapshots, one commit store per batch.
    #[default]
    Cdds,
}

impl Engine {
    /// The id recorded in the pool.
    pub fn id(self) -> u64 {
        match self {
            Engine::Cdds => 1,
        }
    }

    /// The engine with a recorded id, if this build knows it.
    pub fn from_id(id: u64) -> Option<Engine> {
        match id {
            1 => Some(Engine::Cdds),
            _ => None,
        }
    }

    /// Lower-case name, as shown by `stat` and `INFO`.
    pub fn name(self) -> &'static str {
        match self {
            Engine::Cdds => "cdds",
        }
    }
}

impl std::fmt::Display for Engine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// How to create or open a [`Db`](crate::Db).
///
/// Fields that describe the pool's shape (`size`, `max_size`, `engine`) are
/// used only when a pool is created; an existing pool keeps what its header
/// and engine record say.
#[derive(Clone, Debug)]
pub struct Options {
    /// Initial pool size in bytes (create only; rounded up to whole pages,
    /// at least [`tembo_pmem::MIN_POOL_BYTES`]). Default 64 MiB.
    pub size: u64,
    /// Largest size the pool may grow to (create only; `None`: 16 × `size`,
    /// at least 1 GiB).
    pub max_size: Option<u64>,
    /// Durability mode wanted for a file pool (default: detect; see
    /// [`ModeRequest`]). [`Db::stats`](crate::Db::stats) reports the mode obtained.
    pub mode: ModeRequest,
    /// How the engine orders its dependent stores (default `fast`;
    /// `none` gives up crash consistency and exists for measurements).
    pub ordering: OrderingMode,
    /// Flush instruction; `None`: `TEMBO_FLUSH` if set, else the best the CPU has.
    pub flush: Option<FlushInstruction>,
    /// Key and value size limits enforced on every write.
    pub limits: Limits,
    /// The engine of a new database (create only).
    pub engine: Engine,
}

impl Default for Options {
    fn default() -> Self {
        let pool = PoolOptions::default();
        Options {
            size: pool.size,
            max_size: pool.max_size,
            mode: pool.mode,
            ordering: pool.ordering,
            flush: pool.flush,
            limits: Limits::default(),
            engine: Engine::default(),
        }
    }
}

impl Options {
    /// Options for a pool of `size` bytes, everything else default.
    pub fn with_size(size: u64) -> Self {
        Options { size, ..Options::default() }
    }

    /// The pool layer's options these stand for.
    pub fn pool_options(&self) -> PoolOptions {
        PoolOptions {
            size: self.size,
            max_size: self.max_size,
            mode: self.mode,
            ordering: self.ordering,
            flush: self.flush,
        }
    }
}
