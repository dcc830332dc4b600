//! Background, incremental garbage collection (thesis §4.4.4, Alg. 5).
//!
//! Why: dead-slot reuse alone removes dead entries only when a node fills
//! up, so the records of deleted or overwritten keys — a deleted 1 MiB
//! value included — stay allocated until later writes happen to land in
//! the same leaf. The incremental GC walks the tree in key order, a bounded
//! number of nodes per step, and in each node removes the entries that
//! ended at or before the oldest retained version (the oldest reader pin
//! or snapshot, named ones included): *logical* GC. It retires what only
//! they owned — their records, and for dead inner entries whole dead
//! subtrees — and frees those blocks once no running read op can still
//! reach them (the pin table): *physical* GC. An inner root left with one
//! child is replaced by it.
//!
//! What it promises:
//! - it changes no version's contents, so it needs no commit: every step is
//!   made of the same persisted, crash-safe shifts as dead-slot reuse, and
//!   a crash in the middle of a step recovers like any other crash;
//! - it holds the writer lock for one step only (`nodes_per_step` nodes),
//!   and the thread's step ends early once a writer waits for the lock
//!   and the walk has finished a subtree since the step began, so a writer
//!   waits for about one subtree of a node, not a whole step (a step of
//!   256 nodes held the writer up to ~1 ms; 3 alternated rounds: 1M
//!   random durable deletes 332k → 390k/s, p99.9 133 → 89 µs; YCSB B's
//!   update p99.9 322 → 42 µs, A's maximum 1.0 → 0.4 ms; see
//!   design/cdds.md §7, "Session 30"); readers never wait;
//! - an idle tree costs nothing: after a pass that removed nothing, the
//!   thread only wakes to see whether anything was written or the oldest
//!   retained version moved since;
//! - while writers commit, the thread compacts only nearly full nodes with
//!   dead entries whose slots are still mostly live — the dead-slot reuse
//!   the writer would otherwise do on its critical path (removing one dead
//!   entry shifts every slot after it, persisted line by line; a node that
//!   deletes are emptying shrinks toward a merge, which drops its dead
//!   entries for free) — and once no commit happened between two of its
//!   steps it removes every dead entry.
//!
//! The walk resumes from a key (the upper bound of the last subtree it
//! finished), so writers may split, merge and collapse nodes between steps
//! without making it skip or repeat anything that matters.

use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use parking_lot::{Condvar, Mutex};
use tembo_pmem::Mode;

use crate::entry::key_prefix_at;
use crate::error::Result;
use crate::search;
use crate::tree::{TreeCore, WriterState};
use crate::write::Batch;

/// Settings of the background GC thread.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GcConfig {
    /// Nodes visited per step (the longest the writer lock is held).
    pub nodes_per_step: usize,
    /// Pause between steps while a pass is under way.
    pub pause: Duration,
    /// Pause between checks for new work once a pass found nothing to do.
    pub idle_pause: Duration,
}

impl Default for GcConfig {
    fn default() -> Self {
        GcConfig { nodes_per_step: 256, pause: Duration::from_millis(5), idle_pause: Duration::from_millis(200) }
    }
}

/// What one GC step did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct GcStep {
    /// Nodes visited.
    pub nodes_visited: u64,
    /// Nodes from which entries were removed.
    pub nodes_compacted: u64,
    /// Dead (or torn, or duplicate) slots removed.
    pub entries_removed: u64,
    /// Blocks (records, nodes) retired, to be freed once no reader needs them.
    pub blocks_retired: u64,
    /// Nodes left alone by a step that only compacts nodes with many dead
    /// entries (the background thread's while writers are busy).
    pub nodes_skipped: u64,
    /// Whether this step finished a pass over the whole tree.
    pub pass_complete: bool,
    /// The oldest retained version the step used.
    pub oldest: u64,
}

/// Totals of every GC step since the tree was opened.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct GcStats {
    /// Steps run.
    pub steps: u64,
    /// Passes over the whole tree completed.
    pub passes: u64,
    /// Nodes visited.
    pub nodes_visited: u64,
    /// Nodes from which entries were removed.
    pub nodes_compacted: u64,
    /// Slots removed.
    pub entries_removed: u64,
    /// Blocks retired (a retired subtree counts once).
    pub blocks_retired: u64,
    /// Passes run by writes that found the pool full, to reclaim garbage
    /// before failing (counted in `passes` too).
    pub pressure_passes: u64,
    /// Retired blocks, and nodes of retired subtrees not yet walked, that
    /// wait to be freed now (by commits and GC steps, a bounded number
    /// each, once no read op that might reach them runs).
    pub limbo_waiting: u64,
    /// The error that stopped the background thread, if one did.
    pub error: Option<String>,
}

