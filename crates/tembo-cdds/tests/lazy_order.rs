//! Order lines are persisted lazily (`lazy_order`): an insert does not
//! flush its node's order line. Two kinds of node are read through their
//! order line with no recovery walk to rebuild it first, and these tests
//! cover both on the simulator, where only what was flushed and fenced
//! survives (`CrashPolicy::None`):
//! - after a clean close, every node: the next open trusts them all;
//! - after a crash, the nodes that died while a named snapshot still sees
//!   them: once recovery has finished, readers of the snapshot take the
//!   fast path through them.
//!
//! Dropping the close's flush, or the flush when a node dies, makes these
//! tests fail (wrong snapshot contents, or `check` finding used slots the
//! order line does not name).

use std::collections::BTreeMap;
use std::ops::Bound;
use std::sync::Arc;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use tembo_cdds::{Limits, Op, Tree};
use tembo_pmem::sim::CrashPolicy;
use tembo_pmem::{Pool, PoolOptions};

type Model = BTreeMap<Vec<u8>, Vec<u8>>;

fn opts() -> PoolOptions {
    PoolOptions { size: 8 << 20, max_size: Some(256 << 20), ..PoolOptions::default() }
}

/// Random puts (a tenth of them deletes) in batches of 20 over `keys` keys.
fn churn(tree: &Tree, model: &mut Model, rng: &mut ChaCha8Rng, batches: usize, keys: u64) {
    for round in 0..batches {
        let mut kvs: Vec<(Vec<u8>, Option<Vec<u8>>)> = Vec::new();
        for _ in 0..20 {
            let k = format!("k{:06}", rng.gen_range(0..keys)).into_bytes();
            let v = (rng.gen_range(0..10) > 0).then(|| format!("v{round}-{}", rng.gen::<u32>()).into_bytes());
            kvs.push((k, v));
        }
        let ops: Vec<Op<'_>> = kvs
            .iter()
            .map(|(k, v)| match v {
                Some(v) => Op::Put(k, v),
                None => Op::Delete(k),
            })
            .collect();
        tree.write(&ops).unwrap();
        for (k, v) in kvs {
            match v {
                Some(v) => model.insert(k, v),
                None => model.remove(&k),
            };
        }
    }
}

fn contents_at(tree: &Tree, v: Option<u64>) -> Model {
    let it: Box<dyn Iterator<Item = tembo_cdds::Result<tembo_cdds::KeyValue>>> = match v {
        None => Box::new(tree.scan(Bound::Unbounded, Bound::Unbounded, false).unwrap()),
        Some(v) => Box::new(tree.scan_at(v, Bound::Unbounded, Bound::Unbounded, false)),
    };
    it.map(|r| r.unwrap()).collect()
}

fn named_version(tree: &Tree, name: &str) -> u64 {
    tree.named_snapshots().unwrap().into_iter().find(|s| s.name == name).expect("named snapshot").version
}

fn assert_checks(tree: &Tree) {
    let c = tree.check().unwrap();
    assert!(c.is_ok(), "check: {:?} {:?}", c.violations, c.allocator);
}

#[test]
fn a_clean_close_makes_every_order_line_durable() {
    let pool = Arc::new(Pool::simulated(&opts()).unwrap());
    let tree = Tree::create(pool.clone(), Limits::default()).unwrap();
    let mut rng = ChaCha8Rng::seed_from_u64(11);
    let mut model = Model::new();
    churn(&tree, &mut model, &mut rng, 300, 3_000);
    tree.create_named_snapshot("mid").unwrap();
    let at_mid = model.clone();
    churn(&tree, &mut model, &mut rng, 300, 3_000);
    drop(tree);
    pool.close_in_place().unwrap();
    let image = pool.simulator().unwrap().media_image();
    drop(pool);

    let pool = Arc::new(Pool::from_image(&image, &opts()).unwrap());
    assert!(!pool.opened_unclean(), "the close was clean");
    let tree = Tree::open(pool, Limits::default()).unwrap();
    assert!(contents_at(&tree, None) == model, "contents after a clean close");
    assert!(contents_at(&tree, Some(named_version(&tree, "mid"))) == at_mid, "the named snapshot");
    assert_checks(&tree);
}

#[test]
fn nodes_that_die_keep_a_durable_order_line_for_named_snapshots() {
    for seed in 0..3u64 {
        let pool = Arc::new(Pool::simulated(&opts()).unwrap());
        let tree = Tree::create(pool.clone(), Limits::default()).unwrap();
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let mut model = Model::new();
        churn(&tree, &mut model, &mut rng, 200, 2_000);
        tree.create_named_snapshot("before").unwrap();
        let at_snapshot = model.clone();
        // Splits and merges now replace nodes the snapshot still reads.
        churn(&tree, &mut model, &mut rng, 400, 2_000);
        let image = pool.simulator().unwrap().crash_image(&pool, CrashPolicy::None, &mut rng);
        drop(tree);
        drop(pool);

        let pool = Arc::new(Pool::from_image(&image, &opts()).unwrap());
        assert!(pool.opened_unclean());
        let tree = Tree::open(pool, Limits::default()).unwrap();
        let report = tree.recovery_report();
        assert!(report.sweep_error.is_none(), "{report:?}");
        // Recovery is over: readers trust order lines again.
        assert!(contents_at(&tree, None) == model, "seed {seed}: contents");
        let v = named_version(&tree, "before");
        assert!(contents_at(&tree, Some(v)) == at_snapshot, "seed {seed}: the named snapshot after recovery");
        assert_checks(&tree);
    }
}
