//! Random draws from a key range (`TreeCore::sample`) against a model:
//! only pairs of the range come back, with their current values, every
//! pair of a small range comes back given enough draws, and the draws are
//! uniform (chi-square) over leaves of uneven fill with dead versions
//! among the live entries. Bounds of every kind, including keys outside a
//! node's shared prefix, as in `scan_bounds.rs`.

use std::collections::BTreeMap;
use std::ops::{Bound, RangeBounds};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use common::{bound, churn, key, load, tree, Model};
use proptest::prelude::*;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use tembo_cdds::Op;

mod common;

fn as_ref(b: &Bound<Vec<u8>>) -> Bound<&[u8]> {
    b.as_ref().map(Vec::as_slice)
}

fn in_model(m: &Model, lo: &Bound<Vec<u8>>, hi: &Bound<Vec<u8>>) -> Model {
    m.iter().filter(|(k, _)| (lo.clone(), hi.clone()).contains(*k)).map(|(k, v)| (k.clone(), v.clone())).collect()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 16, ..ProptestConfig::default() })]
    #[test]
    fn draws_come_from_the_range_with_current_values(
        n in 1u32..1500,
        shape in 0u8..3,
        ops in prop::collection::vec((0u32..1600, any::<bool>()), 0..300),
        bounds in prop::collection::vec((any::<u8>(), 0u32..1700, any::<u8>(), 0u32..1700), 1..12),
        seed in any::<u64>(),
    ) {
        let t = tree();
        let mut m = Model::new();
        load(&t, &mut m, n, shape);
        // Held across the churn: the entries it ends stay in the nodes.
        let _snap = t.snapshot().unwrap();
        churn(&t, &mut m, ops, shape);
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        for (ls, li, hs, hi) in bounds {
            let (lo, hi) = (bound(ls, li, shape), bound(hs, hi, shape));
            let want = in_model(&m, &lo, &hi);
            let got = t.sample(as_ref(&lo), as_ref(&hi), 100, &mut 400_000, &mut rng).unwrap();
            for (k, v) in &got {
                prop_assert_eq!(want.get(k), Some(v), "{:?}..{:?}", lo, hi);
            }
            let expect = if want.is_empty() { 0 } else { 100 };
            prop_assert_eq!(got.len(), expect, "{:?}..{:?}", lo, hi);
            if (1..=20).contains(&want.len()) {
                let more = t.sample(as_ref(&lo), as_ref(&hi), 2000, &mut 4_000_000, &mut rng).unwrap();
                let seen: Model = more.into_iter().collect();
                prop_assert_eq!(seen, want, "every pair of {:?}..{:?}", lo, hi);
            }
        }
    }
}

#[test]
fn draws_are_uniform_over_uneven_leaves_and_dead_versions() {
    let t = tree();
    let mut m = Model::new();
    load(&t, &mut m, 6000, 0);
    let _snap = t.snapshot().unwrap();
    // Uneven fill: delete runs of keys, and update others (dead versions).
    for i in 0..6000u32 {
        let k = key(i, 0);
        if (i / 40) % 3 == 0 && i % 5 != 0 {
            t.write(&[Op::Delete(&k)]).unwrap();
            m.remove(&k);
        } else if i % 3 == 0 {
            t.write(&[Op::Put(&k, b"again")]).unwrap();
        }
    }
    let (lo, hi) = (Bound::Included(key(1234, 0)), Bound::Excluded(key(4321, 0)));
    let want = in_model(&m, &lo, &hi);
    let per = 60;
    let draws = want.len() * per;
    let mut rng = ChaCha8Rng::seed_from_u64(99);
    let got = t.sample(as_ref(&lo), as_ref(&hi), draws, &mut { usize::MAX }, &mut rng).unwrap();
    assert_eq!(got.len(), draws);
    let mut counts: BTreeMap<Vec<u8>, u64> = want.keys().map(|k| (k.clone(), 0)).collect();
    for (k, _) in got {
        *counts.get_mut(&k).expect("a key of the range") += 1;
    }
    let df = want.len() as f64 - 1.0;
    let chi: f64 = counts.values().map(|&c| (c as f64 - per as f64).powi(2) / per as f64).sum();
    // Mean df, standard deviation sqrt(2 df): six of them is far past p = 1e-6.
    let limit = df + 6.0 * (2.0 * df).sqrt();
    assert!(chi < limit, "chi-square {chi:.0} over {} keys (limit {limit:.0})", want.len());
}

#[test]
fn draws_during_writes_see_one_version() {
    let t = Arc::new(tree());
    let mut m = Model::new();
    load(&t, &mut m, 3000, 0);
    let stop = Arc::new(AtomicBool::new(false));
    let writer = {
        let (t, stop) = (t.clone(), stop.clone());
        std::thread::spawn(move || {
            let mut i = 0u32;
            while !stop.load(Ordering::Relaxed) {
                // Values in the range change; keys outside it come and go,
                // splitting and merging the nodes the draws read.
                let inside = key(1000 + i % 1000, 0);
                let outside = format!("zz{:06}", i % 5000).into_bytes();
                t.write(&[Op::Put(&inside, format!("v{i}").as_bytes())]).unwrap();
                if (i / 5000) % 2 == 0 {
                    t.write(&[Op::Put(&outside, &[7; 40])]).unwrap();
                } else {
                    t.write(&[Op::Delete(&outside)]).unwrap();
                }
                i += 1;
            }
        })
    };
    let (lo, hi) = (Bound::Included(key(1000, 0)), Bound::Excluded(key(2000, 0)));
    let mut rng = ChaCha8Rng::seed_from_u64(5);
    let mut drawn = 0;
    for _ in 0..300 {
        for (k, v) in t.sample(as_ref(&lo), as_ref(&hi), 50, &mut 100_000, &mut rng).unwrap() {
            assert!((lo.clone(), hi.clone()).contains(&k));
            assert!(v.starts_with(b"v") || v.len() == 4, "value {v:?}");
            drawn += 1;
        }
    }
    stop.store(true, Ordering::Relaxed);
    writer.join().unwrap();
    assert_eq!(drawn, 300 * 50);
}
