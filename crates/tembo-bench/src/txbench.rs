//! The Kamino-Tx study (`tembo bench kamino`): YCSB A, B, C, D and F with
//! several writer threads on one database, for the engines `kamino`,
//! `kamino-dynamic`, `undo` and `cdds` (and PMDK libpmemobj's undo-log
//! B+tree, single-threaded, with the `peers` feature); writers on disjoint
//! keys (each thread updates random keys of its own key range: the case
//! where Kamino-Tx's per-object locks should let writers scale); and the
//! paper's worst case, one object updated over and over (§7.1).
//!
//! The load phase runs on one thread; the run phase's operations are
//! generated once and dealt round-robin to the threads, which start
//! together and each keep their own latency histograms. With more than one
//! thread, YCSB D's reads of the newest records may run before another
//! thread inserted them: those misses are counted and reported, not
//! failed (with one thread every read must hit).

use std::path::{Path, PathBuf};
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

use anyhow::{bail, ensure, Context, Result};
use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};
use tembo_pmem::OrderingMode;
use tembo_store::{Db, Engine};

use crate::progress::Progress;
use crate::summary::median;
use crate::targets::{cdds, TargetKind};
use crate::workload::new_histogram;
use crate::workload::ycsb::{fill_value, load_keys, Workload as Core, YcsbOp, YcsbSpec};

/// A system of the study.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum TxTarget {
    /// A Tembo engine through `Db`.
    Engine(#[serde(with = "engine_name")] Engine),
    /// PMDK libpmemobj (one thread).
    Pmemobj,
}

mod engine_name {
    use serde::{Deserialize, Deserializer, Serializer};
    use tembo_store::Engine;
    pub fn serialize<S: Serializer>(e: &Engine, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(e.name())
    }
    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Engine, D::Error> {
        let n = String::deserialize(d)?;
        Engine::from_name(&n).ok_or_else(|| serde::de::Error::custom(format!("unknown engine {n}")))
    }
}

impl TxTarget {
    /// Name in reports.
    pub fn name(self) -> &'static str {
        match self {
            TxTarget::Engine(e) => e.name(),
            TxTarget::Pmemobj => "pmemobj",
        }
    }

    /// Parses `kamino`, `kamino-dynamic`, `undo`, `cdds` or `pmemobj`.
    ///
    /// # Errors
    /// An unknown name.
    pub fn parse(s: &str) -> Result<TxTarget, String> {
        match s {
            "pmemobj" => Ok(TxTarget::Pmemobj),
            _ => Engine::from_name(s)
                .map(TxTarget::Engine)
                .ok_or_else(|| format!("unknown engine `{s}`; known: kamino, kamino-dynamic, undo, cdds, pmemobj")),
        }
    }
}

/// What to run.
#[derive(Clone, Debug)]
pub struct TxBenchConfig {
    /// Systems, in report order.
    pub targets: Vec<TxTarget>,
    /// YCSB workloads.
    pub workloads: Vec<Core>,
    /// Thread counts.
    pub threads: Vec<usize>,
    /// Records loaded.
    pub records: u64,
    /// Run-phase operations (all threads together).
    pub ops: u64,
    /// Value bytes.
    pub value_bytes: usize,
    /// α of `kamino-dynamic`.
    pub alpha: f64,
    /// Runs per cell; medians are reported.
    pub runs: usize,
    /// Where the pools go.
    pub dir: PathBuf,
    /// Seed.
    pub seed: u64,
}

/// One cell of the study: a system, a workload, a thread count.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct TxRow {
    /// System.
    pub target: String,
    /// YCSB workload letter.
    pub workload: String,
    /// Threads in the run phase.
    pub threads: usize,
    /// Run-phase operations per second (median of runs).
    pub ops_per_s: f64,
    /// Median latency of all run-phase operations (ns; median of runs).
    pub p50_ns: u64,
    /// 99th percentile of all operations (ns).
    pub p99_ns: u64,
    /// Median latency of the writes (update, insert, read-modify-write), ns.
    pub write_p50_ns: u64,
    /// 99th percentile of the writes, ns.
    pub write_p99_ns: u64,
    /// Mean write latency, ns.
    pub write_mean_ns: f64,
    /// Reads of YCSB D that ran before their record's insert (threads > 1).
    pub early_reads: u64,
    /// Pool bytes in use after the run (the engine's data and its backup or log).
    pub used_bytes: u64,
    /// Bytes of backup copies (in-place engines).
    pub backup_bytes: u64,
    /// Bytes of the tree's objects (in-place engines).
    pub object_bytes: u64,
    /// Objects copied in the critical path during the run.
    pub copies_critical: u64,
    /// Objects copied by the coordinator during the run.
    pub copies_background: u64,
    /// Write intents whose object had a current backup / all write intents.
    pub backup_hit_rate: f64,
}

