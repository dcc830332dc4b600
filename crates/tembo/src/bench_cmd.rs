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
    /// The CDDS microbenchmark on Tembo and the peers: put, get, delete N random keys
    #[command(
        alias = "kv",
        long_about = "The CDDS microbenchmark (thesis §5.3–5.4) on every chosen target in the same run: N \
        distinct random keys are put once (random order), read once (another random order) and deleted once; \
        on durable targets every operation is its own durable commit. Targets: Tembo's CDDS tree in each \
        ordering mode (cdds = fast, cdds-full, cdds-none = volatile), std BTreeMap, and with the `peers` build \
        feature PMDK libpmemobj, LMDB, RocksDB, SQLite (WAL), Berkeley DB and redb, each durable and volatile, \
        all with their files in --dir (default /dev/shm). Over loopback, through one RESP client and one \
        connection: `tembo serve` (tembo-serve) and redis-server with its AOF fsynced always, everysec or not \
        kept (redis-always, redis-everysec, redis-off), each started for the run with its files in --dir \
        (SET, GET, DEL; the `network` group, part of `all` wherever redis-server is on PATH: a request's \
        loopback round trip makes them slow at large --keys). Every get is checked against the value put. Prints \
        ops/s (median of --runs), latency percentiles (HdrHistogram), and Tembo's flushed lines and fences per \
        op; --json saves everything with the machine, --plot draws throughput and latency charts (SVG + PNG).",
        after_help = "Examples:\n  tembo bench micro --keys 1000000 --value-bytes 256 --json docs/results/micro-1m-256.json\n  \
                      tembo bench micro --keys 200000 --value-bytes 2048 --targets durable,btreemap\n  \
                      tembo bench micro --keys 10000 --runs 1 --targets tembo,btreemap\n  \
                      tembo bench micro --keys 100000 --targets network"
    )]
    Micro(crate::bench_targets_cmd::MicroArgs),
    /// YCSB core workloads A–F (load + run) on Tembo and the peers, generated in-process
    #[command(
        long_about = "YCSB 0.17.0's core workloads A–F generated in-process from --seed (YCSB's key \
        names and load order, operation mixes, scrambled-zipfian and latest request distributions, E's scan \
        lengths uniform in 1..100, F's read-modify-write), each on a fresh instance of every chosen target: \
        a load phase of --records inserts, then a run phase of --ops operations, one thread. Writes on \
        durable targets are each a durable commit. The network targets (tembo-serve, redis-*) store a \
        record as one string; for E they also keep a sorted set of the keys, as YCSB's Redis binding does, \
        and scan with ZRANGE BYLEX and MGET. Reports throughput per phase and latency per operation \
        kind (HdrHistogram).",
        after_help = "Examples:\n  tembo bench ycsb --records 100000 --ops 100000 --targets durable,btreemap\n  \
                      tembo bench ycsb --workloads a,f --records 1000000 --json docs/results/ycsb.json --plot docs/results/ycsb"
    )]
    Ycsb(crate::bench_targets_cmd::YcsbArgs),
    /// Puts per second by value size (CDDS thesis §5.5, Figure 5.5): tembo serve against redis-server's log
    #[command(
        long_about = "The CDDS thesis's §5.5 (\"Tembo versioning vs. Redis logging\", Figure 5.5): the \
        microbenchmark (put, get, delete --keys random keys) at each of --value-sizes, on fresh instances of \
        every chosen target. By default over loopback, one connection: tembo-serve (one copy of each value, \
        made durable in place) against redis-server with its append-only log fsynced before every reply \
        (redis-always) and without persistence (redis-off); any targets can be named. Prints the tables, \
        --json saves them, --plot draws the usual charts and STEM-puts-by-size.{svg,png}, the figure's \
        line chart.",
        after_help = "Examples:\n  tembo bench sizes --keys 50000 --runs 3 --json docs/results/sizes.json --plot docs/results/sizes\n  \
                      tembo bench sizes --value-sizes 64,256,1024,4096,16384 --targets cdds,tembo-serve,redis-always"
    )]
    Sizes(crate::bench_sizes_cmd::SizesArgs),
    /// The Kamino-Tx study: YCSB A, B, C, D, F with writer threads on kamino, kamino-dynamic, undo, cdds
    #[command(
        long_about = "Kamino-Tx §7 with Tembo: YCSB workloads (1 KB values) on the in-place B+tree under \
        Kamino-Tx-Simple (kamino), Kamino-Tx-Dynamic (kamino-dynamic, --alpha of the heap backed up) and \
        undo logging (undo), against the CDDS tree and PMDK libpmemobj (--features peers, one thread). \
        Each cell loads --records records on one thread, then runs --ops operations dealt round-robin to \
        --threads threads on one database. Reports throughput, latency of all operations and of writes, \
        copies made in the critical path, pool bytes used; then writers on disjoint keys (each thread \
        updating random keys of its own range of the records) by thread count; then the worst case (each \
        thread updating one object over and over, each object in a leaf of its own) by value size. \
        --ops 0 skips the YCSB part, --disjoint-updates 0 and --worst-updates 0 the others.",
        after_help = "Examples:\n  tembo bench kamino --records 20000 --ops 20000 --runs 1\n  \
                      tembo bench kamino --threads 1,2 --json docs/results/kamino.json --plot docs/results/kamino"
    )]
    Kamino(crate::bench_kamino_cmd::KaminoArgs),
    /// Merge saved `bench kamino` reports, print their tables and draw their charts again
    #[command(
        name = "plot-kamino",
        after_help = "Example:\n  tembo bench plot-kamino ks/ycsb-a.json ks/ycsb-f.json ks/disjoint.json \
                      --json docs/results/kamino-16core.json --plot docs/results/kamino-16core"
    )]
    PlotKamino(crate::bench_kamino_cmd::PlotKaminoArgs),
    /// The ordering study: insert latency by key order and latency by write ratio, per ordering mode
    #[command(
        long_about = "Reproduces nvm-btree-ordering §5.2 with Tembo: (Figure 3) --keys inserts of \
        8-byte integer keys into an empty tree in each key order — monotonic, uniform, reverse, and YCSB's \
        scrambled zipfian — and (Figure 4) after loading --keys keys, --ops operations of which 0..100% \
        (--ratios) insert new keys uniformly and the rest search loaded keys chosen by the zipfian. Run it \
        on the CDDS tree's ordering modes (the default --targets tembo: cdds = fast, cdds-full, cdds-none) \
        or any other targets. Reports latency percentiles and flushed lines and fences per operation; \
        --plot also draws mean latency against write ratio.",
        after_help = "Example:\n  tembo bench ordering --keys 100000 --json docs/results/ordering.json --plot docs/results/ordering"
    )]
    Ordering(crate::bench_targets_cmd::OrderingArgs),
    /// Write heat map (thesis ch. 6): pages written per insert, CDDS against an in-place B+tree
    #[command(
        long_about = "The write heat map of the CDDS thesis, chapter 6: inserts --keys random keys \
        into each target and counts, for every page of its pool, how many inserts wrote it. Nothing is \
        instrumented: before each insert the pool mapping is made read-only and the first store to each \
        page faults once and is counted. Compares CDDS (copy-on-split versioning) with PMDK libpmemobj's \
        in-place B+tree and undo log (needs the `peers` feature). Prints pages written, mean and maximum \
        writes per page and how much of the writing lands on the hottest 1% of pages; --plot draws the map.",
        after_help = "Example:\n  tembo bench heatmap --keys 100000 --json docs/results/heatmap.json --plot docs/results/heatmap"
    )]
    Heatmap(crate::bench_targets_cmd::HeatmapArgs),
    /// Every workload at a tiny size on every target: checks the harness, peers and charts in seconds
    Smoke(crate::bench_targets_cmd::SmokeArgs),
    /// Print the table of a saved micro/ycsb report and draw its charts again (SVG and PNG)
    Plot(crate::bench_targets_cmd::PlotArgs),
    /// Time from an unclean shutdown to the first answered get and put, and to full recovery
    #[command(long_about = "Loads --keys keys into a CDDS tree on an emulated pool, copies the pool file \
        while it is open (what kill -9 leaves), opens the copy and times the first answered get and the \
        first committed put (the tree recovers lazily and serves at once) and the background repair walk \
        and leak sweep. A second copy is opened with a writer overwriting keys for as long as recovery \
        runs: writes served meanwhile, the slowest of them, and the recovery time under that load. A \
        clean open is timed for comparison. Needs room for three copies of the pool in --pool-dir.")]
    Recovery(RecoveryArgs),
    /// Pool space under long update/delete churn, with and without the background GC
    #[command(
        long_about = "Loads --keys keys into a CDDS database on an emulated pool, then runs --ops operations \
        over the same keys (two in three overwrite a random key, one in three deletes one), each a durable \
        commit, sampling --samples times the pool bytes in use against the live key and value bytes, the dead \
        entries the tree holds, and the throughput. Runs once with the background incremental GC (the \
        default of every database) and once without the GC thread, in the same process. Prints a table; \
        --json saves the samples, --plot draws the used/live ratio over the churn (SVG and PNG).",
        after_help = "Example:\n  tembo bench churn --keys 100000 --ops 1000000 --json docs/results/churn.json --plot docs/results/churn"
    )]
    Churn(ChurnArgs),
}

