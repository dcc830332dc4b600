//! Recovery's leak sweep must not free blocks that other pool roots point
//! to. Before the fix, `Tree::recover` traced only the tree, so the block of
//! any other root in the pool (e.g. the store's `tembo-db` engine record)
//! was swept as a leak after every unclean shutdown.

use std::sync::Arc;

use rand::SeedableRng;
use tembo_cdds::{Limits, Op, Tree};
use tembo_pmem::sim::CrashPolicy;
use tembo_pmem::{Pool, PoolOptions};

#[test]
fn recovery_keeps_blocks_of_other_roots_and_frees_real_leaks() {
    let opts = PoolOptions::with_size(1 << 20);
    let pool = Arc::new(Pool::simulated(&opts).unwrap());
    let tree = Tree::create(pool.clone(), Limits::default()).unwrap();
    for i in 0..200u32 {
        tree.write(&[Op::Put(&i.to_be_bytes(), b"value")]).unwrap();
    }
    let kept = pool.alloc(64).unwrap();
    pool.write(kept, &[7u8; 64]).unwrap();
    pool.persist(kept, 64);
    pool.set_root("other-root", kept).unwrap();
    let leaked = pool.alloc(64).unwrap();
    pool.fence();

    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(1);
    let image = pool.simulator().unwrap().crash_image(&pool, CrashPolicy::None, &mut rng);
    drop(tree);

    let pool = Arc::new(Pool::from_image(&image, &opts).unwrap());
    assert!(pool.opened_unclean());
    let tree = Tree::open(pool.clone(), Limits::default()).unwrap();
    let report = tree.recovery_report();
    assert!(report.ran);
    assert!(report.leaks_freed >= 1, "the unlinked block is a leak: {report:?}");
    let blocks: Vec<u64> = pool.allocated_blocks().unwrap().into_iter().map(|(o, _)| o).collect();
    assert!(blocks.contains(&kept), "the block of root `other-root` was freed by recovery");
    assert!(!blocks.contains(&leaked), "the unlinked block survived recovery");
    let mut back = [0u8; 64];
    pool.read(kept, &mut back).unwrap();
    assert_eq!(back, [7u8; 64]);
    assert_eq!(tree.get(&5u32.to_be_bytes()).unwrap().as_deref(), Some(&b"value"[..]));
    let check = tree.check().unwrap();
    assert!(check.is_ok(), "{:?}", check.violations);
}