/// The worst case of §7.1: one object (a key per thread) updated repeatedly.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct WorstRow {
    /// System.
    pub target: String,
    /// Value (object) bytes.
    pub value_bytes: usize,
    /// Threads, each updating its own key.
    pub threads: usize,
    /// Updates per second, all threads (median of runs).
    pub updates_per_s: f64,
    /// Mean latency of one update (ns).
    pub mean_ns: f64,
    /// Share of updates that copied in the critical path (in-place engines).
    pub critical_copies_per_update: f64,
}

/// Everything `tembo bench kamino` measured.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct TxReport {
    /// The machine.
    pub machine: crate::machine::MachineInfo,
    /// Parameters.
    pub params: serde_json::Value,
    /// YCSB cells.
    pub ycsb: Vec<TxRow>,
    /// Worst-case cells.
    pub worst: Vec<WorstRow>,
    /// Disjoint-writer cells (`value_bytes`: the YCSB value size).
    #[serde(default)]
    pub disjoint: Vec<WorstRow>,
}

struct Sample {
    elapsed: Duration,
    all: Histogram<u64>,
    writes: Histogram<u64>,
    early: u64,
}

fn values(seed: u64, n: usize, bytes: usize) -> Vec<Vec<u8>> {
    (0..n as u64)
        .map(|i| {
            let mut v = vec![0u8; bytes];
            fill_value(seed, i, &mut v);
            v
        })
        .collect()
}

fn open_db(dir: &Path, engine: Engine, size_hint: u64, alpha: f64) -> Result<Db> {
    let path = dir.join("tembo.pool");
    let opts = tembo_store::Options { alpha, ..cdds::options(size_hint, OrderingMode::Fast, engine) };
    Db::create(&path, &opts).with_context(|| format!("creating {}", path.display()))
}

fn is_write(op: &YcsbOp) -> bool {
    matches!(op, YcsbOp::Update(_) | YcsbOp::Insert(_) | YcsbOp::ReadModifyWrite(_))
}

/// Runs `ops` through `exec` (which returns the reads that missed), timing
/// each: histograms of all operations and of the writes, and the misses.
fn timed_ops<'a>(
    ops: impl Iterator<Item = (usize, &'a YcsbOp)>,
    vals: &[Vec<u8>],
    mut exec: impl FnMut(&YcsbOp, &[u8]) -> Result<u64>,
) -> Result<(Histogram<u64>, Histogram<u64>, u64)> {
    let (mut all, mut writes) = (new_histogram(), new_histogram());
    let mut misses = 0;
    let mut last = Instant::now();
    for (i, op) in ops {
        misses += exec(op, &vals[i % vals.len()])?;
        let now = Instant::now();
        let ns = now.duration_since(last).as_nanos().max(1) as u64;
        last = now;
        all.saturating_record(ns);
        if is_write(op) {
            writes.saturating_record(ns);
        }
    }
    Ok((all, writes, misses))
}

/// One YCSB operation on a `Db`; returns the reads that missed.
fn db_op(db: &Db, op: &YcsbOp, v: &[u8]) -> Result<u64> {
    Ok(match op {
        YcsbOp::Read(k) => u64::from(db.get(k)?.is_none()),
        YcsbOp::Update(k) | YcsbOp::Insert(k) => {
            db.put(k, v)?;
            0
        }
        YcsbOp::ReadModifyWrite(k) => {
            let miss = u64::from(db.get(k)?.is_none());
            db.put(k, v)?;
            miss
        }
        YcsbOp::Scan(k, n) => {
            for p in db.scan(&k[..]..).take(*n) {
                std::hint::black_box(p?);
            }
            0
        }
    })
}

