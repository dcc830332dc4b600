//! Concurrency stress test: one writer thread and three reader threads on
//! one tree.
//!
//! The writer runs random single puts, overwrites and deletes, random
//! batches, and batches that put or delete a whole *group* of 8 keys, over a
//! small key space (2000 keys plus the groups) in alternating grow and
//! shrink phases, so nodes split, merge, collapse and reuse dead slots while
//! the readers run; 30% of single writes and of reads go to 64 hot keys (a
//! few leaves), so readers often search a node while the writer shifts it. Every batch's values carry a sequence number equal to
//! the version the batch commits (the writer is the only one, so it knows it
//! in advance), after the key they belong to and before a filler derived
//! from it, so a value is self-validating.
//!
//! The readers loop doing gets, short forward and reverse range scans,
//! group reads and repeated reads of snapshots, and check while they run:
//! - (a) every value read for key `k` is a well-formed value *of `k`* with a
//!   sequence number no newer than the version the read saw;
//! - (b) a group read at one version (a snapshot, or a scan, which pins its
//!   version) sees all 8 keys with equal sequence numbers, or none;
//! - (c) a snapshot's reads repeated while the writer commits more versions
//!   give identical results, for short holds (a few commits) and long ones
//!   (3000 commits, a full scan compared, dead-slot reuse held back meanwhile);
//! - direct reads never go back in time (a key's sequence number never
//!   decreases for one reader).
//!
//! They also record what they saw (key, version or version interval,
//! result), and after the run every observation is checked against the
//! writer's complete history: a read at version `v` must return exactly
//! the state of version `v` — missing keys inside a scanned range included
//! — and a get whose version is unknown must match some version current
//! during the call. Finally `check()` must pass and a full scan must equal
//! the writer's model.
//!
//! Why a stress test and not `loom`: readers search nodes in place or copy
//! them under a seqlock whose version word and slots are `AtomicU64`s *inside
//! the mapped pool*
//! (`Pool::atomic_words` on an mmap), records are read in place from the
//! mapping, and frees go through the pool's allocator; loom can only model
//! atomics it allocates itself and cannot model raw memory shared through a
//! mapping, so the engine's interleavings are explored here by running many
//! of them. `TEMBO_STRESS_SEED` and `TEMBO_STRESS_OPS` override the seed and
//! the number of writer operations (default 60 000: about 5 s here),
//! `TEMBO_STRESS_READERS` the number of readers (default 3).

use std::collections::{BTreeMap, HashMap};
use std::ops::Bound;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use tembo_cdds::{GcConfig, GcStats, Limits, Op, Snapshot, Tree};
use tembo_pmem::{Pool, PoolOptions};

/// Plain keys `k00000`..: every third one is longer than the 8-byte prefix
/// slots carry, so comparisons also go to the records.
const KEYS: u32 = 2000;
/// Keys `0..HOT` (a few leaves) take 30% of single writes and of reads, so
/// readers often search a node while the writer shifts its slots.
const HOT: u32 = 64;
const GROUPS: u32 = 48;
const GROUP_SIZE: u32 = 8;
const READERS: u64 = 3;
/// Observations each reader keeps for the final check.
const MAX_OBS: usize = 20_000;
/// Length of a grow or shrink phase, in writer operations.
const PHASE: u64 = 4000;
/// Versions a long-held snapshot waits for before it is re-read.
const LONG_HOLD: u64 = 3000;

fn env_u64(name: &str, default: u64) -> u64 {
    std::env::var(name).ok().and_then(|s| s.parse().ok()).unwrap_or(default)
}

fn key(i: u32) -> Vec<u8> {
    if i % 3 == 0 {
        format!("k{i:05}:a-key-longer-than-its-prefix").into_bytes()
    } else {
        format!("k{i:05}").into_bytes()
    }
}

fn group_prefix(g: u32) -> Vec<u8> {
    format!("g{g:03}:").into_bytes()
}

fn group_key(g: u32, i: u32) -> Vec<u8> {
    format!("g{g:03}:{i}").into_bytes()
}

