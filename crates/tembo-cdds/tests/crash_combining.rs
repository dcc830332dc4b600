//! Crash consistency of combined writes (`combine`): several threads write
//! at once on a simulated pool, so their writes ride in each other's
//! batches, and fences are crash points under every crash policy.
//!
//! Each thread owns its keys and runs a seeded list of small atomic
//! batches, publishing how many have returned Ok. At a crash, each
//! thread's keys must equal its model after its acknowledged batches, or
//! after one more (the batch in flight, which may have ridden in the
//! commit under way): a combined commit may hold several threads' writes,
//! each of which must be wholly there or wholly absent, and none
//! acknowledged may be missing. The recovered tree must pass `check`.
//!
//! Why the oracle is exact although the threads race: a thread publishes
//! its count before it queues its next batch, and the thread that applies
//! a queued batch takes it from the queue under a lock after that; so at
//! any fence the published count is at most one batch behind what that
//! thread has made durable. Every fence is a crash point;
//! `TEMBO_TEST_SCALE=full` runs longer workloads.

use std::collections::BTreeMap;
use std::ops::Bound;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use tembo_cdds::{Limits, Op, Tree};
use tembo_pmem::sim::{sweep, CrashPoints, CrashPolicy, CrashState, SweepConfig};
use tembo_pmem::{Pool, PoolOptions};

const THREADS: usize = 3;
const BATCHES: usize = 220;
/// Batches per thread with `TEMBO_TEST_SCALE=full`.
const BATCHES_FULL: usize = 1_500;
const KEYS_PER_THREAD: u32 = 48;

type Batch = Vec<(Vec<u8>, Option<Vec<u8>>)>;
type Model = BTreeMap<Vec<u8>, Vec<u8>>;

fn key(t: usize, i: u32) -> Vec<u8> {
    format!("t{t}/key-{i:03}").into_bytes()
}

/// Thread `t`'s batches: 1-3 puts and deletes of its own keys, values of
/// 1-300 bytes carrying the batch number.
fn batches(t: usize, seed: u64, n: usize) -> Vec<Batch> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed ^ (t as u64 + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15));
    (0..n)
        .map(|n| {
            (0..rng.gen_range(1..=3))
                .map(|_| {
                    let k = key(t, rng.gen_range(0..KEYS_PER_THREAD));
                    if rng.gen_bool(0.25) {
                        (k, None)
                    } else {
                        let mut v = format!("t{t}-b{n}-").into_bytes();
                        v.resize(rng.gen_range(v.len()..300), b'a' + (n % 26) as u8);
                        (k, Some(v))
                    }
                })
                .collect()
        })
        .collect()
}

/// `models[n]`: thread's keys after its first `n` batches.
fn models(batches: &[Batch]) -> Vec<Model> {
    let mut m = Model::new();
    let mut out = vec![m.clone()];
    for b in batches {
        for (k, v) in b {
            match v {
                Some(v) => m.insert(k.clone(), v.clone()),
                None => m.remove(k),
            };
        }
        out.push(m.clone());
    }
    out
}

fn pool_options() -> PoolOptions {
    PoolOptions { size: 1 << 20, max_size: Some(32 << 20), ..PoolOptions::default() }
}

