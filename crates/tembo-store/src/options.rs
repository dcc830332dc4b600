//! How a database is created and opened: [`Options`] and [`Engine`].

use tembo_cdds::{GcConfig, Limits};
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
    /// The in-place B+tree on Kamino-Tx-Simple transactions
    /// (`tembo-kamino`): no copy in the critical path, a full backup rolled
    /// forward in the background; writers on different leaves run in parallel.
    Kamino,
    /// As `Kamino` with a dynamic backup of a fraction α of the heap
    /// ([`Options::alpha`]).
    KaminoDynamic,
    /// The same in-place B+tree on undo-log transactions (PMDK's
    /// semantics): the baseline Kamino-Tx is measured against.
    Undo,
}

impl Engine {
    /// The id recorded in the pool.
    pub fn id(self) -> u64 {
        match self {
            Engine::Cdds => 1,
            Engine::Kamino => 2,
            Engine::KaminoDynamic => 3,
            Engine::Undo => 4,
        }
    }

    /// The engine with a recorded id, if this build knows it.
    pub fn from_id(id: u64) -> Option<Engine> {
        match id {
            1 => Some(Engine::Cdds),
            2 => Some(Engine::Kamino),
            3 => Some(Engine::KaminoDynamic),
            4 => Some(Engine::Undo),
            _ => None,
        }
    }

    /// Lower-case name, as shown by `stat` and `INFO`.
    pub fn name(self) -> &'static str {
        match self {
            Engine::Cdds => "cdds",
            Engine::Kamino => "kamino",
            Engine::KaminoDynamic => "kamino-dynamic",
            Engine::Undo => "undo",
        }
    }

    /// Every engine.
    pub const ALL: [Engine; 4] = [Engine::Cdds, Engine::Kamino, Engine::KaminoDynamic, Engine::Undo];

    /// The engine named `name` (as [`Engine::name`] spells it).
    pub fn from_name(name: &str) -> Option<Engine> {
        Engine::ALL.into_iter().find(|e| e.name() == name)
    }

    /// The transaction mode of an in-place engine.
    pub(crate) fn tx_mode(self) -> Option<tembo_kamino::TxMode> {
        match self {
            Engine::Cdds => None,
            Engine::Kamino => Some(tembo_kamino::TxMode::Kamino),
            Engine::KaminoDynamic => Some(tembo_kamino::TxMode::KaminoDynamic),
            Engine::Undo => Some(tembo_kamino::TxMode::Undo),
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
    /// `kamino-dynamic` only: the backup's budget as a fraction of the
    /// heap, in (0, 1] (create only; default 0.5).
    pub alpha: f64,
    /// `cdds` only: the background, incremental GC thread's settings
    /// (`None`: no thread; dead entries are then removed only when their
    /// node fills up, or by [`Db::gc`](crate::Db::gc)).
    pub gc: Option<GcConfig>,
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
            alpha: 0.5,
            gc: Some(GcConfig::default()),
        }
    }
}

impl Options {
    /// Options for a pool of `size` bytes, everything else default.
    pub fn with_size(size: u64) -> Self {
        Options { size, ..Options::default() }
    }

    /// The heap options of the in-place engines.
    pub(crate) fn heap_options(&self, mode: tembo_kamino::TxMode) -> tembo_kamino::HeapOptions {
        tembo_kamino::HeapOptions { mode, alpha: self.alpha, ..tembo_kamino::HeapOptions::default() }
    }

    /// The in-place engines' limits.
    pub(crate) fn tree_limits(&self) -> tembo_kamino::tree::TreeLimits {
        tembo_kamino::tree::TreeLimits { max_key: self.limits.max_key_bytes, max_value: self.limits.max_value_bytes }
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
