//! The crash campaign for the three transaction modes: seeded random
//! workloads on the crash simulator, a crash at every (or a sample of)
//! fence under every crash policy, and an exact oracle. Shared by the test
//! suite and `tembo crashtest --engine kamino|kamino-dynamic|undo`.
//!
//! Two workloads:
//! - **objects**: random multi-object transactions on the heap itself —
//!   stores at random ranges of 1–3 objects, objects replaced (allocate a
//!   new one, relink it, free the old), and transactions that abort after
//!   storing; the coordinator runs at random moments (so crashes find
//!   committed transactions not yet rolled forward, and dependent
//!   transactions copying in the critical path);
//! - **tree**: puts (small and large values, in place and reallocating),
//!   deletes and batches on the in-place B+tree, over uniform, monotonic or
//!   reverse keys, enough to split, borrow, merge and change the root.
//!
//! Each crash state is reopened, recovered (log, then leak sweep) and
//! judged: *inconsistent* if it does not open or recover, or if the heap's,
//! the tree's or the allocator's `check` finds a violation; *lost* if it
//! checks but its contents are neither the model after the acknowledged
//! transactions nor after the one in flight. A sample of states is crashed
//! again during its recovery and must recover to the same answer.

use std::collections::BTreeMap;
use std::ops::Bound;
use std::sync::atomic::{AtomicU64, Ordering as AtomicOrdering};
use std::sync::Arc;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use tembo_pmem::sim::{sweep, CrashPoints, CrashPolicy, CrashState, SweepConfig, SweepReport};
use tembo_pmem::{Marker, OrderingMode, PPtr, PmemError, Pool, PoolOptions};

use crate::tree::{Tree, TreeLimits, TreeOp};
use crate::{Coordinator, Heap, HeapOptions, KaminoError, TxMode};

/// Which workload.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Workload {
    /// Multi-object transactions on the heap.
    Objects,
    /// Key operations on the B+tree with uniform keys.
    TreeUniform,
    /// Ascending keys.
    TreeMonotonic,
    /// Descending keys.
    TreeReverse,
}

impl Workload {
    /// All workloads.
    pub const ALL: [Workload; 4] =
        [Workload::Objects, Workload::TreeUniform, Workload::TreeMonotonic, Workload::TreeReverse];
    /// Lower-case name.
    pub fn name(self) -> &'static str {
        match self {
            Workload::Objects => "objects",
            Workload::TreeUniform => "uniform",
            Workload::TreeMonotonic => "monotonic",
            Workload::TreeReverse => "reverse",
        }
    }
}

/// What to run.
#[derive(Clone, Debug)]
pub struct CampaignConfig {
    /// Transaction mode.
    pub mode: TxMode,
    /// α for `KaminoDynamic`.
    pub alpha: f64,
    /// Workload.
    pub workload: Workload,
    /// Transactions (each acknowledged once).
    pub ops: usize,
    /// Ordering mode of the pool.
    pub ordering: OrderingMode,
    /// Crash points.
    pub points: CrashPoints,
    /// Crash policies.
    pub policies: Vec<CrashPolicy>,
    /// Seed of everything.
    pub seed: u64,
    /// Crash a sample of states again during their recovery (1 in N, 0 = never).
    pub nested_every: u64,
}

/// What a campaign found.
#[derive(Clone, Debug, Default)]
pub struct CampaignReport {
    /// The sweep's counts and first failures.
    pub sweep: SweepReport,
    /// States that did not open, recover or check.
    pub inconsistent: u64,
    /// States that checked but held the wrong contents.
    pub lost: u64,
    /// Crash states checked during nested (crash-in-recovery) sweeps.
    pub nested_states: u64,
    /// Transactions run.
    pub txs: u64,
    /// Cache lines flushed by the workload.
    pub flushes: u64,
    /// Fences issued by the workload.
    pub fences: u64,
}

impl CampaignReport {
    /// States checked, nested ones included.
    pub fn states(&self) -> u64 {
        self.sweep.states_checked + self.nested_states
    }
    /// Violations found.
    pub fn violations(&self) -> u64 {
        self.inconsistent + self.lost
    }
}

