//! Runs a workload on every chosen target and turns the samples into a
//! report: a terminal table, JSON with every figure and the environment,
//! and the ratios the bench issue's goals are stated in.
//!
//! Each target is run `runs` times, each time on a fresh instance in a
//! fresh directory, and the runs are interleaved (run 1 of every target,
//! then run 2…), so drift on a shared machine hits every target alike.
//! Throughput is the median over runs; latency percentiles come from the
//! runs' histograms merged.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};

use crate::machine::MachineInfo;
use crate::progress::Progress;
use crate::summary::median;
use crate::targets::TargetKind;
use crate::workload::{new_histogram, PhaseSample, Workload};

/// Where and how often to run.
#[derive(Clone, Debug)]
pub struct RunConfig {
    /// Targets, in report order.
    pub targets: Vec<TargetKind>,
    /// Runs per target.
    pub runs: usize,
    /// Directory that holds each run's files (a RAM filesystem for the
    /// thesis's emulated persistent memory).
    pub dir: PathBuf,
}

/// Latency of one kind of operation within a phase (nanoseconds).
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct KindFigures {
    /// Operation ("put", "read", "scan", …).
    pub kind: String,
    /// Operations of this kind, over all runs.
    pub count: u64,
    /// Operations of this kind per second of the phase (median over runs).
    pub per_s: f64,
    /// Mean latency.
    pub mean_ns: f64,
    /// Median latency.
    pub p50_ns: u64,
    /// 90th percentile.
    pub p90_ns: u64,
    /// 99th percentile.
    pub p99_ns: u64,
    /// 99.9th percentile.
    pub p999_ns: u64,
    /// Largest latency seen.
    pub max_ns: u64,
}

/// One phase of one target.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct PhaseFigures {
    /// Phase name.
    pub phase: String,
    /// Operations per second (median over runs).
    pub per_s: f64,
    /// Each run's operations per second.
    pub runs_per_s: Vec<f64>,
    /// Cache lines flushed per operation (Tembo targets).
    pub lines_per_op: Option<f64>,
    /// Fences per operation (Tembo targets).
    pub fences_per_op: Option<f64>,
    /// Latency of all the phase's operations.
    pub latency: KindFigures,
    /// Latencies per kind of operation.
    pub kinds: Vec<KindFigures>,
}

/// Everything measured for one target.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct TargetFigures {
    /// Target name (see `TargetKind`).
    pub target: String,
    /// Whether its writes are durable.
    pub durable: bool,
    /// The mode it ran in, in its own words.
    pub mode: String,
    /// Phases in order.
    pub phases: Vec<PhaseFigures>,
}

/// A workload's report.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct Report {
    /// Workload name.
    pub workload: String,
    /// Workload parameters.
    pub params: serde_json::Value,
    /// Runs per target.
    pub runs: usize,
    /// Directory the files lived in, and its filesystem.
    pub dir: String,
    /// Filesystem type of `dir`.
    pub filesystem: String,
    /// The machine.
    pub machine: MachineInfo,
    /// One entry per target.
    pub targets: Vec<TargetFigures>,
    /// Cost of persisting one cache line (store + flush + fence) on a pool
    /// in the same directory, measured in the same run (the floor's unit).
    #[serde(default)]
    pub persist_line_ns: Option<f64>,
}

/// Runs `workload` on every target of `cfg`.
///
/// # Errors
/// A target that cannot be opened or that fails or answers wrongly during a
/// run: the report would be a lie without it, so the run stops.
pub fn run(workload: &dyn Workload, cfg: &RunConfig, progress: Progress) -> Result<Report> {
    std::fs::create_dir_all(&cfg.dir).with_context(|| format!("creating {}", cfg.dir.display()))?;
    let runs = cfg.runs.max(1);
    let bar = progress.bar((runs * cfg.targets.len()) as u64, &workload.name());
    let mut samples: Vec<Vec<Vec<PhaseSample>>> = vec![Vec::new(); cfg.targets.len()];
    let mut modes = vec![String::new(); cfg.targets.len()];
    for run in 0..runs {
        for (ti, &kind) in cfg.targets.iter().enumerate() {
            bar.set_message(kind.name());
            let dir = cfg.dir.join(format!("tembo-bench-{}-{}-{run}", std::process::id(), kind.name()));
            let _ = std::fs::remove_dir_all(&dir);
            std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
            let result = (|| {
                let mut target = kind.open_for(&dir, workload.size_hint(), workload.scans())?;
                let sample = workload.run(target.as_mut(), run);
                // After the run: a pool's page size shows only once touched.
                modes[ti] = target.mode();
                sample
            })();
            let _ = std::fs::remove_dir_all(&dir);
            samples[ti].push(result.with_context(|| format!("{} on {kind}, run {}", workload.name(), run + 1))?);
            bar.inc(1);
        }
    }
    bar.finish_and_clear();
    let targets = cfg
        .targets
        .iter()
        .zip(samples)
        .zip(modes)
        .map(|((kind, runs), mode)| TargetFigures {
            target: kind.name().to_string(),
            durable: kind.durable(),
            mode,
            phases: aggregate(&runs),
        })
        .collect();
    Ok(Report {
        workload: workload.name(),
        params: workload.params(),
        runs,
        dir: cfg.dir.display().to_string(),
        filesystem: filesystem_of(&cfg.dir),
        machine: MachineInfo::detect(),
        targets,
        persist_line_ns: None,
    })
}

