//! `tembo bench kamino`: the Kamino-Tx study (YCSB with writer threads on
//! the in-place engines, the undo baseline, CDDS and PMDK; the worst case).

use std::path::PathBuf;

use anyhow::{bail, Context, Result};
use clap::Args;
use tembo_bench::progress::Progress;
use tembo_bench::txbench::{self, TxBenchConfig, TxReport, TxTarget};
use tembo_bench::workload::ycsb::Workload as Core;

/// Options of `tembo bench kamino`.
#[derive(Debug, Args)]
pub struct KaminoArgs {
    /// Systems, comma-separated: kamino, kamino-dynamic, undo, cdds, pmemobj (pmemobj needs a
    /// build with --features peers and runs one thread)
    #[arg(long, value_name = "LIST", default_value = "kamino,kamino-dynamic,undo,cdds", value_delimiter = ',')]
    engines: Vec<String>,
    /// YCSB workloads, comma-separated
    #[arg(long, value_name = "LIST", default_value = "a,b,c,d,f", value_delimiter = ',')]
    workloads: Vec<Core>,
    /// Writer thread counts, comma-separated (each runs every workload)
    #[arg(long, value_name = "LIST", default_value = "1,2", value_delimiter = ',')]
    threads: Vec<usize>,
    /// Records loaded before each run phase
    #[arg(long, default_value_t = 100_000)]
    records: u64,
    /// Run-phase operations, all threads together (0: skip the YCSB part)
    #[arg(long, default_value_t = 100_000)]
    ops: u64,
    /// Bytes per value (the paper: 1 KB)
    #[arg(long, default_value_t = 1024)]
    value_bytes: usize,
    /// kamino-dynamic's backup budget as a fraction of the heap
    #[arg(long, default_value_t = 0.5)]
    alpha: f64,
    /// Runs per cell (interleaved across systems); medians are reported
    #[arg(long, default_value_t = 3)]
    runs: usize,
    /// Updates per thread in the worst case (0: skip it)
    #[arg(long, default_value_t = 20_000)]
    worst_updates: u64,
    /// Updates per thread of the disjoint-writers run (0: skip it): each
    /// thread updates random keys of its own range of the --records keys
    #[arg(long, default_value_t = 20_000)]
    disjoint_updates: u64,
    /// Value sizes of the worst case, comma-separated
    #[arg(long, value_name = "LIST", default_value = "64,256,1024,4096", value_delimiter = ',')]
    worst_sizes: Vec<usize>,
    /// Directory for the pools (a RAM filesystem gives Tembo's emulated mode)
    #[arg(long, value_name = "DIR", default_value = "/dev/shm")]
    dir: PathBuf,
    /// Seed of keys and request distributions
    #[arg(long, default_value_t = 7)]
    seed: u64,
    /// Write the report as JSON here
    #[arg(long, value_name = "FILE")]
    json: Option<PathBuf>,
    /// Draw charts as STEM-ycsb.svg/.png, STEM-scaling…, STEM-disjoint…, STEM-worst…
    #[arg(long, value_name = "STEM")]
    plot: Option<PathBuf>,
}

/// Runs the study and prints its tables.
pub fn run(a: KaminoArgs) -> Result<()> {
    let targets = a
        .engines
        .iter()
        .map(|s| TxTarget::parse(s.trim()))
        .collect::<Result<Vec<_>, _>>()
        .map_err(anyhow::Error::msg)?;
    if targets.is_empty() || a.threads.is_empty() || a.threads.contains(&0) {
        bail!("give at least one engine and thread counts of at least 1");
    }
    if a.records == 0 || a.runs == 0 {
        bail!("--records and --runs must be at least 1");
    }
    if !(a.alpha > 0.0 && a.alpha <= 1.0) {
        bail!("--alpha must be in (0, 1]");
    }
    let cfg = TxBenchConfig {
        targets,
        workloads: a.workloads.clone(),
        threads: a.threads.clone(),
        records: a.records,
        ops: a.ops,
        value_bytes: a.value_bytes,
        alpha: a.alpha,
        runs: a.runs,
        dir: a.dir.clone(),
        seed: a.seed,
    };
    let progress = Progress::auto();
    let ycsb = if a.ops > 0 { txbench::run_ycsb(&cfg, &progress).context("the YCSB part failed")? } else { Vec::new() };
    let disjoint = if a.disjoint_updates > 0 {
        txbench::run_disjoint(&cfg, a.disjoint_updates, &progress).context("the disjoint-writers run failed")?
    } else {
        Vec::new()
    };
    let worst = if a.worst_updates > 0 {
        txbench::run_worst(&cfg, &a.worst_sizes, a.worst_updates, &progress).context("the worst case failed")?
    } else {
        Vec::new()
    };
    let r = TxReport {
        machine: tembo_bench::machine::MachineInfo::detect(),
        params: serde_json::json!({
            "engines": a.engines, "workloads": a.workloads.iter().map(|w| w.to_string()).collect::<Vec<_>>(),
            "threads": a.threads, "records": a.records, "ops": a.ops, "value_bytes": a.value_bytes,
            "alpha": a.alpha, "runs": a.runs, "disjoint_updates": a.disjoint_updates, "worst_updates": a.worst_updates, "worst_sizes": a.worst_sizes,
            "dir": a.dir, "seed": a.seed,
        }),
        ycsb,
        worst,
        disjoint,
    };
    emit(&r, a.json.as_deref(), a.plot.as_deref())
}

/// Options of `tembo bench plot-kamino`.
#[derive(Debug, Args)]
pub struct PlotKaminoArgs {
    /// Saved `bench kamino --json` reports; their cells are merged in order
    #[arg(required = true, value_name = "FILE")]
    reports: Vec<PathBuf>,
    /// Write the merged report as JSON here
    #[arg(long, value_name = "FILE")]
    json: Option<PathBuf>,
    /// Draw charts as STEM-ycsb.svg/.png, STEM-scaling…, STEM-disjoint…, STEM-worst…
    #[arg(long, value_name = "STEM")]
    plot: Option<PathBuf>,
}

/// Merges saved reports (e.g. one per workload from a time-boxed run),
/// prints their tables and draws their charts.
pub fn run_plot(a: PlotKaminoArgs) -> Result<()> {
    let mut merged: Option<TxReport> = None;
    for path in &a.reports {
        let text = std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
        let r: TxReport = serde_json::from_str(&text)
            .with_context(|| format!("{} is not a `tembo bench kamino --json` report", path.display()))?;
        match &mut merged {
            None => merged = Some(r),
            Some(m) => {
                m.ycsb.extend(r.ycsb);
                m.worst.extend(r.worst);
                m.disjoint.extend(r.disjoint);
            }
        }
    }
    let r = merged.context("no report given")?;
    emit(&r, a.json.as_deref(), a.plot.as_deref())
}

/// Prints the report's tables, saves it as JSON and draws its charts.
fn emit(r: &TxReport, json: Option<&std::path::Path>, plot: Option<&std::path::Path>) -> Result<()> {
    print!("{}", txbench::render(r));
    if let Some(path) = json {
        crate::bench_cmd::write_file(path, &(serde_json::to_string_pretty(r)? + "\n"))?;
        println!("wrote {}", path.display());
    }
    if let Some(stem) = plot {
        let name = stem.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        let dir = stem.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(std::path::Path::new("."));
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
        for (suffix, svg) in txbench::charts(r)? {
            let out = dir.join(format!("{name}-{suffix}"));
            tembo_bench::plot::write_svg_and_png(&out, &svg)?;
            println!("wrote {}.svg and .png", out.display());
        }
    }
    Ok(())
}
