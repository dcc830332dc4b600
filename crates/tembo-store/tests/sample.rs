//! `Db::sample` on every engine: draws lie in the range with current
//! values, reach every pair of a range, are uniform (chi-square) over
//! unevenly filled leaves, and stay right while other threads write.

use std::collections::BTreeMap;
use std::ops::{Bound, RangeBounds};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use tembo_store::{Db, Engine, Options, WriteBatch};

fn db(engine: Engine) -> Db {
    Db::in_memory(&Options { size: 16 << 20, max_size: Some(256 << 20), engine, alpha: 0.3, ..Options::default() })
        .unwrap()
}

fn key(i: u32) -> Vec<u8> {
    format!("set:{:07}", i * 3).into_bytes()
}

/// `n` keys, then runs of them deleted so that leaves are unevenly full.
fn uneven(db: &Db, n: u32) -> BTreeMap<Vec<u8>, Vec<u8>> {
    let mut m = BTreeMap::new();
    for chunk in (0..n).collect::<Vec<_>>().chunks(100) {
        let mut b = WriteBatch::new();
        for &i in chunk {
            b.put(key(i), i.to_le_bytes());
            m.insert(key(i), i.to_le_bytes().to_vec());
        }
        db.write(&b).unwrap();
    }
    for i in 0..n {
        if (i / 50) % 3 == 0 && i % 7 != 0 {
            db.delete(&key(i)).unwrap();
            m.remove(&key(i));
        }
    }
    m
}

#[test]
fn draws_lie_in_the_range_and_reach_every_pair() {
    for engine in Engine::ALL {
        let db = db(engine);
        let m = uneven(&db, 5000);
        let mut rng = ChaCha8Rng::seed_from_u64(1);
        for _ in 0..40 {
            let a = rng.gen_range(0..15_100);
            let b = a + rng.gen_range(0..60);
            let range = (
                Bound::Included(format!("set:{a:07}").into_bytes()),
                Bound::Excluded(format!("set:{b:07}").into_bytes()),
            );
            let want: BTreeMap<_, _> =
                m.iter().filter(|(k, _)| range.contains(*k)).map(|(k, v)| (k.clone(), v.clone())).collect();
            let got = db.sample(range.clone(), 600, &mut 2_000_000, &mut rng).unwrap();
            assert_eq!(got.len(), if want.is_empty() { 0 } else { 600 }, "{engine} {range:?}");
            let seen: BTreeMap<_, _> = got.into_iter().collect();
            assert_eq!(seen, want, "{engine} {range:?}");
        }
        // Unbounded, and a prefix that matches nothing.
        assert_eq!(db.sample::<Vec<u8>, _>(.., 10, &mut 1000, &mut rng).unwrap().len(), 10, "{engine}");
        let mut budget = 1000;
        let none = db.sample(&b"zz"[..].., 10, &mut budget, &mut rng).unwrap();
        assert!(none.is_empty(), "{engine}");
        assert_eq!(budget, 1000, "{engine}: an empty range spends nothing");
        // The budget bounds the descents (the in-place engines take their
        // lock for a few hundred at a time: this spans several holds).
        let mut budget = 700;
        let got = db.sample(&b"set:"[..].., 100_000, &mut budget, &mut rng).unwrap();
        assert!(!got.is_empty() && got.len() <= 700, "{engine}: {}", got.len());
        assert_eq!(budget, 0, "{engine}");
    }
}

#[test]
fn draws_are_uniform_on_every_engine() {
    for engine in Engine::ALL {
        let db = db(engine);
        let m = uneven(&db, 8000);
        let range = key(1000)..key(6000);
        let keys: Vec<&Vec<u8>> = m.keys().filter(|k| range.contains(k)).collect();
        let per = 50;
        let mut rng = ChaCha8Rng::seed_from_u64(2);
        let got = db.sample(range.clone(), keys.len() * per, &mut { usize::MAX }, &mut rng).unwrap();
        let mut counts: BTreeMap<&[u8], u64> = keys.iter().map(|k| (k.as_slice(), 0)).collect();
        for (k, _) in &got {
            *counts.get_mut(k.as_slice()).expect("a key of the range") += 1;
        }
        let df = keys.len() as f64 - 1.0;
        let chi: f64 = counts.values().map(|&c| (c as f64 - per as f64).powi(2) / per as f64).sum();
        let limit = df + 6.0 * (2.0 * df).sqrt();
        assert!(chi < limit, "{engine}: chi-square {chi:.0} over {} keys (limit {limit:.0})", keys.len());
    }
}

#[test]
fn draws_stay_in_the_range_while_others_write() {
    for engine in Engine::ALL {
        let db = Arc::new(db(engine));
        let m = uneven(&db, 4000);
        let stop = Arc::new(AtomicBool::new(false));
        let writers: Vec<_> = (0..2u32)
            .map(|w| {
                let (db, stop) = (db.clone(), stop.clone());
                std::thread::spawn(move || {
                    let mut i = 0u32;
                    while !stop.load(Ordering::Relaxed) {
                        // Values in the range change in place; keys around
                        // it come and go, splitting and merging its nodes.
                        db.put(&key(1000 + (i * 7 + w) % 2000), &[w as u8; 4]).unwrap();
                        // Around the range (keys 3000..9000), not in it.
                        let near = (i * 13) % 14_000;
                        let near = if near < 3000 { near } else { near + 6000 };
                        let out = format!("set:{near:07}x{w}").into_bytes();
                        if (i / 3000) % 2 == 0 {
                            db.put(&out, &[9; 100]).unwrap();
                        } else {
                            db.delete(&out).unwrap();
                        }
                        i += 1;
                    }
                })
            })
            .collect();
        let range = key(1000)..key(3000);
        let mut rng = ChaCha8Rng::seed_from_u64(3);
        let mut drawn = 0;
        for _ in 0..200 {
            for (k, v) in db.sample(range.clone(), 20, &mut 100_000, &mut rng).unwrap() {
                assert!(range.contains(&k), "{engine}");
                assert_eq!(v.len(), 4, "{engine}");
                drawn += 1;
            }
        }
        stop.store(true, Ordering::Relaxed);
        for w in writers {
            w.join().unwrap();
        }
        assert_eq!(drawn, 200 * 20, "{engine}");
        assert!(m.len() > 1000);
    }
}