/// Runs the ops of one run phase on `db` with `threads` threads.
fn run_threads(
    db: &Arc<Db>,
    ops: &Arc<Vec<YcsbOp>>,
    vals: &Arc<Vec<Vec<u8>>>,
    threads: usize,
    must_hit: bool,
) -> Result<Sample> {
    let barrier = Arc::new(Barrier::new(threads + 1));
    let handles: Vec<_> = (0..threads)
        .map(|t| {
            let (db, ops, vals, barrier) = (db.clone(), ops.clone(), vals.clone(), barrier.clone());
            std::thread::spawn(move || -> Result<(Sample, Instant)> {
                barrier.wait();
                let start = Instant::now();
                let mine = ops.iter().enumerate().skip(t).step_by(threads);
                let (all, writes, early) = timed_ops(mine, &vals, |op, v| db_op(&db, op, v))?;
                Ok((Sample { elapsed: start.elapsed(), all, writes, early }, start))
            })
        })
        .collect();
    barrier.wait();
    let (mut all, mut writes, mut early) = (new_histogram(), new_histogram(), 0);
    let mut span: Option<(Instant, Instant)> = None;
    for h in handles {
        let (x, s) = h.join().map_err(|_| anyhow::anyhow!("a benchmark thread panicked"))??;
        all.add(x.all).expect("same bounds");
        writes.add(x.writes).expect("same bounds");
        early += x.early;
        let f = s + x.elapsed;
        // The threads read the clock themselves: the spawning thread may
        // run late after the barrier.
        span = Some(span.map_or((s, f), |(a, b)| (a.min(s), b.max(f))));
    }
    let (s, f) = span.context("no benchmark thread")?;
    let elapsed = f.duration_since(s).max(Duration::from_nanos(1));
    ensure!(!must_hit || early == 0, "{early} reads did not find a record that was loaded or inserted");
    Ok(Sample { elapsed, all, writes, early })
}

/// One run of one YCSB cell on a fresh database.
fn ycsb_once(cfg: &TxBenchConfig, target: TxTarget, w: Core, threads: usize, run: usize) -> Result<(Sample, TxRow)> {
    let mut spec = YcsbSpec::new(w, cfg.records, cfg.ops, cfg.seed + run as u64);
    spec.value_bytes = cfg.value_bytes;
    let vals = Arc::new(values(cfg.seed, 256, cfg.value_bytes));
    let size_hint = (cfg.records + cfg.ops / 10) * (cfg.value_bytes as u64 + 96);
    let dir = tempdir_in(&cfg.dir, target.name())?;
    let ops: Vec<YcsbOp> = spec.run()?.collect();
    let mut row = TxRow {
        target: target.name().into(),
        workload: w.to_string(),
        threads,
        ops_per_s: 0.0,
        p50_ns: 0,
        p99_ns: 0,
        write_p50_ns: 0,
        write_p99_ns: 0,
        write_mean_ns: 0.0,
        early_reads: 0,
        used_bytes: 0,
        backup_bytes: 0,
        object_bytes: 0,
        copies_critical: 0,
        copies_background: 0,
        backup_hit_rate: 0.0,
    };
    let sample = match target {
        TxTarget::Engine(engine) => {
            let db = Arc::new(open_db(dir.path(), engine, size_hint, cfg.alpha)?);
            for (i, k) in load_keys(&spec).enumerate() {
                db.put(&k, &vals[i % vals.len()])?;
            }
            // The load's background work (Kamino-Tx's roll-forwards, the
            // CDDS GC) is done before the run phase, as between YCSB's
            // separate load and run invocations: the run measures the
            // steady state, not the load's backlog.
            db.settle()?;
            let before = db.stats()?.in_place.map(|s| s.heap);
            let s = run_threads(&db, &Arc::new(ops), &vals, threads, threads == 1)?;
            let st = db.stats()?;
            row.used_bytes = st.alloc.used_bytes;
            if let (Some(k), Some(b)) = (st.in_place, before) {
                row.backup_bytes = k.backup_bytes;
                row.object_bytes = k.object_bytes;
                row.copies_critical = k.heap.copies_critical - b.copies_critical;
                row.copies_background = k.heap.copies_background - b.copies_background;
                let hits = k.heap.backup_hits - b.backup_hits;
                let misses = k.heap.backup_misses - b.backup_misses;
                row.backup_hit_rate = hits as f64 / (hits + misses).max(1) as f64;
            }
            drop(Arc::try_unwrap(db).map_err(|_| anyhow::anyhow!("db still shared"))?.close());
            s
        }
        TxTarget::Pmemobj => {
            ensure!(threads == 1, "pmemobj runs single-threaded");
            let mut t = TargetKind::Pmemobj.open(dir.path(), size_hint)?;
            for (i, k) in load_keys(&spec).enumerate() {
                t.put(&k, &vals[i % vals.len()])?;
            }
            let mut buf = Vec::new();
            let start = Instant::now();
            let (all, writes, misses) = timed_ops(ops.iter().enumerate(), &vals, |op, v| match op {
                YcsbOp::Read(k) => Ok(u64::from(!t.get(k, &mut buf)?)),
                YcsbOp::Update(k) | YcsbOp::Insert(k) => t.put(k, v).map(|()| 0),
                YcsbOp::ReadModifyWrite(k) => {
                    let miss = u64::from(!t.get(k, &mut buf)?);
                    t.put(k, v)?;
                    Ok(miss)
                }
                YcsbOp::Scan(k, n) => t.scan(k, *n).map(|_| 0),
            })?;
            ensure!(misses == 0, "{misses} reads missed");
            Sample { elapsed: start.elapsed(), all, writes, early: 0 }
        }
    };
    Ok((sample, row))
}