/// Where the walk resumes.
#[derive(Debug, Default)]
pub(crate) struct GcCursor {
    /// Keys at or below this one are done in the current pass (`None`: a
    /// pass starts from the smallest key).
    after: Option<Vec<u8>>,
    /// Slots removed, nodes skipped and blocks retired so far in the
    /// current pass (0 at its end: a clean pass).
    pass_work: u64,
    /// Leaf ends counted (`TreeCore::leaf_ends`) when the current pass
    /// started, and whether it has met a leaf that still holds an ended
    /// (or torn) entry.
    pass_leaf_ends: u64,
    pass_leaves_dirty: bool,
    /// The leaf-end count at the start of the last pass that found every
    /// leaf free of ended entries: while the count is still that, no leaf
    /// holds one (new nodes hold live entries only), so passes read inner
    /// nodes alone.
    leaves_clean_at: Option<u64>,
    /// Smallest oldest-retained version a step of the current pass used.
    pass_oldest: u64,
    /// A pass that removed nothing: (its oldest retained version, the
    /// current version at its end). No work until either moves.
    clean: Option<(u64, u64)>,
}

/// While writers are busy, only nodes with at least this many slots used
/// are compacted: those the writer would soon have to compact itself on
/// its critical path (dead-slot reuse when a node is full). Nodes that
/// shrink toward a merge lose their dead entries for free when merged.
const BUSY_COMPACT_USED: usize = crate::node::NODE_SLOTS * 3 / 4;

/// Whether a busy writer would soon compact this node itself: it is
/// nearly full, and mostly of live entries. A node whose live entries
/// went below half its used slots is being emptied (deletes), not
/// refilled (overwrites keep the live count): it heads for a merge,
/// which drops its dead entries for free.
fn busy_worth_compacting(used: usize, live: usize) -> bool {
    used >= BUSY_COMPACT_USED && 2 * live >= used
}

/// How a step walks: `thorough` removes every dead entry (else only
/// from nodes a busy writer would soon compact); `skip_leaves` leaves
/// leaves unread (none holds an ended entry); `leaves_dirty` is set when
/// a leaf visited still holds an ended or torn entry; `yield_to_writers`:
/// end the step as soon as a writer waits for the lock, once the walk has
/// finished a subtree (`progressed`), so that it always moves on.
struct WalkMode {
    thorough: bool,
    skip_leaves: bool,
    leaves_dirty: bool,
    yield_to_writers: bool,
    progressed: bool,
}

enum Flow {
    Done,
    Paused,
}

impl TreeCore {
    /// Runs one GC step: visits up to `nodes` nodes (at least one) from
    /// where the last step stopped, holding the writer lock meanwhile.
    ///
    /// # Errors
    /// Invariant or pool errors met on the way (a corrupted pool).
    pub fn gc_step(&self, nodes: usize) -> Result<GcStep> {
        self.gc_step_with(nodes, true, false)
    }

    /// [`TreeCore::gc_step`]; `thorough: false` compacts only nearly full
    /// nodes (see `BUSY_COMPACT_USED`): removing a dead entry shifts the
    /// slots after it, persisted line by line, so while writers are busy
    /// the thread does only what the writer would soon do on its critical
    /// path.
    pub(crate) fn gc_step_with(&self, nodes: usize, thorough: bool, yield_to_writers: bool) -> Result<GcStep> {
        if self.lazy_aborted().is_some() {
            // Nodes may still carry aborted versions: the recovery walk
            // goes first (see `recover`).
            return Ok(GcStep::default());
        }
        let mut ws = self.writer.lock();
        // Not on a tree whose last batch was left half done (see
        // `Writer::poison`): its nodes wait for the next open's recovery.
        self.writer.check_poisoned()?;
        let step = self.gc_step_locked(&mut ws, nodes.max(1), thorough, yield_to_writers);
        // Writes that queued meanwhile go before the next step.
        self.serve_riders(&mut ws);
        let step = step?;
        self.count_step(&step);
        Ok(step)
    }

