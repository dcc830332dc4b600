//! `tembo bench …`: runs the measurements of `tembo-bench` and prints them.
//!
//! The binary only parses options and writes files; what is measured and
//! how lives in `tembo_bench`, so tests and other drivers measure the same
//! way.

use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use clap::{Args, Subcommand};
use tembo_bench::flush::{self, Backing, FlushConfig};
use tembo_bench::progress::Progress;
use tembo_pmem::FlushInstruction;

/// The `bench` subcommands.
#[derive(Debug, Subcommand)]
pub enum BenchCommand {
    /// Flush throughput by object size (CDDS thesis §5.2), msync cost, persist vs raw instructions
    #[command(long_about = "Flush throughput by object size, for every flush instruction this CPU has \
        (the \"MultCallFlushLRU\" benchmark of the CDDS thesis §5.2, Figure 5.1): a 64 MiB region is \
        divided into objects of 64 B … 64 MiB; each object's cache lines are written, then flushed \
        between two fences. Also measures the cost of msync(MS_SYNC) of one dirty 4 KiB page (what \
        the msync mode pays), and Pool::persist of one cache line against the raw store + flush + \
        fence on the same emulated pool.\n\n\
        The full run takes under a minute; --quick takes about a second.")]
    Flush(FlushArgs),
}

/// Options of `tembo bench flush`.
#[derive(Debug, Args)]
pub struct FlushArgs {
    /// Small region and few iterations (about a second; for smoke tests)
    #[arg(long)]
    quick: bool,
    /// Also write the report as JSON to FILE [default when given without FILE: docs/results/flush.json]
    #[arg(long, value_name = "FILE", num_args = 0..=1, default_missing_value = "docs/results/flush.json")]
    json: Option<PathBuf>,
    /// Directory of the file whose page is msync'ed [default: the system temp dir]
    #[arg(long, value_name = "DIR")]
    dir: Option<PathBuf>,
    /// Map the flushed region from a temporary file in DIR (shared, e.g. /dev/shm) instead of anonymous memory
    #[arg(long, value_name = "DIR")]
    region_dir: Option<PathBuf>,
    /// Directory of the emulated pool for the persist comparison (a RAM filesystem)
    #[arg(long, value_name = "DIR", default_value = "/dev/shm")]
    pool_dir: PathBuf,
    /// Measure only this instruction (clwb, clflushopt, clflush); repeatable [default: all available]
    #[arg(long = "instruction", value_name = "NAME")]
    instructions: Vec<FlushInstruction>,
}

/// Runs a `bench` subcommand.
///
/// # Errors
/// A directory that does not exist, an instruction this CPU lacks, a file
/// that cannot be written.
pub fn run(cmd: BenchCommand) -> Result<()> {
    match cmd {
        BenchCommand::Flush(a) => run_flush(a),
    }
}

fn require_dir(dir: &Path, what: &str, flag: &str) -> Result<()> {
    if !dir.is_dir() {
        bail!("{what} directory {} does not exist; create it or pass another with {flag}", dir.display());
    }
    Ok(())
}

fn run_flush(a: FlushArgs) -> Result<()> {
    let mut cfg = if a.quick { FlushConfig::quick() } else { FlushConfig::full() };
    if let Some(dir) = a.dir {
        require_dir(&dir, "msync", "--dir")?;
        cfg.msync_dir = dir;
    }
    if let Some(dir) = a.region_dir {
        require_dir(&dir, "region", "--region-dir")?;
        cfg.backing = Backing::SharedFile(dir);
    }
    require_dir(&a.pool_dir, "pool", "--pool-dir")?;
    cfg.pool_dir = a.pool_dir;
    if !a.instructions.is_empty() {
        for i in &a.instructions {
            if !i.is_available() {
                bail!("this CPU has no {i} instruction; it has: {}", available_names());
            }
        }
        cfg.instructions = a.instructions;
    }
    if cfg.instructions.is_empty() {
        bail!("this CPU has no cache-line flush instruction (clwb, clflushopt, clflush): nothing to measure");
    }
    let report = flush::run(&cfg, Progress::auto()).context("flush benchmark failed")?;
    print!("{}", flush::render_table(&report));
    if let Some(path) = a.json {
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).with_context(|| format!("cannot create directory {}", dir.display()))?;
        }
        let text = serde_json::to_string_pretty(&report).context("encoding the report as JSON")?;
        std::fs::write(&path, text + "\n").with_context(|| format!("cannot write {}", path.display()))?;
        println!("\nwrote {}", path.display());
    }
    Ok(())
}

fn available_names() -> String {
    let v: Vec<&str> = FlushInstruction::ALL.into_iter().filter(|i| i.is_available()).map(|i| i.name()).collect();
    if v.is_empty() {
        "none".into()
    } else {
        v.join(", ")
    }
}
