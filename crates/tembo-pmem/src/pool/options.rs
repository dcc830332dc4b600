//! How a pool is opened: the durability [`Mode`] it ends up in, the mode a
//! caller asks for, and the other [`PoolOptions`].

use super::*;

/// Where the pool lives and what "durable" means for it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Mode {
    /// A DAX file mapped with `MAP_SYNC`: flush + fence is power-fail durable.
    Dax,
    /// A file mapped shared without `MAP_SYNC` (e.g. on `/dev/shm`): flush +
    /// fence is the same code and cost; data survives a process crash, not
    /// power loss.
    Emulated,
    /// A file on an ordinary filesystem: a fence also `msync`s the pages
    /// flushed since the last fence; power-fail durable, page-granular cost.
    Msync,
    /// Anonymous memory: nothing survives the process (tests, measurements).
    Volatile,
    /// The crash simulator: a CPU image and a media image in memory.
    Simulated,
}

impl Mode {
    /// Lower-case name, as shown by `stat` and `INFO persistence`.
    pub fn name(self) -> &'static str {
        match self {
            Mode::Dax => "dax",
            Mode::Emulated => "emulated",
            Mode::Msync => "msync",
            Mode::Volatile => "volatile",
            Mode::Simulated => "simulated",
        }
    }

    /// What an acknowledged write survives in this mode.
    pub fn guarantee(self) -> &'static str {
        match self {
            Mode::Dax => "power failure and process crash (MAP_SYNC on a DAX filesystem)",
            Mode::Emulated => "process crash (kill -9), not power failure or OS crash",
            Mode::Msync => "power failure and process crash (msync of dirty pages at each fence)",
            Mode::Volatile => "nothing: the pool lives in anonymous memory",
            Mode::Simulated => "simulated crashes only (crash simulator)",
        }
    }
}

impl std::fmt::Display for Mode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// The mode asked for when opening or creating a file pool.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum ModeRequest {
    /// `dax` if `MAP_SYNC` is granted, else `emulated` on a RAM filesystem,
    /// else `msync`.
    #[default]
    Auto,
    /// `dax` or an error.
    Dax,
    /// Shared mapping with flush + fence only.
    Emulated,
    /// Flush + `msync` at fences.
    Msync,
}

impl std::str::FromStr for ModeRequest {
    type Err = String;
    fn from_str(s: &str) -> std::result::Result<Self, String> {
        match s.to_ascii_lowercase().as_str() {
            "auto" => Ok(ModeRequest::Auto),
            "dax" => Ok(ModeRequest::Dax),
            "emulated" => Ok(ModeRequest::Emulated),
            "msync" => Ok(ModeRequest::Msync),
            o => Err(format!("unknown mode {o:?}: use auto, dax, emulated or msync")),
        }
    }
}

/// How to create or open a pool.
#[derive(Clone, Debug)]
pub struct PoolOptions {
    /// Initial size in bytes (create only); rounded up to whole pages.
    pub size: u64,
    /// Largest size the pool may grow to (create only; `None`: 16 × size, at
    /// least 1 GiB).
    pub max_size: Option<u64>,
    /// Durability mode wanted (file pools).
    pub mode: ModeRequest,
    /// How engines order their dependent stores.
    pub ordering: OrderingMode,
    /// Flush instruction; `None`: `TEMBO_FLUSH` if set, else the best available.
    pub flush: Option<FlushInstruction>,
}

impl Default for PoolOptions {
    fn default() -> Self {
        PoolOptions {
            size: 64 << 20,
            max_size: None,
            mode: ModeRequest::Auto,
            ordering: OrderingMode::Fast,
            flush: None,
        }
    }
}

impl PoolOptions {
    /// Options for a pool of `size` bytes, everything else default.
    pub fn with_size(size: u64) -> Self {
        PoolOptions { size, ..PoolOptions::default() }
    }

    pub(super) fn flush_instruction(&self) -> Result<FlushInstruction> {
        match self.flush {
            Some(i) if i.is_available() => Ok(i),
            Some(i) => Err(PmemError::ModeUnavailable {
                path: PathBuf::new(),
                requested: "flush instruction",
                why: format!("this CPU has no {i} instruction"),
            }),
            None => FlushInstruction::from_env_or_detect().map_err(|why| PmemError::ModeUnavailable {
                path: PathBuf::new(),
                requested: "flush instruction",
                why,
            }),
        }
    }
}
