//! `tembo crashtest`: the crash campaign of `tembo_cdds::campaign` across
//! key orders and ordering modes — the simulation counterpart of the NVM
//! B-tree ordering study's Table 2 and Figure 6: the share of crash points
//! that leave an inconsistent pool or lose acknowledged data, and the
//! flushes and fences each key operation costs.

use std::process::ExitCode;

use anyhow::{bail, Result};
use clap::{Args, ValueEnum};
use tembo_cdds::campaign::{run, CampaignConfig, KeyOrder};
use tembo_kamino::campaign::{self as kcampaign, Workload};
use tembo_kamino::TxMode;
use tembo_pmem::sim::{CrashPoints, CrashPolicy};
use tembo_pmem::OrderingMode;

/// Which ordering modes to run.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum OrderingArg {
    /// No flushes or fences (must be caught)
    None,
    /// One persist per cache line crossed (x86 line-ordered model)
    Fast,
    /// A persist after every dependent store
    Full,
    /// All three
    All,
}

/// Which key orders to run.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum OrderArg {
    /// Uniformly random keys
    Uniform,
    /// Ascending keys
    Monotonic,
    /// Descending keys
    Reverse,
    /// Uniform keys in groups of four sharing 17 bytes (their 8-byte prefix words tie)
    Tied,
    /// Uniform, monotonic and reverse
    All,
}

/// Options of `tembo crashtest`.
#[derive(Debug, Args)]
pub struct CrashtestArgs {
    /// Ordering modes to test
    #[arg(long, value_enum, default_value = "all")]
    ordering: OrderingArg,
    /// Key orders to test
    #[arg(long = "keys", value_enum, default_value = "all")]
    keys: OrderArg,
    /// Engine under test: cdds (the multi-version B+tree), or kamino, kamino-dynamic,
    /// undo (random multi-object transactions on the heap, then key operations on
    /// the in-place B+tree; kamino-dynamic at alpha 1.0 and 0.2)
    #[arg(long, default_value = "cdds")]
    engine: String,
    /// Operations (transactions) per workload; every fence of it is a crash point
    /// [default: 100 for cdds, 50 for the in-place engines, whose workloads run
    /// more fences per transaction and check more per crash state]
    #[arg(long)]
    scale: Option<usize>,
    /// Crash at each fence with this probability instead of at every fence
    #[arg(long)]
    sample: Option<f64>,
    /// Seed of the workloads and crash images (runs are reproducible)
    #[arg(long, default_value_t = 20261123)]
    seed: u64,
    /// Write the table as JSON to this file too
    #[arg(long)]
    json: Option<std::path::PathBuf>,
}

/// Policies for the in-place engines' campaign.
fn policies(ordering: OrderingMode) -> Vec<CrashPolicy> {
    match ordering {
        // `fast` relies on stores to one line persisting in program order,
        // which `random-words` (8-byte atomicity only) does not give.
        OrderingMode::Fast => vec![CrashPolicy::None, CrashPolicy::All, CrashPolicy::RandomLines],
        _ => CrashPolicy::ALL.to_vec(),
    }
}

/// Runs the campaign; exit 1 if `fast` or `full` shows any violation.
pub fn run_cmd(a: CrashtestArgs) -> Result<ExitCode> {
    let in_place = match a.engine.as_str() {
        "cdds" => None,
        "kamino" => Some(TxMode::Kamino),
        "kamino-dynamic" => Some(TxMode::KaminoDynamic),
        "undo" => Some(TxMode::Undo),
        other => bail!("unknown engine {other:?}: the engines are cdds, kamino, kamino-dynamic, undo"),
    };
    let orderings = match a.ordering {
        OrderingArg::None => vec![OrderingMode::None],
        OrderingArg::Fast => vec![OrderingMode::Fast],
        OrderingArg::Full => vec![OrderingMode::Full],
        OrderingArg::All => vec![OrderingMode::None, OrderingMode::Fast, OrderingMode::Full],
    };
    let orders = match a.keys {
        OrderArg::Uniform => vec![KeyOrder::Uniform],
        OrderArg::Monotonic => vec![KeyOrder::Monotonic],
        OrderArg::Reverse => vec![KeyOrder::Reverse],
        OrderArg::Tied => vec![KeyOrder::Tied],
        OrderArg::All => KeyOrder::ALL.to_vec(),
    };
    let points = match a.sample {
        Some(p) if (0.0..=1.0).contains(&p) => CrashPoints::Sample(p),
        Some(p) => bail!("--sample {p}: give a probability between 0 and 1"),
        None => CrashPoints::Every,
    };
    if let Some(mode) = in_place {
        return run_in_place(&a, a.scale.unwrap_or(50), mode, &orderings, points);
    }
    let scale = a.scale.unwrap_or(100);
    println!("tembo crashtest: engine {}, {} ops per workload, seed {}", a.engine, scale, a.seed);
    println!(
        "{:<10} {:<9} {:>8} {:>8} {:>13} {:>11} {:>13} {:>12}  policies",
        "keys", "ordering", "fences", "states", "inconsistent", "lost", "flushes/op", "fences/op"
    );
    let mut rows = Vec::new();
    let mut bad = 0u64;
    let started = std::time::Instant::now();
    // The CDDS tree's writes (layout 2) no longer rely on stores to one line
    // persisting in program order, so `fast` is judged under all four
    // policies, `random-words` included, like `full`.
    let mut runs: Vec<(OrderingMode, KeyOrder, Vec<CrashPolicy>, bool)> = Vec::new();
    for &ordering in &orderings {
        for &order in &orders {
            runs.push((ordering, order, CrashPolicy::ALL.to_vec(), ordering != OrderingMode::None));
        }
    }
    for (ordering, order, policies, counted) in runs {
        {
            let cfg = CampaignConfig { ops: scale, order, ordering, points, policies, seed: a.seed, nested_every: 0 };
            let r = run(&cfg);
            let states = r.states().max(1) as f64;
            let ops = r.key_ops.max(1) as f64;
            let pct = |n: u64| 100.0 * n as f64 / states;
            let names: Vec<&str> = cfg.policies.iter().map(|p| p.name()).collect();
            println!(
                "{:<10} {:<9} {:>8} {:>8} {:>12.2}% {:>10.2}% {:>13.2} {:>12.2}  {}",
                order.name(),
                ordering.name(),
                r.sweep.fences,
                r.states(),
                pct(r.inconsistent),
                pct(r.lost),
                r.flushes as f64 / ops,
                r.fences as f64 / ops,
                names.join(","),
            );
            if counted {
                bad += r.violations();
                for f in r.sweep.failures.iter().take(3) {
                    println!("    violation: {f}");
                }
            }
            rows.push(serde_json::json!({
                "keys": order.name(), "ordering": ordering.name(), "ops": scale, "key_ops": r.key_ops,
                "fences_in_workload": r.sweep.fences, "states": r.states(),
                "inconsistent": r.inconsistent, "lost": r.lost,
                "flushes_per_op": r.flushes as f64 / ops, "fences_per_op": r.fences as f64 / ops,
                "policies": names, "counted": counted,
            }));
        }
    }
    println!("done in {:.1} s; violations under fast/full: {bad}", started.elapsed().as_secs_f64());
    if let Some(path) = a.json {
        let doc = serde_json::json!({ "engine": a.engine, "seed": a.seed, "scale": scale, "rows": rows });
        std::fs::write(&path, serde_json::to_string_pretty(&doc)?)?;
        println!("wrote {}", path.display());
    }
    Ok(if bad == 0 { ExitCode::SUCCESS } else { ExitCode::FAILURE })
}

