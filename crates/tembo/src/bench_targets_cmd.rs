//! `tembo bench micro|ycsb|ordering|smoke|plot`: the workloads of
//! `tembo_bench::workload` on Tembo's engines and the peers, in one run.

use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use clap::Args;
use tembo_bench::plot;
use tembo_bench::progress::Progress;
use tembo_bench::report::{self, Report, RunConfig};
use tembo_bench::targets::{parse_list, TargetKind};
use tembo_bench::workload::micro::Micro;
use tembo_bench::workload::Workload;

/// Options every target benchmark shares.
#[derive(Debug, Args)]
pub struct Common {
    /// Targets, comma-separated: names (cdds, cdds-full, cdds-none, btreemap, pmemobj, lmdb, lmdb-nosync,
    /// rocksdb, rocksdb-nowal, sqlite, sqlite-nosync, bdb, bdb-nosync, redb, redb-nosync) or groups
    /// (all, durable, volatile, tembo)
    #[arg(long, value_name = "LIST", default_value = "all", value_parser = parse_targets)]
    targets: TargetList,
    /// Runs per target (interleaved); medians are reported
    #[arg(long, default_value_t = 3)]
    runs: usize,
    /// Directory for every target's files (a RAM filesystem gives Tembo's emulated mode)
    #[arg(long, value_name = "DIR", default_value = "/dev/shm")]
    dir: PathBuf,
    /// Seed of keys, orders and request distributions
    #[arg(long, default_value_t = 7)]
    seed: u64,
    /// Also write the report as JSON to FILE
    #[arg(long, value_name = "FILE")]
    json: Option<PathBuf>,
    /// Also draw charts: STEM-throughput.{svg,png} and STEM-latency.{svg,png}
    #[arg(long, value_name = "STEM")]
    plot: Option<PathBuf>,
}

/// A parsed `--targets` list.
#[derive(Clone, Debug)]
pub struct TargetList(Vec<TargetKind>);

fn parse_targets(s: &str) -> Result<TargetList, String> {
    parse_list(s).map(TargetList)
}

/// Options of `tembo bench micro`.
#[derive(Debug, Args)]
pub struct MicroArgs {
    /// Number of keys
    #[arg(long, default_value_t = 1_000_000)]
    keys: usize,
    /// Key size in bytes (at least 8)
    #[arg(long, default_value_t = 25)]
    key_bytes: usize,
    /// Value size in bytes
    #[arg(long, default_value_t = 256)]
    value_bytes: usize,
    #[command(flatten)]
    common: Common,
}

/// Options of `tembo bench plot`.
#[derive(Debug, Args)]
pub struct PlotArgs {
    /// A report written by `tembo bench micro|ycsb --json`
    #[arg(value_name = "JSON")]
    json: PathBuf,
    /// Chart files' stem [default: JSON without its extension]
    #[arg(long, value_name = "STEM")]
    out: Option<PathBuf>,
}

impl Common {
    fn config(&self) -> Result<RunConfig> {
        if !self.dir.is_dir() {
            bail!("directory {} does not exist; create it or pass another with --dir", self.dir.display());
        }
        if self.runs == 0 {
            bail!("--runs must be at least 1");
        }
        for k in &self.targets.0 {
            if !k.available() {
                bail!(
                    "target `{k}` is a peer database and this tembo was built without them; build with \
                     `cargo build --release -p tembo --features peers` after bench/peers.sh installs their libraries"
                );
            }
        }
        Ok(RunConfig { targets: self.targets.0.clone(), runs: self.runs, dir: self.dir.clone() })
    }
}

/// Runs `workload` with `common`'s targets and prints/saves/draws the report.
pub fn run_and_report(workload: &dyn Workload, common: &Common) -> Result<Report> {
    let cfg = common.config()?;
    let r = report::run(workload, &cfg, Progress::auto())
        .with_context(|| format!("{} benchmark failed", workload.name()))?;
    print!("{}", report::render_table(&r));
    save(&r, common.json.as_deref(), common.plot.as_deref())?;
    Ok(r)
}

