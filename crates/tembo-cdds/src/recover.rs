//! Recovery after an unclean shutdown (thesis §4.4.5, Alg. 6), done lazily:
//! the tree serves reads and writes at once and repairs itself behind them.
//!
//! The batch in flight at the crash can only have used version `a = v + 1`
//! (`v` = the commit word). Open records `a` in the metadata block's
//! aborted list and stores `a` as the commit word (both persisted): from
//! then on an entry that *starts* at an aborted version is absent, an entry
//! that *ends* at one is live, and writers use `a + 1` and up, so version
//! `a` reads exactly as `v` did. While the list is non-empty:
//! - readers verify every slot's checks (skipping torn slots), trust a
//!   node's order line only if it names exactly its valid slots in key
//!   order (else sort), and apply the aborted rule (`node::read_checked`);
//! - a writer repairs every node before it reads it for a change (its
//!   descent path, a sibling it merges with): torn slots and aborted
//!   starts are cleared, aborted ends reset to live and the order line
//!   rebuilt — the same persisted stores a full repair uses, so every
//!   repair is itself crash-safe;
//! - a background thread walks every node visible at `a` (which it pins,
//!   so no entry it still has to follow is collected under it), a few
//!   dozen nodes per step under the writer lock, and repairs them; then it
//!   empties the list and readers return to the unchecked fast path.
//!
//! Then the leak sweep frees what the aborted batch allocated and what
//! committed batches retired but had not freed, while writers go on: the
//! pool marks every block allocated from the sweep's start, the tree
//! defers its own frees, and the thread marks, in steps under the writer
//! lock, everything reachable from the root it started at — the records
//! and children of owners (`write::is_owner`), and of every entry of a
//! node that died (was split or merged away) after the version the sweep
//! pins (the copies may sit in nodes created since, which the walk does
//! not visit; a node that died earlier has its copies in nodes that
//! existed when the walk began). Nothing the walk has
//! still to reach can be freed meanwhile (entries visible at the pinned
//! version are kept, and frees are deferred), so when the walk is done,
//! under the writer lock, every block still reachable was marked,
//! allocated since, or is waiting in the tree's limbo (marked then). What
//! is unmarked at that moment nobody can reach again; the pool frees it
//! run by run while writers go on (blocks they allocate meanwhile are
//! still marked), and the tree's own frees resume.
//!
//! After eight crashes before a lazy recovery finished, the list is full
//! and open repairs eagerly before serving (then sweeps the same way).
//! The sweep also keeps the block of every other pool root (the store's
//! engine record), so a pool shared with other roots loses nothing.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::{Mutex, RwLock};
use tembo_pmem::{Marker, PmemError, Pool};

use crate::entry::{Entry, Slot};
use crate::error::{CddsError, Result};
use crate::node::{self, NodeWriter, OrderLine, NODE_SLOTS};
use crate::search;
use crate::tree::TreeCore;
use crate::write::is_owner;

/// Nodes one background recovery step handles under the writer lock at
/// most, by default.
pub const NODES_PER_STEP: usize = 64;
/// A step also ends once it has held the writer lock this long, so a
/// waiting writer's latency stays bounded whatever the nodes cost.
const STEP_TIME: Duration = Duration::from_micros(500);

/// Hook run between two background recovery steps, without the writer lock.
pub type BetweenSteps = Arc<dyn Fn(&TreeCore) + Send + Sync>;

/// Knobs of the background recovery (see [`TreeCore::tune_recovery`]).
#[derive(Clone)]
pub struct RecoveryTuning {
    /// Nodes per step (at least 1): smaller steps let writers in sooner.
    pub nodes_per_step: usize,
    /// Run between steps (tests use it to interleave writes exactly there).
    pub between_steps: Option<BetweenSteps>,
}

impl Default for RecoveryTuning {
    fn default() -> Self {
        RecoveryTuning { nodes_per_step: NODES_PER_STEP, between_steps: None }
    }
}