/// The campaign of an in-place engine: the heap's multi-object
/// transactions and the tree's key orders, per ordering mode (and α).
fn run_in_place(
    a: &CrashtestArgs,
    scale: usize,
    mode: TxMode,
    orderings: &[OrderingMode],
    points: CrashPoints,
) -> Result<ExitCode> {
    let workloads: Vec<Workload> = match a.keys {
        OrderArg::Uniform => vec![Workload::Objects, Workload::TreeUniform],
        OrderArg::Monotonic => vec![Workload::Objects, Workload::TreeMonotonic],
        OrderArg::Reverse => vec![Workload::Objects, Workload::TreeReverse],
        OrderArg::Tied => bail!(
            "--keys tied is a workload of the cdds engine (keys whose prefix words tie); \
             the in-place engines take uniform, monotonic, reverse or all"
        ),
        OrderArg::All => Workload::ALL.to_vec(),
    };
    let alphas: &[f64] = if mode == TxMode::KaminoDynamic { &[1.0, 0.2] } else { &[1.0] };
    println!("tembo crashtest: engine {}, {} transactions per workload, seed {}", a.engine, scale, a.seed);
    println!(
        "{:<10} {:<5} {:<9} {:>8} {:>8} {:>13} {:>11} {:>13} {:>12}  policies",
        "workload", "alpha", "ordering", "fences", "states", "inconsistent", "lost", "flushes/tx", "fences/tx"
    );
    let started = std::time::Instant::now();
    let mut bad = 0u64;
    let mut rows = Vec::new();
    for &ordering in orderings {
        for &w in &workloads {
            for &alpha in alphas {
                let cfg = kcampaign::CampaignConfig {
                    mode,
                    alpha,
                    workload: w,
                    ops: scale,
                    ordering,
                    points,
                    policies: policies(ordering),
                    seed: a.seed,
                    nested_every: if ordering == OrderingMode::None { 0 } else { 101 },
                };
                let r = kcampaign::run(&cfg);
                let states = r.states().max(1) as f64;
                let txs = r.txs.max(1) as f64;
                let pct = |n: u64| 100.0 * n as f64 / states;
                let names: Vec<&str> = cfg.policies.iter().map(|p| p.name()).collect();
                println!(
                    "{:<10} {:<5} {:<9} {:>8} {:>8} {:>12.2}% {:>10.2}% {:>13.2} {:>12.2}  {}",
                    w.name(),
                    alpha,
                    ordering.name(),
                    r.sweep.fences,
                    r.states(),
                    pct(r.inconsistent),
                    pct(r.lost),
                    r.flushes as f64 / txs,
                    r.fences as f64 / txs,
                    names.join(",")
                );
                if ordering != OrderingMode::None {
                    bad += r.violations();
                    for f in r.sweep.failures.iter().take(3) {
                        println!("    violation: {f}");
                    }
                }
                rows.push(serde_json::json!({
                    "workload": w.name(), "alpha": alpha, "ordering": ordering.name(), "txs": r.txs,
                    "fences_in_workload": r.sweep.fences, "states": r.states(),
                    "inconsistent": r.inconsistent, "lost": r.lost,
                    "flushes_per_tx": r.flushes as f64 / txs, "fences_per_tx": r.fences as f64 / txs,
                    "policies": names,
                }));
            }
        }
    }
    println!("done in {:.1} s; violations under fast/full: {bad}", started.elapsed().as_secs_f64());
    if let Some(path) = &a.json {
        let doc = serde_json::json!({ "engine": a.engine, "seed": a.seed, "scale": scale, "rows": rows });
        std::fs::write(path, serde_json::to_string_pretty(&doc)?)?;
        println!("wrote {}", path.display());
    }
    Ok(if bad == 0 { ExitCode::SUCCESS } else { ExitCode::FAILURE })
}
