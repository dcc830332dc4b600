//! The engine micro-benchmark: durable put, get and delete throughput of
//! the CDDS tree on an emulated pool (a file on `/dev/shm`, the thesis's
//! setup), the same tree with ordering `none` ("volatile CDDS"), and
//! `std::collections::BTreeMap` in the same run, with the flushes and
//! fences each operation costs. The peers of the bench issue (LMDB,
//! RocksDB, …) join this table later.
//!
//! Keys are 25 random printable bytes (seeded), values a fixed size; puts
//! insert every key once in random order, gets read every key in another
//! random order, deletes remove every key. Each figure is the median of
//! `runs` runs, each on a fresh pool.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};
use tembo_cdds::{Limits, Op, Tree};
use tembo_pmem::{ModeRequest, OrderingMode, Pool, PoolOptions};

use crate::machine::MachineInfo;
use crate::progress::Progress;
use crate::summary::median;

/// What to measure.
#[derive(Clone, Debug)]
pub struct KvConfig {
    /// Number of keys.
    pub keys: usize,
    /// Value size in bytes.
    pub value_bytes: usize,
    /// Runs per target (medians are reported).
    pub runs: usize,
    /// Directory of the pool files (a RAM filesystem for `emulated` mode).
    pub pool_dir: PathBuf,
    /// Seed of the keys and orders.
    pub seed: u64,
}

/// One target's medians.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct KvRow {
    /// What was measured.
    pub target: String,
    /// Puts per second.
    pub put_per_s: f64,
    /// Gets per second.
    pub get_per_s: f64,
    /// Deletes per second.
    pub delete_per_s: f64,
    /// Cache lines flushed per put.
    pub flushes_per_put: f64,
    /// Fences per put.
    pub fences_per_put: f64,
    /// Cache lines flushed per delete.
    pub flushes_per_delete: f64,
    /// Fences per delete.
    pub fences_per_delete: f64,
}

/// The report.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct KvReport {
    /// Keys.
    pub keys: usize,
    /// Value bytes.
    pub value_bytes: usize,
    /// Runs per target.
    pub runs: usize,
    /// Pool mode of the durable target.
    pub mode: String,
    /// Where it ran.
    pub machine: MachineInfo,
    /// One row per target.
    pub rows: Vec<KvRow>,
}

fn keys(n: usize, seed: u64) -> Vec<Vec<u8>> {
    let mut x = seed | 1;
    let mut next = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    (0..n).map(|_| (0..25).map(|_| b'!' + (next() % 94) as u8).collect()).collect()
}

fn shuffled(n: usize, seed: u64) -> Vec<usize> {
    let mut idx: Vec<usize> = (0..n).collect();
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    for i in (1..n).rev() {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        idx.swap(i, (x % (i as u64 + 1)) as usize);
    }
    idx
}

struct Sample {
    put: f64,
    get: f64,
    del: f64,
    fp: f64,
    fnp: f64,
    fd: f64,
    fnd: f64,
}

fn run_cdds(cfg: &KvConfig, ordering: OrderingMode, ks: &[Vec<u8>], run: usize) -> Result<(Sample, String)> {
    let path = cfg.pool_dir.join(format!("tembo-bench-kv-{}-{run}.pool", std::process::id()));
    let _ = std::fs::remove_file(&path);
    let need = (cfg.keys as u64) * (cfg.value_bytes as u64 + 160) * 3 / 2 + (64 << 20);
    let opts = PoolOptions { size: need, max_size: Some(need * 4), mode: ModeRequest::Auto, ordering, flush: None };
    let pool = Arc::new(Pool::create(&path, &opts).with_context(|| format!("creating {}", path.display()))?);
    let mode = pool.mode().name().to_string();
    let tree = Tree::create(pool.clone(), Limits::default())?;
    let value = vec![0xABu8; cfg.value_bytes];
    let order = shuffled(ks.len(), cfg.seed ^ run as u64);
    let s0 = pool.write_stats();
    let t = Instant::now();
    for &i in &order {
        tree.write(&[Op::Put(&ks[i], &value)])?;
    }
    let put = ks.len() as f64 / t.elapsed().as_secs_f64();
    let s1 = pool.write_stats().since(&s0);
    let order = shuffled(ks.len(), cfg.seed ^ 0x5555 ^ run as u64);
    let t = Instant::now();
    let mut found = 0usize;
    for &i in &order {
        found += tree.get(&ks[i])?.is_some() as usize;
    }
    let get = ks.len() as f64 / t.elapsed().as_secs_f64();
    anyhow::ensure!(found == ks.len(), "only {found} of {} keys found", ks.len());
    let s2 = pool.write_stats();
    let t = Instant::now();
    for &i in &order {
        tree.write(&[Op::Delete(&ks[i])])?;
    }
    let del = ks.len() as f64 / t.elapsed().as_secs_f64();
    let s3 = pool.write_stats().since(&s2);
    drop(tree);
    drop(pool);
    let _ = std::fs::remove_file(&path);
    let n = ks.len() as f64;
    Ok((
        Sample {
            put,
            get,
            del,
            fp: s1.flush_count as f64 / n,
            fnp: s1.fence_count as f64 / n,
            fd: s3.flush_count as f64 / n,
            fnd: s3.fence_count as f64 / n,
        },
        mode,
    ))
}

