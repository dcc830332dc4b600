//! Crash consistency of the allocator and of leak reclamation, on the crash
//! simulator.
//!
//! A seeded workload allocates blocks (writing and persisting their contents),
//! links them into a persistent link table (a block registered as the root
//! `links`, one 8-byte slot per link), unlinks them and frees them (one at a
//! time, or several with one fence). At every
//! fence, under every crash policy, the crashed image is reopened and checked:
//! the pool passes `check`; the link table equals the model after the
//! acknowledged operations or after the one in flight (exact oracle); every
//! linked block is allocated, holds its contents and overlaps no other; the
//! allocated blocks are exactly the model's live blocks (give or take the
//! in-flight allocation or free); and leak reclamation, tracing the link
//! table, leaves exactly the linked blocks and the table allocated.
//!
//! Reclamation itself is crashed at every fence too (and, for a sample of
//! those states, the second reclamation as well): reopening and reclaiming
//! again always converges to the same exact result. A reachable block that
//! is free makes reclamation fail as corruption without freeing anything. Two
//! negative controls prove the harness catches broken engines: linking a
//! block whose contents were never persisted, and freeing a block before
//! unlinking it.
//!
//! Randomness: `TEMBO_SEED` (default 20261123); `TEMBO_TEST_SCALE=full` (or
//! `long`) runs a longer workload.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use tembo_pmem::sim::{sweep, AckCounter, CrashPoints, CrashPolicy, CrashState, SweepConfig, SweepReport};
use tembo_pmem::{LeakTracer, Marker, PmemError, Pool, PoolOffset, PoolOptions};

const DEFAULT_SEED: u64 = 20261123;
const KIB: u64 = 1 << 10;
const MIB: u64 = 1 << 20;
/// Slots of the link table.
const SLOTS: u64 = 48;
/// The root naming the link table.
const LINKS: &str = "links";

fn seed() -> u64 {
    match std::env::var("TEMBO_SEED") {
        Ok(s) => {
            let s = s.trim();
            let parsed = match s.strip_prefix("0x") {
                Some(hex) => u64::from_str_radix(hex, 16),
                None => s.parse(),
            };
            parsed.unwrap_or_else(|_| panic!("TEMBO_SEED={s:?} is not a u64"))
        }
        Err(_) => DEFAULT_SEED,
    }
}

fn full_scale() -> bool {
    matches!(std::env::var("TEMBO_TEST_SCALE").as_deref(), Ok("full") | Ok("long"))
}

fn opts() -> PoolOptions {
    PoolOptions { size: 256 * KIB, max_size: Some(8 * MIB), ..PoolOptions::default() }
}

/// The first word of every block: written and persisted before the block is
/// linked, so a linked block without it was linked too early.
fn tag(off: PoolOffset) -> u64 {
    off ^ 0x4352_4153_485F_4D44
}

/// Marks the link table and every block a nonzero slot of it names.
struct LinkTracer {
    table: PoolOffset,
}

impl LeakTracer for LinkTracer {
    fn trace(&self, pool: &Pool, marker: &mut Marker<'_>) -> tembo_pmem::Result<()> {
        marker.mark(self.table)?;
        for slot in 0..SLOTS {
            let v = pool.load_u64(self.table + slot * 8)?;
            if v != 0 {
                marker.mark(v)?;
            }
        }
        Ok(())
    }
}

/// Creates a simulated pool with a zeroed, persisted link table as root `links`.
fn pool_with_table() -> (Pool, PoolOffset) {
    let pool = Pool::simulated(&opts()).unwrap();
    let table = pool.alloc(SLOTS * 8).unwrap();
    pool.fill(table, SLOTS * 8, 0).unwrap();
    pool.persist(table, SLOTS * 8);
    pool.set_root(LINKS, table).unwrap();
    (pool, table)
}

