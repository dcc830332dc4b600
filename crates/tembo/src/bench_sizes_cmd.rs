//! `tembo bench sizes`: the CDDS thesis's §5.5 ("Tembo versioning vs.
//! Redis logging", Figure 5.5) — puts per second as the value grows, for
//! Tembo's server, which keeps one copy of each value, against
//! redis-server, which writes each one to its memory and to its
//! append-only log. Any targets can be measured this way; the default
//! compares the servers over loopback.

use anyhow::{bail, Result};
use clap::Args;
use tembo_bench::plot;
use tembo_bench::workload::micro::Micro;
use tembo_bench::workload::Workload;

use crate::bench_targets_cmd::{run_combined, save, write_chart, Common};

/// The targets `sizes` measures unless told otherwise.
const DEFAULT_TARGETS: &str = "tembo-serve,redis-always,redis-off";

/// Options of `tembo bench sizes`.
#[derive(Debug, Args)]
pub struct SizesArgs {
    /// Value sizes in bytes, comma-separated (the thesis: 256, 1024, 4096)
    #[arg(long, value_name = "LIST", default_value = "256,1024,4096", value_delimiter = ',')]
    value_sizes: Vec<usize>,
    /// Keys put (then read and deleted) at each size
    #[arg(long, default_value_t = 100_000)]
    keys: usize,
    /// Key size in bytes (at least 8)
    #[arg(long, default_value_t = 25)]
    key_bytes: usize,
    #[command(flatten)]
    common: Common,
}

/// Runs the microbenchmark at each value size on fresh instances of every
/// target; one report whose phases are "put 256 B", "get 256 B"…; with
/// --plot also the line chart of puts per second against value size.
pub fn run(a: SizesArgs) -> Result<()> {
    if a.keys == 0 {
        bail!("--keys must be at least 1");
    }
    if a.value_sizes.is_empty() {
        bail!("--value-sizes needs at least one size");
    }
    let cfg = a.common.config(DEFAULT_TARGETS)?;
    let works: Vec<Box<dyn Workload>> = a
        .value_sizes
        .iter()
        .map(|&v| Box::new(Micro::new(a.keys, a.key_bytes, v, a.common.seed)) as Box<dyn Workload>)
        .collect();
    let params = serde_json::json!({
        "keys": a.keys, "key_bytes": a.key_bytes, "value_sizes": a.value_sizes, "seed": a.common.seed,
    });
    let sizes = a.value_sizes.clone();
    let r = run_combined(&works, &cfg, "sizes", params, |i, phase| format!("{phase} {} B", sizes[i]))?;
    print!("{}", tembo_bench::report::render_table(&r));
    save(&r, a.common.json.as_deref(), a.common.plot.as_deref())?;
    if let Some(stem) = &a.common.plot {
        let series: Vec<(String, Vec<(f64, f64)>)> = r
            .targets
            .iter()
            .map(|t| {
                let pts = sizes
                    .iter()
                    .filter_map(|&v| {
                        let p = t.phases.iter().find(|p| p.phase == format!("put {v} B"))?;
                        Some((v as f64, p.per_s))
                    })
                    .collect();
                (t.target.clone(), pts)
            })
            .collect();
        let svg = plot::series_svg(
            "Puts per second against value size (CDDS thesis Figure 5.5)",
            &format!(
                "{} keys of {} bytes, each put its own request or commit, medians of {} runs",
                a.keys, a.key_bytes, cfg.runs
            ),
            "value size (bytes)",
            "puts per second",
            &series,
        )?;
        write_chart(stem, "puts-by-size", &svg)?;
    }
    Ok(())
}
