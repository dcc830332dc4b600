// The logic of the `kamino_open` fuzz target, shared with
// `crates/tembo-kamino/tests/fuzz_smoke.rs` (both `include!` this file into
// a module of their own, so it holds items only and no inner attributes).
//
// The input damages a valid pool holding an in-place B+tree (Kamino-Tx,
// Kamino-Tx-Dynamic or undo, chosen by the first byte) that crashed with
// transactions committed but not rolled forward: every further 5 bytes are
// a patch (a 4-byte little-endian offset into the image, a byte to store).
// Opening the damaged pool runs recovery; it must give a typed error or a
// tree that `get`, a scan, a put and `check` can run on. A panic anywhere
// is a bug.

use std::ops::Bound;
use std::sync::{Arc, OnceLock};

use tembo_kamino::tree::{Tree, TreeLimits};
use tembo_kamino::{Coordinator, HeapOptions, TxMode};
use tembo_pmem::{Pool, PoolOptions};

const MODES: [TxMode; 3] = [TxMode::Kamino, TxMode::KaminoDynamic, TxMode::Undo];
const LIMITS: TreeLimits = TreeLimits { max_key: 1024, max_value: 1 << 16 };

fn heap_options(mode: TxMode) -> HeapOptions {
    HeapOptions { mode, alpha: 0.3, slots: 8, coordinator: Coordinator::Manual, ..HeapOptions::default() }
}

fn pool_options() -> PoolOptions {
    PoolOptions { size: 1 << 20, max_size: Some(16 << 20), ..PoolOptions::default() }
}

/// The undamaged image of mode `m`: 300 keys, some overwritten and deleted,
/// the last transactions' backups not rolled forward, shut down uncleanly.
pub fn base_image(m: usize) -> &'static [u8] {
    static IMAGES: [OnceLock<Vec<u8>>; 3] = [OnceLock::new(), OnceLock::new(), OnceLock::new()];
    IMAGES[m % 3].get_or_init(|| {
        let pool = Arc::new(Pool::simulated(&pool_options()).expect("a simulated pool"));
        let tree = Tree::create(pool.clone(), &heap_options(MODES[m % 3]), LIMITS).expect("a tree");
        for i in 0..300u32 {
            let k = format!("key{:05}", (i * 7919) % 1000);
            tree.put(k.as_bytes(), &vec![i as u8; (i % 50) as usize * 7]).expect("put");
            if i % 5 == 0 {
                tree.delete(format!("key{:05}", (i * 31) % 1000).as_bytes()).expect("delete");
            }
            if i % 40 == 0 {
                tree.heap().coordinate(3).expect("coordinate");
            }
        }
        pool.simulator().expect("simulated").media_image()
    })
}

include!("damage.rs");

/// Applies the input's patches to a base image and exercises the result.
pub fn kamino_open(data: &[u8]) -> Outcome {
    let Some((&m, patches)) = data.split_first() else { return Outcome::Refused("empty input".into()) };
    let img = patched(base_image(m as usize), patches);
    let pool = match Pool::from_image(&img, &pool_options()) {
        Ok(p) => Arc::new(p),
        Err(e) => return Outcome::Refused(format!("pool: {e}")),
    };
    let tree = match Tree::open(pool, &heap_options(MODES[m as usize % 3]), LIMITS) {
        Ok(t) => t,
        Err(e) => return Outcome::Refused(format!("open: {e}")),
    };
    let _ = tree.get(b"key00007");
    let _ = tree.scan_chunk(Bound::Unbounded, Bound::Unbounded, false);
    let _ = tree.scan_chunk(Bound::Unbounded, Bound::Included(&b"key00500"[..]), true);
    let _ = tree.put(b"fuzz", b"value");
    match tree.check() {
        Ok(v) => Outcome::Opened { violations: v.len() },
        Err(e) => Outcome::Refused(format!("check: {e}")),
    }
}