fn read_links(pool: &Pool, table: PoolOffset) -> Result<BTreeMap<u64, PoolOffset>, String> {
    let mut links = BTreeMap::new();
    for slot in 0..SLOTS {
        let v = pool.load_u64(table + slot * 8).map_err(|e| format!("reading slot {slot}: {e}"))?;
        if v != 0 {
            links.insert(slot, v);
        }
    }
    Ok(links)
}

fn allocated(pool: &Pool) -> Result<BTreeMap<PoolOffset, u64>, String> {
    Ok(pool.allocated_blocks().map_err(|e| format!("allocated_blocks: {e}"))?.into_iter().collect())
}

fn check_ok(pool: &Pool, when: &str) -> Result<(), String> {
    let report = pool.check();
    if report.is_ok() {
        Ok(())
    } else {
        Err(format!("check {when}: {:?}", report.violations))
    }
}

/// The link table, the blocks it reaches and what reclamation must leave:
/// checks that every reachable block is allocated, holds its contents and
/// overlaps no other reachable block. Returns the reachable blocks.
fn check_reachable(
    pool: &Pool,
    table: PoolOffset,
    links: &BTreeMap<u64, PoolOffset>,
    blocks: &BTreeMap<PoolOffset, u64>,
) -> Result<BTreeMap<PoolOffset, u64>, String> {
    let mut reachable = BTreeMap::new();
    for off in links.values().copied().chain([table]) {
        let usable = *blocks.get(&off).ok_or_else(|| format!("reachable block {off:#x} is not allocated"))?;
        reachable.insert(off, usable);
    }
    let mut end = 0;
    for (&off, &usable) in &reachable {
        if off < end {
            return Err(format!("reachable block {off:#x} overlaps the one ending at {end:#x}"));
        }
        end = off + usable;
    }
    for (slot, &off) in links {
        let word = pool.load_u64(off).map_err(|e| e.to_string())?;
        if word != tag(off) {
            return Err(format!("linked block {off:#x} (slot {slot}) lost its contents: {word:#x}"));
        }
    }
    Ok(reachable)
}

/// Reclaims leaks on a recovered pool and checks that exactly the reachable
/// blocks stay, in a consistent heap.
fn reclaim_exactly(
    pool: &Pool,
    table: PoolOffset,
    before: &BTreeMap<PoolOffset, u64>,
    reachable: &BTreeMap<PoolOffset, u64>,
) -> Result<(), String> {
    let report = pool.reclaim_leaks(&[&LinkTracer { table }]).map_err(|e| format!("reclaim_leaks: {e}"))?;
    if report.reachable_blocks != reachable.len() as u64
        || report.reclaimed_blocks != (before.len() - reachable.len()) as u64
    {
        return Err(format!(
            "reclaim reported {report:?} for {} allocated, {} reachable",
            before.len(),
            reachable.len()
        ));
    }
    let after = allocated(pool)?;
    if &after != reachable {
        let leaked: Vec<_> = after.keys().filter(|o| !reachable.contains_key(o)).collect();
        let lost: Vec<_> = reachable.keys().filter(|o| !after.contains_key(o)).collect();
        return Err(format!("after reclaim: leaked {leaked:x?}, lost {lost:x?}"));
    }
    check_ok(pool, "after reclaim")?;
    let s = pool.alloc_stats();
    let used: u64 = reachable.values().sum();
    if s.allocated_blocks != reachable.len() as u64 || s.used_bytes != used {
        return Err(format!(
            "stats after reclaim: {} blocks / {} bytes, expected {} / {used}",
            s.allocated_blocks,
            s.used_bytes,
            reachable.len()
        ));
    }
    // The recovered pool keeps working.
    let b = pool.alloc(100).map_err(|e| format!("alloc after recovery: {e}"))?;
    pool.free(b).map_err(|e| format!("free after recovery: {e}"))?;
    check_ok(pool, "after alloc and free on the recovered pool")
}