    /// Adds a step to the totals [`TreeCore::gc_stats`] reports.
    fn count_step(&self, step: &GcStep) {
        let mut st = self.gc_stats.lock();
        st.steps += 1;
        st.passes += u64::from(step.pass_complete);
        st.nodes_visited += step.nodes_visited;
        st.nodes_compacted += step.nodes_compacted;
        st.entries_removed += step.entries_removed;
        st.blocks_retired += step.blocks_retired;
    }

    /// Whether a pass could find anything to remove: false only after a
    /// pass that removed nothing, while neither the version nor the oldest
    /// retained version has moved since.
    fn pass_may_find_work(&self, ws: &WriterState) -> Result<bool> {
        let Some((oldest, version)) = ws.gc.clean else { return Ok(true) };
        let v = self.current_version()?;
        Ok(v != version || self.oldest_retained(v, self.pins.min_pinned()) != oldest)
    }

    /// Runs GC steps until a whole pass is done (for tests and tools).
    ///
    /// # Errors
    /// As [`TreeCore::gc_step`].
    pub fn gc_pass(&self) -> Result<GcStep> {
        let _ = self.recovery_report(); // a pass needs the repair walk done
        let mut total = GcStep::default();
        loop {
            let s = self.gc_step(4096)?;
            total.nodes_visited += s.nodes_visited;
            total.nodes_compacted += s.nodes_compacted;
            total.entries_removed += s.entries_removed;
            total.blocks_retired += s.blocks_retired;
            total.oldest = s.oldest;
            if s.pass_complete {
                total.pass_complete = true;
                // And whatever of the limbo no read op holds any more.
                let mut ws = self.writer.lock();
                self.settle_limbo(&mut ws);
                self.free_limbo(&mut ws, usize::MAX);
                return Ok(total);
            }
        }
    }

    /// For a write that found the pool full, under the writer lock: runs a
    /// whole GC pass from the first key (unless the last one removed
    /// nothing and no version moved since) and frees what it retired that
    /// no read op holds. Deleted keys' records and the nodes a merge
    /// replaced stay allocated until logical GC reaches them; at a full
    /// pool that garbage is the room the write needs, and a write should
    /// not fail while it exists. Returns whether a pass ran.
    pub(crate) fn reclaim_locked(&self, ws: &mut WriterState) -> Result<bool> {
        if self.lazy_aborted().is_some() {
            return Ok(false);
        }
        if !self.pass_may_find_work(ws)? {
            return Ok(false);
        }
        ws.gc.after = None;
        loop {
            let s = self.gc_step_locked(ws, 4096, true, false)?;
            self.count_step(&s);
            if s.pass_complete {
                break;
            }
        }
        self.settle_limbo(ws);
        self.free_limbo(ws, usize::MAX);
        self.gc_stats.lock().pressure_passes += 1;
        Ok(true)
    }

    /// What the GC has done since open.
    pub fn gc_stats(&self) -> GcStats {
        let waiting = self.writer.lock().limbo.len() as u64;
        GcStats { limbo_waiting: waiting, ..self.gc_stats.lock().clone() }
    }

    /// Whether a pass could find work: false only right after a pass that
    /// removed nothing, while neither the version nor the oldest retained
    /// version has moved.
    pub(crate) fn gc_has_work(&self) -> Result<bool> {
        let ws = self.writer.lock();
        if ws.limbo.needs_fence() || ws.limbo.has_freeable(self.pins.min_pinned()) {
            return Ok(true);
        }
        self.pass_may_find_work(&ws)
    }