impl std::fmt::Debug for RecoveryTuning {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RecoveryTuning")
            .field("nodes_per_step", &self.nodes_per_step)
            .field("between_steps", &self.between_steps.is_some())
            .finish()
    }
}

/// What recovery did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RecoveryReport {
    /// Whether the pool was opened after an unclean shutdown.
    pub ran: bool,
    /// Whether the tree served at once and repaired in the background
    /// (`false`: the aborted list was full and open repaired first).
    pub lazy: bool,
    /// The versions recorded as aborted at open.
    pub aborted: Vec<u64>,
    /// Nodes walked by the repair.
    pub nodes_visited: u64,
    /// Nodes that needed a change (by the walk or by writers).
    pub nodes_repaired: u64,
    /// Slots removed (torn, duplicate, or from an aborted version).
    pub slots_removed: u64,
    /// Entries whose end from an aborted version was reset to live.
    pub ends_reset: u64,
    /// Leaked blocks freed by the sweep.
    pub leaks_freed: u64,
    /// Their usable bytes.
    pub leak_bytes: u64,
    /// Wall time from open until the tree served (what open itself took).
    pub open_time: Duration,
    /// Wall time of the repair (eager: at open; lazy: the background walk).
    pub repair_time: Duration,
    /// Wall time of the leak sweep (in the background).
    pub sweep_time: Duration,
    /// Why the background recovery failed, if it did (the pool then stays
    /// marked for recovery at the next open).
    pub sweep_error: Option<String>,
    /// Whether the background part had finished when the report was taken.
    pub finished: bool,
}

/// The tree's recovery state, shared by readers, writers and the
/// background recovery thread.
#[derive(Debug, Default)]
pub(crate) struct RecoveryState {
    /// Whether aborted versions are still marked somewhere in the tree.
    active: AtomicBool,
    aborted: RwLock<Arc<Vec<u64>>>,
    /// Set while the concurrent leak sweep runs: frees wait in the limbo.
    pub(crate) sweeping: AtomicBool,
    /// Set by `Tree::drop` to stop the background thread between steps.
    pub(crate) cancel: AtomicBool,
    /// What the background work needs to do (`None`: nothing).
    plan: Mutex<Option<Plan>>,
    pub(crate) report: Mutex<RecoveryReport>,
    pub(crate) thread: Mutex<Option<std::thread::JoinHandle<()>>>,
    pub(crate) done: std::sync::OnceLock<RecoveryReport>,
    tuning: Mutex<RecoveryTuning>,
}

/// The background work decided at open.
#[derive(Clone, Copy, Debug)]
struct Plan {
    /// Repair walk from this root, following entries visible at `pinned`.
    repair_from: Option<u64>,
    /// The version pinned at open (released once the walk is done).
    pinned: u64,
}

/// The nodes a walk has seen: one bit per 64-byte line of the pool (nodes
/// are line aligned), allocated up front so that no rehash of hundreds of
/// thousands of entries happens in a step that holds the writer lock.
struct SeenNodes(Vec<u64>);

impl SeenNodes {
    fn new(pool: &Pool) -> SeenNodes {
        SeenNodes(vec![0; (pool.size() / 64 / 64 + 1) as usize])
    }

    /// Marks `n` seen; `true` the first time. A reference that cannot be
    /// a node (outside the pool, not line aligned) is a damaged pool.
    fn insert(&mut self, pool: &Pool, n: u64) -> Result<bool> {
        if n % 64 != 0 || pool.check_range(n, node::NODE_BYTES).is_err() {
            return Err(CddsError::invariant("a child reference that cannot be a node", n));
        }
        let line = (n / 64) as usize;
        if line / 64 >= self.0.len() {
            self.0.resize(line / 64 + 1, 0); // the pool grew meanwhile
        }
        let (w, b) = (line / 64, line % 64);
        let fresh = self.0[w] & (1 << b) == 0;
        self.0[w] |= 1 << b;
        Ok(fresh)
    }
}