/// `key | seq (8 bytes, big-endian) | seq % 23 bytes of (seq as u8)`.
fn value(key: &[u8], seq: u64) -> Vec<u8> {
    let mut v = key.to_vec();
    v.extend_from_slice(&seq.to_be_bytes());
    v.extend(std::iter::repeat(seq as u8).take((seq % 23) as usize));
    v
}

/// The sequence number of a value read for `key`, if it is well formed.
fn seq_of(key: &[u8], v: &[u8]) -> Result<u64, String> {
    let bad = |why: &str| {
        Err(format!("{why}: key {:?} has value {:?}", String::from_utf8_lossy(key), String::from_utf8_lossy(v)))
    };
    if !v.starts_with(key) {
        return bad("value of another key");
    }
    let rest = &v[key.len()..];
    if rest.len() < 8 {
        return bad("value too short");
    }
    let seq = u64::from_be_bytes(rest[..8].try_into().expect("8 bytes"));
    let filler = &rest[8..];
    if filler.len() as u64 != seq % 23 || filler.iter().any(|&b| b != seq as u8) {
        return bad("bad filler");
    }
    Ok(seq)
}

fn show(k: &[u8]) -> String {
    String::from_utf8_lossy(k).into_owned()
}

/// Keys with the sequence numbers of their values.
type Pairs = Vec<(Vec<u8>, u64)>;

/// What a reader saw, for the check against the writer's history.
#[derive(Debug)]
enum Obs {
    /// A get: the key's sequence number (`None`: absent) at some version in `lo..=hi`.
    Get { key: Vec<u8>, lo: u64, hi: u64, seen: Option<u64> },
    /// A scan at `version` from `from` (inclusive) towards `to` (inclusive,
    /// `None`: to the end), in key order or reversed: exactly these pairs.
    Scan { version: u64, reverse: bool, from: Vec<u8>, to: Option<Vec<u8>>, seen: Pairs },
}

/// Every state each key had: (version, present), versions increasing. A
/// key present at version `v` holds the value of sequence number `v`'s
/// last write, which is the version of that entry.
type History = BTreeMap<Vec<u8>, Vec<(u64, bool)>>;

/// The sequence number `key` holds at `version` (`None`: absent).
fn state_at(h: &History, key: &[u8], version: u64) -> Option<u64> {
    let states = h.get(key)?;
    // The last change at or before `version`; a put there wrote sequence
    // number = its version.
    let i = states.partition_point(|&(v, _)| v <= version);
    let (v, present) = *states.get(i.checked_sub(1)?)?;
    present.then_some(v)
}

fn verify_obs(h: &History, o: &Obs) -> Result<(), String> {
    match o {
        Obs::Get { key, lo, hi, seen } => {
            // Versions at which the key changed inside (lo, hi], plus lo.
            let states = h.get(key).map(Vec::as_slice).unwrap_or(&[]);
            let mut candidates = vec![state_at(h, key, *lo)];
            candidates.extend(states.iter().filter(|(v, _)| v > lo && v <= hi).map(|&(v, p)| p.then_some(v)));
            if candidates.contains(seen) {
                Ok(())
            } else {
                Err(format!("get {} saw {seen:?}; at versions {lo}..={hi} it was one of {candidates:?}", show(key)))
            }
        }
        Obs::Scan { version, reverse, from, to, seen } => {
            let range: (Bound<&[u8]>, Bound<&[u8]>) = match (reverse, to) {
                (false, Some(t)) => (Bound::Included(from), Bound::Included(t)),
                (false, None) => (Bound::Included(from), Bound::Unbounded),
                (true, Some(t)) => (Bound::Included(t), Bound::Included(from)),
                (true, None) => (Bound::Unbounded, Bound::Included(from)),
            };
            let mut want: Pairs = h
                .range::<[u8], _>(range)
                .filter_map(|(k, _)| state_at(h, k, *version).map(|s| (k.clone(), s)))
                .collect();
            if *reverse {
                want.reverse();
            }
            if &want == seen {
                Ok(())
            } else {
                let show_all =
                    |v: &[(Vec<u8>, u64)]| v.iter().map(|(k, s)| format!("{}@{s}", show(k))).collect::<Vec<_>>();
                Err(format!(
                    "scan at version {version} from {} (reverse {reverse}) saw {:?}, version {version} holds {:?}",
                    show(from),
                    show_all(seen),
                    show_all(&want)
                ))
            }
        }
    }
}

