//! Lazy recovery with its background thread: after an unclean shutdown the
//! tree serves reads and writes at once while the repair walk and the
//! concurrent leak sweep run behind them (and the GC thread too). In the
//! end the sweep must have freed every leak and nothing live: `check`
//! (which includes "no allocated block the tree does not own" and "no
//! reachable block in free space") passes and the contents equal a model
//! of every acknowledged write; reads, scans and random draws during the
//! recovery see the committed state. The crash campaign (`tests/crash.rs`)
//! covers the lazy phase at every fence; this test covers the threads.

use std::collections::BTreeMap;
use std::ops::Bound;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use tembo_cdds::{GcConfig, Limits, Op, Tree};
use tembo_pmem::sim::CrashPolicy;
use tembo_pmem::{Pool, PoolOptions};

fn key(i: u64) -> Vec<u8> {
    format!("key{i:08}").into_bytes()
}

fn value(i: u64, round: u64) -> Vec<u8> {
    let mut v = format!("v{i}-{round}-").into_bytes();
    v.resize(40 + (i % 90) as usize, b'x');
    v
}

#[test]
fn serves_reads_and_writes_while_repairing_and_sweeping() {
    let scale_full = std::env::var("TEMBO_TEST_SCALE").is_ok_and(|s| s == "full");
    let (keys, churn, after) = if scale_full { (60_000u64, 15_000u64, 20_000u64) } else { (20_000, 5_000, 6_000) };
    let opts = PoolOptions { size: 16 << 20, max_size: Some(512 << 20), ..PoolOptions::default() };
    let pool = Arc::new(Pool::simulated(&opts).unwrap());
    let tree = Tree::create(pool.clone(), Limits::default()).unwrap();
    let mut model: BTreeMap<Vec<u8>, Vec<u8>> = BTreeMap::new();
    for chunk in (0..keys).collect::<Vec<_>>().chunks(200) {
        let kvs: Vec<(Vec<u8>, Vec<u8>)> = chunk.iter().map(|&i| (key(i), value(i, 0))).collect();
        let ops: Vec<Op<'_>> = kvs.iter().map(|(k, v)| Op::Put(k, v)).collect();
        tree.write(&ops).unwrap();
        model.extend(kvs);
    }
    // Held across the crash: what the churn retires stays in the limbo and
    // is leaked by the crash, as are blocks allocated and never linked.
    let snap = tree.snapshot().unwrap();
    let mut rng = ChaCha8Rng::seed_from_u64(7);
    for r in 0..churn {
        let i = rng.gen_range(keys / 4..keys);
        if r % 3 == 0 {
            tree.write(&[Op::Delete(&key(i))]).unwrap();
            model.remove(&key(i));
        } else {
            tree.write(&[Op::Put(&key(i), &value(i, r + 1))]).unwrap();
            model.insert(key(i), value(i, r + 1));
        }
    }
    let unlinked: Vec<u64> = (0..10).map(|_| pool.alloc(100).unwrap()).collect();
    pool.fence();
    let image = pool.simulator().unwrap().crash_image(&pool, CrashPolicy::None, &mut rng);
    drop(snap);
    drop(tree);
    drop(pool);

    let pool = Arc::new(Pool::from_image(&image, &opts).unwrap());
    assert!(pool.opened_unclean());
    // Recovery runs on a thread of the test's own, started once the writer
    // and the readers are under way, so the three overlap.
    let mut tree = Tree::open_deferred(pool.clone(), Limits::default()).unwrap();
    tree.start_gc(GcConfig { pause: std::time::Duration::from_millis(1), ..GcConfig::default() });
    let first = tree.recovery_progress();
    assert!(first.ran && first.lazy && !first.finished, "{first:?}");
    let tree = Arc::new(tree);

    // Readers: the first quarter of the keys is never written again.
    let stop = Arc::new(AtomicBool::new(false));
    let readers: Vec<_> = (0..2)
        .map(|t| {
            let (tree, stop) = (tree.clone(), stop.clone());
            std::thread::spawn(move || {
                let mut rng = ChaCha8Rng::seed_from_u64(100 + t);
                let mut reads = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    let i = rng.gen_range(0..keys / 4);
                    let got = tree.get(&key(i)).unwrap();
                    assert_eq!(got.as_deref(), Some(&value(i, 0)[..]), "key {i} during recovery");
                    if reads % 64 == 0 {
                        let lo = key(i);
                        let n = tree.scan(Bound::Included(lo), Bound::Unbounded, false).unwrap().take(20).count();
                        assert_eq!(n, 20);
                        // Random draws (checked copies while recovery runs).
                        let (lo, hi) = (key(0), key(keys / 4));
                        let drawn = tree
                            .sample(Bound::Included(&lo[..]), Bound::Excluded(&hi[..]), 8, &mut 100_000, &mut rng)
                            .unwrap();
                        assert_eq!(drawn.len(), 8);
                        for (k, v) in drawn {
                            let i: u64 = std::str::from_utf8(&k[3..]).unwrap().parse().unwrap();
                            assert_eq!(v, value(i, 0), "drawn key {i} during recovery");
                        }
                    }
                    reads += 1;
                }
                reads
            })
        })
        .collect();
    let writer = {
        let (tree, stop) = (tree.clone(), stop.clone());
        std::thread::spawn(move || {
            let (mut r, mut during) = (0u64, 0u64);
            while !stop.load(Ordering::Relaxed) || r < after {
                let i = rng.gen_range(keys / 4..keys + keys / 4);
                if r % 4 == 0 {
                    tree.write(&[Op::Delete(&key(i))]).unwrap();
                    model.remove(&key(i));
                } else {
                    let v = value(i, 1_000_000 + r);
                    tree.write(&[Op::Put(&key(i), &v)]).unwrap();
                    model.insert(key(i), v);
                }
                if !tree.recovery_progress().finished {
                    during += 1;
                }
                r += 1;
            }
            (model, r, during)
        })
    };
    std::thread::sleep(std::time::Duration::from_millis(20));
    let report = {
        let tree = tree.clone();
        std::thread::spawn(move || tree.recovery_report().clone()).join().unwrap()
    };
    std::thread::sleep(std::time::Duration::from_millis(20));
    stop.store(true, Ordering::Relaxed);
    let reads: u64 = readers.into_iter().map(|h| h.join().unwrap()).sum();
    let (model, writes, during) = writer.join().unwrap();
    assert!(during > 0, "no write overlapped the recovery");
    assert!(report.sweep_error.is_none(), "{report:?}");
    assert!(report.finished && report.nodes_visited > 0, "{report:?}");
    assert!(report.leaks_freed >= unlinked.len() as u64, "leaks not freed: {report:?}");
    // (Their offsets may be in use again: writes went on after the sweep.
    // `check` below finds any block the tree does not own.)
    let check = tree.check().unwrap();
    assert!(check.is_ok(), "{:?} {:?}", check.violations, check.allocator);
    let got: BTreeMap<Vec<u8>, Vec<u8>> =
        tree.scan(Bound::Unbounded, Bound::Unbounded, false).unwrap().map(|r| r.unwrap()).collect();
    assert!(got == model, "contents differ from the model ({} vs {} keys)", got.len(), model.len());
    eprintln!("{during} of {writes} writes ran while recovery was in progress; {reads} reads; {report:?}");
}