    fn gc_step_locked(
        &self,
        ws: &mut WriterState,
        nodes: usize,
        thorough: bool,
        yield_to_writers: bool,
    ) -> Result<GcStep> {
        // The previous step's unlinks, if no commit has fenced them since.
        self.settle_limbo(ws);
        let mut b = Batch::new(self, self.current_version()?, std::mem::take(&mut ws.scratch))?;
        let mut step = GcStep { oldest: b.oldest, ..GcStep::default() };
        let leaf_ends = self.leaf_ends.load(std::sync::atomic::Ordering::Relaxed);
        if ws.gc.after.is_none() {
            ws.gc.pass_work = 0;
            ws.gc.pass_oldest = b.oldest;
            ws.gc.pass_leaf_ends = leaf_ends;
            ws.gc.pass_leaves_dirty = false;
        }
        ws.gc.pass_oldest = ws.gc.pass_oldest.min(b.oldest);
        b.collapse_root()?;
        let mut budget = nodes;
        let root = self.meta.root(&self.pool)?;
        let mut mode = WalkMode {
            thorough,
            skip_leaves: ws.gc.leaves_clean_at == Some(leaf_ends),
            leaves_dirty: false,
            yield_to_writers,
            progressed: false,
        };
        let flow = b.gc_walk(root, &mut ws.gc.after, &mut budget, &mut step, &mut mode, 0);
        ws.gc.pass_leaves_dirty |= mode.leaves_dirty;
        step.blocks_retired = (b.retired.len() + b.retired_trees.len()) as u64;
        ws.gc.pass_work += step.entries_removed + step.nodes_skipped + step.blocks_retired;
        match flow {
            Ok(Flow::Done) => {
                ws.gc.after = None;
                step.pass_complete = true;
                ws.gc.leaves_clean_at = (!ws.gc.pass_leaves_dirty).then_some(ws.gc.pass_leaf_ends);
                ws.gc.clean = (ws.gc.pass_work == 0).then(|| (ws.gc.pass_oldest, b.w - 1));
            }
            Ok(Flow::Paused) => ws.gc.clean = None,
            // A walk that fails (a damaged node) may already have compacted
            // nodes before it: what they unlinked is retired below like any
            // step's, not dropped with the batch, so no sweep is needed to
            // get it back.
            Err(_) => {
                ws.gc.leaves_clean_at = None;
                ws.gc.clean = None;
            }
        }
        let retired = std::mem::take(&mut b.retired);
        let trees = std::mem::take(&mut b.retired_trees);
        if step.nodes_compacted > 0 || step.entries_removed > 0 {
            // The nodes the step compacted were only flushed
            // (`NodeWriter::remove`): what they unlinked may be freed only
            // after a fence. Where a fence is an msync (a disk file; and the
            // crash simulator, so that the campaign checks this path) it
            // waits in the limbo for the next commit's fence, or the next
            // step's if no commit comes first: each msync made under the
            // writer lock delays the writer's commits (a fence per compacted
            // node before session 40, one per step before session 42).
            // Where a fence is an SFENCE, the step fences now, so that its
            // own frees stay on this thread rather than the writer's.
            if matches!(self.pool.mode(), Mode::Dax | Mode::Emulated) {
                self.pool.fence();
            } else {
                ws.limbo.hold_until_fence(b.w);
            }
        }
        if !retired.is_empty() || !trees.is_empty() {
            // Tagged like a batch committing now: freed once every running
            // read op started after this step.
            self.to_limbo(ws, b.w, retired, trees);
        }
        ws.scratch = b.into_scratch();
        flow?;
        if !ws.limbo.is_empty() {
            // More than a commit frees: between busy writers' commits the
            // steps are what drains a backlog.
            self.free_limbo(ws, 4 * crate::limbo::FREE_BUDGET);
        }
        Ok(step)
    }
}

impl Batch<'_> {
    /// Compacts `n` if it holds reclaimable slots, then (inner nodes) walks
    /// its children whose keys lie above `after`, in key order.
    fn gc_walk(
        &mut self,
        n: u64,
        after: &mut Option<Vec<u8>>,
        budget: &mut usize,
        step: &mut GcStep,
        mode: &mut WalkMode,
        depth: usize,
    ) -> Result<Flow> {
        if depth > 64 {
            return Err(crate::error::CddsError::invariant("tree deeper than 64 levels (a cycle?)", n));
        }
        let mut copy = self.read(n)?;
        step.nodes_visited += 1;
        *budget = budget.saturating_sub(1);
        let oldest = self.oldest;
        let dead = copy.entries().iter().filter(|e| e.end != 0 && e.end <= oldest).count();
        let live = copy.entries().iter().filter(|e| e.end == 0).count();
        if copy.dirty || (dead > 0 && (mode.thorough || busy_worth_compacting(copy.used, live))) {
            let removed = self.compact(n)?;
            if removed > 0 {
                step.nodes_compacted += 1;
                step.entries_removed += removed;
            }
            copy = self.read(n)?;
        } else if dead > 0 {
            step.nodes_skipped += 1;
        }
        if copy.level == 0 {
            mode.leaves_dirty |= copy.dirty || copy.entries().iter().any(|e| e.end != 0);
            return Ok(Flow::Done);
        }
        if copy.level == 1 && mode.skip_leaves {
            return Ok(Flow::Done);
        }
        let entries = copy.entries();
        let start = match after.as_deref() {
            Some(k) => search::bound(self.pool, entries, k, key_prefix_at(k, copy.plen), true)?,
            None => 0,
        };
        for e in &entries[start..] {
            if !e.visible_at(self.w, &[]) {
                continue;
            }
            if *budget == 0 || (mode.yield_to_writers && mode.progressed && self.tree.writer.has_queued()) {
                return Ok(Flow::Paused);
            }
            let child = search::child_of(self.pool, e)?;
            if let Flow::Paused = self.gc_walk(child, after, budget, step, mode, depth + 1)? {
                return Ok(Flow::Paused);
            }
            // Everything below this entry's key is done; the sentinel's
            // subtree ends the node, and the caller records its own bound.
            if let Some(k) = search::entry_key(self.pool, e)? {
                *after = Some(k);
                mode.progressed = true;
            }
        }
        Ok(Flow::Done)
    }
}

