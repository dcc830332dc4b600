//! Readers see a commit only once it is durable.
//!
//! A commit stores the commit word and then persists it; on a disk (msync
//! mode) the persist is an msync that takes a millisecond, and a reader
//! that pinned the new version in between could answer with data that a
//! power failure then takes away. Readers pin a DRAM copy of the version
//! that is stored only after the persist (`TreeCore::commit_version`).
//!
//! The check runs a reader at every fence of a write, on the crash
//! simulator (whose fence hook runs just before each fence completes):
//! whatever the write has stored so far, the reader must still see the
//! state before it, and the state after it as soon as the write returns.

use std::ops::Bound;
use std::sync::{Arc, Mutex};

use tembo_cdds::{Limits, Op, Tree};
use tembo_pmem::{Pool, PoolOptions};

fn opts() -> PoolOptions {
    PoolOptions { size: 4 << 20, max_size: Some(16 << 20), ..PoolOptions::default() }
}

/// What a reader sees: each key's point read, and a full scan.
type Seen = (Vec<Option<Vec<u8>>>, Vec<(Vec<u8>, Vec<u8>)>);

/// What a reader sees of `keys`: point reads and one scan.
fn observe(tree: &Tree, keys: &[Vec<u8>]) -> Seen {
    let gets = keys.iter().map(|k| tree.get(k).expect("get")).collect();
    let scan =
        tree.scan(Bound::Unbounded, Bound::Unbounded, false).expect("scan").map(|r| r.expect("scan item")).collect();
    (gets, scan)
}

#[test]
fn a_reader_at_any_fence_of_a_write_sees_the_state_before_it() {
    let pool = Arc::new(Pool::simulated(&opts()).expect("pool"));
    let tree = Arc::new(Tree::create(pool.clone(), Limits::default()).expect("tree"));
    let keys: Vec<Vec<u8>> = (0..200u32).map(|i| format!("key{i:05}").into_bytes()).collect();
    for (i, k) in keys.iter().enumerate() {
        tree.write(&[Op::Put(k, format!("old{i}").as_bytes())]).expect("put");
    }
    // Each write below: one put, a batch of puts that splits leaves, and a
    // batch of deletes that merges them.
    let fresh: Vec<Vec<u8>> = (0..120u32).map(|i| format!("key{i:05}x").into_bytes()).collect();
    let writes: Vec<Vec<Op<'_>>> = vec![
        vec![Op::Put(&keys[7], b"new7")],
        fresh.iter().map(|k| Op::Put(k, b"fresh")).collect(),
        keys[..150].iter().map(|k| Op::Delete(k)).collect(),
    ];
    let mut all_keys = keys.clone();
    all_keys.extend(fresh.iter().cloned());
    let sim = pool.simulator().expect("simulated");
    for (w, ops) in writes.iter().enumerate() {
        let before = observe(&tree, &all_keys);
        let seen: Arc<Mutex<Vec<u64>>> = Arc::default();
        let stale: Arc<Mutex<Vec<u64>>> = Arc::default();
        let (t, k, b, s, st) = (Arc::downgrade(&tree), all_keys.clone(), before.clone(), seen.clone(), stale.clone());
        sim.set_fence_hook(Some(Box::new(move |ev| {
            let Some(tree) = t.upgrade() else { return };
            s.lock().unwrap().push(ev.fence_index);
            if observe(&tree, &k) != b {
                st.lock().unwrap().push(ev.fence_index);
            }
        })));
        tree.write(ops).expect("write");
        sim.set_fence_hook(None);
        let seen = seen.lock().unwrap().clone();
        assert!(seen.len() >= 2, "write {w}: the reader ran at {} fences only", seen.len());
        assert!(
            stale.lock().unwrap().is_empty(),
            "write {w}: a reader saw the write before its commit was durable, at fences {:?} of {:?}",
            stale.lock().unwrap(),
            seen
        );
        let after = observe(&tree, &all_keys);
        assert_ne!(after, before, "write {w} changed nothing a reader sees");
    }
    assert_eq!(tree.get(&keys[7]).expect("get"), None, "deleted in the last write");
    assert_eq!(tree.get(&fresh[3]).expect("get").as_deref(), Some(&b"fresh"[..]));
    tree.check().expect("check");
}
