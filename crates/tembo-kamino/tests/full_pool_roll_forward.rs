//! A new object's backup copy is allocated with it, inside its transaction.
//!
//! In `kamino` mode every object has a copy. Its block used to be allocated
//! by the roll-forward after the commit; at a full pool that allocation
//! failed in the coordinator (and in recovery, which could then not open
//! the pool) while the transaction had already been acknowledged. Now the
//! transaction allocates both blocks: one that finds room for the object
//! but not its copy fails whole with `PoolFull` and leaves nothing behind,
//! and the roll-forward only copies.

use std::sync::Arc;

use tembo_kamino::{Coordinator, Heap, HeapOptions, KaminoError, TxMode, OBJ_HEADER};
use tembo_pmem::{PmemError, Pool, PoolOptions};

#[test]
fn a_new_objects_copy_is_allocated_in_its_transaction() {
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
    // Room for the object, none for its copy: the transaction fails
    // whole and leaves nothing allocated.
    pool.free(fillers.pop().unwrap()).unwrap();
    let blocks = pool.alloc_stats().allocated_blocks;
    let new_object = |heap: &Heap| {
        heap.transaction(|tx| {
            let w = tx.alloc::<()>(LEN)?;
            tx.set(w, 0, &[7u8; LEN as usize])?;
            Ok(w.obj())
        })
    };
    match new_object(&heap) {
        Err(KaminoError::Pmem(PmemError::PoolFull { .. })) => {}
        other => panic!("the copy's allocation should have found the pool full: {other:?}"),
    }
    assert_eq!(pool.alloc_stats().allocated_blocks, blocks, "the failed transaction left blocks behind");

    // Room for both: the copy is linked at once, and the roll-forward
    // (which allocates nothing now) fills it.
    pool.free(fillers.pop().unwrap()).unwrap();
    let obj = new_object(&heap).unwrap();
    assert_ne!(heap.object_info(obj).unwrap().1, 0, "the new object has its copy's block");
    assert_eq!(heap.coordinate(usize::MAX).unwrap(), 1);
    let v = heap.check(&[warm.offset(), obj.offset()]).unwrap();
    assert!(v.is_empty(), "{v:?}");
    drop(heap);
    let _ = std::fs::remove_dir_all(&dir);
}