/// The background GC thread of a tree.
#[derive(Debug)]
pub(crate) struct GcThread {
    stop: Arc<(Mutex<bool>, Condvar)>,
    handle: JoinHandle<()>,
}

impl GcThread {
    pub(crate) fn start(core: Arc<TreeCore>, cfg: GcConfig) -> GcThread {
        let stop = Arc::new((Mutex::new(false), Condvar::new()));
        let flag = stop.clone();
        let handle = std::thread::Builder::new()
            .name("tembo-cdds-gc".into())
            .spawn(move || run(&core, cfg, &flag))
            .expect("spawning the GC thread");
        GcThread { stop, handle }
    }

    /// Ends the thread's pause now: it takes its next step at once (a
    /// caller that just deleted much wants the space back soon).
    pub(crate) fn wake(&self) {
        self.stop.1.notify_all();
    }

    pub(crate) fn stop(self) {
        *self.stop.0.lock() = true;
        self.stop.1.notify_all();
        let _ = self.handle.join();
    }
}

fn run(core: &TreeCore, cfg: GcConfig, stop: &(Mutex<bool>, Condvar)) {
    let mut pause = cfg.pause;
    let mut last_version: Option<u64> = None;
    loop {
        {
            let mut stopped = stop.0.lock();
            if *stopped {
                return;
            }
            stop.1.wait_for(&mut stopped, pause);
            if *stopped {
                return;
            }
        }
        // The pool's next growth, readied here rather than by the writer
        // whose allocation would need it. A failure (a full filesystem)
        // changes nothing: that allocation reports it.
        let _ = core.pool.prepare_growth();
        match step(core, cfg.nodes_per_step, &mut last_version) {
            // Pass after pass while they find work; idle after a clean one.
            Ok(true) => pause = cfg.pause,
            Ok(false) => pause = cfg.idle_pause,
            Err(e) => {
                // A corrupted pool: stop collecting (the writers and `check`
                // report it too); never panic in the user's process.
                core.gc_stats.lock().error = Some(e.to_string());
                return;
            }
        }
    }
}

