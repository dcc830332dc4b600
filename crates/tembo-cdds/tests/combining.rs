//! Several writer threads on one tree: writes that find the writer busy
//! ride in its batch (`combine`). Each write must still be atomic, get its
//! own outcome (`existed` per op), and be present after it returns Ok;
//! one that fails (a full pool) must change nothing while the writes it
//! was combined with succeed.

use std::collections::BTreeMap;
use std::ops::Bound;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use tembo_cdds::{CddsError, Limits, Op, Tree};
use tembo_pmem::{PmemError, Pool, PoolOptions};

const THREADS: u64 = 4;
const KEYS_PER_THREAD: u32 = 600;
/// Keys one thread writes together in one atomic batch.
const GROUP: u32 = 4;

/// Keys a thread wrote (or failed to).
type Keys = Vec<Vec<u8>>;

fn key(t: u64, i: u32) -> Vec<u8> {
    format!("t{t}-key-{i:05}").into_bytes()
}

fn group_key(t: u64, g: u32, j: u32) -> Vec<u8> {
    format!("t{t}-group-{g:03}-{j}").into_bytes()
}

fn tree(size: u64, max: u64) -> Tree {
    let pool = Pool::in_memory(&PoolOptions { size, max_size: Some(max), ..PoolOptions::default() }).unwrap();
    Tree::create(Arc::new(pool), Limits::default()).unwrap()
}

fn contents(t: &Tree) -> BTreeMap<Vec<u8>, Vec<u8>> {
    t.scan(Bound::Unbounded, Bound::Unbounded, false).unwrap().map(|kv| kv.unwrap()).collect()
}

/// One writer thread: random puts, overwrites and deletes of its own keys,
/// and atomic groups; checks each write's `existed` against its model.
fn writer(t: &Tree, id: u64, ops: u32, stop: &AtomicBool) -> Result<BTreeMap<Vec<u8>, Vec<u8>>, String> {
    let mut rng = ChaCha8Rng::seed_from_u64(0xC0B1 + id);
    let mut model = BTreeMap::new();
    for n in 0..ops {
        if stop.load(Ordering::Relaxed) {
            break;
        }
        let roll = rng.gen_range(0..10);
        if roll < 2 {
            // A group: all its keys carry the same sequence number.
            let g = rng.gen_range(0..8);
            let val = format!("{id}:{n}").into_bytes();
            let keys: Vec<Vec<u8>> = (0..GROUP).map(|j| group_key(id, g, j)).collect();
            let batch: Vec<Op<'_>> = keys.iter().map(|k| Op::Put(k, &val)).collect();
            let out = t.write(&batch).map_err(|e| e.to_string())?;
            for (k, e) in keys.iter().zip(out.existed) {
                if e != model.contains_key(k) {
                    return Err(format!("thread {id} op {n}: existed {e} for {k:?}"));
                }
                model.insert(k.clone(), val.clone());
            }
            continue;
        }
        let k = key(id, rng.gen_range(0..KEYS_PER_THREAD));
        let out = if roll < 7 {
            let val = vec![b'a' + (n % 26) as u8; rng.gen_range(1..300)];
            let out = t.write(&[Op::Put(&k, &val)]).map_err(|e| e.to_string())?;
            let was = model.insert(k.clone(), val).is_some();
            (out, was)
        } else {
            let out = t.write(&[Op::Delete(&k)]).map_err(|e| e.to_string())?;
            (out, model.remove(&k).is_some())
        };
        if out.0.existed != [out.1] {
            return Err(format!("thread {id} op {n}: existed {:?}, the model says {}", out.0.existed, out.1));
        }
    }
    Ok(model)
}

/// Reads groups while the writers run: a group is written in one batch,
/// so a scan (one version) sees its keys all with one value.
fn group_reader(t: &Tree, stop: &AtomicBool) -> Result<u64, String> {
    let mut reads = 0;
    while !stop.load(Ordering::Relaxed) {
        for id in 0..THREADS {
            let from = group_key(id, 0, 0);
            let to = group_key(id, 8, 0);
            let mut groups: BTreeMap<Vec<u8>, Vec<Vec<u8>>> = BTreeMap::new();
            for kv in t.scan(Bound::Included(from), Bound::Excluded(to), false).map_err(|e| e.to_string())? {
                let (k, v) = kv.map_err(|e| e.to_string())?;
                groups.entry(k[..k.len() - 1].to_vec()).or_default().push(v);
            }
            for (g, vals) in groups {
                if vals.len() != GROUP as usize || vals.iter().any(|v| v != &vals[0]) {
                    return Err(format!("group {g:?} torn: {vals:?}"));
                }
            }
            reads += 1;
        }
    }
    Ok(reads)
}