// ----- the alloc / link / unlink / free workload ---------------------------

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Op {
    /// Allocate `size` bytes and persist the block's tag.
    Alloc { size: u64 },
    /// Store the block's offset in a slot and persist it.
    Link { slot: u64, off: PoolOffset },
    /// Clear a slot and persist it.
    Unlink { slot: u64, off: PoolOffset },
    /// Free a block.
    Free { off: PoolOffset },
    /// Free the first `n` blocks of `offs` with one fence (`Pool::free_many`).
    FreeMany { offs: [PoolOffset; 3], n: usize },
}

/// A deliberately broken engine, for the negative controls.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Bug {
    None,
    /// The block's tag is stored but never persisted before the link.
    UnpersistedContents,
    /// A linked block is freed first and unlinked after.
    FreeBeforeUnlink,
}

/// Every operation, announced before it starts, and each allocation's result
/// once it returned. Shared by the workload and the checker.
#[derive(Debug, Default)]
struct Journal {
    table: PoolOffset,
    ops: Vec<Op>,
    results: Vec<Option<PoolOffset>>,
}

#[derive(Clone, Debug, Default, PartialEq, Eq)]
struct ModelState {
    links: BTreeMap<u64, PoolOffset>,
    live: BTreeSet<PoolOffset>,
}

impl ModelState {
    fn apply(&mut self, op: Op, result: Option<PoolOffset>) {
        match op {
            Op::Alloc { .. } => {
                if let Some(off) = result {
                    self.live.insert(off);
                }
            }
            Op::Link { slot, off } => {
                self.links.insert(slot, off);
            }
            Op::Unlink { slot, .. } => {
                self.links.remove(&slot);
            }
            Op::Free { off } => {
                self.live.remove(&off);
            }
            Op::FreeMany { offs, n } => {
                for off in &offs[..n] {
                    self.live.remove(off);
                }
            }
        }
    }
}

impl Journal {
    /// The model after the first `n` operations.
    fn state_after(&self, n: usize) -> ModelState {
        let mut m = ModelState { live: [self.table].into(), ..ModelState::default() };
        for (op, result) in self.ops.iter().zip(&self.results).take(n) {
            m.apply(*op, *result);
        }
        m
    }
}

/// Runs one operation: announces it, does it, records an allocation's
/// offset, acknowledges it.
fn exec(
    pool: &Pool,
    acks: &AckCounter,
    journal: &Mutex<Journal>,
    op: Op,
    bug: Bug,
) -> Result<Option<PoolOffset>, String> {
    let table = {
        let mut j = journal.lock().unwrap();
        j.ops.push(op);
        j.results.push(None);
        j.table
    };
    let result = match op {
        Op::Alloc { size } => {
            let off = pool.alloc(size).map_err(|e| format!("alloc({size}): {e}"))?;
            pool.store_u64(off, tag(off)).map_err(|e| e.to_string())?;
            if bug != Bug::UnpersistedContents {
                pool.persist(off, 8);
            }
            Some(off)
        }
        Op::Link { slot, off } => {
            pool.store_u64(table + slot * 8, off).map_err(|e| e.to_string())?;
            pool.persist(table + slot * 8, 8);
            None
        }
        Op::Unlink { slot, .. } => {
            pool.store_u64(table + slot * 8, 0).map_err(|e| e.to_string())?;
            pool.persist(table + slot * 8, 8);
            None
        }
        Op::Free { off } => {
            pool.free(off).map_err(|e| format!("free({off:#x}): {e}"))?;
            None
        }
        Op::FreeMany { offs, n } => {
            pool.free_many(&offs[..n]).map_err(|e| format!("free_many({:x?}): {e}", &offs[..n]))?;
            None
        }
    };
    *journal.lock().unwrap().results.last_mut().ok_or("empty journal")? = result;
    acks.ack();
    Ok(result)
}

fn random_size(rng: &mut ChaCha8Rng) -> u64 {
    match rng.gen_range(0..10) {
        0..=6 => rng.gen_range(1..=512),
        7 => rng.gen_range(513..=2048),
        _ => rng.gen_range(32 * KIB + 1..=160 * KIB),
    }
}

