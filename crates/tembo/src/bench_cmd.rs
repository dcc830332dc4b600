//! `tembo bench …`: runs the measurements of `tembo-bench` and prints them,
//! and draws charts of saved reports.
//!
//! The binary only parses options and reads and writes files; what is
//! measured, and how it is drawn, lives in `tembo_bench`, so tests and other
//! drivers measure and draw the same way.

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
        The full run takes under a minute; --quick takes about a second. --json saves the report, \
        --plot draws it as an SVG line chart (`tembo bench plot-flush` draws a saved report again).")]
    Flush(FlushArgs),
    /// Draw a saved `bench flush --json` report as an SVG chart, without measuring again
    #[command(
        name = "plot-flush",
        long_about = "Draws a report saved by `tembo bench flush --json` as an SVG line chart: object size \
            (64 B … 64 MiB, log2 axis) against millions of cache lines flushed per second, one line per \
            flush instruction, with the machine the report was measured on. Nothing is measured.",
        after_help = "Example:\n  tembo bench plot-flush docs/results/flush.json --out docs/results/flush.svg"
    )]
    PlotFlush(PlotFlushArgs),
    /// Durable put/get/delete throughput of the CDDS tree against BTreeMap, with flushes and fences per op
    #[command(
        long_about = "Durable put, get and delete throughput of the CDDS B+tree on an emulated pool \
        (a file in --pool-dir, /dev/shm by default, as the CDDS thesis measured), the same tree with \
        ordering `none` (volatile CDDS), and std::collections::BTreeMap in the same run. Keys are 25 random \
        bytes; every key is put once, read once and deleted once, each phase in its own random order. \
        Reports the median of --runs runs and the cache lines flushed and fences issued per operation.",
        after_help = "Examples:\n  tembo bench kv --keys 1000000 --value-bytes 256\n  \
                      tembo bench kv --keys 200000 --value-bytes 2048 --json docs/results/kv-200k-2k.json"
    )]
    Kv(KvArgs),
    /// Time from an unclean shutdown to the first answered request, and what recovery did
    #[command(long_about = "Loads --keys keys into a CDDS tree on an emulated pool, copies the pool file \
        while it is open (what kill -9 leaves), opens the copy and times open + recovery + the first get; \
        reports the repair walk and leak sweep separately, and a clean open for comparison.")]
    Recovery(RecoveryArgs),
}

/// Options of `tembo bench recovery`.
#[derive(Debug, Args)]
pub struct RecoveryArgs {
    /// Keys to load
    #[arg(long, default_value_t = 1_000_000)]
    keys: usize,
    /// Value size in bytes
    #[arg(long, default_value_t = 256)]
    value_bytes: usize,
    /// Directory of the pool files
    #[arg(long, value_name = "DIR", default_value = "/dev/shm")]
    pool_dir: PathBuf,
    /// Also write the report as JSON to FILE
    #[arg(long, value_name = "FILE")]
    json: Option<PathBuf>,
}

