//! Deferred allocations of small blocks set a whole bitmap word's free
//! bits at once and hand the blocks out one by one (`alloc/mod.rs`,
//! `reserve_word`). What that must not change: what the stats, the block
//! listing and `check` report (the blocks set aside are no one's), that a
//! clean close leaves no block allocated that nothing owns, that after a
//! crash the set-aside blocks are leaks the sweeps free (and never a
//! block handed out twice), and that a full pool gives them back before
//! it refuses an allocation.

use std::collections::BTreeSet;

use rand::SeedableRng;
use tembo_pmem::alloc::{class_of, geometry, LeakTracer, Marker, CLASS_SIZES, MAX_SLAB_BLOCK};
use tembo_pmem::sim::CrashPolicy;
use tembo_pmem::{PmemError, Pool, PoolOffset, PoolOptions};

const MIB: u64 = 1 << 20;

fn opts() -> PoolOptions {
    PoolOptions { size: 4 * MIB, max_size: Some(4 * MIB), ..PoolOptions::default() }
}

fn listed(pool: &Pool) -> BTreeSet<PoolOffset> {
    pool.allocated_blocks().expect("blocks").into_iter().map(|(o, _)| o).collect()
}

/// Marks a fixed set of blocks (what an engine would reach).
struct Reach(Vec<PoolOffset>);

impl LeakTracer for Reach {
    fn trace(&self, _pool: &Pool, m: &mut Marker<'_>) -> tembo_pmem::Result<()> {
        for &o in &self.0 {
            m.mark(o)?;
        }
        Ok(())
    }
}

#[test]
fn a_run_of_deferred_allocations_flushes_one_bitmap_line_per_word() {
    let pool = Pool::simulated(&opts()).expect("pool");
    let flushes = pool.write_stats().flush_count;
    let blocks: Vec<PoolOffset> = (0..40).map(|_| pool.alloc_deferred(64).expect("alloc")).collect();
    // 64-byte blocks: 64 to a bitmap word; a new slab also zeroes and
    // persists its bitmap and header.
    let flushed = pool.write_stats().flush_count - flushes;
    assert!(flushed <= 6, "{flushed} lines flushed for 40 deferred allocations");
    let distinct: BTreeSet<PoolOffset> = blocks.iter().copied().collect();
    assert_eq!(distinct.len(), 40, "a block handed out twice");
    assert!(blocks.windows(2).all(|w| w[0] < w[1]), "handed out lowest first");
    // Only the blocks handed out count, and the media's extra bits are
    // accounted for.
    assert_eq!(listed(&pool), distinct);
    assert_eq!(pool.alloc_stats().allocated_blocks, 40);
    assert_eq!(pool.alloc_stats().used_bytes, 40 * 64);
    assert!(pool.check().is_ok(), "{:?}", pool.check());
    // Frees and further allocations of the same and other classes mix.
    pool.free(blocks[3]).expect("free");
    let more: Vec<PoolOffset> = (0..30).map(|i| pool.alloc_deferred(64 + (i % 3) * 100).expect("alloc")).collect();
    let mut live: BTreeSet<PoolOffset> = distinct.clone();
    live.remove(&blocks[3]);
    for m in &more {
        assert!(live.insert(*m), "{m:#x} handed out while in use");
    }
    assert_eq!(listed(&pool), live);
    assert!(pool.check().is_ok(), "{:?}", pool.check());
}