/// `ops` random operations (an operation of a buggy engine may count as two).
fn workload(
    pool: &Pool,
    acks: &AckCounter,
    journal: &Mutex<Journal>,
    ops: usize,
    seed: u64,
    bug: Bug,
) -> Result<(), String> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut pending: Vec<PoolOffset> = Vec::new(); // allocated, never linked
    let mut linked: BTreeMap<u64, PoolOffset> = BTreeMap::new();
    let mut unlinked: Vec<PoolOffset> = Vec::new(); // unlinked, not yet freed
    for _ in 0..ops {
        let free_slots: Vec<u64> = (0..SLOTS).filter(|s| !linked.contains_key(s)).collect();
        let weights = [
            if pending.len() < 6 { 4 } else { 0 },
            if !pending.is_empty() && !free_slots.is_empty() { 4 } else { 0 },
            match linked.len() as u64 {
                0 => 0,
                n if n > SLOTS * 3 / 4 => 8,
                _ => 2,
            },
            if unlinked.is_empty() { 0 } else { 4 },
            if pending.len() > 2 { 1 } else { 0 },
        ];
        let mut pick = rng.gen_range(0..weights.iter().sum::<u32>());
        let choice = weights.iter().position(|w| {
            if pick < *w {
                true
            } else {
                pick -= w;
                false
            }
        });
        match choice {
            Some(0) => {
                let off = exec(pool, acks, journal, Op::Alloc { size: random_size(&mut rng) }, bug)?;
                pending.push(off.ok_or("alloc without offset")?);
            }
            Some(1) => {
                let off = pending.swap_remove(rng.gen_range(0..pending.len()));
                let slot = free_slots[rng.gen_range(0..free_slots.len())];
                exec(pool, acks, journal, Op::Link { slot, off }, bug)?;
                linked.insert(slot, off);
            }
            Some(2) => {
                let slots: Vec<u64> = linked.keys().copied().collect();
                let slot = slots[rng.gen_range(0..slots.len())];
                let off = linked.remove(&slot).ok_or("slot vanished")?;
                if bug == Bug::FreeBeforeUnlink {
                    exec(pool, acks, journal, Op::Free { off }, bug)?;
                    exec(pool, acks, journal, Op::Unlink { slot, off }, bug)?;
                } else {
                    exec(pool, acks, journal, Op::Unlink { slot, off }, bug)?;
                    unlinked.push(off);
                }
            }
            Some(3) if unlinked.len() >= 2 && rng.gen_bool(0.5) => {
                let mut offs = [0; 3];
                let n = unlinked.len().min(3);
                for o in offs.iter_mut().take(n) {
                    *o = unlinked.swap_remove(rng.gen_range(0..unlinked.len()));
                }
                exec(pool, acks, journal, Op::FreeMany { offs, n }, bug)?;
            }
            Some(3) => {
                let off = unlinked.swap_remove(rng.gen_range(0..unlinked.len()));
                exec(pool, acks, journal, Op::Free { off }, bug)?;
            }
            Some(4) => {
                let off = pending.swap_remove(rng.gen_range(0..pending.len()));
                exec(pool, acks, journal, Op::Free { off }, bug)?;
            }
            _ => return Err("no operation possible".into()),
        }
    }
    Ok(())
}

