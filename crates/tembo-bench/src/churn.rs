//! Space under churn (issue: "space stays O(live data) under long
//! update/delete churn — measure it").
//!
//! Loads `keys` keys into a CDDS database, then runs `ops` operations over
//! the same key space — two in three overwrite a random key with a new
//! value, one in three deletes a random key (a deleted key comes back on a
//! later overwrite) — each its own durable commit. After every
//! `ops / samples` operations it records the pool bytes in use, the live
//! key and value bytes (from a model of the contents), the dead entries
//! the tree holds, and the throughput of that stretch. Run once with the
//! background GC thread (the default) and once without it (dead entries
//! then go only when their node fills up), both in the same process, so
//! the two curves are comparable.

use std::collections::HashMap;
use std::path::PathBuf;
use std::time::Instant;

use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};
use tembo_store::{Db, GcConfig, Options};

use crate::progress::Progress;
use crate::workload::Rng;

/// What to run.
#[derive(Clone, Debug)]
pub struct ChurnConfig {
    /// Size of the key space (all loaded first).
    pub keys: usize,
    /// Churn operations after the load.
    pub ops: usize,
    /// Value bytes.
    pub value_bytes: usize,
    /// Samples taken over the churn.
    pub samples: usize,
    /// Directory of the pool files.
    pub pool_dir: PathBuf,
    /// Seed of keys and operations.
    pub seed: u64,
}

/// One sample of one run (the last one after a second of idleness).
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct ChurnSample {
    /// Churn operations done so far.
    pub ops: u64,
    /// Live keys.
    pub keys: u64,
    /// Key and value bytes of the live keys.
    pub live_bytes: u64,
    /// Pool bytes allocated (nodes, records, metadata).
    pub used_bytes: u64,
    /// `used_bytes / live_bytes`.
    pub ratio: f64,
    /// Dead entries still in the tree.
    pub dead_entries: u64,
    /// Operations per second over the stretch since the previous sample.
    pub ops_per_sec: f64,
}

/// One run (GC on or off).
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct ChurnRun {
    /// `background GC` or `no GC thread`.
    pub gc: String,
    /// Samples in order (the first one right after the load).
    pub samples: Vec<ChurnSample>,
    /// GC steps and passes the thread ran.
    pub gc_steps: u64,
    /// Passes completed.
    pub gc_passes: u64,
}

/// The whole measurement.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct ChurnReport {
    /// Key space.
    pub keys: usize,
    /// Churn operations.
    pub ops: usize,
    /// Value bytes.
    pub value_bytes: usize,
    /// The machine.
    pub machine: crate::machine::MachineInfo,
    /// With the background GC, then without.
    pub runs: Vec<ChurnRun>,
}

