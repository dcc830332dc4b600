//! The tree against `BTreeMap`: random batches of puts, overwrites and
//! deletes (enough to split, merge and reuse dead slots), then point reads,
//! forward and reverse range scans, snapshots and `check`.

use std::collections::BTreeMap;
use std::ops::Bound;
use std::sync::Arc;

use proptest::prelude::*;
use tembo_cdds::{Limits, Op, Tree};
use tembo_pmem::{Pool, PoolOptions};

type Model = BTreeMap<Vec<u8>, Vec<u8>>;

fn tree() -> Tree {
    let pool =
        Pool::in_memory(&PoolOptions { size: 8 << 20, max_size: Some(256 << 20), ..PoolOptions::default() }).unwrap();
    Tree::create(Arc::new(pool), Limits::default()).unwrap()
}

fn key(i: u32, wide: bool) -> Vec<u8> {
    if wide {
        format!("user:{i:08}:with-a-longer-tail").into_bytes()
    } else {
        i.to_be_bytes().to_vec()
    }
}

fn check(t: &Tree, m: &Model) {
    let c = t.check().unwrap();
    assert!(c.allocator.is_empty(), "allocator: {:?}", c.allocator);
    if !c.is_ok() {
        let off = u64::from_str_radix(c.violations[0].split(':').next().unwrap().trim_start_matches("0x"), 16).unwrap();
        panic!("check: {:?}\n{}", c.violations, t.dump_node(off).unwrap_or_default());
    }
    assert_eq!(c.stats.keys, m.len() as u64);
    let all: Vec<_> = t.scan(Bound::Unbounded, Bound::Unbounded, false).unwrap().map(|r| r.unwrap()).collect();
    let want: Vec<_> = m.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
    assert_eq!(all, want, "forward scan");
    let mut rev: Vec<_> = t.scan(Bound::Unbounded, Bound::Unbounded, true).unwrap().map(|r| r.unwrap()).collect();
    rev.reverse();
    assert_eq!(rev, want, "reverse scan");
}

#[test]
fn sequential_then_delete_all() {
    let t = tree();
    let mut m = Model::new();
    for i in 0..3000u32 {
        let k = key(i, i % 2 == 0);
        t.write(&[Op::Put(&k, &i.to_le_bytes())]).unwrap();
        m.insert(k, i.to_le_bytes().to_vec());
    }
    check(&t, &m);
    assert!(t.stats().unwrap().height >= 3);
    for i in (0..3000u32).rev() {
        let k = key(i, i % 2 == 0);
        assert_eq!(t.get(&k).unwrap(), m.get(&k).cloned());
        let out = t.write(&[Op::Delete(&k)]).unwrap();
        assert_eq!(out.existed, vec![true]);
        m.remove(&k);
        if i % 500 == 0 {
            check(&t, &m);
        }
    }
    check(&t, &m);
}

/// Keys that share long prefixes (a collection's elements, YCSB's `user`
/// keys): leaves record the prefix their key range shares, and a lookup,
/// insert or delete in them compares only the bytes after it. Random order
/// splits and merges leaves of every range; `check` verifies each leaf's
/// prefix length against its bounds and every prefix word against its key.
#[test]
fn nodes_record_shared_prefixes() {
    let t = tree();
    let mut m = Model::new();
    let mut x = 0x9E37_79B9_7F4A_7C15u64;
    let mut next = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    let k = |i: u64| format!("S\x01\x06myhash\x00\x00\x00\x07element:{i:012}").into_bytes();
    for round in 0..4 {
        for _ in 0..3000 {
            let i = next() % 5000;
            if next() % 4 == 0 {
                t.write(&[Op::Delete(&k(i))]).unwrap();
                m.remove(&k(i));
            } else {
                t.write(&[Op::Put(&k(i), &i.to_le_bytes())]).unwrap();
                m.insert(k(i), i.to_le_bytes().to_vec());
            }
        }
        check(&t, &m);
        let s = t.stats().unwrap();
        assert!(s.prefixed_leaves > 0, "round {round}: no leaf recorded a prefix ({s:?})");
        assert!(s.height >= 3 && s.prefixed_inner_nodes > 0, "round {round}: no inner node recorded a prefix ({s:?})");
        for i in 0..5000 {
            assert_eq!(t.get(&k(i)).unwrap(), m.get(&k(i)).cloned());
        }
        // Keys outside the shared prefixes still route and read right.
        assert_eq!(t.get(b"S").unwrap(), None);
        assert_eq!(t.get(b"S\x01\x06myhash\x00\x00\x00\x07element:").unwrap(), None);
        assert_eq!(t.get(b"T").unwrap(), None);
    }
    // Emptying the tree merges inner nodes with shared prefixes and
    // collapses the root through them.
    for i in 0..5000 {
        if i % 50 != 0 {
            t.write(&[Op::Delete(&k(i))]).unwrap();
            m.remove(&k(i));
        }
    }
    check(&t, &m);
    for i in 0..5000 {
        assert_eq!(t.get(&k(i)).unwrap(), m.get(&k(i)).cloned());
    }
}

