//! The in-place B+tree against a BTreeMap model, in all three modes:
//! random puts (small and large values, in-place and reallocating
//! updates), deletes (enough to borrow, merge and shrink the root),
//! batches, forward and reverse range scans, `check` after every step
//! group, and close + reopen.

use std::collections::BTreeMap;
use std::ops::Bound;
use std::sync::Arc;

use proptest::prelude::*;
use tembo_kamino::tree::{Tree, TreeLimits, TreeOp};
use tembo_kamino::{Coordinator, HeapOptions, TxMode};
use tembo_pmem::{Pool, PoolOptions};

const LIMITS: TreeLimits = TreeLimits { max_key: 1 << 16, max_value: 1 << 20 };

fn opts(mode: TxMode, coordinator: Coordinator) -> HeapOptions {
    HeapOptions { mode, alpha: 0.3, coordinator, ..HeapOptions::default() }
}

#[derive(Clone, Debug)]
enum Step {
    Put(u16, usize),
    Delete(u16),
    Batch(Vec<(u16, Option<usize>)>),
    Scan(u16, u16, bool),
}

fn key(k: u16) -> Vec<u8> {
    // Shared 8-byte prefixes on purpose, so full-key comparisons run.
    format!("key-pref{:05}", k).into_bytes()
}

fn value(k: u16, n: usize) -> Vec<u8> {
    (0..n).map(|i| (k as usize + i) as u8).collect()
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        5 => (0u16..600, prop_oneof![Just(0usize), 1usize..40, 200usize..1200]).prop_map(|(k, n)| Step::Put(k, n)),
        4 => (0u16..600).prop_map(Step::Delete),
        1 => proptest::collection::vec((0u16..600, proptest::option::of(0usize..300)), 1..12).prop_map(Step::Batch),
        1 => (0u16..600, 0u16..600, any::<bool>()).prop_map(|(a, b, r)| Step::Scan(a.min(b), a.max(b), r)),
    ]
}

fn scan_all(t: &Tree, lo: Bound<Vec<u8>>, hi: Bound<Vec<u8>>, rev: bool) -> Vec<(Vec<u8>, Vec<u8>)> {
    let mut out = Vec::new();
    let (mut lo, mut hi) = (lo, hi);
    loop {
        let chunk = t.scan_chunk(lo.as_ref().map(|v| &v[..]), hi.as_ref().map(|v| &v[..]), rev).unwrap();
        let Some(last) = chunk.last() else { break };
        if rev {
            hi = Bound::Excluded(last.0.clone());
        } else {
            lo = Bound::Excluded(last.0.clone());
        }
        out.extend(chunk);
    }
    out
}

fn run(mode: TxMode, steps: &[Step]) {
    let dir = tempfile_dir();
    let path = dir.join("t.pool");
    let popts = PoolOptions::with_size(32 << 20);
    let pool = Arc::new(Pool::create(&path, &popts).unwrap());
    let mut t = Tree::create(pool, &opts(mode, Coordinator::Background), LIMITS).unwrap();
    let mut model: BTreeMap<Vec<u8>, Vec<u8>> = BTreeMap::new();
    for (n, s) in steps.iter().enumerate() {
        match s {
            Step::Put(k, len) => {
                let existed = t.put(&key(*k), &value(*k, *len)).unwrap();
                assert_eq!(existed, model.insert(key(*k), value(*k, *len)).is_some());
            }
            Step::Delete(k) => {
                assert_eq!(t.delete(&key(*k)).unwrap(), model.remove(&key(*k)).is_some());
            }
            Step::Batch(ops) => {
                let owned: Vec<(Vec<u8>, Option<Vec<u8>>)> =
                    ops.iter().map(|(k, v)| (key(*k), v.map(|n| value(*k, n)))).collect();
                let tops: Vec<TreeOp<'_>> = owned
                    .iter()
                    .map(|(k, v)| match v {
                        Some(v) => TreeOp::Put(k, v),
                        None => TreeOp::Delete(k),
                    })
                    .collect();
                let existed = t.write(&tops).unwrap();
                for ((k, v), e) in owned.into_iter().zip(existed) {
                    let had = match v {
                        Some(v) => model.insert(k, v).is_some(),
                        None => model.remove(&k).is_some(),
                    };
                    assert_eq!(e, had);
                }
            }
            Step::Scan(a, b, rev) => {
                let (lo, hi) = (Bound::Included(key(*a)), Bound::Excluded(key(*b)));
                let got = scan_all(&t, lo.clone(), hi.clone(), *rev);
                let mut want: Vec<_> = model.range((lo, hi)).map(|(k, v)| (k.clone(), v.clone())).collect();
                if *rev {
                    want.reverse();
                }
                assert_eq!(got, want);
            }
        }
        if n % 50 == 49 || std::env::var_os("KDEBUG").is_some() {
            let v = t.check().unwrap();
            assert!(v.is_empty(), "step {n} {s:?}: {v:?}");
        }
    }
    for (k, v) in &model {
        assert_eq!(t.get(k).unwrap().as_ref(), Some(v));
    }
    assert_eq!(scan_all(&t, Bound::Unbounded, Bound::Unbounded, false).len(), model.len());
    let v = t.check().unwrap();
    assert!(v.is_empty(), "{v:?}");
    let st = t.stats().unwrap();
    assert_eq!(st.keys, model.len() as u64);
    // Close and reopen: everything is there, no recovery ran.
    let pool = Arc::clone(t.pool());
    drop(t);
    let pool = Arc::try_unwrap(pool).expect("sole owner");
    pool.close().unwrap();
    let pool = Arc::new(Pool::open(&path, &popts).unwrap());
    t = Tree::open(pool, &opts(mode, Coordinator::Background), LIMITS).unwrap();
    assert!(!t.recovery().0.ran);
    let all = scan_all(&t, Bound::Unbounded, Bound::Unbounded, true);
    let want: Vec<_> = model.iter().rev().map(|(k, v)| (k.clone(), v.clone())).collect();
    assert_eq!(all, want);
    let v = t.check().unwrap();
    assert!(v.is_empty(), "{v:?}");
    drop(t);
    let _ = std::fs::remove_dir_all(dir);
}

fn tempfile_dir() -> std::path::PathBuf {
    use std::sync::atomic::{AtomicU64, Ordering};
    static N: AtomicU64 = AtomicU64::new(0);
    let d =
        std::env::temp_dir().join(format!("tembo-kamino-{}-{}", std::process::id(), N.fetch_add(1, Ordering::Relaxed)));
    std::fs::create_dir_all(&d).unwrap();
    d
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 12, ..ProptestConfig::default() })]
    #[test]
    fn kamino_matches_model(steps in proptest::collection::vec(step(), 1..700)) {
        run(TxMode::Kamino, &steps);
    }
    #[test]
    fn kamino_dynamic_matches_model(steps in proptest::collection::vec(step(), 1..700)) {
        run(TxMode::KaminoDynamic, &steps);
    }
    #[test]
    fn undo_matches_model(steps in proptest::collection::vec(step(), 1..700)) {
        run(TxMode::Undo, &steps);
    }
}

#[test]
fn sequential_fill_and_drain_all_modes() {
    for mode in [TxMode::Kamino, TxMode::KaminoDynamic, TxMode::Undo] {
        let mut steps: Vec<Step> = (0..600).map(|k| Step::Put(k, 16)).collect();
        steps.extend((0..600).rev().map(|k| Step::Put(k, 100)));
        steps.extend((0..600).map(Step::Delete));
        run(mode, &steps);
    }
}
