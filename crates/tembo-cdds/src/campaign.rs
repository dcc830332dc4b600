//! The crash campaign: seeded random workloads on the crash simulator, a
//! crash at every (or a sample of) fence under every crash policy, and an
//! exact oracle. Shared by the test suite and `tembo crashtest`.
//!
//! Workloads mix puts (small and large values), overwrites, deletes,
//! multi-op batches and incremental GC steps over uniform, monotonic or
//! reverse keys, with
//! in-memory snapshots held and released (so dead-slot reuse must honour
//! them) and named snapshots created and dropped. Each crash state is
//! reopened, recovered and judged:
//! - *inconsistent*: the pool does not open, recovery fails, or `check`
//!   finds a violated invariant;
//! - *lost*: it checks, but the contents (or the named snapshots, or their
//!   contents) are neither the model after the acknowledged operations nor
//!   after the one in flight.
//!
//! Optionally a sample of states is crashed again *during recovery*
//! (nested sweep) and must recover to the same answer.

use std::collections::{BTreeMap, VecDeque};
use std::ops::Bound;
use std::sync::atomic::{AtomicU64, Ordering as AtomicOrdering};
use std::sync::Arc;

use parking_lot::Mutex;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use tembo_pmem::sim::{sweep, CrashPoints, CrashPolicy, CrashState, SweepConfig, SweepReport};
use tembo_pmem::{OrderingMode, Pool, PoolOptions};

use crate::{Limits, Op, Tree};

/// Key order of a workload.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KeyOrder {
    /// Keys drawn uniformly from the key space.
    Uniform,
    /// Each new key above all earlier ones.
    Monotonic,
    /// Each new key below all earlier ones.
    Reverse,
    /// Uniform keys in groups of four that share their first 17 bytes, so
    /// that entries tie on their 8-byte prefix words: lookups confirm keys
    /// in records, and deletes and overwrites of a key whose only tie is
    /// another key take back the end they stored first (`write`).
    Tied,
}

impl KeyOrder {
    /// The three orders of the ordering study (`Tied` is asked for by name).
    pub const ALL: [KeyOrder; 3] = [KeyOrder::Uniform, KeyOrder::Monotonic, KeyOrder::Reverse];
    /// Lower-case name.
    pub fn name(self) -> &'static str {
        match self {
            KeyOrder::Uniform => "uniform",
            KeyOrder::Monotonic => "monotonic",
            KeyOrder::Reverse => "reverse",
            KeyOrder::Tied => "tied",
        }
    }
}

/// What to run.
#[derive(Clone, Debug)]
pub struct CampaignConfig {
    /// Workload operations (each acknowledged once).
    pub ops: usize,
    /// Key order.
    pub order: KeyOrder,
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
    /// Key-changing operations run (puts and deletes, batch members counted).
    pub key_ops: u64,
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

/// Puts (`Some`) and deletes (`None`) committed together.
type KvBatch = Vec<(Vec<u8>, Option<Vec<u8>>)>;

#[derive(Clone, Debug)]
enum WOp {
    Batch(KvBatch),
    Pin,
    Unpin,
    Name(String),
    Unname(String),
    /// One incremental GC step visiting at most this many nodes.
    Gc(usize),
}

/// The model's contents at one state, shared between the states that ask for it.
type Contents = Arc<BTreeMap<Vec<u8>, Vec<u8>>>;

#[derive(Clone, Debug, Default)]
struct ModelState {
    kv: Contents,
    /// Named snapshots: name → index of the kv state they keep.
    named: BTreeMap<String, usize>,
}

/// Ops between two full copies of the model's contents: a state in
/// between is rebuilt by replaying at most this many ops, so a 100,000-op
/// workload keeps ~50 copies instead of one per op.
const CHECKPOINT_EVERY: usize = 2048;

/// Model states kept after they were built: a sweep asks for the same
/// few states (the acknowledged one and the next, at every fence and
/// policy of an op, plus the named snapshots' states) many times in a row.
const RECENT_STATES: usize = 8;

/// The model after each op (state `i` = after the first `i` ops), kept as
/// checkpoints plus the ops.
struct Model {
    ops: Vec<WOp>,
    checkpoints: Vec<Contents>,
    /// The named snapshots after each op (a few names each).
    named: Vec<BTreeMap<String, usize>>,
    /// The states built most recently, newest last.
    recent: Mutex<VecDeque<(usize, Contents)>>,
}

impl Model {
    fn new(ops: &[WOp]) -> Model {
        let mut kv = BTreeMap::new();
        let mut named = vec![BTreeMap::new()];
        let mut checkpoints = vec![Arc::new(kv.clone())];
        for (i, op) in ops.iter().enumerate() {
            apply(&mut kv, op);
            let mut n = named.last().cloned().unwrap_or_default();
            match op {
                WOp::Name(s) => {
                    n.insert(s.clone(), i);
                }
                WOp::Unname(s) => {
                    n.remove(s);
                }
                _ => {}
            }
            named.push(n);
            if (i + 1) % CHECKPOINT_EVERY == 0 {
                checkpoints.push(Arc::new(kv.clone()));
            }
        }
        Model { ops: ops.to_vec(), checkpoints, named, recent: Mutex::new(VecDeque::new()) }
    }