/// A close while the background recovery runs stops it between two steps
/// and leaves the pool marked for recovery; the next open finishes the job.
#[test]
fn close_during_recovery_resumes_at_next_open() {
    let opts = PoolOptions { size: 8 << 20, max_size: Some(256 << 20), ..PoolOptions::default() };
    let pool = Arc::new(Pool::simulated(&opts).unwrap());
    let tree = Tree::create(pool.clone(), Limits::default()).unwrap();
    for chunk in (0..20_000u64).collect::<Vec<_>>().chunks(500) {
        let kvs: Vec<(Vec<u8>, Vec<u8>)> = chunk.iter().map(|&i| (key(i), value(i, 0))).collect();
        let ops: Vec<Op<'_>> = kvs.iter().map(|(k, v)| Op::Put(k, v)).collect();
        tree.write(&ops).unwrap();
    }
    let leaked = pool.alloc(64).unwrap();
    pool.fence();
    let mut rng = ChaCha8Rng::seed_from_u64(3);
    let image = pool.simulator().unwrap().crash_image(&pool, CrashPolicy::None, &mut rng);
    drop(tree);
    drop(pool);

    // Opened without the thread, written to, closed before recovering.
    let pool = Arc::new(Pool::from_image(&image, &opts).unwrap());
    let tree = Tree::open_deferred(pool.clone(), Limits::default()).unwrap();
    tree.write(&[Op::Put(b"written-while-lazy", b"yes")]).unwrap();
    assert!(!tree.recovery_progress().finished);
    drop(tree);
    let image = pool.simulator().unwrap().crash_image(&pool, CrashPolicy::None, &mut rng);
    drop(pool);
    let pool = Arc::new(Pool::from_image(&image, &opts).unwrap());
    assert!(pool.opened_unclean(), "an unfinished recovery must keep the pool marked");
    let tree = Tree::open(pool.clone(), Limits::default()).unwrap();
    assert_eq!(tree.get(b"written-while-lazy").unwrap().as_deref(), Some(&b"yes"[..]));
    let report = tree.recovery_report();
    assert!(report.sweep_error.is_none() && report.aborted.len() == 2, "{report:?}");
    assert!(!pool.allocated_blocks().unwrap().iter().any(|(o, _)| *o == leaked));
    let check = tree.check().unwrap();
    assert!(check.is_ok(), "{:?}", check.violations);
    assert_eq!(tree.get(&key(12_345)).unwrap(), Some(value(12_345, 0)));
}

