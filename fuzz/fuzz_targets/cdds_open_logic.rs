// The logic of the `cdds_open` fuzz target, shared with
// `crates/tembo-cdds/tests/fuzz_smoke.rs` (both `include!` this file into a
// module of their own, so it holds items only and no inner attributes).
//
// The input damages a valid pool holding a CDDS tree (keys put, overwritten
// and deleted across splits and merges, a named snapshot) that was not
// closed cleanly: the first byte chooses whether the damaged pool is used
// while its lazy recovery is pending (reads on the checked path, a write
// that repairs the nodes it touches) or only after recovery; every further
// 5 bytes are a patch (a 4-byte little-endian offset into the image, a
// byte to store). Opening must give a typed error or a tree that `get`,
// scans, a put and `check` can run on. A panic or a hang is a bug.

use std::ops::Bound;
use std::sync::{Arc, OnceLock};

use tembo_cdds::{Limits, Tree};
use tembo_pmem::{Pool, PoolOptions};

fn pool_options() -> PoolOptions {
    PoolOptions { size: 1 << 20, max_size: Some(16 << 20), ..PoolOptions::default() }
}

/// The undamaged image: 600 puts of 400 keys (values up to 300 bytes), a
/// named snapshot half way, a fifth of the keys deleted, never closed.
pub fn base_image() -> &'static [u8] {
    static IMAGE: OnceLock<Vec<u8>> = OnceLock::new();
    IMAGE.get_or_init(|| {
        let pool = Arc::new(Pool::simulated(&pool_options()).expect("a simulated pool"));
        let tree = Tree::create(pool.clone(), Limits::default()).expect("a tree");
        for i in 0..600u32 {
            let k = format!("key{:05}", (i * 7919) % 400);
            tree.write(&[tembo_cdds::Op::Put(k.as_bytes(), &vec![i as u8; (i % 60) as usize * 5])]).expect("put");
            if i % 5 == 0 {
                let d = format!("key{:05}", (i * 31) % 400);
                tree.write(&[tembo_cdds::Op::Delete(d.as_bytes())]).expect("delete");
            }
            if i == 300 {
                tree.create_named_snapshot("half").expect("snapshot");
            }
        }
        pool.simulator().expect("simulated").media_image()
    })
}

include!("damage.rs");

fn exercise(tree: &Tree) {
    let _ = tree.get(b"key00007");
    let _ = tree.get(b"key00399");
    if let Ok(it) = tree.scan(Bound::Unbounded, Bound::Unbounded, false) {
        let _ = it.take(1000).count();
    }
    if let Ok(it) = tree.scan(Bound::Unbounded, Bound::Included(b"key00200".to_vec()), true) {
        let _ = it.take(1000).count();
    }
    // A scan yields keys of its range only, in order, whatever a damaged
    // leaf holds (callers strip a range's prefix from every key they get,
    // and resume a scan after the last key they got).
    let (lo, hi) = (b"key00100".to_vec(), b"key00300".to_vec());
    for reverse in [false, true] {
        if let Ok(it) = tree.scan(Bound::Included(lo.clone()), Bound::Excluded(hi.clone()), reverse) {
            let mut prev: Option<Vec<u8>> = None;
            for (k, _) in it.take(1000).map_while(Result::ok) {
                assert!(k >= lo && k < hi, "a scan of [key00100, key00300) gave {k:?}");
                if let Some(p) = &prev {
                    assert!(if reverse { k < *p } else { k > *p }, "a scan gave {k:?} after {p:?}");
                }
                prev = Some(k);
            }
        }
    }
}

/// Applies the input's patches to the base image and exercises the result.
pub fn cdds_open(data: &[u8]) -> Outcome {
    let Some((&mode, patches)) = data.split_first() else { return Outcome::Refused("empty input".into()) };
    let img = patched(base_image(), patches);
    let pool = match Pool::from_image(&img, &pool_options()) {
        Ok(p) => Arc::new(p),
        Err(e) => return Outcome::Refused(format!("pool: {e}")),
    };
    let tree = match Tree::open_deferred(pool, Limits::default()) {
        Ok(t) => t,
        Err(e) => return Outcome::Refused(format!("open: {e}")),
    };
    if mode % 2 == 0 {
        exercise(&tree);
        let _ = tree.write(&[tembo_cdds::Op::Put(b"key00123", b"during recovery")]);
    }
    let _ = tree.recovery_report();
    exercise(&tree);
    let _ = tree.write(&[tembo_cdds::Op::Put(b"fuzz", b"value")]);
    match tree.check() {
        Ok(c) => Outcome::Opened { violations: c.violations.len() },
        Err(e) => Outcome::Refused(format!("check: {e}")),
    }
}