/// One step of the thread, if there is work: thorough only when nothing
/// was committed since its previous step, so a quiet tree gets every dead
/// entry removed and a busy one only the nearly full nodes.
fn step(core: &TreeCore, nodes: usize, last_version: &mut Option<u64>) -> Result<bool> {
    if core.lazy_aborted().is_some() || !core.gc_has_work()? {
        return Ok(false);
    }
    let v = core.current_version()?;
    let asked = core.gc_thorough.load(std::sync::atomic::Ordering::Relaxed);
    let thorough = asked || *last_version == Some(v);
    *last_version = Some(v);
    let done = core.gc_step_with(nodes, thorough, true)?;
    if asked && done.pass_complete {
        core.gc_thorough.store(false, std::sync::atomic::Ordering::Relaxed);
    }
    Ok(true)
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use tembo_pmem::{Pool, PoolOptions};

    use crate::write::Op;
    use crate::{Limits, Tree};

    fn key(i: u32) -> Vec<u8> {
        format!("key{i:03}").into_bytes()
    }

    /// A root leaf of 24 used slots: `dead` of them ended by `how`, the
    /// rest live. Returns the entries a busy step (not thorough) removed.
    fn busy_step_removes(overwrite: bool, dead: u32) -> u64 {
        let pool = Arc::new(Pool::simulated(&PoolOptions { size: 8 << 20, ..PoolOptions::default() }).expect("pool"));
        let tree = Tree::create(pool, Limits::default()).expect("tree");
        let live = if overwrite { 24 - dead } else { 24 };
        for i in 0..live {
            tree.write(&[Op::Put(&key(i), b"v")]).expect("put");
        }
        for i in 0..dead {
            if overwrite {
                tree.write(&[Op::Put(&key(i), b"w")]).expect("overwrite");
            } else {
                tree.write(&[Op::Delete(&key(i))]).expect("delete");
            }
        }
        let s = tree.stats().expect("stats");
        assert_eq!((s.nodes, s.dead_entries), (1, u64::from(dead)));
        tree.gc_step_with(16, false, false).expect("step").entries_removed
    }

    #[test]
    fn passes_read_leaves_only_while_one_may_hold_an_ended_entry() {
        let pool = Arc::new(Pool::simulated(&PoolOptions { size: 16 << 20, ..PoolOptions::default() }).expect("pool"));
        let tree = Tree::create(pool, Limits::default()).expect("tree");
        for i in 0..3000u32 {
            tree.write(&[Op::Put(format!("k{:08}", i.wrapping_mul(2_654_435_761)).as_bytes(), b"v")]).expect("put");
        }
        // Inserts end inner entries only (splits); the first pass reads
        // every node and finds the leaves clean, the second reads the inner
        // nodes alone.
        assert!(tree.gc_pass().expect("pass").entries_removed > 0, "dead inner entries");
        let all = tree.stats().expect("stats").nodes;
        assert_eq!(tree.stats().expect("stats").dead_entries, 0);
        let inner = tree.gc_pass().expect("pass").nodes_visited;
        assert!(inner > 1 && inner * 10 < all, "{inner} of {all} nodes read");
        // A delete ends a leaf entry: the next pass reads the leaves again
        // and removes it; the one after is back to the inner nodes.
        tree.write(&[Op::Delete(format!("k{:08}", 7u32.wrapping_mul(2_654_435_761)).as_bytes())]).expect("delete");
        let p = tree.gc_pass().expect("pass");
        assert_eq!((p.nodes_visited, p.entries_removed), (tree.stats().expect("stats").nodes, 1));
        assert_eq!(tree.stats().expect("stats").dead_entries, 0);
        assert_eq!(tree.gc_pass().expect("pass").nodes_visited, inner);
        // So does an overwrite.
        tree.write(&[Op::Put(format!("k{:08}", 9u32.wrapping_mul(2_654_435_761)).as_bytes(), b"w")]).expect("put");
        assert_eq!(tree.gc_pass().expect("pass").entries_removed, 1);
        assert_eq!(tree.stats().expect("stats").dead_entries, 0);
        // An ended entry a snapshot still sees stays, and keeps the leaves
        // read until it can go.
        let snap = tree.snapshot().expect("snapshot");
        tree.write(&[Op::Delete(format!("k{:08}", 11u32.wrapping_mul(2_654_435_761)).as_bytes())]).expect("delete");
        assert_eq!(tree.gc_pass().expect("pass").entries_removed, 0);
        assert!(tree.gc_pass().expect("pass").nodes_visited > inner);
        drop(snap);
        assert_eq!(tree.gc_pass().expect("pass").entries_removed, 1);
        assert_eq!(tree.gc_pass().expect("pass").nodes_visited, inner);
    }

    /// The thread's steps give way to a waiting writer after each finished
    /// subtree, yet every step moves the pass on, so passes still end.
    #[test]
    fn a_step_ends_early_for_a_waiting_writer_and_still_progresses() {
        let pool = Arc::new(Pool::simulated(&PoolOptions { size: 16 << 20, ..PoolOptions::default() }).expect("pool"));
        let tree = Tree::create(pool, Limits::default()).expect("tree");
        let k = |i: u32| format!("k{:08}", i.wrapping_mul(2_654_435_761)).into_bytes();
        for i in 0..3000u32 {
            tree.write(&[Op::Put(&k(i), b"v")]).expect("put");
        }
        for i in (0..3000u32).step_by(2) {
            tree.write(&[Op::Delete(&k(i))]).expect("delete");
        }
        let nodes = tree.stats().expect("stats").nodes;
        let height = tree.stats().expect("stats").height;
        assert!(nodes > 100, "{nodes} nodes");
        // Nobody waits: the step runs its whole budget.
        let whole = tree.gc_step_with(64, true, true).expect("step");
        assert_eq!(whole.nodes_visited, 64);
        // A writer waits: the step ends after one finished subtree (a path
        // down and one leaf, or one whole subtree of the node it resumes
        // in), and the next one goes on from there.
        let (mut steps, mut visited) = (0u64, 0u64);
        loop {
            tree.writer.pretend_queued();
            let s = tree.gc_step_with(64, true, true).expect("step");
            assert!(s.nodes_visited >= 1, "a step that gives way still progresses");
            assert!(s.nodes_visited < 64, "{} nodes visited with a writer waiting", s.nodes_visited);
            steps += 1;
            visited += s.nodes_visited;
            if s.pass_complete {
                break;
            }
            assert!(steps <= 4 * nodes, "the pass does not end");
        }
        assert!(
            steps > 10 && visited >= nodes - 64,
            "{steps} steps visited {visited} of {nodes} nodes (height {height})"
        );
        assert_eq!(tree.stats().expect("stats").dead_entries, 0, "the pass removed every dead entry");
        let c = tree.check().expect("check");
        assert!(c.is_ok(), "{c:?}");
    }

    /// The rightmost leaf: the last child at every level.
    fn rightmost_leaf(tree: &Tree) -> u64 {
        let pool = tree.pool();
        let mut n = tree.meta.root(pool).expect("root");
        while crate::node::level(pool, n).expect("level") > 0 {
            let order = crate::node::order_line(pool, n).expect("order line");
            let last = *order.slots().last().expect("a child");
            let crate::entry::Slot::Valid(e) = crate::node::raw_slots(pool, n).expect("slots")[last as usize] else {
                panic!("the last child's slot is not valid");
            };
            n = crate::search::child_of(pool, &e).expect("child");
        }
        n
    }

    /// A step whose walk stops at a damaged node has already compacted the
    /// nodes before it: the records they unlinked are retired (freed once
    /// no reader can see them), not lost to the allocator until a sweep.
    #[test]
    fn a_step_that_fails_midway_retires_what_it_already_unlinked() {
        let pool = Arc::new(Pool::simulated(&PoolOptions { size: 16 << 20, ..PoolOptions::default() }).expect("pool"));
        let tree = Tree::create(pool, Limits::default()).expect("tree");
        let k = |i: u32| format!("k{i:08}").into_bytes();
        for i in 0..3000u32 {
            tree.write(&[Op::Put(&k(i), &[5u8; 100])]).expect("put");
        }
        // Every leaf keeps enough live entries not to merge.
        for i in (0..3000u32).step_by(3) {
            tree.write(&[Op::Delete(&k(i))]).expect("delete");
        }
        assert!(tree.check().expect("check").is_ok());
        let leaf = rightmost_leaf(&tree);
        let magic = tree.pool().load_u64(leaf + 8).expect("load");
        tree.pool().store_u64(leaf + 8, 0x0bad_0bad_0bad_0bad).expect("damage");
        let err = tree.gc_step(usize::MAX).expect_err("the walk reaches the damaged leaf");
        assert!(err.to_string().contains("node magic"), "{err}");
        let waiting = tree.gc_stats().limbo_waiting;
        assert!(waiting > 500, "{waiting} blocks wait in the limbo after the failed step");
        tree.pool().store_u64(leaf + 8, magic).expect("repair");
        // A commit frees what waits; nothing is leaked or freed twice.
        tree.write(&[Op::Put(b"after", b"x")]).expect("put");
        let c = tree.check().expect("check");
        assert!(c.is_ok(), "{:?} {:?}", c.violations, c.allocator);
        assert!(tree.gc_pass().expect("pass").pass_complete);
        assert_eq!(tree.stats().expect("stats").dead_entries, 0);
    }

    #[test]
    fn a_busy_step_compacts_nodes_refilled_not_nodes_emptied() {
        // Overwrites keep the live count: the writer would soon have to
        // compact this node on its critical path.
        assert_eq!(busy_step_removes(true, 4), 4);
        // Deletes took most of it: it heads for a merge, left alone...
        assert_eq!(busy_step_removes(false, 14), 0);
        // ...unless it is still mostly live.
        assert_eq!(busy_step_removes(false, 4), 4);
    }
}
