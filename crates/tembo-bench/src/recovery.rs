//! Time to recover the CDDS tree after an unclean shutdown.
//!
//! Loads `keys` keys into a tree on an emulated pool, copies the pool file
//! while it is open (the copy is exactly what a `kill -9` leaves: the
//! clean-shutdown flag unset), then opens the copy and measures the time to
//! the first answered get and the first committed put (the tree recovers
//! lazily: both are served at once while the repair walk and the leak
//! sweep run in the background), and the time until recovery has fully
//! finished. A second copy is opened with a writer overwriting keys as
//! fast as it can for as long as recovery runs: how many writes were
//! served meanwhile, their worst latency, and how long recovery took under
//! that load. A clean open of the same data is timed for comparison.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};
use tembo_cdds::{Limits, Op, Tree};
use tembo_pmem::{Pool, PoolOptions};

use crate::progress::Progress;

/// What to measure.
#[derive(Clone, Debug)]
pub struct RecoveryConfig {
    /// Keys loaded.
    pub keys: usize,
    /// Value bytes.
    pub value_bytes: usize,
    /// Directory of the pool files.
    pub pool_dir: PathBuf,
}

/// The measurement.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct RecoveryReport {
    /// Keys loaded.
    pub keys: usize,
    /// Value bytes.
    pub value_bytes: usize,
    /// Pool file bytes.
    pub pool_bytes: u64,
    /// Unclean open through the first answered get, in milliseconds
    /// (repair and sweep still running in the background).
    pub first_request_ms: f64,
    /// Unclean open through the first answered get and then the first
    /// committed put.
    #[serde(default)]
    pub first_write_ms: f64,
    /// Unclean open until recovery has finished (repair walk and sweep).
    pub fully_recovered_ms: f64,
    /// Of which: the repair walk.
    pub repair_ms: f64,
    /// Of which: the leak sweep.
    pub sweep_ms: f64,
    /// Nodes the repair walked.
    pub nodes_visited: u64,
    /// Under load: writes committed while recovery ran.
    #[serde(default)]
    pub loaded_writes: u64,
    /// Under load: the slowest of those writes, in milliseconds.
    #[serde(default)]
    pub loaded_max_write_ms: f64,
    /// Under load: when the slowest write started, in milliseconds after
    /// the unclean open began.
    #[serde(default)]
    pub loaded_max_write_at_ms: f64,
    /// Under load: unclean open until recovery finished.
    #[serde(default)]
    pub loaded_fully_recovered_ms: f64,
    /// Clean open through the first get, in milliseconds.
    pub clean_first_request_ms: f64,
}

fn key(i: usize) -> Vec<u8> {
    format!("key{:022}", i.wrapping_mul(0x9E37_79B9) % 10_000_000_000_000).into_bytes()
}

