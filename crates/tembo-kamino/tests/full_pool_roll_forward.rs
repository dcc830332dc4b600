//! A roll-forward that cannot make its copy (the pool is full) stays to do.
//!
//! A new object gets its first backup copy from the coordinator. If that
//! allocation fails, the job must stay queued with the object still
//! pending, so that a later roll-forward, once there is room, makes the
//! copy. Counting it as done would retire the log slot and leave the object
//! with no backup: an abort or crash recovery would then have nothing to
//! restore it from.

use std::sync::Arc;

use tembo_kamino::{Coordinator, Heap, HeapOptions, KaminoError, TxMode, OBJ_HEADER};
use tembo_pmem::{PmemError, Pool, PoolOptions};

#[test]
fn a_failed_first_copy_is_made_later() {
    let dir = std::env::temp_dir().join(format!("tembo-kamino-full-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let popts = PoolOptions { max_size: Some(4 << 20), ..PoolOptions::with_size(4 << 20) };
    let pool = Arc::new(Pool::create(dir.join("h.pool"), &popts).unwrap());
    let opts = HeapOptions { mode: TxMode::Kamino, coordinator: Coordinator::Manual, ..HeapOptions::default() };
    let heap = Heap::create(pool.clone(), &opts).unwrap();
    // Warm the log slot the transaction below will take, so that it needs
    // no chunk from the full pool.
    let warm = heap.transaction(|tx| Ok(tx.alloc::<()>(8)?.obj())).unwrap();
    heap.coordinate(usize::MAX).unwrap();

    // Fill the pool with blocks of the object's size, outside the heap.
    const LEN: u64 = 1000;
    let mut fillers = Vec::new();
    loop {
        match pool.alloc(OBJ_HEADER + LEN) {
            Ok(b) => fillers.push(b),
            Err(PmemError::PoolFull { .. }) => break,
            Err(e) => panic!("{e}"),
        }
    }
    assert!(fillers.len() > 2);
    // Room for the object, none for its copy.
    pool.free(fillers.pop().unwrap()).unwrap();
    let obj = heap
        .transaction(|tx| {
            let w = tx.alloc::<()>(LEN)?;
            tx.set(w, 0, &[7u8; LEN as usize])?;
            Ok(w.obj())
        })
        .unwrap();
    match heap.coordinate(usize::MAX) {
        Err(KaminoError::Pmem(PmemError::PoolFull { .. })) => {}
        other => panic!("the copy should have found the pool full: {other:?}"),
    }
    assert_eq!(heap.object_info(obj).unwrap().1, 0, "no copy was made");

    // Room again: the job was kept, and its copy is made now.
    pool.free(fillers.pop().unwrap()).unwrap();
    assert_eq!(heap.coordinate(usize::MAX).unwrap(), 1);
    assert_ne!(heap.object_info(obj).unwrap().1, 0, "the new object has its first copy");
    let v = heap.check(&[warm.offset(), obj.offset()]).unwrap();
    assert!(v.is_empty(), "{v:?}");
    drop(heap);
    let _ = std::fs::remove_dir_all(&dir);
}