/// Brings node `n` back to what it holds without the versions `aborted`
/// says were aborted, with an order line that names exactly its entries in
/// key order: removes torn slots and entries starting at an aborted
/// version, resets ends at an aborted version to live, and drops moved
/// entries that ended at or before `oldest` (no retained version sees
/// them, and the record they name belongs to their copy, which may be
/// gone: their keys cannot be trusted for sorting). The order line is kept
/// if it names exactly the valid slots in key order, else rebuilt by
/// sorting. Returns (slots removed, ends reset); a clean node is not
/// written. Crash-safe: every step only removes what no version sees, and
/// the order line is not trusted until every node is repaired.
pub fn repair_node_with(
    pool: &Pool,
    session: u64,
    n: u64,
    aborted: &dyn Fn(u64) -> bool,
    oldest: u64,
) -> Result<(u64, u64)> {
    let slots = node::raw_slots(pool, n)?;
    let order = node::order_line(pool, n)?;
    let norm = |e: &Entry| {
        if e.end != 0 && aborted(e.end) && !aborted(e.start) {
            Entry { end: 0, moved: false, ..*e }
        } else {
            *e
        }
    };
    let mut reset = 0;
    for (i, s) in slots.iter().enumerate() {
        if let Slot::Valid(e) = s {
            if norm(e) != *e {
                node::set_end(pool, n, i, e, 0, false)?;
                reset += 1;
            }
        }
    }
    if reset > 0 {
        pool.fence();
    }
    let (mut used, mut valid, mut keep) = (0u32, 0u32, 0u32);
    for (i, s) in slots.iter().enumerate() {
        match s {
            Slot::Empty => continue,
            Slot::Torn => {}
            Slot::Valid(e) => {
                valid |= 1 << i;
                let e = norm(e);
                let unseen_copy = e.moved && e.end != 0 && e.end <= oldest;
                if !aborted(e.start) && !unseen_copy {
                    keep |= 1 << i;
                }
            }
        }
        used |= 1 << i;
    }
    let (candidates, _) = order.trusted_or_by_slot(valid);
    let mut seq: Vec<u8> = candidates.slots().iter().copied().filter(|&s| keep & (1 << s) != 0).collect();
    let mut entries: Vec<Entry> = seq
        .iter()
        .map(|&s| match slots[s as usize] {
            Slot::Valid(e) => norm(&e),
            _ => unreachable!("only valid slots are kept"),
        })
        .collect();
    node::sort_by_key(pool, &mut entries, &mut seq)?;
    let new_order = OrderLine::of(&seq);
    let clear: Vec<usize> = (0..NODE_SLOTS).filter(|&i| used & !keep & (1 << i) != 0).collect();
    if clear.is_empty() && new_order == order {
        return Ok((0, reset));
    }
    NodeWriter::begin(pool, n, session)?.rewrite(new_order, &clear)?;
    Ok((clear.len() as u64, reset))
}

/// Brings node `n` back to exactly version `v` (every version above `v`
/// aborted): the undo of a failed batch.
pub fn repair_node(pool: &Pool, session: u64, n: u64, v: u64, oldest: u64) -> Result<(u64, u64)> {
    repair_node_with(pool, session, n, &|x| x > v, oldest)
}

impl RecoveryState {
    /// The aborted versions while some node may still carry them.
    #[inline]
    pub(crate) fn aborted(&self) -> Option<Arc<Vec<u64>>> {
        if self.active.load(Ordering::Acquire) {
            Some(self.aborted.read().clone())
        } else {
            None
        }
    }

    fn note_repair(&self, removed: u64, reset: u64) {
        if removed + reset > 0 {
            let mut r = self.report.lock();
            r.nodes_repaired += 1;
            r.slots_removed += removed;
            r.ends_reset += reset;
        }
    }
}

impl TreeCore {
    /// The aborted versions while a lazy recovery has not repaired every
    /// node (readers then take the checked path).
    #[inline]
    pub(crate) fn lazy_aborted(&self) -> Option<Arc<Vec<u64>>> {
        self.recovery.aborted()
    }