/// Writes between every pair of small recovery steps, so splits and merges
/// land exactly where the repair walk and the sweep's walk have been and
/// have yet to go (nodes on their stacks split, parents rebuilt).
#[test]
fn writes_between_every_step_of_the_walks() {
    use std::sync::Mutex;
    use tembo_cdds::RecoveryTuning;
    let opts = PoolOptions { size: 8 << 20, max_size: Some(256 << 20), ..PoolOptions::default() };
    for seed in 0..3u64 {
        let pool = Arc::new(Pool::simulated(&opts).unwrap());
        let tree = Tree::create(pool.clone(), Limits::default()).unwrap();
        let mut model: BTreeMap<Vec<u8>, Vec<u8>> = BTreeMap::new();
        let keys = 6_000u64;
        for chunk in (0..keys).map(|i| i * 2).collect::<Vec<_>>().chunks(100) {
            let kvs: Vec<(Vec<u8>, Vec<u8>)> = chunk.iter().map(|&i| (key(i), value(i, 0))).collect();
            let ops: Vec<Op<'_>> = kvs.iter().map(|(k, v)| Op::Put(k, v)).collect();
            tree.write(&ops).unwrap();
            model.extend(kvs);
        }
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        // Dead entries and dead nodes at the crash: writers' dead-slot reuse
        // retires them while the sweep runs.
        for r in 0..4_000u64 {
            let i = rng.gen_range(0..keys) * 2;
            if r % 2 == 0 {
                tree.write(&[Op::Delete(&key(i))]).unwrap();
                model.remove(&key(i));
            } else {
                tree.write(&[Op::Put(&key(i), &value(i, r))]).unwrap();
                model.insert(key(i), value(i, r));
            }
        }
        let image = pool.simulator().unwrap().crash_image(&pool, CrashPolicy::None, &mut rng);
        drop(tree);
        drop(pool);

        let pool = Arc::new(Pool::from_image(&image, &opts).unwrap());
        let tree = Tree::open_deferred(pool.clone(), Limits::default()).unwrap();
        let shared = Arc::new(Mutex::new((model, rng, 0u64)));
        let hook_state = shared.clone();
        tree.tune_recovery(RecoveryTuning {
            nodes_per_step: 3,
            between_steps: Some(Arc::new(move |t| {
                let mut g = hook_state.lock().unwrap();
                let (model, rng, round) = &mut *g;
                for _ in 0..30 {
                    *round += 1;
                    // Odd keys are new (splits); even ones exist (overwrites,
                    // and deletes that shrink nodes into merges).
                    let i = rng.gen_range(0..2 * keys);
                    if i % 2 == 0 && rng.gen_bool(0.6) {
                        t.write(&[Op::Delete(&key(i))]).unwrap();
                        model.remove(&key(i));
                    } else {
                        let v = value(i, *round);
                        t.write(&[Op::Put(&key(i), &v)]).unwrap();
                        model.insert(key(i), v);
                    }
                }
            })),
        });
        let report = tree.recovery_report().clone();
        assert!(report.sweep_error.is_none(), "{report:?}");
        let check = tree.check().unwrap();
        assert!(check.is_ok(), "seed {seed}: {:?} {:?}", check.violations, check.allocator);
        let g = shared.lock().unwrap();
        let got: BTreeMap<Vec<u8>, Vec<u8>> =
            tree.scan(Bound::Unbounded, Bound::Unbounded, false).unwrap().map(|r| r.unwrap()).collect();
        assert!(got == g.0, "seed {seed}: contents differ from the model after {} writes", g.2);
        assert!(g.2 > 5_000, "too few interleaved writes: {}", g.2);
    }
}