/// A directory removed when dropped.
struct TempDir(PathBuf);
impl TempDir {
    fn path(&self) -> &Path {
        &self.0
    }
}
impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn tempdir_in(dir: &Path, name: &str) -> Result<TempDir> {
    let d = dir.join(format!("tembo-txbench-{}-{name}-{}", std::process::id(), rand_suffix()));
    std::fs::create_dir_all(&d).with_context(|| format!("creating {}", d.display()))?;
    Ok(TempDir(d))
}

fn rand_suffix() -> u64 {
    use std::sync::atomic::{AtomicU64, Ordering};
    static N: AtomicU64 = AtomicU64::new(0);
    N.fetch_add(1, Ordering::Relaxed)
}

fn ns(h: &Histogram<u64>, q: f64) -> u64 {
    if h.is_empty() {
        0
    } else {
        h.value_at_quantile(q)
    }
}

/// Runs the YCSB part of the study: every workload × thread count × system,
/// `runs` times interleaved, medians.
///
/// # Errors
/// A system's errors; a read that misses with one thread.
pub fn run_ycsb(cfg: &TxBenchConfig, progress: &Progress) -> Result<Vec<TxRow>> {
    if !cfg.dir.is_dir() {
        bail!("directory {} does not exist; create it or pass another with --dir", cfg.dir.display());
    }
    let cells: Vec<(Core, usize, TxTarget)> = cfg
        .workloads
        .iter()
        .flat_map(|&w| cfg.threads.iter().flat_map(move |&t| cfg.targets.iter().map(move |&x| (w, t, x))))
        .filter(|&(_, t, x)| x != TxTarget::Pmemobj || t == 1)
        .collect();
    let bar = progress.bar((cells.len() * cfg.runs) as u64, "ycsb cells");
    let mut rows = Vec::new();
    let mut pairs: Vec<(Core, usize)> = Vec::new();
    for c in &cells {
        if !pairs.contains(&(c.0, c.1)) {
            pairs.push((c.0, c.1));
        }
    }
    for (w, threads) in pairs {
        // Interleave: run r of every system, then run r + 1.
        let group: Vec<TxTarget> = cells.iter().filter(|c| c.0 == w && c.1 == threads).map(|c| c.2).collect();
        let mut samples: Vec<Vec<(Sample, TxRow)>> = group.iter().map(|_| Vec::new()).collect();
        for run in 0..cfg.runs {
            for (gi, &x) in group.iter().enumerate() {
                bar.set_message(format!("{} {w} x{threads} run {}", x.name(), run + 1));
                samples[gi].push(ycsb_once(cfg, x, w, threads, run)?);
                bar.inc(1);
            }
        }
        for s in samples {
            let mut rates: Vec<f64> = s.iter().map(|(x, _)| x.all.len() as f64 / x.elapsed.as_secs_f64()).collect();
            let med = |f: &dyn Fn(&Sample) -> u64| {
                let mut v: Vec<f64> = s.iter().map(|(x, _)| f(x) as f64).collect();
                median(&mut v) as u64
            };
            let mut wm: Vec<f64> = s.iter().map(|(x, _)| x.writes.mean()).collect();
            let mut row = s[s.len() / 2].1.clone();
            row.ops_per_s = median(&mut rates);
            row.p50_ns = med(&|x| ns(&x.all, 0.5));
            row.p99_ns = med(&|x| ns(&x.all, 0.99));
            row.write_p50_ns = med(&|x| ns(&x.writes, 0.5));
            row.write_p99_ns = med(&|x| ns(&x.writes, 0.99));
            row.write_mean_ns = median(&mut wm);
            row.early_reads = med(&|x| x.early);
            rows.push(row);
        }
    }
    bar.finish_and_clear();
    Ok(rows)
}