    /// Repairs node `n` if a lazy recovery may have left it unrepaired
    /// (the writer calls it, holding the writer lock, before it reads a
    /// node it will change).
    pub(crate) fn repair_before_write(&self, n: u64, aborted: &[u64], oldest: u64) -> Result<()> {
        let (removed, reset) = repair_node_with(&self.pool, self.session, n, &|x| aborted.contains(&x), oldest)?;
        self.recovery.note_repair(removed, reset);
        Ok(())
    }

    /// Decides recovery at open (before the tree serves): records the
    /// aborted version and moves the commit word past it (lazy), or repairs
    /// every node first when the aborted list is full (eager). Either way
    /// the leak sweep is left for [`TreeCore::run_recovery`].
    pub(crate) fn begin_recovery(&self, unclean: bool) -> Result<()> {
        let t0 = Instant::now();
        let pool = &*self.pool;
        let mut aborted = self.meta.aborted(pool)?;
        if !unclean && aborted.is_empty() {
            return Ok(());
        }
        let _ws = self.writer.lock();
        let v = self.current_version()?;
        if let Some(&bad) = aborted.iter().find(|&&a| a > v + 1) {
            // Only `v + 1` is ever recorded, and the commit word then moves
            // to it: a later version in the list is a corrupted block.
            return Err(CddsError::invariant(
                format!("metadata block lists version {bad} as aborted, beyond the current version {v}"),
                self.meta.off,
            ));
        }
        let root = self.meta.root(pool)?;
        let mut report = RecoveryReport { ran: true, ..Default::default() };
        if unclean && !aborted.contains(&(v + 1)) {
            if self.meta.add_aborted(pool, v + 1)? {
                aborted.push(v + 1);
            } else {
                // The list is full: repair everything now, then forget it.
                *self.recovery.report.lock() = report;
                let visited = self.repair_eager(root, v, &aborted)?;
                self.meta.clear_aborted(pool)?;
                // Version v + 1 reads as v now; committing it keeps writers
                // off it. The interrupted batch's nodes were born at v + 1,
                // and a node of a new batch at v + 1 given one of their
                // blocks back (the sweep frees them) would share their slot
                // salt: their slots would read as its entries wherever it
                // leaves slots unused and a crash drops its zeroes.
                self.commit_version(v + 1)?;
                let mut r = self.recovery.report.lock();
                r.aborted = aborted;
                r.nodes_visited = visited;
                r.repair_time = t0.elapsed();
                r.open_time = t0.elapsed();
                drop(r);
                self.pin_version(v + 1);
                *self.recovery.plan.lock() = Some(Plan { repair_from: None, pinned: v + 1 });
                return Ok(());
            }
        }
        // Version v + 1 now reads exactly as v: make it the current one so
        // that writers start above every aborted version.
        let current = if unclean {
            self.commit_version(v + 1)?;
            v + 1
        } else {
            v
        };
        *self.recovery.aborted.write() = Arc::new(aborted.clone());
        self.recovery.active.store(true, Ordering::Release);
        report.lazy = true;
        report.aborted = aborted;
        report.open_time = t0.elapsed();
        *self.recovery.report.lock() = report;
        self.pin_version(current);
        *self.recovery.plan.lock() = Some(Plan { repair_from: Some(root), pinned: current });
        Ok(())
    }

    /// Whether background recovery work is pending (started by `Tree::open`).
    pub(crate) fn recovery_pending(&self) -> bool {
        self.recovery.plan.lock().is_some()
    }

    /// Repairs every node visible at `v` (aborted: above `v` or listed)
    /// at once; the caller holds the writer lock. Returns the nodes visited.
    fn repair_eager(&self, root: u64, v: u64, listed: &[u64]) -> Result<u64> {
        let aborted = |x: u64| x > v || listed.contains(&x);
        let mut stack = vec![root];
        let mut seen = SeenNodes::new(&self.pool);
        let mut visited = 0;
        while let Some(n) = stack.pop() {
            if seen.insert(&self.pool, n)? {
                visited += 1;
                self.repair_and_descend(n, &aborted, v, &mut stack)?;
            }
        }
        Ok(visited)
    }