    /// Number of states (ops + 1).
    fn len(&self) -> usize {
        self.named.len()
    }

    fn state(&self, i: usize) -> ModelState {
        ModelState { kv: self.contents_after(i), named: self.named[i].clone() }
    }

    /// The contents after `i` ops: a recent state if one is `i`, else the
    /// nearest recent state or checkpoint before it with the ops between
    /// replayed (a 1,000-op workload used to replay up to 1,000 ops for
    /// each of its ~7,000 crash states).
    fn contents_after(&self, i: usize) -> Contents {
        let c = i / CHECKPOINT_EVERY;
        let mut recent = self.recent.lock();
        let mut from = (c * CHECKPOINT_EVERY, &self.checkpoints[c]);
        for (j, kv) in recent.iter() {
            if *j == i {
                return kv.clone();
            }
            if *j < i && *j > from.0 {
                from = (*j, kv);
            }
        }
        let mut kv = (**from.1).clone();
        for op in &self.ops[from.0..i] {
            apply(&mut kv, op);
        }
        let kv = Arc::new(kv);
        if recent.len() == RECENT_STATES {
            recent.pop_front();
        }
        recent.push_back((i, kv.clone()));
        kv
    }
}

fn apply(kv: &mut BTreeMap<Vec<u8>, Vec<u8>>, op: &WOp) {
    if let WOp::Batch(b) = op {
        for (k, v) in b {
            match v {
                Some(v) => kv.insert(k.clone(), v.clone()),
                None => kv.remove(k),
            };
        }
    }
}

/// Key `n` of a workload (order-preserving in `n` for every order).
fn key_of(n: u64, order: KeyOrder) -> Vec<u8> {
    match order {
        KeyOrder::Tied => format!("k{:09}-------{}", n / 4, n % 4).into_bytes(),
        _ => format!("k{n:010}").into_bytes(),
    }
}

fn generate(cfg: &CampaignConfig) -> Vec<WOp> {
    let mut rng = ChaCha8Rng::seed_from_u64(cfg.seed);
    let space = (cfg.ops as u64 / 2).max(16);
    let mut next_mono = 0u64;
    let mut next_rev = u64::from(u32::MAX);
    let mut used: Vec<u64> = Vec::new();
    let mut named = Vec::<String>::new();
    let mut out = Vec::with_capacity(cfg.ops);
    let mut fresh = |rng: &mut ChaCha8Rng, used: &mut Vec<u64>| -> u64 {
        let k = match cfg.order {
            KeyOrder::Uniform | KeyOrder::Tied => rng.gen_range(0..space),
            KeyOrder::Monotonic => {
                next_mono += 1 + rng.gen_range(0..3);
                next_mono
            }
            KeyOrder::Reverse => {
                next_rev -= 1 + rng.gen_range(0..3);
                next_rev
            }
        };
        used.push(k);
        k
    };
    for i in 0..cfg.ops {
        let r = rng.gen_range(0..100);
        let value = |rng: &mut ChaCha8Rng| {
            let len = if rng.gen_range(0..20) == 0 { rng.gen_range(300..3000) } else { rng.gen_range(1..40) };
            let b = rng.gen::<u8>();
            vec![b; len]
        };
        let op = match r {
            0..=1 => WOp::Pin,
            2..=3 => WOp::Unpin,
            4 if named.len() < 3 => {
                let n = format!("s{i}");
                named.push(n.clone());
                WOp::Name(n)
            }
            5 if !named.is_empty() => WOp::Unname(named.remove(rng.gen_range(0..named.len()))),
            6..=15 => {
                let n = rng.gen_range(2..8);
                let mut b = Vec::new();
                for _ in 0..n {
                    if rng.gen_bool(0.7) || used.is_empty() {
                        let k = fresh(&mut rng, &mut used);
                        b.push((key_of(k, cfg.order), Some(value(&mut rng))));
                    } else {
                        b.push((key_of(used[rng.gen_range(0..used.len())], cfg.order), None));
                    }
                }
                WOp::Batch(b)
            }
            16..=45 if !used.is_empty() => {
                let k = used[rng.gen_range(0..used.len())];
                WOp::Batch(vec![(key_of(k, cfg.order), None)])
            }
            46..=60 if !used.is_empty() => {
                let k = used[rng.gen_range(0..used.len())];
                WOp::Batch(vec![(key_of(k, cfg.order), Some(value(&mut rng)))])
            }
            // Small budgets, so passes stop and resume between other ops.
            61..=65 => WOp::Gc(rng.gen_range(1..6)),
            _ => {
                let k = fresh(&mut rng, &mut used);
                WOp::Batch(vec![(key_of(k, cfg.order), Some(value(&mut rng)))])
            }
        };
        out.push(op);
    }
    out
}

/// The pool options campaigns use.
pub fn pool_options(ordering: OrderingMode) -> PoolOptions {
    PoolOptions { size: 1 << 20, max_size: Some(32 << 20), ordering, ..PoolOptions::default() }
}

fn contents(tree: &Tree, v: Option<u64>) -> Result<BTreeMap<Vec<u8>, Vec<u8>>, String> {
    let it: Box<dyn Iterator<Item = crate::Result<crate::KeyValue>>> = match v {
        None => Box::new(tree.scan(Bound::Unbounded, Bound::Unbounded, false).map_err(|e| e.to_string())?),
        Some(v) => Box::new(tree.scan_at(v, Bound::Unbounded, Bound::Unbounded, false)),
    };
    it.map(|r| r.map_err(|e| e.to_string())).collect()
}

/// Judges one reopened tree (opened without its recovery thread, so the
/// lazy phase is deterministic): the contents, named snapshots and their
/// contents, read before any repair (checked reads, aborted versions
/// honoured); then writes made before the repair walk (the writer repairs
/// what it touches) must read back; then the rest of recovery, `check`,
/// and the contents once more — and scans (forward and reverse) begun
/// before the writes and finished after the recovery must have read the
/// judged contents.
fn judge(tree: &Tree, states: &Model, acked: usize) -> Result<(), String> {
    let state = judge_contents(tree, states, acked)?;
    // A scan begun in the lazy phase and finished after the recovery: what
    // it keeps between leaves (a copy of a leaf's parent, read with the
    // aborted versions honoured) must still lead to the judged contents.
    let mut straddling = Vec::new();
    let mut seen = [BTreeMap::new(), BTreeMap::new()];
    for (reverse, seen) in [false, true].into_iter().zip(seen.iter_mut()) {
        let mut it =
            tree.scan(Bound::Unbounded, Bound::Unbounded, reverse).map_err(|e| format!("inconsistent: {e}"))?;
        for r in it.by_ref().take(3) {
            let (k, v) = r.map_err(|e| format!("inconsistent: scan during recovery: {e}"))?;
            seen.insert(k, v);
        }
        straddling.push(it);
    }
    let mut kv = (*state.kv).clone();
    let writes = writes_during_recovery(&kv);
    for batch in &writes {
        tree.write(&ops_of(batch)).map_err(|e| format!("inconsistent: write during recovery: {e}"))?;
        for (k, v) in batch {
            match v {
                Some(v) => kv.insert(k.clone(), v.clone()),
                None => kv.remove(k),
            };
        }
    }
    if contents(tree, None).map_err(|e| format!("inconsistent: scan during recovery: {e}"))? != kv {
        return Err("lost: writes made during recovery do not read back".into());
    }
    let r = tree.recovery_report();
    if let Some(e) = &r.sweep_error {
        return Err(format!("inconsistent: background recovery: {e}"));
    }
    for (it, seen) in straddling.into_iter().zip(seen.iter_mut()) {
        for r in it {
            let (k, v) = r.map_err(|e| format!("inconsistent: scan across the end of recovery: {e}"))?;
            seen.insert(k, v);
        }
        if *seen != *state.kv {
            return Err("lost: a scan begun during recovery and ended after it differs from the contents".into());
        }
    }
    let c = tree.check().map_err(|e| format!("inconsistent: check failed: {e}"))?;
    if !c.is_ok() {
        return Err(format!("inconsistent: {:?} {:?}", c.violations, c.allocator));
    }
    if contents(tree, None).map_err(|e| format!("inconsistent: scan: {e}"))? != kv {
        return Err("lost: contents changed when recovery finished".into());
    }
    Ok(())
}

/// A model batch as tree operations.
fn ops_of(batch: &KvBatch) -> Vec<Op<'_>> {
    batch
        .iter()
        .map(|(k, v)| match v {
            Some(v) => Op::Put(k, v),
            None => Op::Delete(k),
        })
        .collect()
}