/// Starts `threads` writers together; writer `t` puts `key(t, i)` for
/// `i in 0..updates`, cycling through `vals`. Returns the seconds from the
/// first writer's start until the last one finished (each writer reads the
/// clock itself: the spawning thread may run late after the barrier).
fn time_writers(
    db: &Arc<Db>,
    threads: usize,
    updates: u64,
    vals: &Arc<Vec<Vec<u8>>>,
    key: impl Fn(usize, u64) -> Vec<u8> + Send + Sync + 'static,
) -> Result<f64> {
    let barrier = Arc::new(Barrier::new(threads + 1));
    let key = Arc::new(key);
    let hs: Vec<_> = (0..threads)
        .map(|t| {
            let (db, vals, barrier, key) = (db.clone(), vals.clone(), barrier.clone(), key.clone());
            std::thread::spawn(move || -> Result<(Instant, Instant)> {
                barrier.wait();
                let start = Instant::now();
                for i in 0..updates {
                    db.put(&key(t, i), &vals[i as usize % vals.len()])?;
                }
                Ok((start, Instant::now()))
            })
        })
        .collect();
    barrier.wait();
    let mut span: Option<(Instant, Instant)> = None;
    for h in hs {
        let (s, e) = h.join().map_err(|_| anyhow::anyhow!("a benchmark thread panicked"))??;
        span = Some(span.map_or((s, e), |(a, b)| (a.min(s), b.max(e))));
    }
    let (s, e) = span.context("no writer thread")?;
    Ok(e.duration_since(s).as_secs_f64().max(1e-9))
}

fn critical_copies(db: &Db) -> Result<u64> {
    Ok(db.stats()?.in_place.map(|s| s.heap.copies_critical).unwrap_or(0))
}

/// Times the writers of [`time_writers`] on `db`, then closes it: (updates
/// per second, mean ns per update, critical copies per update).
fn writers_sample(
    db: Arc<Db>,
    threads: usize,
    updates: u64,
    vals: &Arc<Vec<Vec<u8>>>,
    key: impl Fn(usize, u64) -> Vec<u8> + Send + Sync + 'static,
) -> Result<(f64, f64, f64)> {
    let before = critical_copies(&db)?;
    let el = time_writers(&db, threads, updates, vals, key)?;
    let after = critical_copies(&db)?;
    let total = (updates * threads as u64) as f64;
    drop(Arc::try_unwrap(db).map_err(|_| anyhow::anyhow!("db still shared"))?.close());
    Ok((total / el, el * 1e9 * threads as f64 / total, (after - before) as f64 / total))
}

/// Medians of (updates/s, mean ns per update, critical copies per update).
fn writer_row(target: Engine, value_bytes: usize, threads: usize, s: &[(f64, f64, f64)]) -> WorstRow {
    let mut a: Vec<f64> = s.iter().map(|x| x.0).collect();
    let mut b: Vec<f64> = s.iter().map(|x| x.1).collect();
    let mut c: Vec<f64> = s.iter().map(|x| x.2).collect();
    WorstRow {
        target: target.name().into(),
        value_bytes,
        threads,
        updates_per_s: median(&mut a),
        mean_ns: median(&mut b),
        critical_copies_per_update: median(&mut c),
    }
}

