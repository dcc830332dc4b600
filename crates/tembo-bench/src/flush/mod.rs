//! The flush benchmark of the CDDS thesis §5.2 (Figure 5.1), and the two
//! costs Tembo's durability story rests on.
//!
//! Why it exists: every durable update in Tembo ends in cache-line flushes
//! and a fence, so their throughput bounds what any engine can do; the
//! thesis measured 12M–20M CLFLUSHes/s (0.72–1.19 GB/s) in 2011. Three parts:
//!
//! - [`sweep`] — "MultCallFlushLRU": a 64 MiB page-aligned region divided
//!   into equal cache-aligned objects of 64 B … 64 MiB; for each object,
//!   write every line, then fence, flush each line, fence; then the next
//!   object, striding over the whole region several times. Reported as cache
//!   lines flushed per second and GB/s, for every flush instruction the CPU
//!   has (CLWB, CLFLUSHOPT, CLFLUSH).
//! - [`msync`] — what the `msync` mode pays instead: one `msync(MS_SYNC)` of
//!   one dirty 4 KiB page of a file in a chosen directory (median, p99).
//! - [`persist_line`] — `Pool::persist(off, 64)` on an emulated pool against
//!   the raw store + flush + fence on the same mapping: the cost of the
//!   pool's abstraction (mode dispatch, bounds, write counters).
//!
//! [`run`] does all three and returns a [`FlushReport`] (serde), which
//! [`render_table`] prints and [`render_svg`] draws as a line chart.

pub mod msync;
pub mod persist_line;
mod plot;
pub mod sweep;
mod table;

use std::path::PathBuf;
use std::time::Instant;

use anyhow::Result;
use serde::{Deserialize, Serialize};
use tembo_pmem::FlushInstruction;

pub use msync::MsyncCost;
pub use persist_line::PersistComparison;
pub use plot::{legend_label, render_svg, TITLE as PLOT_TITLE};
pub use sweep::{InstructionSweep, SweepPoint};
pub use table::render_table;

use crate::machine::MachineInfo;
use crate::progress::Progress;

/// Where the flushed region lives.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Backing {
    /// Anonymous memory (the thesis' `malloc`ed buffer).
    Anonymous,
    /// A temporary file in this directory, mapped shared (use a RAM
    /// filesystem such as `/dev/shm`: that is how an `emulated` pool is mapped).
    SharedFile(PathBuf),
}

/// What to measure and how long.
#[derive(Clone, Debug)]
pub struct FlushConfig {
    /// `"quick"` or `"full"`: recorded in the report.
    pub label: &'static str,
    /// Bytes of the flushed region (the thesis: 64 MiB). A power of two.
    pub region_bytes: usize,
    /// Where the region lives.
    pub backing: Backing,
    /// Timed passes over the whole region for each object size; the median
    /// pass is reported.
    pub passes: u32,
    /// Flush instructions to measure (default: every one this CPU has).
    pub instructions: Vec<FlushInstruction>,
    /// Directory of the file whose page is `msync`ed.
    pub msync_dir: PathBuf,
    /// Timed `msync` calls.
    pub msync_iterations: u32,
    /// Directory of the emulated pool for the persist comparison (a RAM
    /// filesystem, e.g. `/dev/shm`).
    pub pool_dir: PathBuf,
    /// Repetitions of the persist comparison (each times both variants).
    pub persist_repetitions: u32,
    /// Batches per variant per repetition.
    pub persist_batches: u32,
    /// Operations per timed batch.
    pub persist_batch_ops: u32,
}

fn available_instructions() -> Vec<FlushInstruction> {
    FlushInstruction::ALL.into_iter().filter(|i| i.is_available()).collect()
}

impl FlushConfig {
    /// The full run: the thesis' 64 MiB region, 5 passes per object size,
    /// 2000 `msync`s, 10 × 2 × 200 batches of 1000 persists (well under a
    /// minute on a 2020s x86 server).
    pub fn full() -> FlushConfig {
        FlushConfig {
            label: "full",
            region_bytes: 64 << 20,
            backing: Backing::Anonymous,
            passes: 5,
            instructions: available_instructions(),
            msync_dir: std::env::temp_dir(),
            msync_iterations: 2000,
            pool_dir: PathBuf::from("/dev/shm"),
            persist_repetitions: 10,
            persist_batches: 200,
            persist_batch_ops: 1000,
        }
    }

    /// A smoke run of about a second (for tests): a 4 MiB region, 2 passes,
    /// 200 `msync`s, a short persist comparison.
    pub fn quick() -> FlushConfig {
        FlushConfig {
            label: "quick",
            region_bytes: 4 << 20,
            passes: 2,
            msync_iterations: 200,
            persist_repetitions: 3,
            persist_batches: 30,
            persist_batch_ops: 200,
            ..FlushConfig::full()
        }
    }
}

/// Everything one run measured.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct FlushReport {
    /// `"quick"` or `"full"`.
    pub mode: String,
    /// The machine.
    pub machine: MachineInfo,
    /// Bytes of the flushed region.
    pub region_bytes: u64,
    /// `anonymous` or `shared file in DIR (FS)`.
    pub region_backing: String,
    /// Timed passes per object size.
    pub passes: u32,
    /// One sweep over all object sizes per flush instruction.
    pub sweeps: Vec<InstructionSweep>,
    /// The cost of `msync` of one dirty page.
    pub msync: MsyncCost,
    /// `Pool::persist` against the raw instructions.
    pub persist: PersistComparison,
    /// Wall time of the whole run.
    pub elapsed_secs: f64,
}

/// Runs the sweep for every configured instruction, the msync cost and the
/// persist comparison.
///
/// # Errors
/// A region, file or pool that cannot be made (with the path in the message).
pub fn run(cfg: &FlushConfig, progress: Progress) -> Result<FlushReport> {
    let start = Instant::now();
    let machine = MachineInfo::detect();
    let (sweeps, region_backing) = sweep::run_all(cfg, progress)?;
    let msync = msync::measure(&cfg.msync_dir, cfg.msync_iterations, progress)?;
    let persist = persist_line::measure(cfg, progress)?;
    Ok(FlushReport {
        mode: cfg.label.to_string(),
        machine,
        region_bytes: cfg.region_bytes as u64,
        region_backing,
        passes: cfg.passes,
        sweeps,
        msync,
        persist,
        elapsed_secs: start.elapsed().as_secs_f64(),
    })
}