    /// Repairs node `n` (one step of a repair walk) and pushes the children
    /// of its entries visible at `v` once repaired.
    fn repair_and_descend(&self, n: u64, aborted: &dyn Fn(u64) -> bool, v: u64, stack: &mut Vec<u64>) -> Result<()> {
        let oldest = self.oldest_retained(self.current_version()?, self.pins.min_pinned());
        let (removed, reset) = repair_node_with(&self.pool, self.session, n, aborted, oldest)?;
        self.recovery.note_repair(removed, reset);
        let copy = node::read_own(&self.pool, n)?;
        if copy.level > 0 {
            for e in copy.entries().iter().filter(|e| e.visible_at(v, &[])) {
                stack.push(search::child_of(&self.pool, e)?);
            }
        }
        Ok(())
    }

    fn pin_version(&self, v: u64) {
        *self.snapshots.lock().entry(v).or_insert(0) += 1;
    }

    fn unpin_version(&self, v: u64) {
        let mut s = self.snapshots.lock();
        if let Some(c) = s.get_mut(&v) {
            *c -= 1;
            if *c == 0 {
                s.remove(&v);
            }
        }
    }

    /// Runs the background part of recovery (repair walk, then the leak
    /// sweep) on the calling thread, in steps that each hold the writer
    /// lock briefly. Stops early, leaving the pool marked for recovery,
    /// when the tree is being dropped.
    pub(crate) fn run_recovery(&self) {
        let Some(plan) = self.recovery.plan.lock().take() else { return };
        let outcome = self.recovery_phases(plan);
        let mut r = self.recovery.report.lock();
        if let Err(e) = outcome {
            // The next open must recover again.
            self.pool.keep_unclean();
            if self.pool.concurrent_sweep_running() {
                self.pool.abandon_concurrent_sweep();
            }
            self.recovery.sweeping.store(false, Ordering::Release);
            r.sweep_error = Some(e.to_string());
        }
        r.finished = true;
    }

    fn recovery_phases(&self, plan: Plan) -> Result<()> {
        let mut pinned = Some(plan.pinned);
        let result = (|| {
            if let Some(root) = plan.repair_from {
                let t = Instant::now();
                self.repair_walk(root, plan.pinned)?;
                self.recovery.report.lock().repair_time = t.elapsed();
            }
            let t = Instant::now();
            let (blocks, bytes) = self.concurrent_sweep(&mut pinned)?;
            let mut r = self.recovery.report.lock();
            r.sweep_time = t.elapsed();
            r.leaks_freed = blocks;
            r.leak_bytes = bytes;
            Ok(())
        })();
        if let Some(p) = pinned {
            self.unpin_version(p);
        }
        result
    }

    /// Sets the background recovery's step size and hook; takes effect at
    /// its next step. (Call it right after [`crate::Tree::open_deferred`] to
    /// cover the whole recovery.)
    pub fn tune_recovery(&self, tuning: RecoveryTuning) {
        *self.recovery.tuning.lock() = RecoveryTuning { nodes_per_step: tuning.nodes_per_step.max(1), ..tuning };
    }

    /// Between two steps: runs the hook, then checks for cancellation.
    /// Returns the size of the next step.
    fn between_steps(&self) -> Result<usize> {
        let t = self.recovery.tuning.lock().clone();
        if let Some(hook) = &t.between_steps {
            hook(self);
        }
        self.check_cancel()?;
        Ok(t.nodes_per_step)
    }

    fn check_cancel(&self) -> Result<()> {
        if self.recovery.cancel.load(Ordering::Acquire) {
            return Err(CddsError::invariant("recovery interrupted by close; the next open resumes it", 0));
        }
        Ok(())
    }

