//! A transaction id is never reused against a stale log entry.
//!
//! Log slots are reused without being cleared: an entry is valid for the
//! transaction whose id it starts with. An older transaction can take a
//! slot after a younger one retired from it, overwriting the slot word with
//! its smaller id while the younger one's later entries stay in the chunk.
//! Ids restart above the largest slot word at open, so after a clean close
//! the next life could hand out that younger id again, and a crash in that
//! transaction would roll back the stale entry's object too, over another
//! transaction's committed change. This test builds exactly that and
//! checks the committed change survives the crash.

use std::sync::Arc;

use tembo_kamino::{Coordinator, Heap, HeapOptions, KaminoError, TxMode};
use tembo_pmem::{PPtr, Pool, PoolOptions};

fn opts() -> HeapOptions {
    HeapOptions { mode: TxMode::Kamino, slots: 2, coordinator: Coordinator::Manual, ..HeapOptions::default() }
}

/// A transaction that takes a slot (by locking `obj`) and gives it back
/// unused: it moves the slot queue along without writing a slot word.
fn lock_only(heap: &Heap, obj: PPtr<()>) {
    heap.transaction(|tx| tx.lock(obj)).unwrap();
}

#[test]
fn a_crash_after_a_clean_reopen_keeps_committed_changes() {
    let dir = std::env::temp_dir().join(format!("tembo-kamino-txid-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("h.pool");
    let copy = dir.join("crashed.pool");
    let popts = PoolOptions::with_size(8 << 20);

    // Life 1: leave a younger transaction's entry for B in a slot whose
    // word an older transaction then overwrites.
    let (a, b) = {
        let pool = Arc::new(Pool::create(&path, &popts).unwrap());
        let heap = Heap::create(pool, &opts()).unwrap();
        let (a, b) = heap
            .transaction(|tx| {
                let a = tx.alloc::<()>(64)?;
                let b = tx.alloc::<()>(64)?;
                tx.set_u64(a, 0, 1)?;
                tx.set_u64(b, 0, 1)?;
                Ok((a.obj(), b.obj()))
            })
            .unwrap();
        heap.coordinate(usize::MAX).unwrap();
        heap.set_app_root(a.offset()).unwrap();
        // The older transaction: its id is taken now, its slot later.
        heap.transaction(|old| {
            std::thread::scope(|s| {
                s.spawn(|| {
                    // The younger one: entries for A and B in the next slot.
                    heap.transaction(|tx| {
                        let wa = tx.write(a)?;
                        let wb = tx.write(b)?;
                        tx.set_u64(wa, 0, 2)?;
                        tx.set_u64(wb, 0, 2)
                    })
                    .unwrap();
                });
            });
            heap.coordinate(usize::MAX)?;
            // Rotate the slot queue so the older one gets the younger's slot.
            lock_only(&heap, a);
            let wa = old.write(a)?;
            old.set_u64(wa, 0, 3)
        })
        .unwrap();
        heap.coordinate(usize::MAX).unwrap();
        drop(heap);
        (a, b)
    };

    // Life 2, after a clean close: the first transaction takes the slot
    // with the stale entry and is running when another commits B.
    {
        let pool = Arc::new(Pool::open(&path, &popts).unwrap());
        let heap = Heap::open(pool, &opts()).unwrap();
        // The first id of this life; the slot queue is rotated (by a
        // younger transaction) so that it takes the stale slot.
        let r: Result<(), KaminoError> = heap.transaction(|tx| {
            lock_only(&heap, a);
            let wa = tx.write(a)?;
            tx.set_u64(wa, 0, 9)?;
            std::thread::scope(|s| {
                s.spawn(|| {
                    heap.transaction(|t2| {
                        let wb = t2.write(b)?;
                        t2.set_u64(wb, 0, 5)
                    })
                    .unwrap();
                });
            });
            // Crash here: what kill -9 leaves is the pool file as it is.
            std::fs::copy(&path, &copy).unwrap();
            Err(KaminoError::Aborted("the copy is the crash".into()))
        });
        assert!(r.is_err());
    }

    let pool = Arc::new(Pool::open(&copy, &popts).unwrap());
    let heap = Heap::open(pool, &opts()).unwrap();
    assert_eq!(heap.get_u64(a, 0).unwrap(), 3, "the running transaction's store is rolled back");
    assert_eq!(heap.get_u64(b, 0).unwrap(), 5, "a committed change was rolled back by a stale log entry");
    drop(heap);
    let _ = std::fs::remove_dir_all(&dir);
}