/// A corrupted aborted list (a version beyond the current one) is reported
/// as corruption at open, not trusted: trusting it would hide entries.
#[test]
fn an_aborted_version_beyond_the_current_one_is_corruption() {
    let opts = PoolOptions::with_size(1 << 20);
    let pool = Arc::new(Pool::simulated(&opts).unwrap());
    let tree = Tree::create(pool.clone(), Limits::default()).unwrap();
    for i in 0..50u64 {
        tree.write(&[Op::Put(&key(i), b"v")]).unwrap();
    }
    let meta = pool.root(tembo_cdds::ROOT_NAME).unwrap();
    // Word 6 of the metadata block: the first aborted-list slot.
    pool.store_u64(meta + 48, 1_000_000).unwrap();
    pool.persist(meta + 48, 8);
    let mut rng = ChaCha8Rng::seed_from_u64(9);
    let image = pool.simulator().unwrap().crash_image(&pool, CrashPolicy::None, &mut rng);
    drop(tree);
    let pool = Arc::new(Pool::from_image(&image, &opts).unwrap());
    let err = Tree::open(pool, Limits::default()).unwrap_err().to_string();
    assert!(err.contains("aborted") && err.contains("beyond the current version"), "{err}");
}

/// Eight unclean opens in a row that never finish their recovery fill the
/// aborted list; the ninth repairs every node before serving, and writes
/// made at every stage are all there.
#[test]
fn a_full_aborted_list_makes_open_repair_eagerly() {
    let opts = PoolOptions { size: 4 << 20, max_size: Some(64 << 20), ..PoolOptions::default() };
    let pool = Arc::new(Pool::simulated(&opts).unwrap());
    let tree = Tree::create(pool.clone(), Limits::default()).unwrap();
    for i in 0..2_000u64 {
        tree.write(&[Op::Put(&key(i), &value(i, 0))]).unwrap();
    }
    let mut rng = ChaCha8Rng::seed_from_u64(11);
    let mut image = pool.simulator().unwrap().crash_image(&pool, CrashPolicy::None, &mut rng);
    drop(tree);
    drop(pool);
    for round in 1..=9u64 {
        let pool = Arc::new(Pool::from_image(&image, &opts).unwrap());
        let tree = Tree::open_deferred(pool.clone(), Limits::default()).unwrap();
        let lazy = tree.recovery_progress().lazy;
        assert_eq!(lazy, round <= 8, "round {round}");
        for r in 1..round {
            assert_eq!(tree.get(&key(r)).unwrap(), Some(value(r, r)), "round {round}: write of round {r}");
        }
        tree.write(&[Op::Put(&key(round), &value(round, round))]).unwrap();
        if round == 9 {
            let report = tree.recovery_report().clone();
            assert!(report.sweep_error.is_none() && report.nodes_visited > 0, "{report:?}");
            let check = tree.check().unwrap();
            assert!(check.is_ok(), "{:?}", check.violations);
            assert_eq!(tree.get(&key(1_999)).unwrap(), Some(value(1_999, 0)));
        }
        image = pool.simulator().unwrap().crash_image(&pool, CrashPolicy::None, &mut rng);
    }
}