fn engines_of(cfg: &TxBenchConfig) -> Vec<Engine> {
    cfg.targets.iter().filter_map(|t| if let TxTarget::Engine(e) = t { Some(*e) } else { None }).collect()
}

/// Filler keys between two threads' keys in the worst case: more than a
/// leaf of either tree holds, so each thread's key has a leaf of its own.
const WORST_SPACING: usize = 64;

/// The worst case: each thread updates its own key `updates` times. The
/// keys are spaced apart by filler keys so that no two threads share a
/// leaf: what is measured is the dependent copy, not a leaf lock.
///
/// # Errors
/// A system's errors.
pub fn run_worst(cfg: &TxBenchConfig, sizes: &[usize], updates: u64, progress: &Progress) -> Result<Vec<WorstRow>> {
    let mut rows = Vec::new();
    let targets = engines_of(cfg);
    let bar = progress.bar((sizes.len() * cfg.threads.len() * targets.len() * cfg.runs) as u64, "worst case");
    for &size in sizes {
        for &threads in &cfg.threads {
            let mut per: Vec<Vec<(f64, f64, f64)>> = targets.iter().map(|_| Vec::new()).collect();
            for _run in 0..cfg.runs {
                for (ei, &engine) in targets.iter().enumerate() {
                    bar.set_message(format!("{} {size} B x{threads}", engine.name()));
                    let dir = tempdir_in(&cfg.dir, engine.name())?;
                    let db = Arc::new(open_db(dir.path(), engine, 64 << 20, cfg.alpha)?);
                    let vals = Arc::new(values(cfg.seed, 16, size));
                    let mut batch = tembo_store::WriteBatch::new();
                    for t in 0..threads {
                        batch.put(format!("worst-{t:04}"), vals[0].clone());
                        for j in 0..WORST_SPACING {
                            batch.put(format!("worst-{t:04}-{j:03}"), &b"filler"[..]);
                        }
                    }
                    db.write(&batch)?;
                    db.settle()?;
                    per[ei].push(writers_sample(db, threads, updates, &vals, |t, _| {
                        format!("worst-{t:04}").into_bytes()
                    })?);
                    bar.inc(1);
                }
            }
            for (ei, s) in per.iter().enumerate() {
                rows.push(writer_row(targets[ei], size, threads, s));
            }
        }
    }
    bar.finish_and_clear();
    Ok(rows)
}

/// Writers on disjoint keys: `cfg.records` YCSB records are loaded, their
/// keys sorted and cut into one contiguous range per thread, and each
/// thread updates `updates` keys drawn uniformly from its own range.
///
/// # Errors
/// A system's errors.
pub fn run_disjoint(cfg: &TxBenchConfig, updates: u64, progress: &Progress) -> Result<Vec<WorstRow>> {
    let mut rows = Vec::new();
    let targets = engines_of(cfg);
    let spec = YcsbSpec::new(Core::A, cfg.records, 0, cfg.seed);
    let mut keys: Vec<Vec<u8>> = load_keys(&spec).collect();
    keys.sort_unstable();
    let keys = Arc::new(keys);
    let size_hint = cfg.records * (cfg.value_bytes as u64 + 96);
    let bar = progress.bar((cfg.threads.len() * targets.len() * cfg.runs) as u64, "disjoint writers");
    for &threads in &cfg.threads {
        ensure!(keys.len() >= threads, "--records must be at least the thread count");
        let mut per: Vec<Vec<(f64, f64, f64)>> = targets.iter().map(|_| Vec::new()).collect();
        for run in 0..cfg.runs {
            for (ei, &engine) in targets.iter().enumerate() {
                bar.set_message(format!("{} x{threads} run {}", engine.name(), run + 1));
                let dir = tempdir_in(&cfg.dir, engine.name())?;
                let db = Arc::new(open_db(dir.path(), engine, size_hint, cfg.alpha)?);
                let vals = Arc::new(values(cfg.seed, 256, cfg.value_bytes));
                for (i, k) in load_keys(&spec).enumerate() {
                    db.put(&k, &vals[i % vals.len()])?;
                }
                db.settle()?; // as in the YCSB cells
                let (ks, per_thread, seed) = (keys.clone(), keys.len() / threads, cfg.seed + run as u64);
                per[ei].push(writers_sample(db, threads, updates, &vals, move |t, i| {
                    // SplitMix64 of (seed, thread, i): uniform, cheap, reproducible.
                    let mut z = (seed ^ (t as u64) << 40 ^ i).wrapping_add(0x9E37_79B9_7F4A_7C15);
                    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
                    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
                    z ^= z >> 31;
                    ks[t * per_thread + (z % per_thread as u64) as usize].clone()
                })?);
                bar.inc(1);
            }
        }
        for (ei, s) in per.iter().enumerate() {
            rows.push(writer_row(targets[ei], cfg.value_bytes, threads, s));
        }
    }
    bar.finish_and_clear();
    Ok(rows)
}

