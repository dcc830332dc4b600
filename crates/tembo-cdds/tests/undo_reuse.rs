//! A batch that fails (a full pool) after its splits made new nodes is
//! undone, and the next batch writes the same version. Its nodes may get
//! the undone nodes' blocks back — same offset, same birth version, so
//! the same slot salt — and a new node zeroes its unused slots only in
//! the cache. A crash that keeps only fenced lines (`CrashPolicy::None`)
//! then shows the undone node's slots where the new one left slots
//! unused: unless the undo cleared them durably, they read as valid
//! entries of the new node, entries nobody wrote. Recovery must find the
//! committed contents exactly and `check` must pass.

use std::collections::BTreeMap;
use std::ops::Bound;
use std::sync::Arc;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use tembo_cdds::{CddsError, Limits, Op, Tree};
use tembo_pmem::sim::CrashPolicy;
use tembo_pmem::{PmemError, Pool, PoolOptions};

fn key(rng: &mut ChaCha8Rng) -> Vec<u8> {
    format!("k{:012}", rng.gen_range(0..1_000_000_000u64)).into_bytes()
}

#[test]
fn nodes_of_an_undone_batch_do_not_come_back_in_the_next_one() {
    let size = 16 << 20;
    let opts = PoolOptions { size, max_size: Some(size), ..PoolOptions::default() };
    let pool = Arc::new(Pool::simulated(&opts).unwrap());
    let tree = Tree::create(pool.clone(), Limits::default()).unwrap();
    let mut rng = ChaCha8Rng::seed_from_u64(5);
    let mut model = BTreeMap::new();
    for _ in 0..3 {
        let batch: Vec<(Vec<u8>, Vec<u8>)> = (0..400).map(|i| (key(&mut rng), vec![i as u8; 24])).collect();
        let ops: Vec<Op<'_>> = batch.iter().map(|(k, v)| Op::Put(k, v)).collect();
        tree.write(&ops).unwrap();
        model.extend(batch);
    }
    let before = tree.current_version().unwrap();

    // Splits first, then a value no pool of this size can hold.
    let failed: Vec<(Vec<u8>, Vec<u8>)> = (0..600).map(|_| (key(&mut rng), vec![0xEE; 24])).collect();
    let huge = vec![0u8; 2 * size as usize];
    let mut ops: Vec<Op<'_>> = failed.iter().map(|(k, v)| Op::Put(k, v)).collect();
    ops.push(Op::Put(b"zz-huge", &huge));
    match tree.write(&ops) {
        Err(CddsError::Pmem(PmemError::PoolFull { .. })) => {}
        other => panic!("expected a full pool, got {other:?}"),
    }
    assert_eq!(tree.current_version().unwrap(), before, "the failed batch committed nothing");

    // The next batch writes the same version and splits as often.
    let next: Vec<(Vec<u8>, Vec<u8>)> = (0..600).map(|i| (key(&mut rng), vec![i as u8; 24])).collect();
    let ops: Vec<Op<'_>> = next.iter().map(|(k, v)| Op::Put(k, v)).collect();
    tree.write(&ops).unwrap();
    assert_eq!(tree.current_version().unwrap(), before + 1);
    model.extend(next);

    let image = pool.simulator().unwrap().crash_image(&pool, CrashPolicy::None, &mut rng);
    drop(tree);
    drop(pool);
    let pool = Arc::new(Pool::from_image(&image, &opts).unwrap());
    let tree = Tree::open(pool, Limits::default()).unwrap();
    let got: BTreeMap<Vec<u8>, Vec<u8>> =
        tree.scan(Bound::Unbounded, Bound::Unbounded, false).unwrap().map(|kv| kv.unwrap()).collect();
    let extra: Vec<_> = got.keys().filter(|k| !model.contains_key(*k)).take(3).collect();
    let missing: Vec<_> = model.keys().filter(|k| !got.contains_key(*k)).take(3).collect();
    assert!(extra.is_empty() && missing.is_empty(), "extra {extra:?}, missing {missing:?}");
    assert_eq!(got, model);
    let c = tree.check().unwrap();
    assert!(c.is_ok(), "{:?}", c.violations);
}

/// A root split publishes its new root before the batch commits: readers
/// at the committed version go through it to the old root. When the batch
/// then fails and is undone, readers still inside that root must find
/// what they were reading, not a freed (or wiped, or reused) block.
#[test]
fn readers_inside_an_undone_root_split_read_on() {
    let size = 16 << 20;
    let opts = PoolOptions { size, max_size: Some(size), ..PoolOptions::default() };
    let pool = Arc::new(Pool::in_memory(&opts).unwrap());
    let tree = Tree::create(pool, Limits::default()).unwrap();
    let keys: Vec<Vec<u8>> = (0..20u32).map(|i| format!("r{i:04}").into_bytes()).collect();
    let ops: Vec<Op<'_>> = keys.iter().map(|k| Op::Put(k, k)).collect();
    tree.write(&ops).unwrap();
    let stop = std::sync::atomic::AtomicBool::new(false);
    let huge = vec![0u8; 2 * size as usize];
    std::thread::scope(|s| {
        let reader = s.spawn(|| {
            let mut reads = 0u64;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                for k in &keys {
                    assert_eq!(tree.get(k).unwrap().as_deref(), Some(&k[..]), "key {k:?}");
                    reads += 1;
                }
            }
            reads
        });
        for round in 0..3_000u32 {
            // Enough new keys to split the root leaf, then a value no pool
            // of this size can hold.
            let more: Vec<Vec<u8>> = (0..40u32).map(|i| format!("s{round:05}-{i:02}").into_bytes()).collect();
            let mut ops: Vec<Op<'_>> = more.iter().map(|k| Op::Put(k, k)).collect();
            ops.push(Op::Put(b"zz-huge", &huge));
            assert!(matches!(tree.write(&ops), Err(CddsError::Pmem(PmemError::PoolFull { .. }))));
            if round % 64 == 0 {
                // A commit now and then frees what the undone batches retired.
                tree.write(&[Op::Put(b"tick", b"t")]).unwrap();
            }
        }
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        let reads = reader.join().unwrap();
        eprintln!("{reads} reads during 3,000 undone root splits");
    });
    let c = tree.check().unwrap();
    assert!(c.is_ok(), "{:?}", c.violations);
}