/// The pool options campaigns use.
pub fn pool_options(ordering: OrderingMode) -> PoolOptions {
    PoolOptions { size: 1 << 20, max_size: Some(64 << 20), ordering, ..PoolOptions::default() }
}

fn heap_options(cfg: &CampaignConfig) -> HeapOptions {
    HeapOptions {
        mode: cfg.mode,
        alpha: cfg.alpha,
        slots: 8,
        coordinator: Coordinator::Manual,
        ..HeapOptions::default()
    }
}

const LIMITS: TreeLimits = TreeLimits { max_key: 1 << 10, max_value: 1 << 16 };
const OBJECTS: usize = 8;

// ----- the objects workload ------------------------------------------------------

#[derive(Clone, Debug)]
struct ObjTx {
    /// (object slot, offset seed, bytes)
    writes: Vec<(usize, u64, Vec<u8>)>,
    /// Replace this slot's object with a new one of this length and fill.
    replace: Option<(usize, u64, u8)>,
    abort: bool,
    coordinate: usize,
}

type ObjState = Vec<Vec<u8>>;

fn initial_objects(rng: &mut ChaCha8Rng) -> ObjState {
    (0..OBJECTS).map(|_| (0..rng.gen_range(16..400)).map(|_| rng.gen()).collect()).collect()
}

fn gen_obj_txs(rng: &mut ChaCha8Rng, n: usize) -> Vec<ObjTx> {
    (0..n)
        .map(|_| {
            let k = rng.gen_range(1..=3);
            let writes = (0..k)
                .map(|_| {
                    let len = rng.gen_range(1..200);
                    (rng.gen_range(0..OBJECTS), rng.gen(), (0..len).map(|_| rng.gen()).collect())
                })
                .collect();
            let replace = rng.gen_bool(0.15).then(|| (rng.gen_range(0..OBJECTS), rng.gen_range(8..500), rng.gen()));
            ObjTx {
                writes,
                replace,
                abort: rng.gen_bool(0.1),
                coordinate: if rng.gen_bool(0.3) { rng.gen_range(1..3) } else { 0 },
            }
        })
        .collect()
}

/// Applies one transaction to the model (the same clamping as the run).
fn apply_obj(s: &mut ObjState, t: &ObjTx) {
    if t.abort {
        return;
    }
    if let Some((slot, len, fill)) = t.replace {
        s[slot] = vec![fill; len as usize];
    }
    for (slot, seed, bytes) in &t.writes {
        let obj = &mut s[*slot];
        let off = (*seed % obj.len() as u64) as usize;
        let n = bytes.len().min(obj.len() - off);
        obj[off..off + n].copy_from_slice(&bytes[..n]);
    }
}

fn run_obj_tx(heap: &Heap, root: u64, t: &ObjTx) -> Result<(), KaminoError> {
    let r = heap.transaction(|tx| {
        let rootp = PPtr::<()>::new(root);
        if let Some((slot, len, fill)) = t.replace {
            let old = tx.get_u64(rootp, slot as u64 * 8)?;
            let w = tx.alloc::<()>(len)?;
            tx.set(w, 0, &vec![fill; len as usize])?;
            let rw = tx.write(rootp)?;
            tx.set_u64(rw, slot as u64 * 8, w.obj().offset())?;
            tx.free(PPtr::<()>::new(old))?;
        }
        for (slot, seed, bytes) in &t.writes {
            let obj = PPtr::<()>::new(tx.get_u64(rootp, *slot as u64 * 8)?);
            let len = heap.len(obj)?;
            let off = seed % len;
            let n = (bytes.len() as u64).min(len - off);
            let w = tx.write(obj)?;
            tx.set(w, off, &bytes[..n as usize])?;
        }
        if t.abort {
            return Err(KaminoError::Aborted("the workload aborts this one".into()));
        }
        Ok(())
    });
    match r {
        Err(KaminoError::Aborted(_)) if t.abort => Ok(()),
        other => other,
    }
}

fn obj_tracer(root: u64) -> impl Fn(&Pool, &mut Marker<'_>) -> Result<(), PmemError> {
    move |pool: &Pool, m: &mut Marker<'_>| {
        Heap::mark_object(pool, m, root)?;
        for i in 0..OBJECTS as u64 {
            let o = pool.load_u64(root + crate::OBJ_HEADER + i * 8)?;
            Heap::mark_object(pool, m, o)?;
        }
        Ok(())
    }
}