/// Two batches touching the start, the middle and the end of the key
/// space (paths the interrupted operation may have left unrepaired).
fn writes_during_recovery(kv: &BTreeMap<Vec<u8>, Vec<u8>>) -> Vec<KvBatch> {
    let mut first = Vec::new();
    if let Some(k) = kv.keys().next() {
        first.push((k.clone(), None));
    }
    if let Some(k) = kv.keys().next_back() {
        first.push((k.clone(), Some(b"rewritten during recovery".to_vec())));
    }
    first.push((key_of(0, KeyOrder::Uniform), Some(b"new during recovery".to_vec())));
    let mut mid = kv.keys().nth(kv.len() / 2).cloned().unwrap_or_else(|| key_of(7, KeyOrder::Uniform));
    mid.push(b'~');
    vec![first, vec![(mid, Some(vec![b'm'; 300]))]]
}

/// The model state (acknowledged, or with the op in flight) the reopened
/// tree holds, named snapshots included.
fn judge_contents(tree: &Tree, states: &Model, acked: usize) -> Result<ModelState, String> {
    let got = contents(tree, None).map_err(|e| format!("inconsistent: scan: {e}"))?;
    let named: BTreeMap<String, u64> = tree
        .named_snapshots()
        .map_err(|e| format!("inconsistent: {e}"))?
        .into_iter()
        .map(|s| (s.name, s.version))
        .collect();
    let candidates = [Some(acked), Some(acked + 1).filter(|&i| i < states.len())];
    let mut why = String::new();
    for s in candidates.into_iter().flatten().map(|i| states.state(i)) {
        if *s.kv != got {
            why = format!("contents ({} keys) differ from the model ({} keys)", got.len(), s.kv.len());
            continue;
        }
        if named.keys().ne(s.named.keys()) {
            why = format!("named snapshots {:?} differ from the model {:?}", named.keys(), s.named.keys());
            continue;
        }
        for (name, &idx) in &s.named {
            let at = contents(tree, Some(named[name])).map_err(|e| format!("inconsistent: snapshot scan: {e}"))?;
            if at != *states.state(idx).kv {
                return Err(format!("lost: named snapshot {name} does not hold its version's contents"));
            }
        }
        return Ok(s);
    }
    Err(format!("lost: after {acked} acknowledged ops: {why}"))
}

