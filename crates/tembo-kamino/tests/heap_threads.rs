//! Many threads, few objects: transfers between accounts in multi-object
//! transactions (some aborted on purpose), readers that lock every account
//! and check the total, and so few log slots that transactions wait for
//! them and roll jobs forward themselves. In every mode, the total never
//! changes, every committed transfer is counted, and `check` finds the
//! heap's invariants (backups current, log idle) at the end.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tembo_kamino::{Coordinator, Heap, HeapOptions, KaminoError, TxMode};
use tembo_pmem::{PPtr, Pool, PoolOptions};

const ACCOUNTS: usize = 8;
const START: u64 = 1_000;
const WRITERS: usize = 4;
const TRANSFERS: u64 = 1_500;

fn pool_path(tag: &str) -> std::path::PathBuf {
    let d = std::env::temp_dir().join(format!("tembo-kamino-threads-{}-{tag}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d.join("h.pool")
}

/// A small deterministic generator per thread.
fn next(x: &mut u64) -> u64 {
    *x ^= *x << 13;
    *x ^= *x >> 7;
    *x ^= *x << 17;
    *x
}

fn run(mode: TxMode, alpha: f64, coordinator: Coordinator) {
    let path = pool_path(&format!("{}-{alpha}-{coordinator:?}", mode.name()));
    let pool = Arc::new(Pool::create(&path, &PoolOptions::with_size(16 << 20)).unwrap());
    let opts = HeapOptions { mode, alpha, slots: 3, lock_timeout: Duration::from_secs(20), coordinator };
    let heap = Arc::new(Heap::create(pool, &opts).unwrap());
    // Accounts of 256 bytes: the balance at 0, the rest rewritten with it so
    // a torn object shows.
    let accounts: Vec<PPtr<()>> = heap
        .transaction(|tx| {
            let mut v = Vec::new();
            for _ in 0..ACCOUNTS {
                let w = tx.alloc::<()>(256)?;
                tx.set_u64(w, 0, START)?;
                tx.set(w, 8, &[START as u8; 248])?;
                v.push(w.obj());
            }
            Ok(v)
        })
        .unwrap();
    let accounts = Arc::new(accounts);
    let stop = Arc::new(AtomicBool::new(false));
    let committed = Arc::new(AtomicU64::new(0));

    let reader = {
        let (heap, accounts, stop) = (heap.clone(), accounts.clone(), stop.clone());
        std::thread::spawn(move || {
            let mut checks = 0u64;
            while !stop.load(Ordering::Relaxed) || checks == 0 {
                // Read locks in address order, as the writers lock.
                let mut sorted: Vec<PPtr<()>> = accounts.to_vec();
                sorted.sort_by_key(|p| p.offset());
                let guards: Vec<_> = sorted.iter().map(|&a| heap.read_lock(a).unwrap()).collect();
                let mut total = 0;
                for &a in sorted.iter() {
                    let bal = heap.get_u64(a, 0).unwrap();
                    let mut tail = [0u8; 248];
                    heap.read(a, 8, &mut tail).unwrap();
                    assert!(tail.iter().all(|&b| b == bal as u8), "a torn account");
                    total += bal;
                }
                drop(guards);
                assert_eq!(total, START * ACCOUNTS as u64, "a reader saw money appear or vanish");
                checks += 1;
            }
            checks
        })
    };

    let writers: Vec<_> = (0..WRITERS)
        .map(|t| {
            let (heap, accounts, committed) = (heap.clone(), accounts.clone(), committed.clone());
            std::thread::spawn(move || {
                let mut x = 0x9E37_79B9_7F4A_7C15 ^ (t as u64 + 1);
                for i in 0..TRANSFERS {
                    let a = (next(&mut x) % ACCOUNTS as u64) as usize;
                    let b = (a + 1 + (next(&mut x) % (ACCOUNTS as u64 - 1)) as usize) % ACCOUNTS;
                    let (lo, hi) = if accounts[a].offset() < accounts[b].offset() { (a, b) } else { (b, a) };
                    let amount = next(&mut x) % 50;
                    let abort = i % 7 == 3;
                    let r = heap.transaction(|tx| {
                        let wl = tx.write(accounts[lo])?;
                        let wh = tx.write(accounts[hi])?;
                        let (from, to) = if lo == a { (wl, wh) } else { (wh, wl) };
                        let fb = tx.get_u64(from.obj(), 0)?;
                        let tb = tx.get_u64(to.obj(), 0)?;
                        let amount = amount.min(fb);
                        tx.set_u64(from, 0, fb - amount)?;
                        tx.set(from, 8, &[(fb - amount) as u8; 248])?;
                        tx.set_u64(to, 0, tb + amount)?;
                        tx.set(to, 8, &[(tb + amount) as u8; 248])?;
                        if abort {
                            return Err(KaminoError::Aborted("on purpose".into()));
                        }
                        Ok(())
                    });
                    match r {
                        Ok(()) => {
                            committed.fetch_add(1, Ordering::Relaxed);
                        }
                        Err(KaminoError::Aborted(_)) if abort => {}
                        Err(e) => panic!("transfer failed: {e}"),
                    }
                }
            })
        })
        .collect();
    for w in writers {
        w.join().unwrap();
    }
    stop.store(true, Ordering::Relaxed);
    assert!(reader.join().unwrap() > 0);

    let total: u64 = accounts.iter().map(|&a| heap.get_u64(a, 0).unwrap()).sum();
    assert_eq!(total, START * ACCOUNTS as u64);
    let offsets: Vec<u64> = accounts.iter().map(|a| a.offset()).collect();
    let violations = heap.check(&offsets).unwrap();
    assert!(violations.is_empty(), "{violations:?}");
    let st = heap.stats();
    // The accounts' creation is one more committed transaction.
    assert_eq!(st.committed, committed.load(Ordering::Relaxed) + 1);
    assert!(st.aborted >= WRITERS as u64 * (TRANSFERS / 7), "aborted {}", st.aborted);
    if mode != TxMode::Undo {
        assert!(st.copies_background + st.copies_critical > 0);
    }
    drop(heap);
    let _ = std::fs::remove_dir_all(path.parent().unwrap());
}

#[test]
fn kamino_transfers_under_contention() {
    run(TxMode::Kamino, 1.0, Coordinator::Background);
}

#[test]
fn kamino_transfers_with_a_manual_coordinator() {
    // No background thread: transactions that find no free slot roll the
    // oldest jobs forward themselves.
    run(TxMode::Kamino, 1.0, Coordinator::Manual);
}

#[test]
fn kamino_dynamic_transfers_under_contention() {
    run(TxMode::KaminoDynamic, 0.5, Coordinator::Background);
}

#[test]
fn undo_transfers_under_contention() {
    run(TxMode::Undo, 1.0, Coordinator::Background);
}