/// The checker of one crash state of the workload.
fn check_workload_state(state: &CrashState, journal: &Mutex<Journal>) -> Result<(), String> {
    let (table, before, in_flight, after) = {
        let j = journal.lock().unwrap();
        let acked = state.acknowledged as usize;
        if acked > j.ops.len() {
            return Err(format!("{acked} acknowledged but {} operations journaled", j.ops.len()));
        }
        let before = j.state_after(acked);
        let in_flight = j.ops.get(acked).copied();
        let after = in_flight.map(|op| {
            let mut m = before.clone();
            m.apply(op, None);
            m
        });
        (j.table, before, in_flight, after)
    };
    let pool = Pool::from_image(&state.image, &opts()).map_err(|e| format!("reopen: {e}"))?;
    if pool.root(LINKS) != Some(table) {
        return Err(format!("root {LINKS} is {:?}, expected {table:#x}", pool.root(LINKS)));
    }
    check_ok(&pool, "after reopen")?;

    // The link table: the model after the acknowledged operations, or after
    // the one in flight.
    let links = read_links(&pool, table)?;
    if links != before.links && after.as_ref().map(|a| &a.links) != Some(&links) {
        return Err(format!(
            "link table {links:x?} is neither the model after {} ops {:x?} nor after the in-flight {in_flight:?}",
            state.acknowledged, before.links
        ));
    }
    let blocks = allocated(&pool)?;
    let reachable = check_reachable(&pool, table, &links, &blocks)?;

    // The allocator: exactly the live blocks, give or take the in-flight
    // allocation (one new block) or free.
    let got: BTreeSet<PoolOffset> = blocks.keys().copied().collect();
    let ok = got == before.live
        || match in_flight {
            Some(Op::Alloc { size }) => {
                let extra: Vec<_> = got.difference(&before.live).collect();
                before.live.is_subset(&got) && extra.len() == 1 && blocks[extra[0]] >= size
            }
            Some(Op::Free { off }) => {
                let mut less = before.live.clone();
                less.remove(&off);
                got == less
            }
            // Before its one fence, any subset of the frees may have persisted.
            Some(Op::FreeMany { offs, n }) => {
                got.is_subset(&before.live) && before.live.difference(&got).all(|off| offs[..n].contains(off))
            }
            _ => false,
        };
    if !ok {
        let extra: Vec<_> = got.difference(&before.live).collect();
        let missing: Vec<_> = before.live.difference(&got).collect();
        return Err(format!(
            "allocated blocks differ from the model after {} ops (in flight {in_flight:?}): extra {extra:x?}, missing {missing:x?}",
            state.acknowledged
        ));
    }
    reclaim_exactly(&pool, table, &blocks, &reachable)
}

fn assert_clean(name: &str, seed: u64, report: &SweepReport) {
    eprintln!(
        "{name} (TEMBO_SEED={seed}): {} fences, {} crash states checked, {} failed",
        report.fences, report.states_checked, report.failure_count
    );
    assert!(
        report.is_ok(),
        "{name} (TEMBO_SEED={seed}): {} of {} crash states failed:\n{}",
        report.failure_count,
        report.states_checked,
        report.failures.join("\n")
    );
}

/// Sweeps the workload; returns the report and the number of operations run.
fn sweep_workload(cfg: &SweepConfig, ops: usize, seed: u64, bug: Bug) -> (SweepReport, usize) {
    let (pool, table) = pool_with_table();
    let journal = Arc::new(Mutex::new(Journal { table, ..Journal::default() }));
    let j = journal.clone();
    let report = sweep(
        cfg,
        &pool,
        |pool, acks| workload(pool, acks, &journal, ops, seed, bug),
        move |state| check_workload_state(state, &j),
    );
    let n = journal.lock().unwrap().ops.len();
    (report, n)
}

#[test]
fn every_crash_point_of_an_alloc_link_unlink_free_workload_recovers_exactly() {
    let seed = seed();
    let ops = if full_scale() { 1200 } else { 300 };
    let cfg = SweepConfig::exhaustive(seed);
    let (report, n) = sweep_workload(&cfg, ops, seed, Bug::None);
    assert_clean("alloc/link/unlink/free workload", seed, &report);
    assert_eq!(n, ops);
    assert!(report.fences > ops as u64, "{} fences for {ops} operations", report.fences);
    assert_eq!(report.states_checked, (report.fences + 1) * CrashPolicy::ALL.len() as u64);
}

// ----- crashing leak reclamation ---------------------------------------------