fn run_btreemap(cfg: &KvConfig, ks: &[Vec<u8>], run: usize) -> Sample {
    let value = vec![0xABu8; cfg.value_bytes];
    let mut m = BTreeMap::new();
    let order = shuffled(ks.len(), cfg.seed ^ run as u64);
    let t = Instant::now();
    for &i in &order {
        m.insert(ks[i].clone(), value.clone());
    }
    let put = ks.len() as f64 / t.elapsed().as_secs_f64();
    let order = shuffled(ks.len(), cfg.seed ^ 0x5555 ^ run as u64);
    let t = Instant::now();
    let mut found = 0usize;
    for &i in &order {
        // A get returns an owned copy of the value, as the tree's does.
        found += std::hint::black_box(m.get(&ks[i]).cloned()).is_some() as usize;
    }
    let get = ks.len() as f64 / t.elapsed().as_secs_f64();
    assert_eq!(found, ks.len());
    let t = Instant::now();
    for &i in &order {
        m.remove(&ks[i]);
    }
    let del = ks.len() as f64 / t.elapsed().as_secs_f64();
    Sample { put, get, del, fp: 0.0, fnp: 0.0, fd: 0.0, fnd: 0.0 }
}

fn row(target: &str, samples: &[Sample]) -> KvRow {
    let med = |f: &dyn Fn(&Sample) -> f64| median(&mut samples.iter().map(f).collect::<Vec<_>>());
    KvRow {
        target: target.to_string(),
        put_per_s: med(&|s| s.put),
        get_per_s: med(&|s| s.get),
        delete_per_s: med(&|s| s.del),
        flushes_per_put: med(&|s| s.fp),
        fences_per_put: med(&|s| s.fnp),
        flushes_per_delete: med(&|s| s.fd),
        fences_per_delete: med(&|s| s.fnd),
    }
}

/// Runs the benchmark.
///
/// # Errors
/// Pool creation (directory, space) and tree errors.
pub fn run(cfg: &KvConfig, progress: Progress) -> Result<KvReport> {
    let ks = keys(cfg.keys, cfg.seed);
    let bar = progress.bar((cfg.runs * 3) as u64, "kv runs");
    let (mut fast, mut none, mut map) = (Vec::new(), Vec::new(), Vec::new());
    let mut mode = String::new();
    for run in 0..cfg.runs {
        // Interleaved, so drift on a shared machine hits every target alike.
        let (s, m) = run_cdds(cfg, OrderingMode::Fast, &ks, run)?;
        mode = m;
        fast.push(s);
        bar.inc(1);
        none.push(run_cdds(cfg, OrderingMode::None, &ks, run)?.0);
        bar.inc(1);
        map.push(run_btreemap(cfg, &ks, run));
        bar.inc(1);
    }
    bar.finish_and_clear();
    Ok(KvReport {
        keys: cfg.keys,
        value_bytes: cfg.value_bytes,
        runs: cfg.runs,
        mode: mode.clone(),
        machine: MachineInfo::detect(),
        rows: vec![
            row(&format!("cdds durable (ordering fast, {mode})"), &fast),
            row("cdds volatile (ordering none)", &none),
            row("std BTreeMap", &map),
        ],
    })
}

/// The report as a table with ratios to `BTreeMap`.
pub fn render_table(r: &KvReport) -> String {
    let mut s = format!(
        "{} keys x {} B values, median of {} runs, durable pool mode: {}\n",
        r.keys, r.value_bytes, r.runs, r.mode
    );
    s.push_str(&format!(
        "{:<40} {:>12} {:>12} {:>12} {:>10} {:>10} {:>10} {:>10}\n",
        "target", "put/s", "get/s", "delete/s", "flush/put", "fence/put", "flush/del", "fence/del"
    ));
    for row in &r.rows {
        s.push_str(&format!(
            "{:<40} {:>12.0} {:>12.0} {:>12.0} {:>10.2} {:>10.2} {:>10.2} {:>10.2}\n",
            row.target,
            row.put_per_s,
            row.get_per_s,
            row.delete_per_s,
            row.flushes_per_put,
            row.fences_per_put,
            row.flushes_per_delete,
            row.fences_per_delete
        ));
    }
    if let Some(map) = r.rows.iter().find(|x| x.target.contains("BTreeMap")) {
        for row in r.rows.iter().filter(|x| !x.target.contains("BTreeMap")) {
            s.push_str(&format!(
                "{} vs BTreeMap: put {:.2}x, get {:.2}x, delete {:.2}x\n",
                row.target,
                row.put_per_s / map.put_per_s,
                row.get_per_s / map.get_per_s,
                row.delete_per_s / map.delete_per_s
            ));
        }
    }
    s
}