struct Shared {
    /// The writer finished (or a reader failed).
    done: AtomicBool,
    /// Some thread found a violation: stop early.
    failed: AtomicBool,
    /// The last version the writer committed (stored after the commit returns).
    committed: AtomicU64,
}

#[derive(Debug, Default)]
struct ReaderStats {
    gets: u64,
    scans: u64,
    group_reads: u64,
    groups_full: u64,
    snapshot_rounds: u64,
    /// Long-held snapshots whose full contents were re-read unchanged.
    long_snapshots: u64,
    /// Snapshot re-reads during which the writer committed at least one version.
    rounds_with_progress: u64,
}

struct Reader<'a> {
    tree: &'a Tree,
    shared: &'a Shared,
    rng: ChaCha8Rng,
    last_seen: HashMap<Vec<u8>, u64>,
    obs: Vec<Obs>,
    stats: ReaderStats,
    /// A snapshot held across many writer commits, with its full contents
    /// when taken; re-read when the writer has moved `LONG_HOLD` versions on.
    long: Option<(Snapshot<'a>, Pairs)>,
}

type R<T> = Result<T, String>;
/// A put (`Some(value)`) or delete (`None`) of a key.
type KeyOp = (Vec<u8>, Option<Vec<u8>>);
/// What the writer believes the tree holds.
type Model = BTreeMap<Vec<u8>, Vec<u8>>;
/// A snapshot's scan (key, sequence number) and its gets.
type SnapRead = (Pairs, Vec<Option<Vec<u8>>>);

fn e2s(e: tembo_cdds::CddsError) -> String {
    format!("engine error: {e}")
}