#[test]
fn a_clean_close_frees_what_is_set_aside() {
    let dir = std::env::temp_dir().join(format!("tembo-deferred-reserve-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("dir");
    let path = dir.join("p.pool");
    let kept: BTreeSet<PoolOffset> = {
        let pool = Pool::create(&path, &opts()).expect("create");
        let b: BTreeSet<PoolOffset> = (0..5).map(|i| pool.alloc_deferred(48 + i * 200).expect("alloc")).collect();
        pool.fence();
        pool.close().expect("close");
        b
    };
    let pool = Pool::open(&path, &opts()).expect("open");
    assert_eq!(listed(&pool), kept, "blocks set aside outlived a clean close");
    assert!(pool.check().is_ok(), "{:?}", pool.check());
    drop(pool);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn after_a_crash_the_set_aside_blocks_are_leaks_the_sweeps_free() {
    let pool = Pool::simulated(&opts()).expect("pool");
    let handed: Vec<PoolOffset> = (0..3).map(|_| pool.alloc_deferred(64).expect("alloc")).collect();
    pool.fence();
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(7);
    for policy in CrashPolicy::ALL {
        let image = pool.simulator().expect("simulated").crash_image(&pool, policy, &mut rng);
        // The stop-the-world sweep.
        let p = Pool::from_image(&image, &opts()).expect("a crashed pool opens");
        let before = listed(&p);
        assert!(before.len() > 3 && handed.iter().all(|h| before.contains(h)), "{policy:?}: {before:?}");
        p.reclaim_leaks(&[&Reach(handed.clone())]).expect("sweep");
        assert_eq!(listed(&p), handed.iter().copied().collect(), "{policy:?}");
        assert!(p.check().is_ok(), "{policy:?}: {:?}", p.check());
        // The concurrent sweep, with deferred allocations on both sides of
        // its start: those before it are given back (nothing reaches the
        // ones set aside), those during it are marked as allocated.
        let p = Pool::from_image(&image, &opts()).expect("a crashed pool opens");
        let early = p.alloc_deferred(64).expect("alloc");
        p.begin_concurrent_sweep();
        let during = p.alloc_deferred(64).expect("alloc");
        let mut reached = handed.clone();
        reached.push(early);
        p.concurrent_sweep_mark(&reached, true).expect("mark");
        while !p.concurrent_sweep_free_step(1 << 20).expect("free step").done {}
        p.end_concurrent_sweep();
        let mut want: BTreeSet<PoolOffset> = reached.iter().copied().collect();
        want.insert(during);
        assert_eq!(listed(&p), want, "{policy:?}");
        assert!(p.check().is_ok(), "{policy:?}: {:?}", p.check());
    }
}

#[test]
fn a_full_pool_gives_back_the_set_aside_blocks_before_it_refuses() {
    let opts = PoolOptions { size: 2 * MIB, max_size: Some(2 * MIB), ..PoolOptions::default() };
    let pool = Pool::simulated(&opts).expect("pool");
    // A class whose slab is one bitmap word: the first deferred block sets
    // aside the whole rest of its slab.
    let size = CLASS_SIZES
        .iter()
        .copied()
        .find(|&s| s >= 256 && geometry(class_of(s).expect("small")).bitmap_words == 1)
        .expect("a one-word class");
    let first = pool.alloc_deferred(size).expect("alloc");
    // The smallest large blocks, until nothing more fits.
    let large_size = MAX_SLAB_BLOCK + 1;
    let mut large = Vec::new();
    let err = loop {
        match pool.alloc(large_size) {
            Ok(b) => large.push(b),
            Err(e) => break e,
        }
    };
    assert!(matches!(err, PmemError::PoolFull { .. }), "{err}");
    // A fenced allocation of the same class cannot take set-aside blocks,
    // and no slab fits: it gets them given back rather than fail.
    let second = pool.alloc(size).expect("the set-aside blocks are given back at a full pool");
    assert_ne!(first, second);
    assert!(pool.check().is_ok(), "{:?}", pool.check());
    let mut want: BTreeSet<PoolOffset> = large.iter().copied().collect();
    want.extend([first, second]);
    assert_eq!(listed(&pool), want);
}

/// A new slab costs one fence: its zeroed bitmap and the left-over free
/// run's header share it, and the slab's header is only flushed, made
/// durable by the fence its first allocation makes before the block is
/// referenced (`alloc/mod.rs`, `carve_ordered`). At every fence of a run
/// of allocations that each open a slab of another class, and just before
/// the caller's fence, a crash under every policy leaves a heap that opens,
/// passes `check` and sweeps clean; after the caller's fence every block
/// handed out is allocated on the media.
#[test]
fn a_new_slab_is_walkable_at_every_crash_point_and_durable_at_the_next_fence() {
    use std::sync::{Arc, Mutex};
    let opts = PoolOptions { size: 8 * MIB, max_size: Some(8 * MIB), ..PoolOptions::default() };
    for deferred in [true, false] {
        let pool = Pool::simulated(&opts).expect("pool");
        let images: Arc<Mutex<Vec<Vec<u8>>>> = Arc::default();
        let sink = images.clone();
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(11);
        pool.simulator().expect("simulated").set_fence_hook(Some(Box::new(move |ev| {
            for policy in CrashPolicy::ALL {
                sink.lock().unwrap().push(ev.crash_image(policy, &mut rng));
            }
        })));
        let fences_before = pool.simulator().expect("simulated").fence_count();
        // Classes of 48 B to 4 KiB: each allocation opens a slab.
        let sizes = [48u64, 160, 320, 640, 1280, 2560, 4096];
        let handed: Vec<PoolOffset> = sizes
            .iter()
            .map(|&s| if deferred { pool.alloc_deferred(s) } else { pool.alloc(s) }.expect("alloc"))
            .collect();
        let fences = pool.simulator().expect("simulated").fence_count() - fences_before;
        if deferred {
            assert_eq!(fences, sizes.len() as u64, "one fence per new slab");
        }
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(12);
        for policy in CrashPolicy::ALL {
            let image = pool.simulator().expect("simulated").crash_image(&pool, policy, &mut rng);
            images.lock().unwrap().push(image);
        }
        pool.simulator().expect("simulated").set_fence_hook(None);
        let images = std::mem::take(&mut *images.lock().unwrap());
        assert!(!images.is_empty());
        for (i, image) in images.iter().enumerate() {
            let p = Pool::from_image(image, &opts).unwrap_or_else(|e| panic!("image {i} does not open: {e}"));
            assert!(p.check().is_ok(), "image {i} (deferred {deferred}): {:?}", p.check());
            // Nothing was linked: the sweep leaves no block allocated.
            p.reclaim_leaks(&[&Reach(Vec::new())]).expect("sweep");
            assert!(listed(&p).is_empty(), "image {i}: {:?}", listed(&p));
            assert!(p.check().is_ok(), "image {i} after the sweep: {:?}", p.check());
        }
        // The caller's fence (already made by every `alloc`).
        pool.fence();
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(13);
        for policy in CrashPolicy::ALL {
            let image = pool.simulator().expect("simulated").crash_image(&pool, policy, &mut rng);
            let p = Pool::from_image(&image, &opts).expect("opens");
            let on_media = listed(&p);
            assert!(handed.iter().all(|h| on_media.contains(h)), "{policy:?} (deferred {deferred}): {on_media:?}");
            p.reclaim_leaks(&[&Reach(handed.clone())]).expect("sweep");
            assert_eq!(listed(&p), handed.iter().copied().collect(), "{policy:?}");
            assert!(p.check().is_ok(), "{policy:?}: {:?}", p.check());
        }
    }
}