#[test]
fn snapshot_sees_its_version() {
    let t = tree();
    for i in 0..500u32 {
        t.write(&[Op::Put(&key(i, false), b"old")]).unwrap();
    }
    let snap = t.snapshot().unwrap();
    for i in 0..500u32 {
        if i % 3 == 0 {
            t.write(&[Op::Delete(&key(i, false))]).unwrap();
        } else {
            t.write(&[Op::Put(&key(i, false), b"new")]).unwrap();
        }
    }
    for i in 0..500u32 {
        assert_eq!(snap.get(&key(i, false)).unwrap().as_deref(), Some(&b"old"[..]));
    }
    assert_eq!(snap.scan(Bound::Unbounded, Bound::Unbounded, false).count(), 500);
    drop(snap);
    let c = t.check().unwrap();
    assert!(c.is_ok(), "{:?}", c.violations);
}

#[derive(Clone, Debug)]
enum TOp {
    Put(u16, u8),
    Del(u16),
}

fn op() -> impl Strategy<Value = TOp> {
    prop_oneof![3 => (0u16..400, any::<u8>()).prop_map(|(k, v)| TOp::Put(k, v)), 2 => (0u16..400).prop_map(TOp::Del)]
}

/// A generated batch as keys and values (`None`: a delete).
type Pairs = Vec<(Vec<u8>, Option<Vec<u8>>)>;

fn pairs(b: &[TOp], wide: bool) -> Pairs {
    b.iter()
        .map(|o| match o {
            TOp::Put(k, v) => (key(*k as u32, wide), Some(vec![*v; (*v as usize) % 40 + 1])),
            TOp::Del(k) => (key(*k as u32, wide), None),
        })
        .collect()
}

fn ops_of(pairs: &Pairs) -> Vec<Op<'_>> {
    pairs
        .iter()
        .map(|(k, v)| match v {
            Some(v) => Op::Put(k, v),
            None => Op::Delete(k),
        })
        .collect()
}