/// Options of `tembo bench kv`.
#[derive(Debug, Args)]
pub struct KvArgs {
    /// Number of keys
    #[arg(long, default_value_t = 1_000_000)]
    keys: usize,
    /// Value size in bytes
    #[arg(long, default_value_t = 256)]
    value_bytes: usize,
    /// Runs per target; medians are reported
    #[arg(long, default_value_t = 3)]
    runs: usize,
    /// Directory of the pool files (a RAM filesystem gives emulated mode)
    #[arg(long, value_name = "DIR", default_value = "/dev/shm")]
    pool_dir: PathBuf,
    /// Seed of keys and orders
    #[arg(long, default_value_t = 7)]
    seed: u64,
    /// Also write the report as JSON to FILE
    #[arg(long, value_name = "FILE")]
    json: Option<PathBuf>,
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
    /// Also draw the report as an SVG line chart in FILE [default when given without FILE: docs/results/flush.svg]
    #[arg(long, value_name = "FILE", num_args = 0..=1, default_missing_value = "docs/results/flush.svg")]
    plot: Option<PathBuf>,
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

/// Options of `tembo bench plot-flush`.
#[derive(Debug, Args)]
pub struct PlotFlushArgs {
    /// The report, as written by `tembo bench flush --json`
    #[arg(value_name = "JSON")]
    json: PathBuf,
    /// Where to write the chart [default: JSON with the extension .svg]
    #[arg(long, value_name = "SVG")]
    out: Option<PathBuf>,
}

/// Runs a `bench` subcommand.
///
/// # Errors
/// A directory that does not exist, an instruction this CPU lacks, a file
/// that cannot be written.
pub fn run(cmd: BenchCommand) -> Result<()> {
    match cmd {
        BenchCommand::Flush(a) => run_flush(a),
        BenchCommand::PlotFlush(a) => run_plot_flush(a),
        BenchCommand::Kv(a) => run_kv(a),
        BenchCommand::Recovery(a) => run_recovery(a),
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
        let text = serde_json::to_string_pretty(&report).context("encoding the report as JSON")?;
        write_file(&path, &(text + "\n"))?;
        println!("\nwrote {}", path.display());
    }
    if let Some(path) = a.plot {
        write_file(&path, &flush::render_svg(&report).context("drawing the chart")?)?;
        println!("wrote {}", path.display());
    }
    Ok(())
}

fn run_plot_flush(a: PlotFlushArgs) -> Result<()> {
    let text = std::fs::read_to_string(&a.json).with_context(|| format!("cannot read {}", a.json.display()))?;
    let report: flush::FlushReport = serde_json::from_str(&text).with_context(|| {
        format!("{} is not a flush report (as written by `tembo bench flush --json`)", a.json.display())
    })?;
    let svg = flush::render_svg(&report).with_context(|| format!("cannot draw {}", a.json.display()))?;
    let out = a.out.unwrap_or_else(|| a.json.with_extension("svg"));
    if out == a.json {
        bail!("the chart would overwrite the report {}; pass another file with --out", a.json.display());
    }
    write_file(&out, &svg)?;
    println!("wrote {}", out.display());
    Ok(())
}

/// Writes `text` to `path`, creating its directory.
fn write_file(path: &Path, text: &str) -> Result<()> {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).with_context(|| format!("cannot create directory {}", dir.display()))?;
    }
    std::fs::write(path, text).with_context(|| format!("cannot write {}", path.display()))
}

fn available_names() -> String {
    let v: Vec<&str> = FlushInstruction::ALL.into_iter().filter(|i| i.is_available()).map(|i| i.name()).collect();
    if v.is_empty() {
        "none".into()
    } else {
        v.join(", ")
    }
}

fn run_kv(a: KvArgs) -> Result<()> {
    require_dir(&a.pool_dir, "pool", "--pool-dir")?;
    if a.keys == 0 || a.runs == 0 {
        bail!("--keys and --runs must be at least 1");
    }
    let cfg = tembo_bench::kv::KvConfig {
        keys: a.keys,
        value_bytes: a.value_bytes,
        runs: a.runs,
        pool_dir: a.pool_dir,
        seed: a.seed,
    };
    let report = tembo_bench::kv::run(&cfg, Progress::auto()).context("kv benchmark failed")?;
    print!("{}", tembo_bench::kv::render_table(&report));
    if let Some(path) = a.json {
        std::fs::write(&path, serde_json::to_string_pretty(&report)?)
            .with_context(|| format!("writing {}", path.display()))?;
        println!("wrote {}", path.display());
    }
    Ok(())
}

fn run_recovery(a: RecoveryArgs) -> Result<()> {
    require_dir(&a.pool_dir, "pool", "--pool-dir")?;
    let cfg = tembo_bench::recovery::RecoveryConfig { keys: a.keys, value_bytes: a.value_bytes, pool_dir: a.pool_dir };
    let r = tembo_bench::recovery::run(&cfg, Progress::auto()).context("recovery benchmark failed")?;
    println!(
        "{} keys x {} B ({} MiB pool): unclean open to first answered get {:.1} ms, to fully recovered \
         {:.1} ms (repair walk {:.1} ms over {} nodes, background leak sweep {:.1} ms); clean open to first get {:.1} ms",
        r.keys,
        r.value_bytes,
        r.pool_bytes >> 20,
        r.first_request_ms,
        r.fully_recovered_ms,
        r.repair_ms,
        r.nodes_visited,
        r.sweep_ms,
        r.clean_first_request_ms
    );
    if let Some(path) = a.json {
        std::fs::write(&path, serde_json::to_string_pretty(&r)?)
            .with_context(|| format!("writing {}", path.display()))?;
        println!("wrote {}", path.display());
    }
    Ok(())
}