fn reopen(image: &[u8], ordering: OrderingMode) -> Result<(Arc<Pool>, Tree), String> {
    let pool =
        Arc::new(Pool::from_image(image, &pool_options(ordering)).map_err(|e| format!("inconsistent: reopen: {e}"))?);
    let tree =
        Tree::open_deferred(pool.clone(), Limits::default()).map_err(|e| format!("inconsistent: recovery: {e}"))?;
    Ok((pool, tree))
}

/// Runs one campaign.
pub fn run(cfg: &CampaignConfig) -> CampaignReport {
    let ops = generate(cfg);
    let states = Arc::new(Model::new(&ops));
    let pool = Arc::new(Pool::simulated(&pool_options(cfg.ordering)).expect("a simulated pool"));
    let tree = Tree::create(pool.clone(), Limits::default()).expect("a tree on a fresh pool");
    pool.reset_write_stats();
    let inconsistent = Arc::new(AtomicU64::new(0));
    let lost = Arc::new(AtomicU64::new(0));
    let nested = Arc::new(AtomicU64::new(0));
    let key_ops: u64 = ops.iter().map(|o| if let WOp::Batch(b) = o { b.len() as u64 } else { 0 }).sum();
    let sweep_cfg = SweepConfig {
        points: cfg.points,
        policies: cfg.policies.clone(),
        seed: cfg.seed,
        include_end: true,
        max_failures_kept: 10,
    };
    let checker = {
        let (states, inconsistent, lost, nested) = (states.clone(), inconsistent.clone(), lost.clone(), nested.clone());
        let (ordering, nested_every) = (cfg.ordering, cfg.nested_every);
        move |st: &CrashState| -> Result<(), String> {
            let acked = st.acknowledged as usize;
            let verdict = (|| {
                let (_pool, tree) = reopen(&st.image, ordering)?;
                judge(&tree, &states, acked)?;
                if nested_every > 0 && st.seed % nested_every == 0 {
                    // Crash again at every fence of this state's recovery.
                    let inner =
                        Arc::new(Pool::from_image(&st.image, &pool_options(ordering)).map_err(|e| e.to_string())?);
                    let states2 = states.clone();
                    let rep = sweep(
                        &SweepConfig {
                            policies: vec![CrashPolicy::RandomLines, CrashPolicy::None],
                            ..SweepConfig::exhaustive(st.seed)
                        },
                        &inner.clone(),
                        move |_, _| {
                            let t = Tree::open_deferred(inner, Limits::default()).map_err(|e| e.to_string())?;
                            match &t.recovery_report().sweep_error {
                                Some(e) => Err(e.clone()),
                                None => Ok(()),
                            }
                        },
                        move |st2: &CrashState| {
                            let (_p, t) = reopen(&st2.image, ordering)?;
                            judge(&t, &states2, acked)
                        },
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
            let mut pins = Vec::new();
            for op in &ops {
                match op {
                    WOp::Batch(b) => {
                        tree.write(&ops_of(b)).map_err(|e| e.to_string())?;
                    }
                    WOp::Pin => pins.push(tree.snapshot().map_err(|e| e.to_string())?),
                    WOp::Unpin => {
                        pins.pop();
                    }
                    WOp::Name(n) => {
                        tree.create_named_snapshot(n).map_err(|e| e.to_string())?;
                    }
                    WOp::Unname(n) => tree.drop_named_snapshot(n).map_err(|e| e.to_string())?,
                    WOp::Gc(nodes) => {
                        tree.gc_step(*nodes).map_err(|e| e.to_string())?;
                    }
                }
                acks.ack();
            }
            Ok(())
        },
        checker,
    );
    let ws = pool.write_stats();
    CampaignReport {
        sweep: report,
        inconsistent: inconsistent.load(AtomicOrdering::Relaxed),
        lost: lost.load(AtomicOrdering::Relaxed),
        nested_states: nested.load(AtomicOrdering::Relaxed),
        key_ops,
        flushes: ws.flush_count,
        fences: ws.fence_count,
    }
}