/// Builds a crashed pool with many leaks: small blocks of several classes
/// (one slab entirely leaked), large runs next to each other and to linked
/// ones, and blocks unlinked but never freed. Returns the image and the table.
fn leaky_image(seed: u64) -> (Vec<u8>, PoolOffset) {
    let (pool, table) = pool_with_table();
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut blocks = Vec::new();
    for i in 0..120u64 {
        let size = match i % 12 {
            0 | 1 => rng.gen_range(32 * KIB + 1..=96 * KIB),
            2..=4 => 2000,
            _ => rng.gen_range(1..=400),
        };
        let off = pool.alloc(size).unwrap();
        pool.store_u64(off, tag(off)).unwrap();
        pool.persist(off, 8);
        blocks.push((i, size, off));
    }
    // Keep a few of each kind linked; the 2000-byte blocks all leak.
    let linked = blocks.iter().filter(|(i, size, _)| i % 7 == 3 && *size != 2000).take(SLOTS as usize);
    for (slot, &(_, _, off)) in (0u64..).zip(linked) {
        pool.store_u64(table + slot * 8, off).unwrap();
        pool.persist(table + slot * 8, 8);
    }
    // Unlink the first two links again, without freeing: leaks too.
    for slot in 0..2 {
        pool.store_u64(table + slot * 8, 0).unwrap();
        pool.persist(table + slot * 8, 8);
    }
    let sim = pool.simulator().unwrap();
    (sim.crash_image(&pool, CrashPolicy::None, &mut ChaCha8Rng::seed_from_u64(seed)), table)
}

/// What every crash state of a reclamation must satisfy.
#[derive(Clone, Debug)]
struct ReclaimExpect {
    table: PoolOffset,
    links: BTreeMap<u64, PoolOffset>,
    /// Allocated blocks before any reclamation.
    before: BTreeMap<PoolOffset, u64>,
}

/// Checks a crash state of a reclamation run; with `nest`, also sweeps the
/// crash points of the second reclamation of a sample of states.
fn check_reclaim_state(state: &CrashState, ex: &ReclaimExpect, nest: bool) -> Result<(), String> {
    let pool = Pool::from_image(&state.image, &opts()).map_err(|e| format!("reopen: {e}"))?;
    check_ok(&pool, "after reopen")?;
    let links = read_links(&pool, ex.table)?;
    if links != ex.links {
        return Err(format!("reclamation changed the link table: {links:x?}, expected {:x?}", ex.links));
    }
    let blocks = allocated(&pool)?;
    let reachable = check_reachable(&pool, ex.table, &links, &blocks)?;
    if let Some((off, _)) = blocks.iter().find(|(o, u)| ex.before.get(*o) != Some(*u)) {
        return Err(format!("block {off:#x} appeared during reclamation"));
    }
    if state.acknowledged == 1 && blocks != reachable {
        return Err(format!("reclamation finished but {} leaks remain", blocks.len() - reachable.len()));
    }
    let sample = state.fence_index.is_some_and(|f| f % 5 == 0) && state.policy == CrashPolicy::RandomWords;
    if nest && sample {
        let inner = Pool::from_image(&state.image, &opts()).map_err(|e| format!("reopen for the nested sweep: {e}"))?;
        let inner_ex = ReclaimExpect { before: blocks.clone(), ..ex.clone() };
        let cfg = SweepConfig {
            points: CrashPoints::Every,
            policies: vec![CrashPolicy::None, CrashPolicy::RandomLines],
            ..SweepConfig::exhaustive(state.seed)
        };
        let report = sweep(
            &cfg,
            &inner,
            |p, acks| {
                p.reclaim_leaks(&[&LinkTracer { table: ex.table }]).map_err(|e| e.to_string())?;
                acks.ack();
                Ok(())
            },
            move |s| check_reclaim_state(s, &inner_ex, false),
        );
        if !report.is_ok() {
            return Err(format!("crashing the second reclamation: {}", report.failures.join("; ")));
        }
    }
    reclaim_exactly(&pool, ex.table, &blocks, &reachable)
}