/// Applies a batch the tree committed to the model, checking the tree's
/// report of which keys existed before each op.
fn apply(m: &mut Model, pairs: Pairs, existed: &[bool]) -> Result<(), TestCaseError> {
    for (i, (k, v)) in pairs.into_iter().enumerate() {
        prop_assert_eq!(existed[i], m.contains_key(&k), "op {}", i);
        match v {
            Some(v) => m.insert(k, v),
            None => m.remove(&k),
        };
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]
    #[test]
    fn batches_match_the_model(batches in prop::collection::vec(prop::collection::vec(op(), 1..40), 1..60), wide in any::<bool>()) {
        let t = tree();
        let mut m = Model::new();
        for b in &batches {
            let owned = pairs(b, wide);
            let ops = ops_of(&owned);
            // A hint for the next batch's keys (present, absent, empty):
            // it must change nothing, as `check` and the model below tell.
            t.prefetch_keys(owned.iter().map(|(k, _)| k.as_slice()).chain([&b""[..], &[0xFF; 70][..]]));
            let out = t.write(&ops).unwrap();
            apply(&mut m, owned, &out.existed)?;
        }
        check(&t, &m);
        let lo = key(100, wide);
        let hi = key(300, wide);
        let got: Vec<_> = t.scan(Bound::Included(lo.clone()), Bound::Excluded(hi.clone()), true).unwrap().map(|r| r.unwrap().0).collect();
        let want: Vec<_> = m.range(lo..hi).rev().map(|(k, _)| k.clone()).collect();
        prop_assert_eq!(got, want);
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]
    /// Batches whose keys ascend (as a server's sorted group commit, a
    /// collection's neighbouring sub-keys or a copy's pairs come): each
    /// descent after the first may start on the previous one's path, and
    /// batches large enough to split and merge leaves and inner nodes in
    /// their middle make sure a reshaped path is never reused. Repeated
    /// keys (a put then a delete of one key) and descending stretches
    /// (`shuffle`) are in the mix too.
    #[test]
    fn ascending_batches_match_the_model(
        batches in prop::collection::vec(prop::collection::vec(op(), 1..300), 1..25),
        wide in any::<bool>(),
        shuffle in 0usize..4,
    ) {
        let t = tree();
        let mut m = Model::new();
        for (bi, b) in batches.iter().enumerate() {
            let mut owned = pairs(b, wide);
            // Stable: a key's ops keep their order.
            owned.sort_by(|a, b| a.0.cmp(&b.0));
            if shuffle > 0 && bi % shuffle == 0 {
                let len = owned.len();
                owned[len / 2..].reverse();
            }
            let ops = ops_of(&owned);
            let out = t.write(&ops).unwrap();
            apply(&mut m, owned, &out.existed)?;
            for k in (0..400u32).step_by(7) {
                let k = key(k, wide);
                prop_assert_eq!(t.get(&k).unwrap(), m.get(&k).cloned());
                prop_assert_eq!(t.contains(&k).unwrap(), m.contains_key(&k));
            }
        }
        check(&t, &m);
    }
}

/// The deterministic half of the test above: sorted batches into a tree
/// three levels deep start most descents below the root, and what they
/// write is what a descent from the root writes.
#[test]
fn sorted_batches_start_descents_on_the_previous_path() {
    let t = tree();
    let mut m = Model::new();
    let keys: Vec<Vec<u8>> = (0..6000u32).map(|i| key(i * 2, true)).collect();
    for chunk in keys.chunks(500) {
        let ops: Vec<Op<'_>> = chunk.iter().map(|k| Op::Put(k, &k[..9])).collect();
        t.write(&ops).unwrap();
        m.extend(chunk.iter().map(|k| (k.clone(), k[..9].to_vec())));
    }
    assert!(t.stats().unwrap().height >= 3);
    let before = t.finger_descents();
    // Every other old key deleted, a new key between each pair put: one
    // batch, ascending, splitting and merging leaves as it goes.
    let mut owned: Vec<(Vec<u8>, bool)> = Vec::new();
    for i in 0..6000u32 {
        if i % 2 == 0 {
            owned.push((key(i * 2, true), false));
        }
        owned.push((key(i * 2 + 1, true), true));
    }
    let ops: Vec<Op<'_>> =
        owned.iter().map(|(k, put)| if *put { Op::Put(k, &k[..5]) } else { Op::Delete(k) }).collect();
    let out = t.write(&ops).unwrap();
    for (i, (k, put)) in owned.into_iter().enumerate() {
        assert_eq!(out.existed[i], !put);
        if put {
            m.insert(k.clone(), k[..5].to_vec());
        } else {
            m.remove(&k);
        }
    }
    let started_below = t.finger_descents() - before;
    assert!(started_below > 8000, "{started_below} of 9000 descents started below the root");
    check(&t, &m);
}

