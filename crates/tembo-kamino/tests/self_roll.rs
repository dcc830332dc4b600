//! When the coordinator is behind (a quarter of the log slots hold jobs
//! waiting for it), a committing thread rolls its own transaction forward
//! instead of queueing it: the copies are made while the objects are in
//! that thread's cache, and the backlog cannot grow until every slot
//! waits. Here the coordinator never runs on its own (`Manual`), so jobs
//! pile up and the later commits must roll themselves forward; the
//! backups must then be exactly as current as with the coordinator.

use std::sync::Arc;

use tembo_kamino::{Coordinator, Heap, HeapOptions, TxMode};
use tembo_pmem::{Pool, PoolOptions};

fn run(mode: TxMode, alpha: f64) {
    let pool = Arc::new(Pool::in_memory(&PoolOptions::with_size(8 << 20)).unwrap());
    let opts = HeapOptions { mode, alpha, slots: 8, coordinator: Coordinator::Manual, ..HeapOptions::default() };
    let heap = Heap::create(pool, &opts).unwrap();
    let objs: Vec<_> = (0..6).map(|_| heap.transaction(|tx| Ok(tx.alloc::<()>(256)?.obj())).unwrap()).collect();
    for round in 0..40u64 {
        let o = objs[round as usize % objs.len()];
        heap.transaction(|tx| {
            let w = tx.write(o)?;
            tx.set(w, 0, &round.to_le_bytes())?;
            tx.set(w, 128, &[round as u8; 64])
        })
        .unwrap();
    }
    let st = heap.stats();
    assert!(st.self_rolled > 0, "no commit rolled itself forward: {st:?}");
    // Fewer jobs than commits were left for the coordinator.
    let left = heap.coordinate(usize::MAX).unwrap() as u64;
    assert!(left < st.committed, "{left} jobs left of {} commits", st.committed);
    let offsets: Vec<u64> = objs.iter().map(|o| o.offset()).collect();
    let problems = heap.check(&offsets).unwrap();
    assert!(problems.is_empty(), "{problems:?}");
    for (i, &o) in objs.iter().enumerate() {
        let last = (0..40u64).filter(|r| *r as usize % objs.len() == i).max().unwrap();
        assert_eq!(heap.get_u64(o, 0).unwrap(), last);
    }
}

#[test]
fn kamino_commits_roll_themselves_forward_when_the_coordinator_is_behind() {
    run(TxMode::Kamino, 1.0);
}

#[test]
fn kamino_dynamic_commits_roll_themselves_forward_when_the_coordinator_is_behind() {
    run(TxMode::KaminoDynamic, 0.5);
}