impl Reader<'_> {
    fn record(&mut self, o: Obs) {
        if self.obs.len() < MAX_OBS {
            self.obs.push(o);
        }
    }

    fn random_key(&mut self) -> Vec<u8> {
        match self.rng.gen_range(0..10) {
            0..=2 => key(self.rng.gen_range(0..HOT)),
            3..=7 => key(self.rng.gen_range(0..KEYS)),
            _ => group_key(self.rng.gen_range(0..GROUPS), self.rng.gen_range(0..GROUP_SIZE)),
        }
    }

    /// A direct read must not see an older value than an earlier one did.
    fn monotonic(&mut self, k: &[u8], seq: u64) -> R<()> {
        let last = self.last_seen.entry(k.to_vec()).or_insert(0);
        if seq < *last {
            return Err(format!("{} went back in time: seq {seq} after seq {last}", show(k)));
        }
        *last = seq;
        Ok(())
    }

    fn get(&mut self) -> R<()> {
        if self.rng.gen_bool(0.25) {
            // Prefetching walks nodes the writer and GC are changing: it
            // must neither hang, nor fail, nor change what reads see.
            let ahead: Vec<Vec<u8>> = (0..8).map(|_| self.random_key()).collect();
            self.tree.prefetch_keys(ahead.iter().map(Vec::as_slice));
        }
        let k = self.random_key();
        let lo = self.tree.current_version().map_err(e2s)?;
        let got = self.tree.get(&k).map_err(e2s)?;
        let hi = self.tree.current_version().map_err(e2s)?;
        let seen = match got {
            Some(v) => {
                let s = seq_of(&k, &v)?;
                if s > hi {
                    return Err(format!("get {} saw seq {s}, newer than the current version {hi}", show(&k)));
                }
                self.monotonic(&k, s)?;
                Some(s)
            }
            None => None,
        };
        self.stats.gets += 1;
        self.record(Obs::Get { key: k, lo, hi, seen });
        Ok(())
    }

    /// Checks one scan's pairs (order, bounds, values, versions); returns
    /// them with their sequence numbers.
    fn scan_pairs(
        &self,
        it: impl Iterator<Item = tembo_cdds::Result<(Vec<u8>, Vec<u8>)>>,
        version: u64,
        reverse: bool,
        from: &[u8],
        take: usize,
    ) -> R<Pairs> {
        let mut out: Pairs = Vec::new();
        for r in it.take(take) {
            let (k, v) = r.map_err(e2s)?;
            let s = seq_of(&k, &v)?;
            if s > version {
                return Err(format!("scan at version {version} saw {} with seq {s}", show(&k)));
            }
            let in_bound = if reverse { k.as_slice() <= from } else { k.as_slice() >= from };
            let ordered = match out.last() {
                None => true,
                Some((p, _)) => (reverse && k < *p) || (!reverse && k > *p),
            };
            if !in_bound || !ordered {
                return Err(format!(
                    "scan from {} (reverse {reverse}) returned {} after {:?}",
                    show(from),
                    show(&k),
                    out.last().map(|(p, _)| show(p))
                ));
            }
            out.push((k, s));
        }
        Ok(out)
    }

    fn scan(&mut self) -> R<()> {
        let from = self.random_key();
        let reverse = self.rng.gen_bool(0.3);
        let take = self.rng.gen_range(1..24);
        let (lo, hi) = if reverse {
            (Bound::Unbounded, Bound::Included(from.clone()))
        } else {
            (Bound::Included(from.clone()), Bound::Unbounded)
        };
        let it = self.tree.scan(lo, hi, reverse).map_err(e2s)?;
        let version = it.version();
        let seen = self.scan_pairs(it, version, reverse, &from, take)?;
        for (k, s) in &seen {
            self.monotonic(k, *s)?;
        }
        let to = if seen.len() == take { seen.last().map(|(k, _)| k.clone()) } else { None };
        self.stats.scans += 1;
        self.record(Obs::Scan { version, reverse, from, to, seen });
        Ok(())
    }

    /// (b): all of a group or none, at a snapshot and in a scan.
    fn group(&mut self) -> R<()> {
        let g = self.rng.gen_range(0..GROUPS);
        let pfx = group_prefix(g);
        let hi = {
            let mut h = pfx.clone();
            *h.last_mut().expect("non-empty") += 1;
            h
        };
        let check = |seen: &[(Vec<u8>, u64)], how: &str, version: u64| -> R<()> {
            let all_equal = seen.iter().all(|(_, s)| *s == seen[0].1);
            let keys_ok = seen.iter().enumerate().all(|(i, (k, _))| *k == group_key(g, i as u32));
            if seen.is_empty() || (seen.len() == GROUP_SIZE as usize && all_equal && keys_ok) {
                return Ok(());
            }
            Err(format!(
                "group {g} read {how} at version {version} is not all-or-nothing: {:?}",
                seen.iter().map(|(k, s)| format!("{}@{s}", show(k))).collect::<Vec<_>>()
            ))
        };

        let snap = self.tree.snapshot().map_err(e2s)?;
        let v = snap.version();
        let it = snap.scan(Bound::Included(pfx.clone()), Bound::Excluded(hi.clone()), false);
        let seen = self.scan_pairs(it, v, false, &pfx, usize::MAX)?;
        check(&seen, "by a snapshot scan", v)?;
        // The same version by point reads.
        let mut by_get = Vec::new();
        for i in 0..GROUP_SIZE {
            let k = group_key(g, i);
            if let Some(val) = snap.get(&k).map_err(e2s)? {
                by_get.push((k.clone(), seq_of(&k, &val)?));
            }
        }
        if by_get != seen {
            return Err(format!("group {g} at snapshot version {v}: gets {by_get:?} differ from the scan {seen:?}"));
        }
        if !seen.is_empty() {
            self.stats.groups_full += 1;
        }
        drop(snap);
        self.record(Obs::Scan { version: v, reverse: false, from: pfx.clone(), to: Some(hi.clone()), seen });

        // A plain scan pins its version too; reversed, for the other path.
        let it = self.tree.scan(Bound::Included(pfx.clone()), Bound::Excluded(hi.clone()), true).map_err(e2s)?;
        let version = it.version();
        let mut seen = self.scan_pairs(it, version, true, &hi, usize::MAX)?;
        let record = Obs::Scan { version, reverse: true, from: hi, to: Some(pfx), seen: seen.clone() };
        seen.reverse();
        check(&seen, "by a reverse scan", version)?;
        for (k, s) in &seen {
            self.monotonic(k, *s)?;
        }
        self.stats.group_reads += 1;
        self.record(record);
        Ok(())
    }

    /// A snapshot's scan of up to 48 pairs from `from` and its gets of `keys`.
    fn snapshot_read(&self, snap: &Snapshot<'_>, from: &[u8], keys: &[Vec<u8>]) -> R<SnapRead> {
        let v = snap.version();
        let it = snap.scan(Bound::Included(from.to_vec()), Bound::Unbounded, false);
        let scanned = self.scan_pairs(it, v, false, from, 48)?;
        let mut gets = Vec::new();
        for k in keys {
            let got = snap.get(k).map_err(e2s)?;
            if let Some(val) = &got {
                let s = seq_of(k, val)?;
                if s > v {
                    return Err(format!("snapshot at {v} read {} with seq {s}", show(k)));
                }
            }
            gets.push(got);
        }
        Ok((scanned, gets))
    }

    /// (c): a snapshot's reads, repeated while the writer commits, are identical.
    fn snapshot_repeat(&mut self) -> R<()> {
        let snap = self.tree.snapshot().map_err(e2s)?;
        let v = snap.version();
        let from = key(self.rng.gen_range(0..KEYS));
        let keys: Vec<Vec<u8>> = (0..12).map(|_| self.random_key()).collect();
        let first = self.snapshot_read(&snap, &from, &keys)?;
        for round in 0..3 {
            let before = self.shared.committed.load(Ordering::SeqCst);
            let waited = Instant::now();
            while self.shared.committed.load(Ordering::SeqCst) < before + 3
                && !self.shared.done.load(Ordering::SeqCst)
                && waited.elapsed() < Duration::from_millis(20)
            {
                std::thread::yield_now();
            }
            if self.shared.committed.load(Ordering::SeqCst) > before {
                self.stats.rounds_with_progress += 1;
            }
            let again = self.snapshot_read(&snap, &from, &keys)?;
            if again != first {
                return Err(format!(
                    "snapshot at version {v} changed in round {round} (current {}): scan {:?} then {:?}",
                    self.shared.committed.load(Ordering::SeqCst),
                    first.0.iter().map(|(k, s)| format!("{}@{s}", show(k))).collect::<Vec<_>>(),
                    again.0.iter().map(|(k, s)| format!("{}@{s}", show(k))).collect::<Vec<_>>()
                ));
            }
            if snap.version() != v {
                return Err(format!("snapshot version moved from {v} to {}", snap.version()));
            }
        }
        drop(snap);
        self.stats.snapshot_rounds += 1;
        let to = if first.0.len() == 48 { first.0.last().map(|(k, _)| k.clone()) } else { None };
        self.record(Obs::Scan { version: v, reverse: false, from, to, seen: first.0 });
        Ok(())
    }

    /// (c) over a long time: a snapshot held while the writer commits
    /// thousands of versions (blocking the reuse of every slot it can see)
    /// still reads exactly what it read when taken.
    fn long_snapshot(&mut self) -> R<()> {
        let whole = |snap: &Snapshot<'_>, this: &Self| {
            this.scan_pairs(
                snap.scan(Bound::Unbounded, Bound::Unbounded, false),
                snap.version(),
                false,
                &[],
                usize::MAX,
            )
        };
        match self.long.take() {
            None => {
                let snap = self.tree.snapshot().map_err(e2s)?;
                let all = whole(&snap, self)?;
                self.long = Some((snap, all));
            }
            Some((snap, all)) => {
                let v = snap.version();
                if self.shared.committed.load(Ordering::SeqCst) < v + LONG_HOLD
                    && !self.shared.done.load(Ordering::SeqCst)
                {
                    self.long = Some((snap, all));
                    return Ok(());
                }
                let again = whole(&snap, self)?;
                if again != all {
                    let diff: Vec<_> = again.iter().filter(|p| !all.contains(p)).take(5).collect();
                    return Err(format!(
                        "long-held snapshot at version {v} changed by version {}: {} pairs then {}, e.g. new {diff:?}",
                        self.shared.committed.load(Ordering::SeqCst),
                        all.len(),
                        again.len()
                    ));
                }
                drop(snap);
                self.stats.long_snapshots += 1;
                self.record(Obs::Scan { version: v, reverse: false, from: Vec::new(), to: None, seen: all });
            }
        }
        Ok(())
    }

    fn run(&mut self) -> R<()> {
        while !self.shared.done.load(Ordering::SeqCst) {
            match self.rng.gen_range(0..100) {
                0..=39 => self.get()?,
                40..=69 => self.scan()?,
                70..=87 => self.group()?,
                88..=97 => self.snapshot_repeat()?,
                _ => self.long_snapshot()?,
            }
        }
        Ok(())
    }
}