/// The report as terminal tables, with `kamino / undo` ratios.
pub fn render(r: &TxReport) -> String {
    use std::fmt::Write;
    let mut s = String::new();
    if !r.ycsb.is_empty() {
        let _ = writeln!(
            s,
            "{:<3} {:>3} {:<15} {:>11} {:>8} {:>8} {:>9} {:>9} {:>8} {:>9} {:>9}",
            "wl", "thr", "engine", "ops/s", "p50 us", "p99 us", "wr p50", "wr p99", "vs undo", "crit cp", "used MiB"
        );
    }
    for row in &r.ycsb {
        let undo = r
            .ycsb
            .iter()
            .find(|u| u.target == "undo" && u.workload == row.workload && u.threads == row.threads)
            .map(|u| row.ops_per_s / u.ops_per_s);
        let _ = writeln!(
            s,
            "{:<3} {:>3} {:<15} {:>11.0} {:>8.2} {:>8.2} {:>9.2} {:>9.2} {:>8} {:>9} {:>9.1}",
            row.workload,
            row.threads,
            row.target,
            row.ops_per_s,
            row.p50_ns as f64 / 1e3,
            row.p99_ns as f64 / 1e3,
            row.write_p50_ns as f64 / 1e3,
            row.write_p99_ns as f64 / 1e3,
            undo.map_or("-".to_string(), |x| format!("{x:.2}x")),
            row.copies_critical,
            row.used_bytes as f64 / (1 << 20) as f64,
        );
    }
    if !r.disjoint.is_empty() {
        let _ = writeln!(s, "\ndisjoint writers: each thread updates random keys of its own key range");
        let _ = writeln!(
            s,
            "{:<15} {:>4} {:>12} {:>10} {:>14} {:>8}",
            "engine", "thr", "updates/s", "mean us", "crit cp/update", "vs 1 thr"
        );
        for w in &r.disjoint {
            let one = r.disjoint.iter().find(|x| x.target == w.target && x.threads == 1);
            let _ = writeln!(
                s,
                "{:<15} {:>4} {:>12.0} {:>10.2} {:>14.2} {:>8}",
                w.target,
                w.threads,
                w.updates_per_s,
                w.mean_ns / 1e3,
                w.critical_copies_per_update,
                one.map_or("-".to_string(), |o| format!("{:.2}x", w.updates_per_s / o.updates_per_s)),
            );
        }
    }
    if !r.worst.is_empty() {
        let _ = writeln!(s, "\nworst case: one object per thread updated repeatedly");
        let _ = writeln!(
            s,
            "{:<15} {:>7} {:>4} {:>12} {:>10} {:>14}",
            "engine", "bytes", "thr", "updates/s", "mean us", "crit cp/update"
        );
        for w in &r.worst {
            let _ = writeln!(
                s,
                "{:<15} {:>7} {:>4} {:>12.0} {:>10.2} {:>14.2}",
                w.target,
                w.value_bytes,
                w.threads,
                w.updates_per_s,
                w.mean_ns / 1e3,
                w.critical_copies_per_update
            );
        }
    }
    s
}

