//! Kamino-Tx-Dynamic's steady state: once the partial backup is at its
//! budget, a miss takes the block of the least recently written copy of
//! its size instead of freeing one block and allocating another. Updates
//! of same-size objects at α = 0.2 must then miss, evict, and allocate
//! nothing; the contents, the backups and the allocator stay exact.

use std::sync::Arc;

use tembo_kamino::{Coordinator, Heap, HeapOptions, TxMode};
use tembo_pmem::{PPtr, Pool, PoolOptions};

const OBJECTS: usize = 100;

#[test]
fn misses_at_the_budget_reuse_the_evicted_copy_s_block() {
    let pool = Arc::new(Pool::in_memory(&PoolOptions::with_size(16 << 20)).unwrap());
    let opts = HeapOptions {
        mode: TxMode::KaminoDynamic,
        alpha: 0.2,
        coordinator: Coordinator::Manual,
        ..HeapOptions::default()
    };
    let heap = Heap::create(pool.clone(), &opts).unwrap();
    let objs: Vec<PPtr<()>> =
        heap.transaction(|tx| (0..OBJECTS).map(|_| Ok(tx.alloc::<()>(1000)?.obj())).collect()).unwrap();
    let mut model = vec![0u64; OBJECTS];
    let mut x = 0x9E37_79B9_7F4A_7C15u64;
    let mut update = |heap: &Heap, model: &mut Vec<u64>, round: u64| {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let i = (x % OBJECTS as u64) as usize;
        heap.transaction(|tx| {
            let w = tx.write(objs[i])?;
            tx.set(w, 0, &round.to_le_bytes())?;
            tx.set(w, 992, &round.to_le_bytes())
        })
        .unwrap();
        model[i] = round;
        heap.coordinate(usize::MAX).unwrap();
    };
    // Fill the budget first (a fifth of the heap's object bytes).
    for round in 1..=300 {
        update(&heap, &mut model, round);
    }
    let before = heap.stats();
    let blocks = pool.alloc_stats().allocated_blocks;
    for round in 301..=1300 {
        update(&heap, &mut model, round);
    }
    let after = heap.stats();
    assert!(after.backup_misses - before.backup_misses > 100, "too few misses to test: {after:?}");
    assert!(
        after.evictions - before.evictions >= after.backup_misses - before.backup_misses,
        "a miss at the budget must evict: {before:?} then {after:?}"
    );
    // Same-size copies and a single thread: every miss finds a victim.
    let (misses, reused) = (after.backup_misses - before.backup_misses, after.reused_blocks - before.reused_blocks);
    assert_eq!(reused, misses, "misses at the budget that did not reuse a block: {before:?} then {after:?}");
    assert_eq!(pool.alloc_stats().allocated_blocks, blocks, "misses at the budget allocated blocks");
    assert!(after.backup_bytes <= (0.2 * (OBJECTS * 1000) as f64) as u64 + 1000, "over budget: {after:?}");
    for (i, &o) in objs.iter().enumerate() {
        let mut head = [0u8; 8];
        let mut tail = [0u8; 8];
        heap.read(o, 0, &mut head).unwrap();
        heap.read(o, 992, &mut tail).unwrap();
        assert_eq!((u64::from_le_bytes(head), u64::from_le_bytes(tail)), (model[i], model[i]), "object {i}");
    }
    let offsets: Vec<u64> = objs.iter().map(|o| o.offset()).collect();
    assert_eq!(heap.check(&offsets).unwrap(), Vec::<String>::new());
}
