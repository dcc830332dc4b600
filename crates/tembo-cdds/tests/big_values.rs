//! Values longer than a record's fill chunk (32 KiB) are checksummed,
//! copied and flushed a chunk at a time (`record::fill_chunks`). A crash
//! that keeps only the lines flushed before a fence (`CrashPolicy::None`)
//! must still find every committed value whole, and `check` — which
//! verifies every record's checksum — must pass. Sizes straddle the chunk
//! and line boundaries, with keys of odd lengths so that values start
//! mid-line.

use std::collections::BTreeMap;
use std::sync::Arc;

use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use tembo_cdds::{Limits, Op, Tree};
use tembo_pmem::sim::CrashPolicy;
use tembo_pmem::{Pool, PoolOptions};

const CHUNK: usize = 32 * 1024;

fn value(n: usize, salt: usize) -> Vec<u8> {
    (0..n).map(|j| (j.wrapping_mul(31) ^ salt) as u8).collect()
}

#[test]
fn big_values_are_whole_after_a_crash_that_keeps_only_flushed_lines() {
    let opts = PoolOptions { size: 8 << 20, max_size: Some(64 << 20), ..PoolOptions::default() };
    let pool = Arc::new(Pool::simulated(&opts).unwrap());
    let tree = Tree::create(pool.clone(), Limits::default()).unwrap();
    let sizes = [CHUNK - 1, CHUNK, CHUNK + 1, 2 * CHUNK + 63, 100_000, 3 * CHUNK + 17, 1 << 20];
    let mut model = BTreeMap::new();
    for (i, &n) in sizes.iter().enumerate() {
        // Key lengths 1..=7 (mod 8) move the value's start within a line.
        let k = format!("big{i}{}", "k".repeat(i % 8)).into_bytes();
        let v = value(n, i);
        tree.write(&[Op::Put(&k, &v)]).unwrap();
        model.insert(k, v);
    }
    // Overwrites in one batch with small values around them.
    let batch: Vec<(Vec<u8>, Vec<u8>)> = vec![
        (b"big2kk".to_vec(), value(5 * CHUNK + 5, 99)),
        (b"small".to_vec(), b"s".to_vec()),
        (b"big0".to_vec(), value(CHUNK + 9, 7)),
    ];
    let ops: Vec<Op<'_>> = batch.iter().map(|(k, v)| Op::Put(k, v)).collect();
    tree.write(&ops).unwrap();
    model.extend(batch);

    let mut rng = ChaCha8Rng::seed_from_u64(11);
    let image = pool.simulator().unwrap().crash_image(&pool, CrashPolicy::None, &mut rng);
    drop(tree);
    drop(pool);
    let pool = Arc::new(Pool::from_image(&image, &opts).unwrap());
    assert!(pool.opened_unclean());
    let tree = Tree::open(pool, Limits::default()).unwrap();
    tree.check().unwrap();
    for (k, v) in &model {
        let got = tree.get(k).unwrap();
        assert_eq!(got.as_ref().map(Vec::len), Some(v.len()), "key {:?}", String::from_utf8_lossy(k));
        assert!(got.as_deref() == Some(&v[..]), "key {:?}: other bytes", String::from_utf8_lossy(k));
    }
}