/// Keys in groups that share 12 bytes and differ in the 13th: entries of
/// one group tie on their 8-byte prefix words wherever a node's shared
/// prefix is shorter than 5 bytes, so deletes and overwrites take every
/// path of the leaf's lookup: a sole tie that is the key (ended before its
/// record is read), a sole tie that is another key (the end is taken back,
/// the key is absent, and a put's new entry goes before or after it), and
/// several ties.
fn tied_key(group: u8, member: u8) -> Vec<u8> {
    let mut k = vec![b'g', group / 16, group % 16, 0];
    k.extend_from_slice(b"--------");
    k.push(member);
    k
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 32, ..ProptestConfig::default() })]
    #[test]
    fn writes_of_keys_sharing_prefix_words_match_the_model(
        batches in prop::collection::vec(
            prop::collection::vec((any::<bool>(), 0u8..40, 0u8..4), 1..12), 1..120),
    ) {
        let t = tree();
        let mut m = Model::new();
        for b in &batches {
            let owned: Vec<(Vec<u8>, bool)> = b.iter().map(|&(put, g, i)| (tied_key(g, i), put)).collect();
            let ops: Vec<Op<'_>> = owned.iter().map(|(k, put)| if *put { Op::Put(k, k) } else { Op::Delete(k) }).collect();
            let out = t.write(&ops).unwrap();
            for (i, (k, put)) in owned.into_iter().enumerate() {
                prop_assert_eq!(out.existed[i], m.contains_key(&k), "op {} of {:?}", i, b);
                if put {
                    m.insert(k.clone(), k);
                } else {
                    m.remove(&k);
                }
            }
            for g in 0..40u8 {
                for i in 0..4u8 {
                    let k = tied_key(g, i);
                    prop_assert_eq!(t.get(&k).unwrap(), m.get(&k).cloned());
                    prop_assert_eq!(t.contains(&k).unwrap(), m.contains_key(&k));
                }
            }
        }
        check(&t, &m);
    }
}

/// Long update/delete churn over a fixed key space: the space the tree owns
/// must stay proportional to the live data (dead-slot reuse, subtree
/// retirement and root collapse keep up), not grow with the number of ops.
#[test]
fn space_stays_bounded_under_churn() {
    let t = tree();
    let mut x = 12345u64;
    let mut next = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    let mut peak_ratio = 0f64;
    for round in 0..10 {
        for _ in 0..10_000 {
            let k = key((next() % 2000) as u32, true);
            if next() % 3 == 0 {
                t.write(&[Op::Delete(&k)]).unwrap();
            } else {
                t.write(&[Op::Put(&k, &[round as u8; 48])]).unwrap();
            }
        }
        let s = t.stats().unwrap();
        let ratio = s.owned_bytes as f64 / s.data_bytes.max(1) as f64;
        eprintln!(
            "churn round {round}: {} keys, {} nodes ({} live), {} live / {} dead entries, owned {} B for {} B of data ({ratio:.1}x)",
            s.keys, s.nodes, s.live_nodes, s.live_entries, s.dead_entries, s.owned_bytes, s.data_bytes
        );
        if round >= 2 {
            peak_ratio = peak_ratio.max(ratio);
        }
    }
    assert!(peak_ratio < 20.0, "owned/data ratio {peak_ratio:.1} keeps growing under churn");
    let c = t.check().unwrap();
    assert!(c.is_ok(), "{:?}", c.violations);
}

/// A pool of an older tree layout (2: no prefixes; 3: leaf prefixes only;
/// 4: nodes persisted whole, without birth words) opens with its contents
/// and is upgraded to layout 5, so that a build that would misread inner
/// prefixes or salted slots refuses it; an unknown layout is refused with
/// an error that says what to do.
#[test]
fn older_layouts_upgrade_and_unknown_ones_are_refused() {
    for old in [2u64, 3, 4] {
        let t = tree();
        let mut m = Model::new();
        for i in 0..2000u32 {
            t.write(&[Op::Put(&key(i, true), b"v")]).unwrap();
            m.insert(key(i, true), b"v".to_vec());
        }
        let pool = t.pool().clone();
        drop(t);
        let meta = pool.root(tembo_cdds::ROOT_NAME).unwrap();
        pool.store_u64(meta + 8, old).unwrap();
        let t = Tree::open(pool.clone(), Limits::default()).unwrap();
        assert_eq!(pool.load_u64(meta + 8).unwrap(), 5, "layout {old} is recorded as 5 once opened");
        check(&t, &m);
        drop(t);
        pool.store_u64(meta + 8, 6).unwrap();
        let Err(err) = Tree::open(pool.clone(), Limits::default()) else { panic!("layout 6 must be refused") };
        let err = err.to_string();
        assert!(err.contains("tree layout 6") && err.contains("copy the data out"), "{err}");
    }
}
