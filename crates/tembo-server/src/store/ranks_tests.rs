//! The store's rank queries against a model: committed keys plus pending
//! writes, across commits, discards, block cuts and joins, and an index
//! gone stale behind the store's back.

use std::collections::{BTreeMap, BTreeSet};
use std::ops::Bound;
use std::sync::Arc;

use proptest::prelude::*;
use tembo_store::{Db, Engine, Options, WriteBatch};

use super::Store;

const PREFIX: &[u8] = b"z\x00";
const UNIVERSE: u16 = 6000;

fn key(i: u16) -> Vec<u8> {
    [PREFIX, &i.to_be_bytes()].concat()
}

#[derive(Debug, Clone)]
enum Op {
    Put(u16),
    Delete(u16),
    /// Puts (or deletes) a run of keys: grows or empties blocks at once.
    Run(u16, u16, bool),
    Commit,
    Discard,
    Before(u16, bool),
    Nth(u16),
    /// A key committed behind the store's back (the index goes stale).
    Behind(u16),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => (0..UNIVERSE).prop_map(Op::Put),
        4 => (0..UNIVERSE).prop_map(Op::Delete),
        1 => (0..UNIVERSE, 1..600u16, any::<bool>()).prop_map(|(a, n, put)| Op::Run(a, n, put)),
        3 => Just(Op::Commit),
        1 => Just(Op::Discard),
        4 => (0..UNIVERSE, any::<bool>()).prop_map(|(i, incl)| Op::Before(i, incl)),
        4 => (0..UNIVERSE).prop_map(Op::Nth),
        1 => (0..UNIVERSE).prop_map(Op::Behind),
    ]
}

struct Model {
    committed: BTreeSet<u16>,
    pending: BTreeMap<u16, bool>,
}

impl Model {
    fn view(&self) -> BTreeSet<u16> {
        let mut v = self.committed.clone();
        for (&k, &put) in &self.pending {
            if put {
                v.insert(k);
            } else {
                v.remove(&k);
            }
        }
        v
    }
}

/// Whether the store may leave a query to a walk: a range too small to
/// index, or too many pending writes there.
fn may_decline(size: u64, m: &Model) -> bool {
    size < crate::ranks::MIN_KEYS || m.pending.len() >= super::RANK_PENDING_MAX
}

/// Runs `ops` after committing `initial`; returns how many queries the index answered.
fn run(engine: Engine, initial: Vec<u16>, ops: Vec<Op>) -> Result<usize, TestCaseError> {
    let opts = Options { engine, ..Options::with_size(64 << 20) };
    let db = Arc::new(Db::in_memory(&opts).unwrap());
    // Neighbours on both sides of the range, which no answer may count.
    let mut b = WriteBatch::new();
    for k in [&b"y"[..], b"z\x00", b"z\x01", b"z\x01\x00"] {
        b.put(k.to_vec(), Vec::new());
    }
    let mut m = Model { committed: BTreeSet::new(), pending: BTreeMap::new() };
    for &i in &initial {
        b.put(key(i), Vec::new());
        m.committed.insert(i);
    }
    db.write(&b).unwrap();
    let mut st = Store::new(db.clone()).unwrap();
    // The prefix key itself is an entry of the range.
    let size_extra = 1u64;
    let mut answered = 0;
    let mut went_behind = false;
    for op in ops {
        match op {
            Op::Put(i) => {
                st.put(key(i), Vec::new()).unwrap();
                m.pending.insert(i, true);
            }
            Op::Delete(i) => {
                st.delete(key(i));
                m.pending.insert(i, false);
            }
            Op::Run(a, n, put) => {
                for i in a..a.saturating_add(n).min(UNIVERSE) {
                    if put {
                        st.put(key(i), Vec::new()).unwrap();
                    } else {
                        st.delete(key(i));
                    }
                    m.pending.insert(i, put);
                }
            }
            Op::Commit => {
                st.commit().unwrap();
                m.committed = m.view();
                m.pending.clear();
            }
            Op::Discard => {
                st.discard();
                m.pending.clear();
            }
            Op::Behind(i) => {
                went_behind = true;
                db.put(&key(i), b"").unwrap();
                m.committed.insert(i);
            }
            Op::Before(i, incl) => {
                let view = m.view();
                let size = view.len() as u64 + size_extra;
                let k = key(i);
                let at = if incl { Bound::Included(&k[..]) } else { Bound::Excluded(&k[..]) };
                let want = size_extra + view.iter().filter(|&&j| if incl { j < i } else { j <= i }).count() as u64;
                match st.rank_before(PREFIX, size, at).unwrap() {
                    Some(n) => {
                        prop_assert_eq!(n, want, "before {} (included {})", i, incl);
                        answered += 1;
                    }
                    None => prop_assert!(may_decline(size, &m), "no answer at size {}", size),
                }
            }
            Op::Nth(pos) => {
                let view = m.view();
                let size = view.len() as u64 + size_extra;
                let want = match pos as u64 {
                    0 => Some(PREFIX.to_vec()),
                    p => view.iter().nth(p as usize - 1).map(|&j| key(j)),
                };
                match st.rank_nth(PREFIX, size, pos as u64).unwrap() {
                    Some(got) => {
                        prop_assert_eq!(got, want, "nth {}", pos);
                        answered += 1;
                    }
                    None => prop_assert!(may_decline(size, &m), "no answer at size {}", size),
                }
            }
        }
    }
    // Every index agrees with the pool at the end, once a query has
    // noticed the keys written behind the store's back.
    st.commit().unwrap();
    m.committed = m.view();
    let size = m.committed.len() as u64 + size_extra;
    st.rank_before(PREFIX, size, Bound::Included(&key(0)[..])).unwrap();
    let ranks = st.ranks.get_mut().unwrap();
    // (Below MIN_KEYS no query consults the index, so one gone stale
    // behind the store's back is not yet found out.)
    if let Err(e) = ranks.check(&db) {
        prop_assert!(went_behind && size < crate::ranks::MIN_KEYS, "{}", e);
    }
    prop_assert!(ranks.bytes() < 1 << 20);
    Ok(answered)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    #[test]
    fn rank_queries_match_the_model(
        initial in proptest::collection::vec(0..UNIVERSE, 900..2500),
        ops in proptest::collection::vec(op(), 1..250),
        engine in prop_oneof![Just(Engine::Cdds), Just(Engine::Kamino)],
    ) {
        // The index learns what each commit changed from the engine's
        // report of which keys existed: both kinds of engine report it.
        run(engine, initial, ops)?;
    }
}

#[test]
fn an_index_follows_heavy_churn_and_shrinks_with_its_range() {
    let initial: Vec<u16> = (0..UNIVERSE).collect();
    let mut ops = vec![Op::Nth(3000)];
    // Delete most of the range in runs, querying between commits, then grow it back.
    for a in (0..UNIVERSE).step_by(500) {
        ops.extend([Op::Run(a, 400, false), Op::Before(a + 420, true), Op::Commit, Op::Nth(a / 10)]);
    }
    for a in (0..UNIVERSE).step_by(300) {
        ops.extend([Op::Run(a, 300, true), Op::Commit, Op::Before(a, false), Op::Nth(a)]);
    }
    let queries = ops.iter().filter(|o| matches!(o, Op::Before(..) | Op::Nth(_))).count();
    assert_eq!(run(Engine::Cdds, initial, ops).unwrap(), queries, "every query answered by the index");
}