fn save(r: &Report, json: Option<&Path>, plot_stem: Option<&Path>) -> Result<()> {
    if let Some(path) = json {
        super::bench_cmd::write_file(path, &(serde_json::to_string_pretty(r)? + "\n"))?;
        println!("wrote {}", path.display());
    }
    if let Some(stem) = plot_stem {
        draw(r, stem)?;
    }
    Ok(())
}

fn draw(r: &Report, stem: &Path) -> Result<()> {
    let name = stem.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let dir = stem.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    for (suffix, svg) in [("throughput", plot::throughput_svg(r)?), ("latency", plot::latency_svg(r)?)] {
        let out = dir.join(format!("{name}-{suffix}"));
        plot::write_svg_and_png(&out, &svg)?;
        println!("wrote {}.svg and .png", out.display());
    }
    Ok(())
}

/// `tembo bench micro`.
pub fn run_micro(a: MicroArgs) -> Result<()> {
    if a.keys == 0 {
        bail!("--keys must be at least 1");
    }
    let w = Micro::new(a.keys, a.key_bytes, a.value_bytes, a.common.seed);
    run_and_report(&w, &a.common).map(drop)
}

/// `tembo bench plot`.
pub fn run_plot(a: PlotArgs) -> Result<()> {
    let text = std::fs::read_to_string(&a.json).with_context(|| format!("cannot read {}", a.json.display()))?;
    let r: Report = serde_json::from_str(&text).with_context(|| {
        format!("{} is not a target report (as written by `tembo bench micro|ycsb --json`)", a.json.display())
    })?;
    draw(&r, &a.out.unwrap_or_else(|| a.json.with_extension("")))
}

/// Options of `tembo bench ycsb`.
#[derive(Debug, Args)]
pub struct YcsbArgs {
    /// Workloads to run, comma-separated (a..f)
    #[arg(long, value_name = "LIST", default_value = "a,b,c,d,e,f", value_delimiter = ',')]
    workloads: Vec<tembo_bench::workload::ycsb::Workload>,
    /// Records inserted by each workload's load phase (YCSB recordcount)
    #[arg(long, default_value_t = 1_000_000)]
    records: u64,
    /// Operations of each run phase (YCSB operationcount)
    #[arg(long, default_value_t = 1_000_000)]
    ops: u64,
    /// Bytes per record (YCSB's default: 10 fields x 100 B)
    #[arg(long, default_value_t = 1000)]
    value_bytes: usize,
    #[command(flatten)]
    common: Common,
}

/// `tembo bench ycsb`: each workload on a fresh instance of every target;
/// one report whose phases are "load a", "run a", "load b"…
pub fn run_ycsb(a: YcsbArgs) -> Result<()> {
    use tembo_bench::workload::ycsb_bench::Ycsb;
    if a.records == 0 {
        bail!("--records must be at least 1 (reads need a record)");
    }
    let cfg = a.common.config()?;
    let mut combined: Option<Report> = None;
    for w in &a.workloads {
        let work = Ycsb::new(*w, a.records, a.ops, a.value_bytes, a.common.seed);
        let mut r = report::run(&work, &cfg, Progress::auto()).with_context(|| format!("YCSB {w} failed"))?;
        let letter = w.to_string().to_ascii_lowercase();
        for t in &mut r.targets {
            for p in &mut t.phases {
                p.phase = format!("{} {letter}", p.phase);
            }
        }
        match combined.as_mut() {
            None => {
                r.workload = "ycsb".into();
                r.params = serde_json::json!({
                    "workloads": a.workloads.iter().map(|w| w.to_string()).collect::<Vec<_>>(),
                    "record_count": a.records, "operation_count": a.ops,
                    "value_bytes": a.value_bytes, "seed": a.common.seed,
                });
                combined = Some(r);
            }
            Some(c) => {
                for (ct, t) in c.targets.iter_mut().zip(r.targets) {
                    ct.phases.extend(t.phases);
                }
            }
        }
    }
    let Some(r) = combined else { bail!("no workload given") };
    print!("{}", report::render_table(&r));
    save(&r, a.common.json.as_deref(), a.common.plot.as_deref())
}