fn filesystem_of(dir: &Path) -> String {
    // The longest mount point that contains `dir`, from /proc/mounts.
    let dir = std::fs::canonicalize(dir).unwrap_or_else(|_| dir.to_path_buf());
    let mounts = std::fs::read_to_string("/proc/mounts").unwrap_or_default();
    mounts
        .lines()
        .filter_map(|l| {
            let mut f = l.split_whitespace();
            let (_, at, fs) = (f.next()?, f.next()?, f.next()?);
            dir.starts_with(at).then(|| (at.len(), fs.to_string()))
        })
        .max()
        .map(|(_, fs)| fs)
        .unwrap_or_else(|| "unknown".into())
}

fn aggregate(runs: &[Vec<PhaseSample>]) -> Vec<PhaseFigures> {
    let Some(first) = runs.first() else { return Vec::new() };
    (0..first.len())
        .map(|p| {
            let phase: Vec<&PhaseSample> = runs.iter().filter_map(|r| r.get(p)).collect();
            let rate = |s: &PhaseSample, ops: u64| ops as f64 / s.elapsed.as_secs_f64().max(1e-9);
            let runs_per_s: Vec<f64> = phase.iter().map(|s| rate(s, s.ops)).collect();
            let per_s = median(&mut runs_per_s.clone());
            let per_op = |f: &dyn Fn(&tembo_pmem::WriteStats) -> u64| -> Option<f64> {
                let mut v: Vec<f64> =
                    phase.iter().filter_map(|s| s.writes.map(|w| f(&w) as f64 / s.ops.max(1) as f64)).collect();
                (!v.is_empty()).then(|| median(&mut v))
            };
            let mut kinds = Vec::new();
            let mut all = new_histogram();
            for (_, h) in phase.iter().flat_map(|s| &s.kinds) {
                let _ = all.add(h);
            }
            let latency = kind_figures("all", &all, per_s);
            for (kind, _) in &first[p].kinds {
                let mut merged = new_histogram();
                let mut rates = Vec::new();
                for s in &phase {
                    if let Some((_, h)) = s.kinds.iter().find(|(k, _)| k == kind) {
                        let _ = merged.add(h);
                        rates.push(rate(s, h.len()));
                    }
                }
                kinds.push(kind_figures(kind, &merged, median(&mut rates)));
            }
            PhaseFigures {
                phase: first[p].name.clone(),
                per_s,
                runs_per_s,
                lines_per_op: per_op(&|w| w.flush_count),
                fences_per_op: per_op(&|w| w.fence_count),
                latency,
                kinds,
            }
        })
        .collect()
}

fn kind_figures(kind: &str, h: &Histogram<u64>, per_s: f64) -> KindFigures {
    KindFigures {
        kind: kind.to_string(),
        count: h.len(),
        per_s,
        mean_ns: h.mean(),
        p50_ns: h.value_at_quantile(0.5),
        p90_ns: h.value_at_quantile(0.9),
        p99_ns: h.value_at_quantile(0.99),
        p999_ns: h.value_at_quantile(0.999),
        max_ns: h.max(),
    }
}

impl Report {
    /// The figures of `target`'s `phase`.
    pub fn phase(&self, target: &str, phase: &str) -> Option<&PhaseFigures> {
        self.targets.iter().find(|t| t.target == target)?.phases.iter().find(|p| p.phase == phase)
    }

    /// Phase names, in order of first appearance.
    pub fn phase_names(&self) -> Vec<String> {
        let mut names: Vec<String> = Vec::new();
        for p in self.targets.iter().flat_map(|t| &t.phases) {
            if !names.contains(&p.phase) {
                names.push(p.phase.clone());
            }
        }
        names
    }