/// Reopens a crash image, recovers, checks, and compares each thread's
/// keys with its model after `acked[t]` or `acked[t] + 1` batches.
fn judge(image: &[u8], acked: &[usize], models: &[Vec<Model>]) -> Result<(), String> {
    let pool = Arc::new(Pool::from_image(image, &pool_options()).map_err(|e| format!("reopen: {e}"))?);
    let tree = Tree::open_deferred(pool, Limits::default()).map_err(|e| format!("recovery: {e}"))?;
    if let Some(e) = &tree.recovery_report().sweep_error {
        return Err(format!("background recovery: {e}"));
    }
    let c = tree.check().map_err(|e| format!("check: {e}"))?;
    if !c.is_ok() {
        return Err(format!("check: {:?} {:?}", c.violations, c.allocator));
    }
    let all: Model = tree
        .scan(Bound::Unbounded, Bound::Unbounded, false)
        .map_err(|e| e.to_string())?
        .collect::<Result<_, _>>()
        .map_err(|e| format!("scan: {e}"))?;
    for (t, m) in models.iter().enumerate() {
        let prefix = format!("t{t}/").into_bytes();
        let got: Model =
            all.iter().filter(|(k, _)| k.starts_with(&prefix)).map(|(k, v)| (k.clone(), v.clone())).collect();
        let a = acked[t];
        if got != m[a] && m.get(a + 1) != Some(&got) {
            return Err(format!(
                "thread {t}: {} keys match neither its {a} acknowledged batches ({} keys) nor one more",
                got.len(),
                m[a].len()
            ));
        }
    }
    Ok(())
}

#[test]
fn combined_commits_survive_crashes_whole() {
    let seed = std::env::var("TEMBO_SEED").ok().and_then(|s| s.parse().ok()).unwrap_or(20261126u64);
    let full = matches!(std::env::var("TEMBO_TEST_SCALE").as_deref(), Ok("full") | Ok("long"));
    let n = if full { BATCHES_FULL } else { BATCHES };
    let work: Vec<Vec<Batch>> = (0..THREADS).map(|t| batches(t, seed, n)).collect();
    let models: Arc<Vec<Vec<Model>>> = Arc::new(work.iter().map(|b| models(b)).collect());
    let acked: Arc<Vec<AtomicUsize>> = Arc::new((0..THREADS).map(|_| AtomicUsize::new(0)).collect());

    let pool = Arc::new(Pool::simulated(&pool_options()).expect("a simulated pool"));
    let tree = Tree::create(pool.clone(), Limits::default()).expect("a tree");
    let cfg = SweepConfig {
        points: CrashPoints::Every,
        policies: CrashPolicy::ALL.to_vec(),
        seed,
        include_end: true,
        max_failures_kept: 5,
    };
    let checker = {
        let (acked, models) = (acked.clone(), models.clone());
        move |st: &CrashState| -> Result<(), String> {
            // Read at the fence: the workload is paused in it (see the
            // module docs for why these counts bound what is durable).
            let counts: Vec<usize> = acked.iter().map(|a| a.load(Ordering::SeqCst)).collect();
            judge(&st.image, &counts, &models).map_err(|e| format!("acked {counts:?}: {e}"))
        }
    };
    let report = sweep(
        &cfg,
        &pool,
        |_, _| {
            std::thread::scope(|s| {
                let hs: Vec<_> = work
                    .iter()
                    .enumerate()
                    .map(|(t, bs)| {
                        let (tree, acked) = (&tree, &acked);
                        s.spawn(move || -> Result<(), String> {
                            for (n, b) in bs.iter().enumerate() {
                                let ops: Vec<Op<'_>> = b
                                    .iter()
                                    .map(|(k, v)| match v {
                                        Some(v) => Op::Put(k, v),
                                        None => Op::Delete(k),
                                    })
                                    .collect();
                                tree.write(&ops).map_err(|e| format!("thread {t} batch {n}: {e}"))?;
                                acked[t].store(n + 1, Ordering::SeqCst);
                            }
                            Ok(())
                        })
                    })
                    .collect();
                hs.into_iter().try_for_each(|h| h.join().map_err(|_| "a writer panicked".to_string())?)
            })
        },
        checker,
    );
    eprintln!(
        "{} fences, {} crash states checked, {} failures; {} writes rode in another thread's commit",
        report.fences,
        report.states_checked,
        report.failure_count,
        tree.combined_writes()
    );
    assert!(report.is_ok(), "TEMBO_SEED={seed}:\n{}", report.failures.join("\n"));
    assert!(report.states_checked > 100, "too few crash states: {}", report.states_checked);
}