#[test]
fn concurrent_writers_share_commits_and_each_keeps_its_outcome() {
    let t = tree(8 << 20, 256 << 20);
    let mut combined = 0;
    // Rounds until some writes rode in another thread's batch (on a busy
    // machine the threads may happen not to overlap in one round).
    for round in 0..5 {
        let stop = AtomicBool::new(false);
        let (models, reads) = std::thread::scope(|s| {
            let reader = s.spawn(|| group_reader(&t, &stop));
            let writers: Vec<_> = (0..THREADS)
                .map(|id| {
                    let (t, stop) = (&t, &stop);
                    s.spawn(move || writer(t, id, 3000, stop))
                })
                .collect();
            let models: Vec<_> = writers.into_iter().map(|w| w.join().unwrap()).collect();
            stop.store(true, Ordering::Relaxed);
            (models, reader.join().unwrap())
        });
        let reads = reads.unwrap();
        let mut want = BTreeMap::new();
        for m in models {
            want.extend(m.unwrap());
        }
        assert_eq!(contents(&t), want, "round {round}: the tree differs from the writers' models");
        let c = t.check().unwrap();
        assert!(c.is_ok(), "{:?}", c.violations);
        combined = t.combined_writes();
        eprintln!("round {round}: {combined} writes combined so far, {reads} group scans");
        if combined > 0 {
            break;
        }
        // Start the next round from an empty tree.
        let keys: Vec<Vec<u8>> = want.into_keys().collect();
        let dels: Vec<Op<'_>> = keys.iter().map(|k| Op::Delete(k)).collect();
        t.write(&dels).unwrap();
    }
    assert!(combined > 0, "no write ever rode in another's batch: combining was not exercised");
}

/// Threads fill a small pool with fresh keys until it is full. A write
/// that failed must have changed nothing even if it was combined with
/// others; every write that succeeded must be there.
#[test]
fn a_full_pool_fails_only_the_writes_that_do_not_fit() {
    let t = tree(2 << 20, 6 << 20);
    let results: Vec<(Keys, Keys)> = std::thread::scope(|s| {
        let hs: Vec<_> = (0..THREADS)
            .map(|id| {
                let t = &t;
                s.spawn(move || {
                    let (mut ok, mut failed) = (Vec::new(), Vec::new());
                    let mut fails = 0;
                    for i in 0..1_000_000u32 {
                        let k = format!("t{id}-{i:07}").into_bytes();
                        // Every 7th write is big: a big one fails while
                        // small ones beside it still fit.
                        let v = vec![id as u8; if i % 7 == 0 { 3000 } else { 200 }];
                        match t.write(&[Op::Put(&k, &v)]) {
                            Ok(out) => {
                                assert_eq!(out.existed, [false]);
                                ok.push(k);
                            }
                            Err(CddsError::Pmem(PmemError::PoolFull { .. })) => {
                                failed.push(k);
                                fails += 1;
                                if fails > 50 {
                                    break;
                                }
                            }
                            Err(e) => panic!("thread {id}: {e}"),
                        }
                    }
                    (ok, failed)
                })
            })
            .collect();
        hs.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let got = contents(&t);
    let mut n_ok = 0;
    for (ok, failed) in &results {
        assert!(!failed.is_empty(), "the pool never filled");
        for k in ok {
            assert!(got.contains_key(k), "acknowledged {k:?} missing");
        }
        for k in failed {
            assert!(!got.contains_key(k), "failed write {k:?} present");
        }
        n_ok += ok.len();
    }
    assert_eq!(got.len(), n_ok);
    let c = t.check().unwrap();
    assert!(c.is_ok(), "{:?}", c.violations);
    eprintln!("{n_ok} writes fit; {} combined", t.combined_writes());
}
