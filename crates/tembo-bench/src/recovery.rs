//! Time to recover the CDDS tree after an unclean shutdown.
//!
//! Loads `keys` keys into a tree on an emulated pool, copies the pool file
//! while it is open (the copy is exactly what a `kill -9` leaves: the
//! clean-shutdown flag unset), then opens the copy and measures the time to
//! the first answered request (open + repair walk + one get; the leak sweep
//! runs in the background and only writes wait for it), the time until
//! recovery has fully finished, and what the recovery did. A clean open of the same data is timed for comparison.

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
    /// Unclean open through the first answered get, in milliseconds (the
    /// leak sweep may still be running: reads do not wait for it).
    pub first_request_ms: f64,
    /// Unclean open until recovery has finished (sweep included): the
    /// earliest a write is served.
    pub fully_recovered_ms: f64,
    /// Of which: the repair walk.
    pub repair_ms: f64,
    /// Of which: the leak sweep.
    pub sweep_ms: f64,
    /// Nodes the repair walked.
    pub nodes_visited: u64,
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
    std::fs::copy(&path, &copy).with_context(|| format!("copying to {}", copy.display()))?;
    drop(tree);
    drop(pool);
    let pool_bytes = std::fs::metadata(&copy)?.len();

    let t = Instant::now();
    let pool = Arc::new(Pool::open(&copy, &opts)?);
    anyhow::ensure!(pool.opened_unclean(), "the copy should read as an unclean shutdown");
    let tree = Tree::open(pool.clone(), Limits::default())?;
    let got = tree.get(&keys[keys.len() / 2])?;
    let first_request_ms = t.elapsed().as_secs_f64() * 1e3;
    let r = tree.recovery_report().clone();
    let fully_recovered_ms = t.elapsed().as_secs_f64() * 1e3;
    anyhow::ensure!(got.as_deref() == Some(&value[..]), "recovered tree lost a key");
    anyhow::ensure!(r.sweep_error.is_none(), "leak sweep failed: {:?}", r.sweep_error);
    drop(tree);
    drop(pool);

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
        fully_recovered_ms,
        repair_ms: r.repair_time.as_secs_f64() * 1e3,
        sweep_ms: r.sweep_time.as_secs_f64() * 1e3,
        nodes_visited: r.nodes_visited,
        clean_first_request_ms,
    })
}