    /// The lazy repair walk: every node visible at `pinned` (kept visible by
    /// the pin), a step at a time; then the aborted list is emptied.
    fn repair_walk(&self, root: u64, pinned: u64) -> Result<()> {
        let pool = &*self.pool;
        let aborted = self.recovery.aborted.read().clone();
        let is_aborted = |x: u64| aborted.contains(&x);
        let mut stack = vec![root];
        let mut seen = SeenNodes::new(pool);
        while !stack.is_empty() {
            let step = self.between_steps()?;
            let mut ws = self.writer.lock();
            let started = Instant::now();
            let mut visited = 0;
            while visited < step && started.elapsed() < STEP_TIME {
                let Some(n) = stack.pop() else { break };
                if !seen.insert(pool, n)? {
                    continue;
                }
                visited += 1;
                self.repair_and_descend(n, &is_aborted, pinned, &mut stack)?;
            }
            self.recovery.report.lock().nodes_visited += visited as u64;
            // Writers waiting for the lock go before the next step.
            self.serve_riders(&mut ws);
            ws.unlock_fair();
        }
        let _ws = self.writer.lock();
        self.meta.clear_aborted(pool)?;
        self.recovery.active.store(false, Ordering::Release);
        Ok(())
    }

    /// The leak sweep, concurrent with writers (see the module docs).
    /// Returns (blocks freed, bytes freed).
    fn concurrent_sweep(&self, pinned: &mut Option<u64>) -> Result<(u64, u64)> {
        let pool = &*self.pool;
        // Before the writer lock: marking blocks allocated from here on is
        // only ever too cautious, and the mark set is large to build.
        pool.begin_concurrent_sweep();
        let (root, since) = {
            let mut ws = self.writer.lock();
            let since = self.current_version()?;
            self.pin_version(since);
            if let Some(p) = pinned.replace(since) {
                self.unpin_version(p);
            }
            self.recovery.sweeping.store(true, Ordering::Release);
            // Retired before the sweep began and still waiting for readers:
            // allocated, and to be freed by the tree, not by the sweep.
            ws.limbo.expand_all(pool)?;
            let waiting: Vec<u64> = ws.limbo.blocks().collect();
            pool.concurrent_sweep_mark(&waiting, false)?;
            let mut fixed = vec![self.meta.off];
            let table = self.meta.snapshots(pool)?;
            if table != 0 {
                fixed.push(table);
            }
            let root = self.meta.root(pool)?;
            fixed.push(root);
            pool.concurrent_sweep_mark(&fixed, true)?;
            let foreign: Vec<u64> = pool
                .roots()
                .into_iter()
                .filter(|r| r.name != crate::meta::ROOT_NAME && r.offset != 0)
                .map(|r| r.offset)
                .collect();
            pool.concurrent_sweep_mark(&foreign, false)?;
            (root, since)
        };
        // (node, died at or before `since`): in such a node the entries
        // live when it died belong to their copies, which the walk finds
        // in nodes reachable at `since`; a node that died later is walked
        // whole (its copies may be in nodes created since, not walked).
        let mut stack = vec![(root, false)];
        let mut seen = SeenNodes::new(pool);
        seen.insert(pool, root)?;
        let mut marks = Vec::new();
        while !stack.is_empty() {
            let step = self.between_steps()?;
            let mut ws = self.writer.lock();
            let started = Instant::now();
            for _ in 0..step {
                if started.elapsed() >= STEP_TIME {
                    break;
                }
                let Some((n, dead)) = stack.pop() else { break };
                let level = node::level(pool, n)?;
                for s in node::raw_slots(pool, n)? {
                    let Slot::Valid(e) = s else { continue };
                    if (e.moved || dead) && e.end <= since && !is_owner(&e, dead) {
                        continue; // its owner is the copy, found on its own
                    }
                    marks.push(e.rec);
                    if level > 0 {
                        let child = search::child_of(pool, &e)?;
                        marks.push(child);
                        if seen.insert(pool, child)? {
                            stack.push((child, e.end != 0 && e.end <= since));
                        }
                    }
                }
                pool.concurrent_sweep_mark(&marks, true)?;
                marks.clear();
            }
            self.serve_riders(&mut ws);
            ws.unlock_fair();
        }
        let deferred = {
            // Everything reachable now is marked (or allocated since), and
            // so is what waits in the limbo (marked as it was retired).
            let mut ws = self.writer.lock();
            self.recovery.sweeping.store(false, Ordering::Release);
            if let Some(p) = pinned.take() {
                self.unpin_version(p);
            }
            self.settle_limbo(&mut ws);
            self.take_freeable(&mut ws, usize::MAX)
        };
        // What the limbo kept while the walk ran, freed here rather than
        // all at once in some writer's commit.
        for chunk in deferred.chunks(1024) {
            self.between_steps()?;
            let _ = pool.free_many(chunk);
        }
        // What is unmarked now nobody can reach again: free it in steps that
        // hold only the allocator lock, while writers go on.
        let (mut blocks, mut bytes) = (0, 0);
        loop {
            let budget = self.between_steps()? * 64;
            let step = pool.concurrent_sweep_free_step(budget)?;
            blocks += step.freed_blocks;
            bytes += step.freed_bytes;
            if step.done {
                break;
            }
        }
        pool.end_concurrent_sweep();
        Ok((blocks, bytes))
    }