fn judge_objects(heap: &Heap, states: &[ObjState], acked: usize) -> Result<(), String> {
    let root = heap.app_root().map_err(|e| format!("inconsistent: {e}"))?;
    heap.reclaim_leaks(&obj_tracer(root)).map_err(|e| format!("inconsistent: leak sweep: {e}"))?;
    let rootp = PPtr::<()>::new(root);
    let mut objs = vec![root];
    let mut got = Vec::new();
    for i in 0..OBJECTS as u64 {
        let o = heap.get_u64(rootp, i * 8).map_err(|e| format!("inconsistent: {e}"))?;
        objs.push(o);
        let len = heap.len(PPtr::<()>::new(o)).map_err(|e| format!("inconsistent: object {i}: {e}"))?;
        let mut b = vec![0u8; len as usize];
        heap.read(PPtr::<()>::new(o), 0, &mut b).map_err(|e| format!("inconsistent: {e}"))?;
        got.push(b);
    }
    let v = heap.check(&objs).map_err(|e| format!("inconsistent: check: {e}"))?;
    if !v.is_empty() {
        return Err(format!("inconsistent: {v:?}"));
    }
    let a = heap.pool().check();
    if !a.is_ok() {
        return Err(format!("inconsistent: allocator: {:?}", a.violations));
    }
    if states.get(acked) == Some(&got) || states.get(acked + 1) == Some(&got) {
        return Ok(());
    }
    let differ: Vec<usize> = (0..OBJECTS).filter(|&i| states.get(acked).map_or(true, |s| s[i] != got[i])).collect();
    Err(format!("lost: after {acked} acknowledged transactions, objects {differ:?} differ from the model"))
}

// ----- the tree workload ---------------------------------------------------------------

type KvBatch = Vec<(Vec<u8>, Option<Vec<u8>>)>;

fn gen_tree_ops(w: Workload, rng: &mut ChaCha8Rng, n: usize) -> Vec<KvBatch> {
    let mut next = 0u32;
    let mut live: Vec<Vec<u8>> = Vec::new();
    let mut key = |rng: &mut ChaCha8Rng| -> Vec<u8> {
        match w {
            Workload::TreeMonotonic => {
                next += 1;
                format!("k{next:07}").into_bytes()
            }
            Workload::TreeReverse => {
                next += 1;
                format!("k{:07}", 9_999_999 - next).into_bytes()
            }
            _ => format!("k{:07}", rng.gen_range(0..400)).into_bytes(),
        }
    };
    (0..n)
        .map(|_| {
            let k = if rng.gen_bool(0.7) { 1 } else { rng.gen_range(2..4) };
            (0..k)
                .map(|_| {
                    if !live.is_empty() && rng.gen_bool(0.3) {
                        let i = rng.gen_range(0..live.len());
                        let k = live.swap_remove(i);
                        if rng.gen_bool(0.6) {
                            return (k, None);
                        }
                        let v = value(rng);
                        live.push(k.clone());
                        return (k, Some(v));
                    }
                    let k = key(rng);
                    live.push(k.clone());
                    (k, Some(value(rng)))
                })
                .collect()
        })
        .collect()
}

fn value(rng: &mut ChaCha8Rng) -> Vec<u8> {
    let n = if rng.gen_bool(0.2) { rng.gen_range(200..1200) } else { rng.gen_range(0..40) };
    (0..n).map(|_| rng.gen()).collect()
}