#[test]
fn crashing_leak_reclamation_at_every_fence_then_reclaiming_again_is_exact() {
    let seed = seed();
    let (image, table) = leaky_image(seed);
    let pool = Pool::from_image(&image, &opts()).unwrap();
    assert!(pool.opened_unclean());
    let links = read_links(&pool, table).unwrap();
    let before = allocated(&pool).unwrap();
    let reachable = check_reachable(&pool, table, &links, &before).unwrap();
    let leaks = before.len() - reachable.len();
    assert!(leaks >= 60, "only {leaks} leaks to reclaim");
    let leak_report = pool.find_leaks(&[&LinkTracer { table }]).unwrap();
    assert_eq!(leak_report.leaked.len(), leaks);
    assert_eq!(leak_report.reachable_blocks, reachable.len() as u64);

    let ex = ReclaimExpect { table, links, before };
    let checker_ex = ex.clone();
    let report = sweep(
        &SweepConfig::exhaustive(seed),
        &pool,
        |p, acks| {
            let r = p.reclaim_leaks(&[&LinkTracer { table }]).map_err(|e| e.to_string())?;
            if r.reclaimed_blocks != leaks as u64 {
                return Err(format!("reclaimed {r:?}, expected {leaks} leaks"));
            }
            acks.ack();
            Ok(())
        },
        move |state| check_reclaim_state(state, &checker_ex, true),
    );
    assert_clean("crashing reclamation", seed, &report);
    assert!(report.fences >= leaks as u64, "{} fences to free {leaks} leaks", report.fences);
    assert!(pool.leaks_reclaimed());
    assert_eq!(allocated(&pool).unwrap(), reachable);
    check_ok(&pool, "after the swept reclamation").unwrap();
}

// ----- negative controls ---------------------------------------------------------

#[test]
fn negative_control_linking_unpersisted_contents_is_caught() {
    let seed = seed();
    let (report, _) = sweep_workload(&SweepConfig::exhaustive(seed), 80, seed, Bug::UnpersistedContents);
    assert!(report.failure_count > 0, "the sweep missed contents linked before they were persisted");
    assert!(
        report.failures.iter().any(|f| f.contains("lost its contents")),
        "failures do not name the lost contents: {:?}",
        report.failures
    );
}

#[test]
fn negative_control_freeing_before_unlinking_is_caught() {
    let seed = seed();
    let (report, _) = sweep_workload(&SweepConfig::exhaustive(seed), 80, seed, Bug::FreeBeforeUnlink);
    assert!(report.failure_count > 0, "the sweep missed a block freed while still linked");
    assert!(
        report.failures.iter().any(|f| f.contains("is not allocated")),
        "failures do not name the freed reachable block: {:?}",
        report.failures
    );
}

#[test]
fn reclamation_refuses_a_reachable_free_block_and_frees_nothing() {
    // The state the free-before-unlink engine leaves: a linked block that is
    // free. Marking reports it as corruption, and no leak is freed.
    let (pool, table) = pool_with_table();
    let leak = pool.alloc(64).unwrap();
    let dangling = pool.alloc(64).unwrap();
    pool.store_u64(table, dangling).unwrap();
    pool.persist(table, 8);
    pool.free(dangling).unwrap();
    let image = pool.simulator().unwrap().crash_image(&pool, CrashPolicy::None, &mut ChaCha8Rng::seed_from_u64(seed()));
    let re = Pool::from_image(&image, &opts()).unwrap();
    let before = allocated(&re).unwrap();
    assert!(before.contains_key(&leak) && !before.contains_key(&dangling));
    let found = re.find_leaks(&[&LinkTracer { table }]);
    assert!(matches!(found, Err(PmemError::Corrupted { offset, .. }) if offset == dangling), "find_leaks: {found:?}");
    let reclaimed = re.reclaim_leaks(&[&LinkTracer { table }]);
    assert!(
        matches!(reclaimed, Err(PmemError::Corrupted { offset, .. }) if offset == dangling),
        "reclaim_leaks: {reclaimed:?}"
    );
    assert_eq!(allocated(&re).unwrap(), before, "a failed reclamation freed something");
    assert!(!re.leaks_reclaimed());
    check_ok(&re, "after the refused reclamation").unwrap();
}