#[derive(Debug, Default)]
struct WriterStats {
    ops: u64,
    batches: u64,
    group_puts: u64,
    group_deletes: u64,
    max_keys: u64,
    /// `stats` readings (every 500 ops) with less than half the most keys seen.
    key_drops: u64,
    max_height: u64,
    last_height: u64,
    /// `stats` readings with a lower height than the reading before.
    height_drops: u64,
    checks: u64,
}

/// One writer op: a list of (key, Some(value) | None), applied as one batch.
fn writer_op(rng: &mut ChaCha8Rng, op: u64, seq: u64) -> (Vec<KeyOp>, u8) {
    let growing = (op / PHASE) % 2 == 0;
    let p_put = if growing { 0.8 } else { 0.03 };
    let single = |rng: &mut ChaCha8Rng| {
        let space = if rng.gen_bool(0.3) { HOT } else { KEYS };
        let k = key(rng.gen_range(0..space));
        if rng.gen_bool(p_put) {
            let v = value(&k, seq);
            (k, Some(v))
        } else {
            (k, None)
        }
    };
    match rng.gen_range(0..100) {
        // A single put, overwrite or delete.
        0..=54 => (vec![single(rng)], 0),
        // A random batch (a key may repeat: applied in order).
        55..=74 => ((0..rng.gen_range(2..24)).map(|_| single(rng)).collect(), 1),
        // A whole group, sometimes with random keys in the same batch.
        75..=94 => {
            let g = rng.gen_range(0..GROUPS);
            let put = rng.gen_bool(if growing { 0.75 } else { 0.1 });
            let mut ops: Vec<_> = (0..GROUP_SIZE)
                .map(|i| {
                    let k = group_key(g, i);
                    let v = put.then(|| value(&k, seq));
                    (k, v)
                })
                .collect();
            for _ in 0..rng.gen_range(0..4) {
                let at = rng.gen_range(0..=ops.len());
                ops.insert(at, single(rng));
            }
            (ops, if put { 2 } else { 3 })
        }
        // A run of neighbouring keys at once: splits (growing) or merges (shrinking).
        _ => {
            let start = rng.gen_range(0..KEYS - 40);
            let ops = (start..start + 40)
                .map(|i| {
                    let k = key(i);
                    let v = growing.then(|| value(&k, seq));
                    (k, v)
                })
                .collect();
            (ops, 1)
        }
    }
}