/// Options of `tembo bench churn`.
#[derive(Debug, Args)]
pub struct ChurnArgs {
    /// Size of the key space (all loaded before the churn)
    #[arg(long, default_value_t = 100_000)]
    keys: usize,
    /// Churn operations
    #[arg(long, default_value_t = 1_000_000)]
    ops: usize,
    /// Value size in bytes
    #[arg(long, default_value_t = 256)]
    value_bytes: usize,
    /// Samples over the churn
    #[arg(long, default_value_t = 20)]
    samples: usize,
    /// Seed of keys and operations
    #[arg(long, default_value_t = 7)]
    seed: u64,
    /// Directory of the pool files
    #[arg(long, value_name = "DIR", default_value = "/dev/shm")]
    pool_dir: PathBuf,
    /// Also write the report as JSON to FILE
    #[arg(long, value_name = "FILE")]
    json: Option<PathBuf>,
    /// Also draw the used/live ratio as STEM.svg and STEM.png
    #[arg(long, value_name = "STEM")]
    plot: Option<PathBuf>,
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
        BenchCommand::Micro(a) => crate::bench_targets_cmd::run_micro(a),
        BenchCommand::Ycsb(a) => crate::bench_targets_cmd::run_ycsb(a),
        BenchCommand::Sizes(a) => crate::bench_sizes_cmd::run(a),
        BenchCommand::Kamino(a) => crate::bench_kamino_cmd::run(a),
        BenchCommand::PlotKamino(a) => crate::bench_kamino_cmd::run_plot(a),
        BenchCommand::Ordering(a) => crate::bench_targets_cmd::run_ordering(a),
        BenchCommand::Heatmap(a) => crate::bench_targets_cmd::run_heatmap(a),
        BenchCommand::Smoke(a) => crate::bench_targets_cmd::run_smoke(a),
        BenchCommand::Plot(a) => crate::bench_targets_cmd::run_plot(a),
        BenchCommand::Recovery(a) => run_recovery(a),
        BenchCommand::Churn(a) => run_churn(a),
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
pub(crate) fn write_file(path: &Path, text: &str) -> Result<()> {
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

fn run_churn(a: ChurnArgs) -> Result<()> {
    require_dir(&a.pool_dir, "pool", "--pool-dir")?;
    anyhow::ensure!(a.keys > 0 && a.samples > 0, "--keys and --samples must be at least 1");
    let cfg = tembo_bench::churn::ChurnConfig {
        keys: a.keys,
        ops: a.ops,
        value_bytes: a.value_bytes,
        samples: a.samples,
        pool_dir: a.pool_dir,
        seed: a.seed,
    };
    let r = tembo_bench::churn::run(&cfg, &Progress::auto()).context("churn benchmark failed")?;
    println!("{} keys x {} B, {} churn ops (2/3 overwrite, 1/3 delete)", r.keys, r.value_bytes, r.ops);
    println!(
        "{:<14} {:>10} {:>9} {:>12} {:>12} {:>7} {:>10} {:>10}",
        "gc", "ops", "keys", "live MiB", "used MiB", "ratio", "dead", "ops/s"
    );
    for run in &r.runs {
        for s in &run.samples {
            println!(
                "{:<14} {:>10} {:>9} {:>12.1} {:>12.1} {:>7.2} {:>10} {:>10.0}",
                run.gc,
                s.ops,
                s.keys,
                s.live_bytes as f64 / 1048576.0,
                s.used_bytes as f64 / 1048576.0,
                s.ratio,
                s.dead_entries,
                s.ops_per_sec
            );
        }
        println!("{}: {} GC steps, {} passes", run.gc, run.gc_steps, run.gc_passes);
    }
    if let Some(path) = a.json {
        std::fs::write(&path, serde_json::to_string_pretty(&r)?)
            .with_context(|| format!("writing {}", path.display()))?;
        println!("wrote {}", path.display());
    }
    if let Some(stem) = a.plot {
        tembo_bench::plot::write_svg_and_png(&stem, &tembo_bench::churn::ratio_svg(&r)?)?;
        println!("wrote {}.svg and .png", stem.display());
    }
    Ok(())
}

fn run_recovery(a: RecoveryArgs) -> Result<()> {
    require_dir(&a.pool_dir, "pool", "--pool-dir")?;
    let cfg = tembo_bench::recovery::RecoveryConfig { keys: a.keys, value_bytes: a.value_bytes, pool_dir: a.pool_dir };
    let r = tembo_bench::recovery::run(&cfg, Progress::auto()).context("recovery benchmark failed")?;
    println!(
        "{} keys x {} B ({} MiB pool), unclean open (lazy recovery): first answered get {:.1} ms, first committed \
         put {:.1} ms, fully recovered {:.1} ms (background repair walk {:.1} ms over {} nodes, leak sweep {:.1} ms)",
        r.keys,
        r.value_bytes,
        r.pool_bytes >> 20,
        r.first_request_ms,
        r.first_write_ms,
        r.fully_recovered_ms,
        r.repair_ms,
        r.nodes_visited,
        r.sweep_ms,
    );
    println!(
        "with a writer overwriting keys meanwhile: {} writes served during recovery, slowest {:.2} ms (at {:.0} ms), \
         recovery done after {:.1} ms; clean open to first get {:.1} ms",
        r.loaded_writes,
        r.loaded_max_write_ms,
        r.loaded_max_write_at_ms,
        r.loaded_fully_recovered_ms,
        r.clean_first_request_ms
    );
    if let Some(path) = a.json {
        std::fs::write(&path, serde_json::to_string_pretty(&r)?)
            .with_context(|| format!("writing {}", path.display()))?;
        println!("wrote {}", path.display());
    }
    Ok(())
}