fn judge_tree(tree: &Tree, states: &[BTreeMap<Vec<u8>, Vec<u8>>], acked: usize) -> Result<(), String> {
    let v = tree.check().map_err(|e| format!("inconsistent: check: {e}"))?;
    if !v.is_empty() {
        return Err(format!("inconsistent: {v:?}"));
    }
    let a = tree.pool().check();
    if !a.is_ok() {
        return Err(format!("inconsistent: allocator: {:?}", a.violations));
    }
    let mut got = BTreeMap::new();
    let mut lo: Bound<Vec<u8>> = Bound::Unbounded;
    loop {
        let chunk = tree
            .scan_chunk(lo.as_ref().map(|v| &v[..]), Bound::Unbounded, false)
            .map_err(|e| format!("inconsistent: scan: {e}"))?;
        let Some(last) = chunk.last() else { break };
        lo = Bound::Excluded(last.0.clone());
        got.extend(chunk);
    }
    if states.get(acked) == Some(&got) || states.get(acked + 1) == Some(&got) {
        return Ok(());
    }
    Err(format!(
        "lost: after {acked} acknowledged transactions: {} keys, the model {}",
        got.len(),
        states.get(acked).map_or(0, |s| s.len())
    ))
}

// ----- the sweep -----------------------------------------------------------------------

enum Prepared {
    Objects { txs: Vec<ObjTx>, states: Arc<Vec<ObjState>>, init: ObjState },
    Tree { batches: Vec<KvBatch>, states: Arc<Vec<BTreeMap<Vec<u8>, Vec<u8>>>> },
}

fn reopen_and_judge(image: &[u8], cfg: &CampaignConfig, prepared: &Prepared, acked: usize) -> Result<(), String> {
    let pool = Arc::new(
        Pool::from_image(image, &pool_options(cfg.ordering)).map_err(|e| format!("inconsistent: reopen: {e}"))?,
    );
    judge_pool(pool, cfg, prepared, acked)
}

fn judge_pool(pool: Arc<Pool>, cfg: &CampaignConfig, prepared: &Prepared, acked: usize) -> Result<(), String> {
    match prepared {
        Prepared::Objects { states, .. } => {
            let heap = Heap::open(pool, &heap_options(cfg)).map_err(|e| format!("inconsistent: recovery: {e}"))?;
            judge_objects(&heap, states, acked)
        }
        Prepared::Tree { states, .. } => {
            let tree =
                Tree::open(pool, &heap_options(cfg), LIMITS).map_err(|e| format!("inconsistent: recovery: {e}"))?;
            judge_tree(&tree, states, acked)
        }
    }
}