fn key(i: usize) -> Vec<u8> {
    format!("churn:{:019}", (i as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 1).into_bytes()
}

/// Runs both configurations.
///
/// # Errors
/// Pool files that cannot be created; engine errors; a read that does not
/// match what was written.
pub fn run(cfg: &ChurnConfig, progress: &Progress) -> Result<ChurnReport> {
    let mut runs = Vec::new();
    for gc in [Some(GcConfig::default()), None] {
        runs.push(run_one(cfg, gc, progress)?);
    }
    Ok(ChurnReport {
        keys: cfg.keys,
        ops: cfg.ops,
        value_bytes: cfg.value_bytes,
        machine: crate::machine::MachineInfo::detect(),
        runs,
    })
}

fn run_one(cfg: &ChurnConfig, gc: Option<GcConfig>, progress: &Progress) -> Result<ChurnRun> {
    let name = if gc.is_some() { "background GC" } else { "no GC thread" };
    let path = cfg.pool_dir.join(format!("tembo-bench-churn-{}.pool", std::process::id()));
    let _ = std::fs::remove_file(&path);
    let live_guess = cfg.keys as u64 * (cfg.value_bytes as u64 + 64);
    let size = (live_guess * 3).max(64 << 20);
    let opts = Options { size, max_size: Some(size * 16), gc, ..Options::default() };
    let db = Db::create(&path, &opts).with_context(|| format!("creating {}", path.display()))?;
    let mut rng = Rng::seed_from_u64(cfg.seed);
    let mut value = vec![0u8; cfg.value_bytes];
    let mut model: HashMap<usize, u8> = HashMap::with_capacity(cfg.keys);
    let entry_bytes = |i: usize| (key(i).len() + cfg.value_bytes) as u64;
    let bar = progress.bar((cfg.keys + cfg.ops) as u64, &format!("churn ({name})"));
    for i in 0..cfg.keys {
        value.fill(1);
        db.put(&key(i), &value)?;
        model.insert(i, 1);
        bar.inc(1);
    }
    let mut samples = Vec::new();
    let mut sample = |db: &Db, done: u64, model: &HashMap<usize, u8>, secs: f64, stretch: u64| -> Result<()> {
        let st = db.stats()?;
        let live_bytes: u64 = model.keys().map(|&i| entry_bytes(i)).sum();
        samples.push(ChurnSample {
            ops: done,
            keys: model.len() as u64,
            live_bytes,
            used_bytes: st.alloc.used_bytes,
            ratio: st.alloc.used_bytes as f64 / live_bytes.max(1) as f64,
            dead_entries: st.tree.dead_entries,
            ops_per_sec: if secs > 0.0 { stretch as f64 / secs } else { 0.0 },
        });
        Ok(())
    };
    sample(&db, 0, &model, 0.0, 0)?;
    let every = (cfg.ops / cfg.samples.max(1)).max(1);
    let mut last = 0usize;
    let mut t = Instant::now();
    for op in 1..=cfg.ops {
        let i = rng.below(cfg.keys as u64) as usize;
        if rng.below(3) == 0 {
            db.delete(&key(i))?;
            model.remove(&i);
        } else {
            let b = rng.next_u64() as u8 | 1;
            value.fill(b);
            db.put(&key(i), &value)?;
            model.insert(i, b);
        }
        bar.inc(1);
        if op % every == 0 || op == cfg.ops {
            let secs = t.elapsed().as_secs_f64();
            sample(&db, op as u64, &model, secs, (op - last) as u64)?;
            last = op;
            t = Instant::now();
        }
    }
    bar.finish_and_clear();
    // Then idle for a second: what the writes left behind, and (with the
    // thread) what the GC reclaims once nobody writes.
    std::thread::sleep(std::time::Duration::from_secs(1));
    sample(&db, cfg.ops as u64, &model, 0.0, 0)?;
    // Spot-check the contents against the model.
    for i in (0..cfg.keys).step_by((cfg.keys / 1000).max(1)) {
        let got = db.get(&key(i))?;
        let want = model.get(&i).map(|b| vec![*b; cfg.value_bytes]);
        anyhow::ensure!(got == want, "key {i} reads {:?} bytes, the model has {:?}", got.map(|v| v.len()), want);
    }
    let gs = db.stats()?.gc.unwrap_or_default();
    drop(db);
    let _ = std::fs::remove_file(&path);
    Ok(ChurnRun { gc: name.into(), samples, gc_steps: gs.steps, gc_passes: gs.passes })
}

/// The used/live ratio of each run over the churn, as an SVG line chart.
///
/// # Errors
/// Drawing errors.
pub fn ratio_svg(r: &ChurnReport) -> Result<String> {
    let series: Vec<(String, Vec<(f64, f64)>)> = r
        .runs
        .iter()
        .map(|run| (run.gc.clone(), run.samples.iter().map(|s| (s.ops as f64 / 1e3, s.ratio)).collect()))
        .collect();
    crate::plot::series_svg(
        "Pool bytes used per live byte under update/delete churn",
        &format!(
            "{} keys x {} B values, 2/3 overwrites, 1/3 deletes, one durable commit each; {}",
            r.keys, r.value_bytes, r.machine.cpu_model
        ),
        "churn operations (thousands)",
        "pool bytes used / live key+value bytes",
        &series,
    )
}
