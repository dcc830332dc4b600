//! Range scans against `BTreeMap::range`: every kind of bound (included,
//! excluded, unbounded) at both ends, forward and reverse, with bounds that
//! are keys of the tree, keys between them, keys shorter than the shared
//! prefixes and keys beyond either end, on trees deep enough that the
//! bounds fall inside leaves, on leaf edges and outside a leaf's range —
//! and through a snapshot, so that entries of other versions sit among the
//! visible ones. A scan places its bounds by binary search on the slots'
//! prefix words (`scan.rs`), which this pins down.

use std::ops::Bound;

use common::{bound, churn, load, tree, Model};
use proptest::prelude::*;

mod common;

fn expected(m: &Model, lo: &Bound<Vec<u8>>, hi: &Bound<Vec<u8>>, reverse: bool) -> Vec<(Vec<u8>, Vec<u8>)> {
    // BTreeMap::range panics on an empty or inverted range; a scan is empty.
    let empty = match (lo, hi) {
        (Bound::Included(l), Bound::Included(h)) => l > h,
        (Bound::Included(l), Bound::Excluded(h))
        | (Bound::Excluded(l), Bound::Included(h))
        | (Bound::Excluded(l), Bound::Excluded(h)) => l >= h,
        _ => false,
    };
    if empty {
        return Vec::new();
    }
    let mut got: Vec<_> =
        m.range::<Vec<u8>, _>((lo.clone(), hi.clone())).map(|(k, v)| (k.clone(), v.clone())).collect();
    if reverse {
        got.reverse();
    }
    got
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 32, ..ProptestConfig::default() })]
    #[test]
    fn bounded_scans_match_the_model(
        n in 1u32..1500,
        shape in 0u8..3,
        ops in prop::collection::vec((0u32..1600, any::<bool>()), 0..300),
        bounds in prop::collection::vec((any::<u8>(), 0u32..1700, any::<u8>(), 0u32..1700, any::<bool>()), 1..24),
    ) {
        let t = tree();
        let mut m = Model::new();
        load(&t, &mut m, n, shape);
        // A snapshot before the churn: its scans must skip the entries
        // the churn adds and keep those it ends.
        let snap = t.snapshot().unwrap();
        let before = m.clone();
        churn(&t, &mut m, ops, shape);
        for (ls, li, hs, hi, reverse) in bounds {
            let lo = bound(ls, li, shape);
            let hi = bound(hs, hi, shape);
            let got: Vec<_> = t.scan(lo.clone(), hi.clone(), reverse).unwrap().map(|r| r.unwrap()).collect();
            prop_assert_eq!(&got, &expected(&m, &lo, &hi, reverse), "now: {:?}..{:?} reverse {}", lo, hi, reverse);
            // The same through `next_into` and reused buffers, mixed with `next`.
            let mut it = t.scan(lo.clone(), hi.clone(), reverse).unwrap();
            let (mut k, mut v) = (b"stale".to_vec(), b"stale".to_vec());
            let mut into = Vec::new();
            loop {
                let pair = if into.len() % 3 == 2 {
                    it.next().map(|r| r.unwrap())
                } else {
                    it.next_into(&mut k, &mut v).map(|r| r.map(|()| (k.clone(), v.clone())).unwrap())
                };
                match pair {
                    Some(p) => into.push(p),
                    None => break,
                }
            }
            prop_assert_eq!(into, got, "next_into: {:?}..{:?} reverse {}", lo, hi, reverse);
            let old: Vec<_> = snap.scan(lo.clone(), hi.clone(), reverse).map(|r| r.unwrap()).collect();
            prop_assert_eq!(old, expected(&before, &lo, &hi, reverse), "snapshot: {:?}..{:?} reverse {}", lo, hi, reverse);
        }
    }
}