/// Runs the measurement.
///
/// # Errors
/// Pool files that cannot be created or copied; tree errors.
pub fn run(cfg: &RecoveryConfig, progress: Progress) -> Result<RecoveryReport> {
    let path = cfg.pool_dir.join(format!("tembo-bench-recovery-{}.pool", std::process::id()));
    let copy = cfg.pool_dir.join(format!("tembo-bench-recovery-{}-crashed.pool", std::process::id()));
    let _ = std::fs::remove_file(&path);
    let need = (cfg.keys as u64) * (cfg.value_bytes as u64 + 160) * 3 / 2 + (64 << 20);
    let opts = PoolOptions { size: need, max_size: Some(need * 4), ..PoolOptions::default() };
    let pool = Arc::new(Pool::create(&path, &opts).with_context(|| format!("creating {}", path.display()))?);
    let tree = Tree::create(pool.clone(), Limits::default())?;
    let value = vec![7u8; cfg.value_bytes];
    let bar = progress.bar(cfg.keys as u64, "loading keys");
    let keys: Vec<Vec<u8>> = (0..cfg.keys).map(key).collect();
    for chunk in keys.chunks(1000) {
        let ops: Vec<Op<'_>> = chunk.iter().map(|k| Op::Put(k, &value)).collect();
        tree.write(&ops)?;
        bar.inc(chunk.len() as u64);
    }
    bar.finish_and_clear();
    drop(tree);
    drop(pool);
    let crashed = cfg.pool_dir.join(format!("tembo-bench-recovery-{}-image.pool", std::process::id()));
    // What `kill -9` leaves: the file with the clean flag unset (the pool
    // is reopened and copied before its clean close).
    {
        let pool = Arc::new(Pool::open(&path, &opts)?);
        let tree = Tree::open(pool.clone(), Limits::default())?;
        std::fs::copy(&path, &crashed).with_context(|| format!("copying to {}", crashed.display()))?;
        drop(tree);
    }
    let pool_bytes = std::fs::metadata(&crashed)?.len();

    std::fs::copy(&crashed, &copy).with_context(|| format!("copying to {}", copy.display()))?;
    let t = Instant::now();
    let pool = Arc::new(Pool::open(&copy, &opts)?);
    anyhow::ensure!(pool.opened_unclean(), "the copy should read as an unclean shutdown");
    let tree = Tree::open(pool.clone(), Limits::default())?;
    let got = tree.get(&keys[keys.len() / 2])?;
    let first_request_ms = t.elapsed().as_secs_f64() * 1e3;
    tree.write(&[Op::Put(&keys[0], b"first write")])?;
    let first_write_ms = t.elapsed().as_secs_f64() * 1e3;
    let r = tree.recovery_report().clone();
    let fully_recovered_ms = t.elapsed().as_secs_f64() * 1e3;
    anyhow::ensure!(got.as_deref() == Some(&value[..]), "recovered tree lost a key");
    anyhow::ensure!(r.sweep_error.is_none(), "recovery failed: {:?}", r.sweep_error);
    anyhow::ensure!(r.lazy, "recovery should have been lazy: {r:?}");
    drop(tree);
    drop(pool);
    std::fs::remove_file(&copy)?;

    std::fs::copy(&crashed, &copy).with_context(|| format!("copying to {}", copy.display()))?;
    let t = Instant::now();
    let pool = Arc::new(Pool::open(&copy, &opts)?);
    let tree = Tree::open(pool.clone(), Limits::default())?;
    let (mut loaded_writes, mut worst, mut worst_at) = (0u64, 0f64, 0f64);
    let mut i = 0usize;
    while !tree.recovery_progress().finished {
        let w = Instant::now();
        tree.write(&[Op::Put(&keys[i % keys.len()], &value)])?;
        let took = w.elapsed().as_secs_f64() * 1e3;
        if took > worst {
            worst = took;
            worst_at = (w - t).as_secs_f64() * 1e3;
        }
        loaded_writes += 1;
        i = i.wrapping_add(7919);
    }
    let lr = tree.recovery_report().clone();
    let loaded_fully_recovered_ms = t.elapsed().as_secs_f64() * 1e3;
    anyhow::ensure!(lr.sweep_error.is_none(), "recovery under load failed: {:?}", lr.sweep_error);
    drop(tree);
    drop(pool);
    let _ = std::fs::remove_file(&crashed);

    let t = Instant::now();
    let pool = Arc::new(Pool::open(&path, &opts)?);
    let tree = Tree::open(pool.clone(), Limits::default())?;
    let _ = tree.get(&keys[0])?;
    let clean_first_request_ms = t.elapsed().as_secs_f64() * 1e3;
    drop(tree);
    drop(pool);
    let _ = std::fs::remove_file(&path);
    let _ = std::fs::remove_file(&copy);
    Ok(RecoveryReport {
        keys: cfg.keys,
        value_bytes: cfg.value_bytes,
        pool_bytes,
        first_request_ms,
        first_write_ms,
        fully_recovered_ms,
        repair_ms: r.repair_time.as_secs_f64() * 1e3,
        sweep_ms: r.sweep_time.as_secs_f64() * 1e3,
        nodes_visited: r.nodes_visited,
        loaded_writes,
        loaded_max_write_ms: worst,
        loaded_max_write_at_ms: worst_at,
        loaded_fully_recovered_ms,
        clean_first_request_ms,
    })
}