fn writer(tree: &Tree, shared: &Shared, seed: u64, ops: u64) -> R<(Model, History, WriterStats)> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut model = Model::new();
    let mut history: History = BTreeMap::new();
    let mut st = WriterStats::default();
    for op in 0..ops {
        if shared.failed.load(Ordering::SeqCst) {
            break;
        }
        let current = tree.current_version().map_err(e2s)?;
        let seq = current + 1;
        let (list, kind) = writer_op(&mut rng, op, seq);
        let batch: Vec<Op<'_>> = list
            .iter()
            .map(|(k, v)| match v {
                Some(v) => Op::Put(k, v),
                None => Op::Delete(k),
            })
            .collect();
        let out = tree.write(&batch).map_err(e2s)?;
        let mut changed = false;
        let mut touched: Vec<&Vec<u8>> = Vec::new();
        for (i, (k, v)) in list.iter().enumerate() {
            if out.existed[i] != model.contains_key(k) {
                return Err(format!(
                    "op {op}: existed[{i}] = {} for {}, the model says otherwise",
                    out.existed[i],
                    show(k)
                ));
            }
            changed |= v.is_some() || out.existed[i];
            match v {
                Some(v) => model.insert(k.clone(), v.clone()),
                None => model.remove(k),
            };
            touched.push(k);
        }
        let want = if changed { seq } else { current };
        if out.version != want {
            return Err(format!("op {op}: committed version {} where {want} was expected", out.version));
        }
        if changed {
            for k in touched {
                let states = history.entry(k.clone()).or_default();
                let present = model.contains_key(k);
                match states.last_mut() {
                    Some(last) if last.0 == seq => last.1 = present,
                    _ => states.push((seq, present)),
                }
            }
        }
        shared.committed.store(out.version, Ordering::SeqCst);
        st.ops += 1;
        st.batches += u64::from(list.len() > 1);
        st.group_puts += u64::from(kind == 2);
        st.group_deletes += u64::from(kind == 3);

        if op % 500 == 499 {
            let s = tree.stats().map_err(e2s)?;
            if s.keys != model.len() as u64 {
                return Err(format!("op {op}: stats count {} keys, the model {}", s.keys, model.len()));
            }
            // Shrinking after a peak: merges and root collapses happened.
            st.height_drops += u64::from(s.height < st.last_height);
            st.key_drops += u64::from(s.keys * 2 < st.max_keys);
            st.max_keys = st.max_keys.max(s.keys);
            st.max_height = st.max_height.max(s.height);
            st.last_height = s.height;
        }
        // A full check while the readers run (and hold snapshots).
        if op % 5000 == 4999 {
            let c = tree.check().map_err(e2s)?;
            if !c.is_ok() {
                return Err(format!("op {op}: check during the run: {:?}", c.violations));
            }
            st.checks += 1;
        }
    }
    Ok((model, history, st))
}