/// Distinct names, in first-seen order.
fn names_of<'a>(it: impl Iterator<Item = &'a String>) -> Vec<String> {
    let mut v: Vec<String> = Vec::new();
    for n in it {
        if !v.contains(n) {
            v.push(n.clone());
        }
    }
    v
}

/// Charts: throughput per workload at the largest thread count, scaling
/// with threads on workload A, disjoint writers by threads, and the worst
/// case by object size.
///
/// # Errors
/// Drawing errors.
pub fn charts(r: &TxReport) -> Result<Vec<(&'static str, String)>> {
    let mut out = Vec::new();
    let names = names_of(r.ycsb.iter().map(|x| &x.target));
    let letters = ["A", "B", "C", "D", "E", "F"];
    if let Some(tmax) = r.ycsb.iter().map(|x| x.threads).max() {
        let series: Vec<(String, Vec<(f64, f64)>)> = names
            .iter()
            .map(|n| {
                let pts = r
                    .ycsb
                    .iter()
                    .filter(|x| &x.target == n && (x.threads == tmax || (n == "pmemobj" && x.threads == 1)))
                    .filter_map(|x| {
                        letters.iter().position(|l| *l == x.workload).map(|i| (i as f64 + 1.0, x.ops_per_s / 1e3))
                    })
                    .collect();
                (n.clone(), pts)
            })
            .filter(|s: &(String, Vec<(f64, f64)>)| !s.1.is_empty())
            .collect();
        out.push((
            "ycsb",
            crate::plot::series_svg(
                &format!("YCSB throughput, {tmax} thread(s), 1 KB values"),
                "x: workload 1=A 2=B 3=C 4=D 6=F; pmemobj always 1 thread; medians of runs",
                "YCSB workload",
                "thousand ops/s",
                &series,
            )?,
        ));
    }
    let scaling: Vec<(String, Vec<(f64, f64)>)> = names
        .iter()
        .map(|n| {
            let pts = r
                .ycsb
                .iter()
                .filter(|x| &x.target == n && x.workload == "A")
                .map(|x| (x.threads as f64, x.ops_per_s / 1e3))
                .collect();
            (n.clone(), pts)
        })
        .filter(|s: &(String, Vec<(f64, f64)>)| s.1.len() > 1)
        .collect();
    if !scaling.is_empty() {
        out.push((
            "scaling",
            crate::plot::series_svg(
                "YCSB A throughput by threads",
                "medians of runs",
                "threads",
                "thousand ops/s",
                &scaling,
            )?,
        ));
    }
    let disjoint: Vec<(String, Vec<(f64, f64)>)> = names_of(r.disjoint.iter().map(|w| &w.target))
        .into_iter()
        .map(|n| {
            let pts = r
                .disjoint
                .iter()
                .filter(|w| w.target == n)
                .map(|w| (w.threads as f64, w.updates_per_s / 1e3))
                .collect();
            (n, pts)
        })
        .filter(|s: &(String, Vec<(f64, f64)>)| s.1.len() > 1)
        .collect();
    if !disjoint.is_empty() {
        out.push((
            "disjoint",
            crate::plot::series_svg(
                "Writers on disjoint keys: updates by threads",
                "each thread updates random keys of its own range; medians of runs",
                "threads",
                "thousand updates/s",
                &disjoint,
            )?,
        ));
    }
    if !r.worst.is_empty() {
        let t1 = r.worst.iter().map(|w| w.threads).min().unwrap_or(1);
        let mut series: Vec<(String, Vec<(f64, f64)>)> = Vec::new();
        for w in r.worst.iter().filter(|w| w.threads == t1) {
            match series.iter_mut().find(|s| s.0 == w.target) {
                Some(s) => s.1.push(((w.value_bytes as f64).log2(), w.mean_ns / 1e3)),
                None => series.push((w.target.clone(), vec![((w.value_bytes as f64).log2(), w.mean_ns / 1e3)])),
            }
        }
        out.push((
            "worst",
            crate::plot::series_svg(
                "Worst case: one object updated repeatedly",
                &format!("{t1} thread(s); x = log2(value bytes): 6 = 64 B, 8 = 256 B, 10 = 1 KiB, 12 = 4 KiB"),
                "log2(value bytes)",
                "microseconds per update",
                &series,
            )?,
        ));
    }
    Ok(out)
}