    /// How far `target`'s `phase` is from its floor: BTreeMap's time for
    /// the same operation plus the measured cost of persisting the cache
    /// lines the target flushed per operation (needs both in the report and
    /// `persist_line_ns`).
    pub fn floor(&self, target: &str, phase: &str) -> Option<Floor> {
        let line_ns = self.persist_line_ns?;
        let t = self.phase(target, phase)?;
        let map = self.phase("btreemap", phase)?;
        let lines = t.lines_per_op?;
        let (target_ns, map_ns) = (1e9 / t.per_s, 1e9 / map.per_s);
        let floor_ns = map_ns + lines * line_ns;
        Some(Floor { target_ns, map_ns, lines, line_ns, floor_ns, ratio: target_ns / floor_ns })
    }

    /// The best durable embedded peer (not Tembo, not a server over the
    /// network) in `phase`: its name and rate.
    pub fn best_durable_peer(&self, phase: &str) -> Option<(&str, f64)> {
        self.targets
            .iter()
            .filter(|t| t.durable && !t.target.starts_with("cdds") && !is_network(&t.target))
            .filter_map(|t| Some((t.target.as_str(), self.phase(&t.target, phase)?.per_s)))
            .max_by(|a, b| a.1.total_cmp(&b.1))
    }
}

/// Whether `target` names a server measured over the network.
fn is_network(target: &str) -> bool {
    target.parse::<TargetKind>().is_ok_and(|k| k.server().is_some())
}

/// A target's time per operation beside its floor.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Floor {
    /// The target's ns per operation (1 / throughput).
    pub target_ns: f64,
    /// BTreeMap's ns per operation.
    pub map_ns: f64,
    /// Cache lines the target flushed per operation.
    pub lines: f64,
    /// ns to persist one line.
    pub line_ns: f64,
    /// `map_ns + lines * line_ns`.
    pub floor_ns: f64,
    /// `target_ns / floor_ns`.
    pub ratio: f64,
}

fn us(ns: u64) -> String {
    format!("{:.2}", ns as f64 / 1000.0)
}

/// The report as terminal tables: one per phase, then Tembo's ratios.
pub fn render_table(r: &Report) -> String {
    let mut s = format!(
        "workload {} {} — {} run(s) per target, files on {} ({}), {} ({} CPUs)\n",
        r.workload, r.params, r.runs, r.dir, r.filesystem, r.machine.cpu_model, r.machine.cpus
    );
    for phase in r.phase_names() {
        s.push_str(&format!(
            "\n[{phase}]\n{:<19} {:>12} {:>9} {:>9} {:>9} {:>10} {:>8} {:>8}  {}\n",
            "target", "ops/s", "p50 us", "p99 us", "p99.9 us", "max us", "lines", "fences", "mode"
        ));
        for t in &r.targets {
            let Some(p) = t.phases.iter().find(|p| p.phase == phase) else { continue };
            let all = &p.latency;
            let opt = |v: Option<f64>| v.map_or("-".to_string(), |x| format!("{x:.2}"));
            s.push_str(&format!(
                "{:<19} {:>12.0} {:>9} {:>9} {:>9} {:>10} {:>8} {:>8}  {}\n",
                t.target,
                p.per_s,
                us(all.p50_ns),
                us(all.p99_ns),
                us(all.p999_ns),
                us(all.max_ns),
                opt(p.lines_per_op),
                opt(p.fences_per_op),
                t.mode
            ));
            if p.kinds.len() > 1 {
                for k in &p.kinds {
                    s.push_str(&format!(
                        "  {:<17} {:>12.0} {:>9} {:>9} {:>9} {:>10}\n",
                        k.kind,
                        k.per_s,
                        us(k.p50_ns),
                        us(k.p99_ns),
                        us(k.p999_ns),
                        us(k.max_ns)
                    ));
                }
            }
        }
        if let (Some(cdds), Some((peer, rate))) = (r.phase("cdds", &phase), r.best_durable_peer(&phase)) {
            s.push_str(&format!("cdds / best durable peer ({peer}): {:.2}x\n", cdds.per_s / rate));
        }
        if let Some(f) = r.floor("cdds", &phase) {
            s.push_str(&format!(
                "cdds closeness to the floor: {:.2}x ({:.0} ns/op against BTreeMap {:.0} ns + {:.1} lines x {:.0} ns)\n",
                f.ratio, f.target_ns, f.map_ns, f.lines, f.line_ns
            ));
        }
        for other in ["btreemap", "bdb"] {
            if let (Some(cdds), Some(o)) = (r.phase("cdds", &phase), r.phase(other, &phase)) {
                s.push_str(&format!("cdds / {other}: {:.2}x\n", cdds.per_s / o.per_s));
            }
        }
        for other in ["redis-always", "redis-everysec", "redis-off"] {
            if let (Some(t), Some(o)) = (r.phase("tembo-serve", &phase), r.phase(other, &phase)) {
                s.push_str(&format!("tembo-serve / {other}: {:.2}x\n", t.per_s / o.per_s));
            }
        }
    }
    s
}