#[test]
fn one_writer_three_readers() {
    stress(None);
}

/// The same with the background GC thread stepping every millisecond:
/// its shifts and frees must stay invisible to readers and snapshots.
#[test]
fn one_writer_three_readers_and_background_gc() {
    let gc = GcConfig { nodes_per_step: 32, pause: Duration::from_millis(1), idle_pause: Duration::from_millis(2) };
    let stats = stress(Some(gc)).expect("GC stats");
    eprintln!("background GC: {stats:?}");
    assert!(stats.error.is_none(), "{stats:?}");
    assert!(stats.steps > 0 && stats.entries_removed > 0 && stats.blocks_retired > 0, "the GC did no work: {stats:?}");
}

fn stress(gc: Option<GcConfig>) -> Option<GcStats> {
    let seed = env_u64("TEMBO_STRESS_SEED", 0x7E3B_05EE);
    let ops = env_u64("TEMBO_STRESS_OPS", 60_000);
    let pool = Pool::in_memory(&PoolOptions { size: 16 << 20, max_size: Some(512 << 20), ..PoolOptions::default() })
        .expect("an in-memory pool");
    let mut tree = Tree::create(Arc::new(pool), Limits::default()).expect("a tree");
    if let Some(cfg) = gc {
        tree.start_gc(cfg);
    }
    let shared = Shared { done: AtomicBool::new(false), failed: AtomicBool::new(false), committed: AtomicU64::new(0) };
    let started = Instant::now();

    let (writer_result, readers) = std::thread::scope(|s| {
        let readers: Vec<_> = (0..env_u64("TEMBO_STRESS_READERS", READERS))
            .map(|r| {
                let (tree, shared) = (&tree, &shared);
                s.spawn(move || {
                    let mut rd = Reader {
                        tree,
                        shared,
                        rng: ChaCha8Rng::seed_from_u64(seed ^ (r + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15)),
                        last_seen: HashMap::new(),
                        obs: Vec::new(),
                        stats: ReaderStats::default(),
                        long: None,
                    };
                    let res = rd.run();
                    if res.is_err() {
                        shared.failed.store(true, Ordering::SeqCst);
                        shared.done.store(true, Ordering::SeqCst);
                    }
                    (res, rd.obs, rd.stats)
                })
            })
            .collect();
        let w = writer(&tree, &shared, seed, ops);
        shared.done.store(true, Ordering::SeqCst);
        let readers: Vec<_> = readers.into_iter().map(|h| h.join().expect("reader thread")).collect();
        (w, readers)
    });

    let ctx = format!("seed {seed:#x}, {ops} writer ops (TEMBO_STRESS_SEED / TEMBO_STRESS_OPS to replay)");
    let mut failures = Vec::new();
    for (i, (res, _, _)) in readers.iter().enumerate() {
        if let Err(e) = res {
            failures.push(format!("reader {i}: {e}"));
        }
    }
    let (model, history, wst) = match writer_result {
        Ok(w) => w,
        Err(e) => panic!("writer: {e}\nreaders: {failures:?}\n{ctx}"),
    };
    assert!(failures.is_empty(), "{failures:#?}\n{ctx}");
    let elapsed = started.elapsed();

    // Every observation against the writer's history.
    let mut checked = 0;
    for (i, (_, obs, _)) in readers.iter().enumerate() {
        for o in obs {
            if let Err(e) = verify_obs(&history, o) {
                panic!("reader {i}: {e}\n{ctx}");
            }
            checked += 1;
        }
    }

    // The final state: check, and a full scan equal to the model.
    let c = tree.check().expect("check runs");
    assert!(c.is_ok(), "check after the run: {:?}\n{ctx}", c.violations);
    assert_eq!(c.stats.keys, model.len() as u64, "{ctx}");
    let all: Vec<_> = tree.scan(Bound::Unbounded, Bound::Unbounded, false).unwrap().map(|r| r.unwrap()).collect();
    let want: Vec<_> = model.into_iter().collect();
    assert!(all == want, "the final scan differs from the model\n{ctx}");

    eprintln!("{ctx}: {elapsed:.1?}; writer {wst:?}; {checked} observations checked");
    for (i, (_, _, st)) in readers.iter().enumerate() {
        eprintln!("reader {i}: {st:?}");
    }
    // The run exercised what it is for: the tree grew and shrank (splits and
    // merges; whether the root also collapsed depends on when readers let
    // go of old versions, so `height_drops` is reported, not required),
    // batches and groups ran, and the readers read while the writer committed.
    assert!(wst.ops == ops && wst.group_puts > 0 && wst.group_deletes > 0, "{wst:?}");
    assert!(wst.max_height >= 3 && wst.key_drops > 0, "{wst:?}");
    for (i, (_, _, st)) in readers.iter().enumerate() {
        assert!(st.gets > 0 && st.scans > 0 && st.group_reads > 0 && st.snapshot_rounds > 0, "reader {i}: {st:?}");
    }
    let total = |f: fn(&ReaderStats) -> u64| readers.iter().map(|(_, _, st)| f(st)).sum::<u64>();
    assert!(total(|s| s.groups_full) > 0, "no reader saw a group present");
    assert!(total(|s| s.rounds_with_progress) > 0, "no snapshot re-read ran while the writer committed");
    assert!(total(|s| s.long_snapshots) > 0, "no long-held snapshot was re-read");
    gc.map(|_| tree.gc_stats())
}