/// Runs one campaign.
pub fn run(cfg: &CampaignConfig) -> CampaignReport {
    let mut rng = ChaCha8Rng::seed_from_u64(cfg.seed);
    let prepared = Arc::new(match cfg.workload {
        Workload::Objects => {
            let init = initial_objects(&mut rng);
            let txs = gen_obj_txs(&mut rng, cfg.ops);
            let mut s = init.clone();
            let mut states = vec![s.clone()];
            for t in &txs {
                apply_obj(&mut s, t);
                states.push(s.clone());
            }
            Prepared::Objects { txs, states: Arc::new(states), init }
        }
        w => {
            let batches = gen_tree_ops(w, &mut rng, cfg.ops);
            let mut m = BTreeMap::new();
            let mut states = vec![m.clone()];
            for b in &batches {
                for (k, v) in b {
                    match v {
                        Some(v) => m.insert(k.clone(), v.clone()),
                        None => m.remove(k),
                    };
                }
                states.push(m.clone());
            }
            Prepared::Tree { batches, states: Arc::new(states) }
        }
    });
    let pool = Arc::new(Pool::simulated(&pool_options(cfg.ordering)).expect("a simulated pool"));
    // Set up before the sweep: the initial state is not under test.
    enum Target {
        Heap(Heap, u64),
        Tree(Tree),
    }
    let target = match &*prepared {
        Prepared::Objects { init, .. } => {
            let heap = Heap::create(pool.clone(), &heap_options(cfg)).expect("a heap on a fresh pool");
            let root = heap
                .transaction(|tx| {
                    let r = tx.alloc::<()>(OBJECTS as u64 * 8)?;
                    for (i, content) in init.iter().enumerate() {
                        let o = tx.alloc::<()>(content.len() as u64)?;
                        tx.set(o, 0, content)?;
                        tx.set_u64(r, i as u64 * 8, o.obj().offset())?;
                    }
                    Ok(r.obj().offset())
                })
                .expect("setup");
            heap.set_app_root(root).expect("setup");
            heap.coordinate(usize::MAX).expect("setup");
            Target::Heap(heap, root)
        }
        Prepared::Tree { .. } => Target::Tree(Tree::create(pool.clone(), &heap_options(cfg), LIMITS).expect("a tree")),
    };
    pool.reset_write_stats();
    let inconsistent = Arc::new(AtomicU64::new(0));
    let lost = Arc::new(AtomicU64::new(0));
    let nested = Arc::new(AtomicU64::new(0));
    let sweep_cfg = SweepConfig {
        points: cfg.points,
        policies: cfg.policies.clone(),
        seed: cfg.seed,
        include_end: true,
        max_failures_kept: 10,
    };
    let checker = {
        let (prepared, inconsistent, lost, nested, cfg) =
            (prepared.clone(), inconsistent.clone(), lost.clone(), nested.clone(), cfg.clone());
        move |st: &CrashState| -> Result<(), String> {
            let acked = st.acknowledged as usize;
            let verdict = (|| {
                reopen_and_judge(&st.image, &cfg, &prepared, acked)?;
                if cfg.nested_every > 0 && st.seed % cfg.nested_every == 0 {
                    // Crash again at every fence of this state's recovery.
                    let inner =
                        Arc::new(Pool::from_image(&st.image, &pool_options(cfg.ordering)).map_err(|e| e.to_string())?);
                    let (cfg2, prep2, cfg3, prep3) = (cfg.clone(), prepared.clone(), cfg.clone(), prepared.clone());
                    let rep = sweep(
                        &SweepConfig {
                            policies: vec![CrashPolicy::RandomLines, CrashPolicy::None],
                            ..SweepConfig::exhaustive(st.seed)
                        },
                        &inner.clone(),
                        move |_, _| judge_pool(inner, &cfg2, &prep2, acked),
                        move |st2: &CrashState| reopen_and_judge(&st2.image, &cfg3, &prep3, acked),
                    );
                    nested.fetch_add(rep.states_checked, AtomicOrdering::Relaxed);
                    if !rep.is_ok() {
                        return Err(format!("inconsistent: crash during recovery: {}", rep.failures.join("; ")));
                    }
                }
                Ok(())
            })();
            if let Err(msg) = &verdict {
                let counter = if msg.starts_with("lost") { &lost } else { &inconsistent };
                counter.fetch_add(1, AtomicOrdering::Relaxed);
            }
            verdict
        }
    };
    let report = sweep(
        &sweep_cfg,
        &pool.clone(),
        |_, acks| {
            match (&target, &*prepared) {
                (Target::Heap(heap, root), Prepared::Objects { txs, .. }) => {
                    for t in txs {
                        run_obj_tx(heap, *root, t).map_err(|e| e.to_string())?;
                        acks.ack();
                        if t.coordinate > 0 {
                            heap.coordinate(t.coordinate).map_err(|e| e.to_string())?;
                        }
                    }
                }
                (Target::Tree(tree), Prepared::Tree { batches, .. }) => {
                    for (i, b) in batches.iter().enumerate() {
                        if b.len() == 1 {
                            match &b[0] {
                                (k, Some(v)) => tree.put(k, v).map(|_| ()),
                                (k, None) => tree.delete(k).map(|_| ()),
                            }
                        } else {
                            let ops: Vec<TreeOp<'_>> = b
                                .iter()
                                .map(|(k, v)| match v {
                                    Some(v) => TreeOp::Put(k, v),
                                    None => TreeOp::Delete(k),
                                })
                                .collect();
                            tree.write(&ops).map(|_| ())
                        }
                        .map_err(|e| e.to_string())?;
                        acks.ack();
                        if i % 3 == 0 {
                            tree.heap().coordinate(2).map_err(|e| e.to_string())?;
                        }
                    }
                }
                _ => unreachable!("target and workload are made together"),
            }
            Ok(())
        },
        checker,
    );
    let ws = pool.write_stats();
    drop(target);
    CampaignReport {
        sweep: report,
        inconsistent: inconsistent.load(AtomicOrdering::Relaxed),
        lost: lost.load(AtomicOrdering::Relaxed),
        nested_states: nested.load(AtomicOrdering::Relaxed),
        txs: cfg.ops as u64,
        flushes: ws.flush_count,
        fences: ws.fence_count,
    }
}
