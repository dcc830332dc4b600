//! Engine conformance: every engine behind the same `Db` API — point
//! operations, batches, ranges, limits, reopen, recovery after an unclean
//! shutdown, the engine record, and (in-place engines) many writers.

use std::collections::BTreeMap;
use std::sync::Arc;

use rand::{Rng, SeedableRng};
use tembo_store::{Db, DbError, Engine, Options, WriteBatch};

fn opts(engine: Engine) -> Options {
    Options { size: 8 << 20, max_size: Some(256 << 20), engine, alpha: 0.3, ..Options::default() }
}

fn dir() -> std::path::PathBuf {
    use std::sync::atomic::{AtomicU64, Ordering};
    static N: AtomicU64 = AtomicU64::new(0);
    let d = std::env::temp_dir().join(format!(
        "tembo-engines-{}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    ));
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn contents(db: &Db) -> BTreeMap<Vec<u8>, Vec<u8>> {
    db.iter().map(|r| r.unwrap()).collect()
}

#[test]
fn every_engine_behaves_the_same() {
    for engine in Engine::ALL {
        let d = dir();
        let path = d.join("db.pool");
        let db = Db::create(&path, &opts(engine)).unwrap();
        assert_eq!(db.engine(), engine);
        let mut model = BTreeMap::new();
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(7);
        for i in 0..3000u32 {
            let k = format!("k{:05}", rng.gen_range(0..800)).into_bytes();
            if rng.gen_bool(0.65) {
                let v = vec![i as u8; rng.gen_range(0..300)];
                db.put(&k, &v).unwrap();
                model.insert(k, v);
            } else {
                assert_eq!(db.delete(&k).unwrap(), model.remove(&k).is_some(), "{engine}");
            }
        }
        let mut b = WriteBatch::new();
        b.put("batch-a", "1").put("batch-b", "2").delete("batch-a");
        let out = db.write(&b).unwrap();
        assert_eq!(out.existed, vec![false, false, true]);
        model.insert(b"batch-b".to_vec(), b"2".to_vec());
        assert_eq!(contents(&db), model, "{engine}");
        // `get_into` reuses one buffer across present and missing keys.
        let mut buf = b"stale bytes that must not survive".to_vec();
        for i in 0..800u32 {
            let k = format!("k{i:05}").into_bytes();
            let found = db.get_into(&k, &mut buf).unwrap();
            assert_eq!(found.then(|| buf.clone()), model.get(&k).cloned(), "{engine} {i}");
            assert!(found || buf.is_empty(), "{engine}: a miss leaves the buffer empty");
            assert_eq!(db.contains(&k).unwrap(), found, "{engine} {i}: contains agrees with get");
            // A part of a value, and its whole length.
            let (offset, limit) = (i as usize % 5, i as usize % 7);
            let part = db.get_range_into(&k, offset as u64, limit, &mut buf).unwrap();
            let want = model.get(&k).map(|v| {
                let from = offset.min(v.len());
                (v[from..(from + limit).min(v.len())].to_vec(), v.len() as u64)
            });
            assert_eq!(part.map(|len| (buf.clone(), len)), want, "{engine} {i}: {limit} bytes from {offset}");
        }
        let rev: Vec<_> = db.scan_rev(&b"k00100"[..]..&b"k00500"[..]).map(|r| r.unwrap()).collect();
        let want: Vec<_> =
            model.range(b"k00100".to_vec()..b"k00500".to_vec()).rev().map(|(k, v)| (k.clone(), v.clone())).collect();
        assert_eq!(rev, want, "{engine}");
        // `next_into` reuses two buffers; the in-place engines' chunks
        // (256 pairs) end inside this range.
        let (mut k, mut v) = (b"stale".to_vec(), b"stale value".to_vec());
        let mut it = db.scan(&b"k00100"[..]..&b"k00700"[..]);
        let mut into = Vec::new();
        while let Some(pair) = it.next_into(&mut k, &mut v) {
            pair.unwrap();
            into.push((k.clone(), v.clone()));
        }
        let want: Vec<_> =
            model.range(b"k00100".to_vec()..b"k00700".to_vec()).map(|(k, v)| (k.clone(), v.clone())).collect();
        drop(it);
        assert_eq!(into, want, "{engine}: next_into");
        let pre: Vec<_> = db.scan_prefix(b"k001").map(|r| r.unwrap().0).collect();
        assert_eq!(pre, model.keys().filter(|k| k.starts_with(b"k001")).cloned().collect::<Vec<_>>());
        assert!(matches!(db.put(b"", b"x"), Err(DbError::EmptyKey)));
        assert!(matches!(db.put(&vec![1u8; 70_000], b"x"), Err(DbError::KeyTooLarge { .. })));
        let c = db.check().unwrap();
        assert!(c.is_ok(), "{engine}: {:?}", c.violations());
        let st = db.stats().unwrap();
        assert_eq!(st.tree.keys, model.len() as u64, "{engine}");
        assert_eq!(st.in_place.is_some(), engine != Engine::Cdds);
        if engine != Engine::Cdds {
            assert!(matches!(db.snapshot(), Err(DbError::Unsupported { .. })));
            let k = st.in_place.unwrap();
            assert!(k.heap.committed >= 3000);
        }
        db.close().unwrap();
        // Reopen: the engine comes from the pool, whatever the options say.
        let db = Db::open(&path, &opts(Engine::Cdds)).unwrap();
        assert_eq!(db.engine(), engine);
        assert!(!db.recovery_report().ran);
        assert_eq!(contents(&db), model, "{engine}");
        db.close().unwrap();
        let _ = std::fs::remove_dir_all(d);
    }
}

#[test]
fn in_place_engines_recover_after_an_unclean_shutdown() {
    for engine in [Engine::Kamino, Engine::KaminoDynamic, Engine::Undo] {
        let d = dir();
        let path = d.join("db.pool");
        let db = Db::create(&path, &opts(engine)).unwrap();
        for i in 0..500u32 {
            db.put(format!("key{i:04}").as_bytes(), &[i as u8; 100]).unwrap();
        }
        // Leave the pool as a crash would: unclean, backup not rolled forward.
        db.pool().keep_unclean();
        std::mem::forget(db);
        // The forgotten Db still holds the lock in this process; a second
        // handle on the file must be refused, so copy the file instead.
        let copy = d.join("copy.pool");
        std::fs::copy(&path, &copy).unwrap();
        let db = Db::open(&copy, &opts(engine)).unwrap();
        assert!(db.recovery_report().ran, "{engine}");
        for i in 0..500u32 {
            assert_eq!(db.get(format!("key{i:04}").as_bytes()).unwrap(), Some(vec![i as u8; 100]), "{engine}");
        }
        let c = db.check().unwrap();
        assert!(c.is_ok(), "{engine}: {:?}", c.violations());
    }
}

#[test]
fn in_place_writers_on_disjoint_keys_run_in_parallel() {
    for engine in [Engine::Kamino, Engine::KaminoDynamic, Engine::Undo] {
        let db = Arc::new(Db::in_memory(&opts(engine)).unwrap());
        let threads: Vec<_> = (0..4u32)
            .map(|t| {
                let db = db.clone();
                std::thread::spawn(move || {
                    for i in 0..1500u32 {
                        let k = format!("t{t}-{i:05}");
                        db.put(k.as_bytes(), &[t as u8; 64]).unwrap();
                        if i % 3 == 0 {
                            assert!(db.delete(k.as_bytes()).unwrap());
                        }
                        if i % 7 == 0 {
                            let _ = db.get(format!("t{}-{:05}", (t + 1) % 4, i).as_bytes()).unwrap();
                        }
                    }
                })
            })
            .collect();
        let reader = {
            let db = db.clone();
            std::thread::spawn(move || {
                for _ in 0..50 {
                    let n = db.iter().inspect(|r| assert!(r.is_ok())).count();
                    assert!(n <= 4 * 1500);
                }
            })
        };
        for t in threads {
            t.join().unwrap();
        }
        reader.join().unwrap();
        assert_eq!(db.iter().count(), 4 * 1000, "{engine}");
        let c = db.check().unwrap();
        assert!(c.is_ok(), "{engine}: {:?}", c.violations());
    }
}

/// Puts keys `key0000000`, `key0000001`, … until the pool is full; returns
/// how many fitted.
fn fill_until_full(db: &Db, engine: Engine, round: u8) -> u32 {
    let mut n = 0u32;
    loop {
        let k = format!("key{n:07}");
        match db.put(k.as_bytes(), &vec![round; 100 + (n % 200) as usize]) {
            Ok(()) => n += 1,
            Err(DbError::Pool { source: tembo_pmem::PmemError::PoolFull { .. }, .. }) => return n,
            Err(e) => panic!("{engine}: {e}"),
        }
        assert!(n < 1_000_000, "{engine}: an 8 MiB pool never filled");
    }
}

/// Every engine at its pool's maximum size: puts fail with `PoolFull` and
/// change nothing, the full pool closes and reopens, deleting every key
/// (in random order) succeeds, and the room comes back — as many keys fit
/// again.
#[test]
fn every_engine_empties_and_refills_a_full_pool() {
    use rand::seq::SliceRandom;
    for engine in Engine::ALL {
        let o = Options {
            size: 8 << 20,
            max_size: Some(8 << 20),
            engine,
            alpha: 0.3,
            mode: tembo_pmem::ModeRequest::Emulated,
            ..Options::default()
        };
        let path = dir().join("full.pool");
        let db = Db::create(&path, &o).unwrap();
        let n = fill_until_full(&db, engine, 1);
        assert!(n > 2_000, "{engine}: only {n} keys fit");
        assert_eq!(db.iter().count(), n as usize, "{engine}");
        drop(db);
        let db = Db::open(&path, &o).unwrap_or_else(|e| panic!("{engine}: reopen of a full pool: {e}"));
        assert_eq!(db.iter().count(), n as usize, "{engine}");
        let mut order: Vec<u32> = (0..n).collect();
        order.shuffle(&mut rand_chacha::ChaCha8Rng::seed_from_u64(3));
        for i in order {
            let k = format!("key{i:07}");
            assert!(db.delete(k.as_bytes()).unwrap_or_else(|e| panic!("{engine}: delete {k}: {e}")), "{engine} {k}");
        }
        assert_eq!(db.iter().count(), 0, "{engine}");
        let again = fill_until_full(&db, engine, 2);
        assert!(again >= n * 9 / 10, "{engine}: {again} keys fit after emptying, {n} before");
        assert!(db.check().unwrap().is_ok(), "{engine}: {:?}", db.check().unwrap());
    }
}
