//! A named snapshot taken of a tree that has committed nothing keeps the
//! empty tree — after later writes, after a crash (even one before any
//! commit) and after a clean reopen — and rolling back to it empties the
//! tree. A pool that an older build left with such a snapshot (its record
//! saying version 1 while the tree is still at 0) opens and reads the same.
//! Found by `tembo crashtest --scale 20 --seed 307904659`: the old record
//! showed the first write's contents, and a crash before any commit left a
//! pool that would not open ("named snapshot is newer than the tree").

use std::collections::BTreeMap;
use std::ops::Bound;
use std::sync::Arc;

use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use tembo_cdds::{Limits, Op, Tree};
use tembo_pmem::sim::CrashPolicy;
use tembo_pmem::{Pool, PoolOptions};

fn at(tree: &Tree, v: u64) -> BTreeMap<Vec<u8>, Vec<u8>> {
    tree.scan_at(v, Bound::Unbounded, Bound::Unbounded, false).map(|r| r.unwrap()).collect()
}

fn snapshot_version(tree: &Tree, name: &str) -> u64 {
    tree.named_snapshots().unwrap().into_iter().find(|s| s.name == name).expect("the snapshot is listed").version
}

fn crash(pool: &Arc<Pool>, opts: &PoolOptions) -> Tree {
    let mut rng = ChaCha8Rng::seed_from_u64(3);
    let image = pool.simulator().unwrap().crash_image(pool, CrashPolicy::None, &mut rng);
    let pool = Arc::new(Pool::from_image(&image, opts).unwrap());
    Tree::open(pool, Limits::default()).expect("the crashed pool opens")
}

#[test]
fn a_snapshot_of_the_empty_tree_stays_empty() {
    let opts = PoolOptions::with_size(1 << 20);
    let pool = Arc::new(Pool::simulated(&opts).unwrap());
    let tree = Tree::create(pool.clone(), Limits::default()).unwrap();
    let s = tree.create_named_snapshot("empty").unwrap();
    assert!(at(&tree, s.version).is_empty());
    tree.write(&[Op::Put(b"k", b"v")]).unwrap();
    assert!(at(&tree, s.version).is_empty(), "the first write is not in the snapshot");
    let reopened = crash(&pool, &opts);
    assert_eq!(reopened.get(b"k").unwrap().as_deref(), Some(&b"v"[..]));
    assert!(at(&reopened, snapshot_version(&reopened, "empty")).is_empty());
    reopened.rollback_to("empty").unwrap();
    assert_eq!(reopened.get(b"k").unwrap(), None, "rolled back to the empty tree");
    drop(tree);
}

#[test]
fn a_crash_right_after_the_snapshot_leaves_a_pool_that_opens() {
    let opts = PoolOptions::with_size(1 << 20);
    let pool = Arc::new(Pool::simulated(&opts).unwrap());
    let tree = Tree::create(pool.clone(), Limits::default()).unwrap();
    tree.create_named_snapshot("s0").unwrap();
    let reopened = crash(&pool, &opts);
    assert!(at(&reopened, snapshot_version(&reopened, "s0")).is_empty());
    reopened.write(&[Op::Put(b"k", b"v")]).unwrap();
    assert!(at(&reopened, snapshot_version(&reopened, "s0")).is_empty());
    let c = reopened.check().unwrap();
    assert!(c.is_ok(), "{c:?}");
    drop(tree);
}

/// The state an older build left: the record says 1, the tree is at 0.
fn legacy_state(tree: &Tree, pool: &Pool) {
    let s = tree.create_named_snapshot("old").unwrap();
    assert_eq!(s.version, 1);
    let meta = pool.root(tembo_cdds::ROOT_NAME).unwrap();
    // Word 2 of the metadata block: the commit word.
    pool.store_u64(meta + 16, 0).unwrap();
    pool.persist(meta + 16, 8);
}

#[test]
fn an_older_builds_snapshot_of_the_empty_tree_opens_after_a_crash() {
    let opts = PoolOptions::with_size(1 << 20);
    let pool = Arc::new(Pool::simulated(&opts).unwrap());
    let tree = Tree::create(pool.clone(), Limits::default()).unwrap();
    legacy_state(&tree, &pool);
    let reopened = crash(&pool, &opts);
    reopened.write(&[Op::Put(b"k", b"v")]).unwrap();
    assert!(at(&reopened, snapshot_version(&reopened, "old")).is_empty());
    drop(tree);
}

#[test]
fn an_older_builds_snapshot_of_the_empty_tree_opens_after_a_clean_close() {
    let path = std::env::temp_dir().join(format!("tembo-named-snap-{}.pool", std::process::id()));
    let _ = std::fs::remove_file(&path);
    let opts = PoolOptions::with_size(1 << 20);
    {
        let pool = Arc::new(Pool::create(&path, &opts).unwrap());
        let tree = Tree::create(pool.clone(), Limits::default()).unwrap();
        legacy_state(&tree, &pool);
    }
    let pool = Arc::new(Pool::open(&path, &opts).unwrap());
    assert!(!pool.opened_unclean());
    let tree = Tree::open(pool, Limits::default()).expect("the pool opens");
    assert!(tree.current_version().unwrap() >= 1, "version 1 is committed, empty");
    tree.write(&[Op::Put(b"k", b"v")]).unwrap();
    assert!(at(&tree, snapshot_version(&tree, "old")).is_empty(), "the first write is not in the snapshot");
    drop(tree);
    let _ = std::fs::remove_file(&path);
}