    /// What recovery did at open, waiting for the background part to finish
    /// (running it here if no thread does). All zero after a clean shutdown.
    pub fn recovery_report(&self) -> &RecoveryReport {
        self.recovery.done.get_or_init(|| {
            let handle = self.recovery.thread.lock().take();
            match handle {
                Some(h) => {
                    if h.join().is_err() {
                        self.recovery.report.lock().sweep_error = Some("the recovery thread panicked".into());
                    }
                }
                None => self.run_recovery(),
            }
            let mut r = self.recovery.report.lock().clone();
            r.finished = true;
            r
        })
    }

    /// What recovery has done so far, without waiting for it.
    pub fn recovery_progress(&self) -> RecoveryReport {
        match self.recovery.done.get() {
            Some(r) => r.clone(),
            None => self.recovery.report.lock().clone(),
        }
    }

    /// Marks every block the tree owns: the metadata block, the snapshot
    /// table, every node reachable through non-moved entries, and the
    /// records of non-moved entries (a moved entry's record belongs to its copy).
    pub fn trace(&self, pool: &Pool, m: &mut Marker<'_>) -> std::result::Result<(), PmemError> {
        trace_owned(pool, self.meta, m)
    }
}

fn trace_owned(pool: &Pool, meta: crate::meta::Meta, m: &mut Marker<'_>) -> std::result::Result<(), PmemError> {
    m.mark(meta.off)?;
    let table = meta.snapshots(pool).map_err(to_pmem)?;
    if table != 0 {
        m.mark(table)?;
    }
    let root = meta.root(pool).map_err(to_pmem)?;
    let mut stack = vec![(root, false)];
    m.mark(root)?;
    while let Some((n, dead)) = stack.pop() {
        let level = node::level(pool, n).map_err(to_pmem)?;
        for s in node::raw_slots(pool, n).map_err(to_pmem)? {
            let Slot::Valid(e) = s else { continue };
            if !is_owner(&e, dead) {
                continue;
            }
            m.mark(e.rec)?;
            if level > 0 {
                let child = search::child_of(pool, &e).map_err(to_pmem)?;
                if m.mark(child)? {
                    stack.push((child, e.end != 0));
                }
            }
        }
    }
    Ok(())
}

fn to_pmem(e: CddsError) -> PmemError {
    match e {
        CddsError::Pmem(p) => p,
        CddsError::Invariant { what, offset } => PmemError::Corrupted { what, offset },
        other => PmemError::Corrupted { what: other.to_string(), offset: 0 },
    }
}
