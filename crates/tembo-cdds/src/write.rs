//! The writer: batches of puts and deletes at version `w = current + 1`,
//! insert with dead-slot reuse and split (thesis Alg. 2, 3), delete with
//! copy-from-sibling / merge on underflow (Alg. 4), root split, and the
//! commit store. One writer at a time (the `writer` lock; writes that
//! find it taken ride in the holder's batch, see `combine`).
//!
//! Every change writes only slots no retained version can see (new entries
//! start at `w`, ended ones end at `w`, shifts keep every overwritten slot's
//! content persisted elsewhere first), so until the commit store of `w`
//! every reader and every crash sees version `w - 1` exactly. A batch that
//! fails (a full pool) is undone by the same repair recovery uses.

use std::cmp::Ordering;

use tembo_pmem::Pool;

use crate::entry::{key_prefix, key_prefix_at, Entry, ReadAt, Slot, MAX_VERSION};
use crate::error::{CddsError, Result};
use crate::limbo::{self, Limbo};
use crate::node::{self, NodeCopy, NodeWriter, NODE_SLOTS};
use crate::record;
use crate::search;
use crate::tree::TreeCore;

/// Fewest live entries of a non-root node before it borrows or merges (ml).
pub const MIN_LIVE: usize = 6;
/// Above this many live entries a rebuilt node is split in two (4·ml).
pub const SPLIT_TWO: usize = 4 * MIN_LIVE;
/// Entries a split at the tail (an append past the last leaf's keys) puts
/// in the right node: 2·ml (see `Batch::appends_at_tail`).
const TAIL_SPLIT_RIGHT: usize = 2 * MIN_LIVE;

/// One operation of a batch.
#[derive(Clone, Copy, Debug)]
pub enum Op<'a> {
    /// Insert or overwrite.
    Put(&'a [u8], &'a [u8]),
    /// Remove (no-op if absent).
    Delete(&'a [u8]),
}

/// What a committed batch did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WriteOutcome {
    /// The version the batch committed (unchanged if it changed nothing).
    /// A write that rode in another thread's batch gets that batch's.
    pub version: u64,
    /// For each op, whether its key existed before it.
    pub existed: Vec<bool>,
}

/// Buffers a batch fills and empties, kept by the writer between batches:
/// a put allocated and freed three vectors, and the first free (a cache
/// miss in the allocator's page map after the put's own misses) was 6% of
/// a random put's time.
#[derive(Debug, Default)]
pub(crate) struct BatchScratch {
    allocs: Vec<u64>,
    touched: Vec<u64>,
    path: Vec<Step>,
    finger: Vec<u8>,
}

#[derive(Clone, Debug)]
struct Step {
    node: u64,
    /// The parent's entry pointing here (`None` at the root).
    via: Option<Entry>,
}

/// One batch's (or one GC step's) work at version `w`.
pub(crate) struct Batch<'t> {
    pub(crate) tree: &'t TreeCore,
    pub(crate) pool: &'t Pool,
    /// The version the batch writes (current + 1).
    pub(crate) w: u64,
    /// The oldest version any reader or snapshot may still read.
    pub(crate) oldest: u64,
    /// Leave underfull nodes that keep a live entry unmerged (a delete at
    /// a full pool).
    spare: bool,
    allocs: Vec<u64>,
    touched: Vec<u64>,
    /// The descent's buffer, reused by each put and delete.
    path: Vec<Step>,
    /// The key of the last descent into `path`, while `path` still leads
    /// to where that key lives (see [`Batch::finger_start`]).
    finger: Vec<u8>,
    /// Whether `path` is still exact: nothing but in-place leaf changes
    /// happened since it was descended. Every change that replaces a node
    /// or changes an inner node clears it ([`Batch::reshaped`]).
    finger_ok: bool,
    /// While a put rebuilds its full leaf: the key it inserts is `finger`
    /// (see [`Batch::build`]'s split at the tail).
    putting_finger: bool,
    /// Blocks unlinked by this batch, to free once no reader needs them.
    pub(crate) retired: Vec<u64>,
    /// Roots of subtrees unlinked by this batch: they and what they own
    /// are freed the same way, walked lazily (see `limbo`).
    pub(crate) retired_trees: Vec<u64>,
    old_root: u64,
    changed: bool,
    /// The nodes this batch created (also in `allocs`), emptied by `undo`.
    nodes_made: Vec<u64>,
    /// Blocks of this batch that readers may reach before its commit: a
    /// root split's new root and the record of its entry for the old root
    /// (also in `allocs`). `undo` retires them instead of freeing them.
    published: Vec<u64>,
    /// While a lazy recovery runs: the aborted versions, and every node is
    /// repaired before the batch reads it for a change (see `recover`).
    aborted: Option<std::sync::Arc<Vec<u64>>>,
}

impl TreeCore {
    /// Applies `ops` atomically: all of them become durable with one commit
    /// store, or (on error) none.
    ///
    /// # Errors
    /// Limit errors before anything is written; pool errors (full) after
    /// which the batch is undone and nothing changed.
    pub fn write(&self, ops: &[Op<'_>]) -> Result<WriteOutcome> {
        for op in ops {
            let (k, v) = match op {
                Op::Put(k, v) => (k, Some(v)),
                Op::Delete(k) => (k, None),
            };
            if k.is_empty() {
                return Err(CddsError::EmptyKey);
            }
            if k.len() > self.limits.max_key_bytes {
                return Err(CddsError::KeyTooLarge { len: k.len(), max: self.limits.max_key_bytes });
            }
            if let Some(v) = v {
                if v.len() > self.limits.max_value_bytes {
                    return Err(CddsError::ValueTooLarge { len: v.len(), max: self.limits.max_value_bytes });
                }
            }
        }
        let mut ws = match self.writer.try_lock() {
            Some(ws) => ws,
            None if crate::combine::op_bytes(ops) <= crate::combine::MAX_COMBINED_BYTES => {
                // Another write runs: ride in the next batch (see `combine`).
                return self.writer.ride(ops, |ws| {
                    let _ = self.write_serving(ws, &[], true);
                });
            }
            None => self.writer.lock(),
        };
        self.write_serving(&mut ws, ops, false)
    }

    /// With the writer lock: applies `ops` and every write queued to ride
    /// along in one batch, and answers the queued ones. If that batch
    /// fails it is undone and each runs alone (see `combine`).
    /// `queued_own`: the caller's own write is one of the queued ones (it
    /// rode, then found the lock free), not `ops`.
    fn write_serving(
        &self,
        ws: &mut crate::tree::WriterState,
        ops: &[Op<'_>],
        queued_own: bool,
    ) -> Result<WriteOutcome> {
        let served = self.writer.take_queued(ws);
        if served.requests.is_empty() {
            return self.write_alone(ws, ops);
        }
        let riders = &served.requests;
        let mut all: Vec<Op<'_>> = Vec::with_capacity(ops.len() + riders.iter().map(|r| r.len()).sum::<usize>());
        all.extend_from_slice(ops);
        for r in riders {
            all.extend(r.ops());
        }
        if let Ok(out) = self.write_locked(ws, &all) {
            let mut existed = out.existed.into_iter();
            let mine = WriteOutcome { version: out.version, existed: existed.by_ref().take(ops.len()).collect() };
            for r in riders {
                r.finish(Ok(WriteOutcome { version: out.version, existed: existed.by_ref().take(r.len()).collect() }));
            }
            self.writer.count_combined(riders.len() - usize::from(queued_own));
            return Ok(mine);
        }
        // The combined batch was undone (or the writer is poisoned, which
        // each rerun reports at once): one request's failure, a full pool
        // say, must not fail the others, so each runs alone.
        let mine = self.write_alone(ws, ops);
        for r in riders {
            let theirs: Vec<Op<'_>> = r.ops().collect();
            r.finish(self.write_alone(ws, &theirs));
        }
        mine
    }

    /// With the writer lock, before a holder that does not write (GC,
    /// recovery) lets it go: applies the writes waiting to ride, so that
    /// a holder that takes the lock again at once cannot starve them.
    pub(crate) fn serve_riders(&self, ws: &mut crate::tree::WriterState) {
        if self.writer.has_queued() {
            let _ = self.write_serving(ws, &[], false);
        }
    }

    /// With the writer lock: applies `ops` as one batch, and when the pool
    /// is full, frees what it can and tries again before it fails.
    fn write_alone(&self, ws: &mut crate::tree::WriterState, ops: &[Op<'_>]) -> Result<WriteOutcome> {
        let full = |r: &Result<WriteOutcome>| matches!(r, Err(CddsError::Pmem(tembo_pmem::PmemError::PoolFull { .. })));
        let mut r = self.write_locked(ws, ops);
        if full(&r) {
            self.settle_limbo(ws);
            if ws.limbo.has_freeable(self.pins.min_pinned()) {
                // The limbo frees a bounded number of blocks per commit, so
                // after a big retirement it may hold the space this batch
                // needs: free all it can and try once more (the failed
                // batch was undone).
                self.free_limbo(ws, usize::MAX);
                r = self.write_locked(ws, ops);
            }
        }
        if full(&r) && self.reclaim_locked(ws)? {
            // Dead entries' records and replaced nodes wait for logical GC:
            // a whole pass turns them into room before the write gives up.
            r = self.write_locked(ws, ops);
        }
        if full(&r) && ops.iter().all(|op| matches!(op, Op::Delete(_))) {
            // Deletes are how a full pool gets room back, but the merge
            // that keeps a node at `MIN_LIVE` live entries needs a new
            // node. Without room for one, leave nodes underfull (readers
            // and `check` accept that; later writes merge them) rather
            // than refuse the delete, and open the pool's reserve for what
            // a node's last live entry still needs when its leaf goes.
            r = self.pool.with_reserve(|| self.write_locked_with(ws, ops, true));
        }
        r
    }

    /// [`TreeCore::write`] for a caller already holding the writer lock.
    pub(crate) fn write_locked(&self, ws: &mut crate::tree::WriterState, ops: &[Op<'_>]) -> Result<WriteOutcome> {
        self.write_locked_with(ws, ops, false)
    }

    /// [`TreeCore::write_locked`]; `spare`: skip merges of nodes that keep
    /// a live entry (see [`TreeCore::write`]).
    fn write_locked_with(
        &self,
        ws: &mut crate::tree::WriterState,
        ops: &[Op<'_>],
        spare: bool,
    ) -> Result<WriteOutcome> {
        self.writer.check_poisoned()?;
        let _poison = crate::combine::PoisonOnPanic(&self.writer);
        let v = self.current_version()?;
        if v >= MAX_VERSION {
            return Err(CddsError::VersionsExhausted(v));
        }
        let mut b = Batch::new(self, v, std::mem::take(&mut ws.scratch))?;
        b.spare = spare;
        b.collapse_root()?;
        let mut existed = Vec::with_capacity(ops.len());
        let mut failed = None;
        for op in ops {
            let r = match op {
                Op::Put(k, val) => b.put(k, val),
                Op::Delete(k) => b.delete(k),
            };
            match r {
                Ok(e) => existed.push(e),
                Err(e) => {
                    failed = Some(e);
                    break;
                }
            }
        }
        let mut retired = std::mem::take(&mut b.retired);
        let trees = std::mem::take(&mut b.retired_trees);
        let version = match failed {
            Some(e) => {
                let undo = b.undo();
                retired.append(&mut b.retired);
                // What compactions of the failed batch unlinked must be
                // durably unlinked before it can be freed (no commit
                // fence comes to do it; `NodeWriter::remove`).
                self.fence_unlinks(ws);
                self.to_limbo(ws, v + 1, retired, trees);
                if let Err(u) = undo {
                    // Entries of the failed batch may remain at `v + 1`,
                    // which the next batch would commit.
                    self.writer.poison(&format!("a failed write could not be undone ({u})"));
                    return Err(u);
                }
                return Err(e);
            }
            None if b.changed => {
                self.commit_version(v + 1)?;
                // Its fences made a GC step's flushed unlinks durable too.
                ws.limbo.fenced();
                v + 1
            }
            None => v,
        };
        // Free at least twice what this commit retired, so that a backlog
        // (a big retired subtree) always drains.
        let budget = limbo::FREE_BUDGET.max(2 * (retired.len() + trees.len() * node::NODE_SLOTS));
        if !retired.is_empty() || !trees.is_empty() {
            if version == v {
                // No commit fence made this batch's unlinks durable.
                self.fence_unlinks(ws);
            }
            self.to_limbo(ws, v + 1, retired, trees);
        }
        ws.scratch = b.into_scratch();
        if !ws.limbo.is_empty() {
            self.free_limbo(ws, budget);
        }
        Ok(WriteOutcome { version, existed })
    }

    /// The oldest version any reader or snapshot may still read.
    pub(crate) fn oldest_retained(&self, current: u64, min_pinned: Option<u64>) -> u64 {
        let mut oldest = current;
        if let Some(p) = min_pinned {
            oldest = oldest.min(p);
        }
        if let Some((&s, _)) = self.snapshots.lock().iter().next() {
            oldest = oldest.min(s);
        }
        oldest
    }

    /// Puts blocks retired by the batch at `tag` in the limbo. While the
    /// leak sweep runs they are marked now (they were reachable when it
    /// began), so its end need not mark a limbo of thousands at once.
    pub(crate) fn to_limbo(&self, ws: &mut crate::tree::WriterState, tag: u64, blocks: Vec<u64>, trees: Vec<u64>) {
        if self.recovery.sweeping.load(std::sync::atomic::Ordering::Acquire) {
            // Walked now, to be marked: the sweep would free what it finds
            // unmarked, and these are the limbo's to free.
            let mut walked = Limbo::default();
            walked.push(tag, blocks, trees);
            let _ = walked.expand_all(&self.pool);
            let blocks: Vec<u64> = walked.blocks().collect();
            // Lenient: a block that is not allocated needs no keeping.
            let _ = self.pool.concurrent_sweep_mark(&blocks, false);
            ws.limbo.push(tag, blocks, Vec::new());
            return;
        }
        ws.limbo.push(tag, blocks, trees);
    }

    /// Fences if the limbo holds blocks back for one (a GC step's
    /// compactions, only flushed), so that they may be freed.
    pub(crate) fn settle_limbo(&self, ws: &mut crate::tree::WriterState) {
        if ws.limbo.needs_fence() {
            self.fence_unlinks(ws);
        }
    }

    /// Fences, making every flushed unlink durable (what the limbo holds
    /// back for a fence too).
    fn fence_unlinks(&self, ws: &mut crate::tree::WriterState) {
        self.pool.fence();
        ws.limbo.fenced();
    }

    /// Frees up to about `budget` retired blocks no running read op can
    /// still reach.
    pub(crate) fn free_limbo(&self, ws: &mut crate::tree::WriterState, budget: usize) {
        if self.recovery.sweeping.load(std::sync::atomic::Ordering::Acquire) {
            return; // the leak sweep needs every block it may reach to stay put
        }
        // Not even flushed: the pool flushes these bitmap words at its
        // close. A free a crash undoes leaves a leak for the recovery's
        // sweep, which every unclean open runs, never a double use:
        // nothing references these blocks.
        let _ = self.pool.free_many_lazy(&self.take_freeable(ws, budget));
    }

    /// Removes from the limbo up to about `budget` blocks no running read
    /// op can still reach: nothing references them any more, so whoever
    /// takes them may free them without the writer lock.
    pub(crate) fn take_freeable(&self, ws: &mut crate::tree::WriterState, budget: usize) -> Vec<u64> {
        ws.limbo.take_freeable(&self.pool, self.pins.min_pinned(), budget)
    }
}

/// What [`Batch::end_sole_tie`] did.
enum SoleTie {
    /// The key's live entry `e`, in `slot`, is ended; a new entry of the
    /// key takes `rank` in the order line.
    Ended { e: Entry, slot: usize, rank: usize },
    /// The key has no entry (nothing changed); a new one takes `rank`.
    Absent { rank: usize },
    /// Not the case it handles: nothing done.
    NotTried,
}

impl<'t> Batch<'t> {
    /// Starts a batch at `v + 1`, `v` being the current version (the
    /// caller holds the writer lock).
    /// `scratch`: buffers from an earlier batch (see [`BatchScratch`]).
    pub(crate) fn new(tree: &'t TreeCore, v: u64, scratch: BatchScratch) -> Result<Batch<'t>> {
        let oldest = tree.oldest_retained(v, tree.pins.min_pinned());
        // Empty: `into_scratch` clears what it hands back.
        let BatchScratch { allocs, touched, path, finger } = scratch;
        Ok(Batch {
            tree,
            pool: &tree.pool,
            w: v + 1,
            oldest,
            allocs,
            touched,
            path,
            finger,
            finger_ok: false,
            putting_finger: false,
            retired: Vec::new(),
            retired_trees: Vec::new(),
            spare: false,
            old_root: tree.meta.root(&tree.pool)?,
            changed: false,
            nodes_made: Vec::new(),
            published: Vec::new(),
            aborted: tree.lazy_aborted(),
        })
    }

    /// The batch's buffers, emptied, for the next one.
    pub(crate) fn into_scratch(mut self) -> BatchScratch {
        let mut scratch = BatchScratch {
            allocs: std::mem::take(&mut self.allocs),
            touched: std::mem::take(&mut self.touched),
            path: std::mem::take(&mut self.path),
            finger: std::mem::take(&mut self.finger),
        };
        scratch.allocs.clear();
        scratch.touched.clear();
        scratch.path.clear();
        scratch.finger.clear();
        scratch
    }

    /// Repairs `n` first if a lazy recovery may not have reached it yet.
    fn repaired(&self, n: u64) -> Result<u64> {
        if let Some(ab) = &self.aborted {
            self.tree.repair_before_write(n, ab, self.oldest)?;
        }
        Ok(n)
    }

    /// The path from the root to the leaf covering `key`, and that leaf
    /// loaded for reading in place. `path` holds the batch's previous
    /// descent: kept down to the deepest node that still covers `key` where
    /// [`Batch::finger_start`] allows, else cleared.
    fn descend(&mut self, key: &[u8], path: &mut Vec<Step>) -> Result<node::RawNode<'t>> {
        let whole = key_prefix(key);
        match self.finger_start(key, path)? {
            Some(depth) if depth > 0 => {
                path.truncate(depth + 1);
                self.tree.finger_descents.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            }
            _ => {
                path.clear();
                path.push(Step { node: self.tree.meta.root(self.pool)?, via: None });
            }
        }
        // Not a path to trust until it reaches the leaf (an error on the
        // way leaves it half built).
        self.finger_ok = false;
        let mut raw = node::RawNode::default();
        loop {
            let n = self.repaired(path.last().expect("non-empty").node)?;
            raw.load(self.pool, n, self.tree.session)?;
            if raw.level() == 0 {
                // Exact from here until a change reshapes the tree.
                self.finger.clear();
                self.finger.extend_from_slice(key);
                self.finger_ok = true;
                return Ok(raw);
            }
            if path.len() > 64 {
                return Err(CddsError::invariant("tree deeper than 64 levels (a cycle?)", n));
            }
            // The writer's own nodes cannot change under it: no validation.
            let pfx = if raw.plen() == 0 { whole } else { key_prefix_at(key, raw.plen()) };
            let e = search::child_raw(self.pool, &raw, n, key, pfx, self.w)?;
            path.push(Step { node: search::child_of(self.pool, &e)?, via: Some(e) });
        }
    }

    /// Where a descent for `key` may start on the batch's previous path: the
    /// depth of the deepest node on it whose key range holds `key`, or
    /// `None` for a descent from the root.
    ///
    /// A batch's keys often come in ascending runs (a server's group commit
    /// is sorted; a hash's fields, a list's elements, a copy's pairs are
    /// neighbours), and the next key then mostly lives in the same leaf or
    /// near it: starting there skips the upper levels' loads and searches.
    /// Sound because, at version `w`, node `path[d]` covers the keys from
    /// the key of the visible entry before `path[d].via` in its parent up
    /// to `path[d].via`'s key (exclusive; the sentinel is unbounded), as
    /// `search::child_raw` picks children. The previous key lay in that
    /// range; a key at or above it and below the upper bound does too —
    /// provided no entry of any inner node on the path changed since, which
    /// `finger_ok` guarantees: in-place leaf inserts and ends change no
    /// range, and every other change goes through [`Batch::reshaped`].
    fn finger_start(&self, key: &[u8], path: &[Step]) -> Result<Option<usize>> {
        if !self.finger_ok || path.is_empty() || key < self.finger.as_slice() {
            return Ok(None);
        }
        for depth in (1..path.len()).rev() {
            let Some(via) = &path[depth].via else {
                return Err(CddsError::invariant(
                    "descent step below the root without a parent entry",
                    path[depth].node,
                ));
            };
            match search::entry_key_ref(self.pool, via)? {
                None => return Ok(Some(depth)),
                Some(hi) if key < hi => return Ok(Some(depth)),
                Some(_) => {}
            }
        }
        Ok(Some(0))
    }

    /// Notes that the batch is about to change the tree's shape (replace a
    /// node, or change an inner node's entries): the previous descent's
    /// path may no longer lead where it did.
    fn reshaped(&mut self) {
        self.finger_ok = false;
    }

    /// In a leaf read in place: the entry for `key` visible at `w` with its
    /// slot, if any, and the rank a new entry for `key` (starting at `w`,
    /// after every older entry of the key) takes in the order line.
    fn leaf_position(&self, raw: &node::RawNode<'_>, leaf: u64, key: &[u8]) -> Result<(Option<(Entry, usize)>, usize)> {
        let pfx = key_prefix_at(key, raw.plen());
        let mut i = search::bound_raw(self.pool, raw, key, pfx, false, 0)?;
        let mut found = None;
        while i < raw.used() {
            let e = raw.entry_checked(i, leaf)?;
            if e.prefix != pfx || record::cmp_entry(self.pool, &e, key, pfx)? != Ordering::Equal {
                break;
            }
            if e.visible_at(self.w, &[]) {
                found = Some((e, raw.slot(i)));
            }
            i += 1;
        }
        Ok((found, i))
    }

    /// Entries of a leaf read in place that are visible at `w`, counted up
    /// to `MIN_LIVE`: its callers only ask whether the leaf is below that,
    /// and a leaf holds up to 30 entries to decode (the count was 7–10% of
    /// a random delete's time).
    fn live_in(&self, raw: &node::RawNode<'_>, leaf: u64) -> Result<usize> {
        let mut live = 0;
        for i in 0..raw.used() {
            if raw.entry_checked(i, leaf)?.visible_at(self.w, &[]) {
                live += 1;
                if live == MIN_LIVE {
                    break;
                }
            }
        }
        Ok(live)
    }

    /// After node `path[depth]` lost a live entry and is left with `live`:
    /// rebuilds it with a sibling if that is below ml (Alg. 4).
    fn rebalance_if_low(&mut self, path: &[Step], depth: usize, live: usize) -> Result<()> {
        if depth > 0 && live < MIN_LIVE && !(self.spare && live > 0) {
            let c = self.read(path[depth].node)?;
            let list = self.restart(&live_slots(&c, self.w));
            self.rebalance(path, depth, list, c.plen)?;
        }
        Ok(())
    }

    /// Logical GC of the root (thesis §4.4.4): an inner root whose only
    /// entry every retained version sees, all others dead to every retained
    /// version, is replaced by its child. No version's contents change, so
    /// the root store needs no commit; the old root is retired.
    pub(crate) fn collapse_root(&mut self) -> Result<()> {
        self.reshaped();
        // Each round removes a level: more than 64 means a damaged pool.
        for _ in 0..64 {
            let root = self.repaired(self.tree.meta.root(self.pool)?)?;
            let mut raw = node::RawNode::default();
            raw.load(self.pool, root, self.tree.session)?;
            if raw.level() == 0 || (0..raw.used()).filter(|&i| raw.entry(i).end == 0).nth(1).is_some() {
                return Ok(());
            }
            let copy = self.read(root)?;
            if copy.level == 0 || copy.dirty {
                return Ok(());
            }
            let mut only = None;
            for e in copy.entries() {
                if e.end == 0 && e.start <= self.oldest && only.is_none() {
                    only = Some(*e);
                } else if e.end == 0 || e.end > self.oldest {
                    return Ok(());
                }
            }
            let Some(only) = only else { return Ok(()) };
            let child = search::child_of(self.pool, &only)?;
            // The old root dies like any node an ended entry points to
            // (no retained version still reads it here, but the rule
            // stays the same everywhere).
            self.tree.dirty_orders.settle(self.pool, root)?;
            self.tree.meta.set_root(self.pool, child)?;
            self.old_root = child;
            for e in copy.entries() {
                if *e != only && !e.moved {
                    self.retire_owned(copy.level, e)?;
                }
            }
            self.retired.push(only.rec);
            self.retired.push(root);
        }
        Err(CddsError::invariant("root collapse did not end (a cycle?)", self.old_root))
    }

    pub(crate) fn read(&self, n: u64) -> Result<Box<NodeCopy>> {
        node::read_own(self.pool, n)
    }

    fn put(&mut self, key: &[u8], value: &[u8]) -> Result<bool> {
        let mut path = std::mem::take(&mut self.path);
        let r = self.put_along(key, value, &mut path);
        self.path = path;
        r
    }

    fn put_along(&mut self, key: &[u8], value: &[u8], path: &mut Vec<Step>) -> Result<bool> {
        // The record's block and the value load while the descent waits;
        // the record is written before anything can point to it.
        let rec = record::alloc_leaf(self.pool, key, value)?;
        self.allocs.push(rec);
        let raw = self.descend(key, path)?;
        let path = &path[..];
        record::fill_leaf(self.pool, rec, key, value)?;
        let depth = path.len() - 1;
        let leaf = path[depth].node;
        // The leaf's slots hold the key bytes after its shared prefix.
        let pfx = key_prefix_at(key, raw.plen());
        self.changed = true;
        if raw.used() < NODE_SLOTS {
            // The common case, done on the leaf in place (no node copy):
            // end the key's old entry, if any, and insert the new one.
            raw.check_order(leaf)?;
            let (old, rank) = self.end_key_in_leaf(&raw, leaf, key)?;
            // Touched before the first store: should a later step fail,
            // `undo` must repair this leaf too.
            self.touch(leaf);
            let mut nw = NodeWriter::begin(self.pool, leaf, self.tree.session)?;
            nw.insert(rank, &Entry::new(self.w, rec, pfx))?;
            drop(nw);
            self.tree.dirty_orders.note(self.pool, leaf)?;
            if old.is_some() && depth > 0 {
                // An overwrite keeps the live count, which may already be
                // below ml (a node without a sibling): as the slow path does.
                let live = self.live_in(&raw, leaf)? + 1;
                self.rebalance_if_low(path, depth, live)?;
            }
            return Ok(old.is_some());
        }
        let copy = self.read(leaf)?;
        let old = search::leaf_find(self.pool, &copy, key, pfx, ReadAt { version: self.w, aborted: &[] })?
            .map(|i| copy.entries()[i]);
        let ends = old.as_slice();
        // `descend` left `key` in `finger`.
        self.putting_finger = true;
        let r = self.rewrite(copy, path, depth, ends, &[Entry::new(self.w, rec, pfx)]);
        self.putting_finger = false;
        r?;
        Ok(old.is_some())
    }

    fn delete(&mut self, key: &[u8]) -> Result<bool> {
        let mut path = std::mem::take(&mut self.path);
        let r = self.delete_along(key, &mut path);
        self.path = path;
        r
    }

    fn delete_along(&mut self, key: &[u8], path: &mut Vec<Step>) -> Result<bool> {
        let raw = self.descend(key, path)?;
        let path = &path[..];
        let depth = path.len() - 1;
        let leaf = path[depth].node;
        raw.check_order(leaf)?;
        if self.end_key_in_leaf(&raw, leaf, key)?.0.is_none() {
            return Ok(false);
        }
        self.changed = true;
        let live = self.live_in(&raw, leaf)?;
        self.rebalance_if_low(path, depth, live)?;
        Ok(true)
    }

    /// Ends the entry for `key` visible at `w` in a leaf read in place, if
    /// there is one (touching the leaf first): that entry and its slot, and
    /// the rank a new entry for `key` takes in the order line.
    fn end_key_in_leaf(
        &mut self,
        raw: &node::RawNode<'_>,
        leaf: u64,
        key: &[u8],
    ) -> Result<(Option<(Entry, usize)>, usize)> {
        match self.end_sole_tie(raw, leaf, key)? {
            SoleTie::Ended { e, slot, rank } => Ok((Some((e, slot)), rank)),
            SoleTie::Absent { rank } => Ok((None, rank)),
            SoleTie::NotTried => {
                let (old, rank) = self.leaf_position(raw, leaf, key)?;
                if let Some((e, slot)) = old {
                    self.touch(leaf);
                    self.end_entry(leaf, 0, slot, &e)?;
                }
                Ok((old, rank))
            }
        }
    }

    /// The common case of a delete or an overwrite, with the confirming
    /// read overlapped: when exactly one entry of the leaf has the key's
    /// prefix word and it is live, it is ended (stored and its flush
    /// started) *before* its record is read to confirm the key, so that
    /// the record's miss and the slot line's write-back overlap instead of
    /// following each other (the confirming read was 18% of a random
    /// delete's time). If the record holds another key sharing those 8
    /// bytes, the end is stored back and the key is absent (any entry of it
    /// would tie too). Safe at every point: an end at the uncommitted
    /// version is one no reader sees and recovery discards; the end stored
    /// back is flushed, so the fence of whichever commit comes next (this
    /// batch's or a later one at the same version) orders it first.
    fn end_sole_tie(&mut self, raw: &node::RawNode<'_>, leaf: u64, key: &[u8]) -> Result<SoleTie> {
        let pfx = key_prefix_at(key, raw.plen());
        let Some(i) = search::sole_prefix_tie(raw, pfx) else {
            return Ok(SoleTie::NotTried);
        };
        let e = raw.entry_checked(i, leaf)?;
        if e.end != 0 || e.start > self.w {
            return Ok(SoleTie::NotTried);
        }
        let slot = raw.slot(i);
        self.touch(leaf);
        node::set_end(self.pool, leaf, slot, &e, self.w, false)?;
        match record::cmp_entry(self.pool, &e, key, pfx)? {
            Ordering::Equal => {
                self.tree.leaf_ends.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                Ok(SoleTie::Ended { e, slot, rank: i + 1 })
            }
            below_or_above => {
                node::set_end(self.pool, leaf, slot, &e, e.end, e.moved)?;
                Ok(SoleTie::Absent { rank: if below_or_above == Ordering::Less { i + 1 } else { i } })
            }
        }
    }

    /// Ends `e`, in `slot` of node `n` at `level`, at this batch's version.
    /// Ends in leaves are counted: the GC reads leaves only while one may
    /// hold an ended entry (see `gc`).
    fn end_entry(&self, n: u64, level: u8, slot: usize, e: &Entry) -> Result<()> {
        if level == 0 {
            self.tree.leaf_ends.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        }
        node::set_end(self.pool, n, slot, e, self.w, false)
    }

    fn slot_of(&self, n: u64, copy: &NodeCopy, e: &Entry) -> Result<usize> {
        copy.entries()
            .iter()
            .position(|x| x == e)
            .map(|i| copy.slots()[i] as usize)
            .ok_or_else(|| CddsError::invariant("entry to end is not in its node", n))
    }

    fn touch(&mut self, n: u64) {
        // Deduplicated by `undo`, its only reader: a group commit of
        // hundreds of puts would otherwise scan this list once per put.
        if self.touched.last() != Some(&n) {
            self.touched.push(n);
        }
    }

    /// Ends `ends` and adds `adds` in the node at `path[depth]`: in place if
    /// it has room (after dead-slot reuse), else by rebuilding it into new
    /// nodes (split, or merge with a sibling when too few live entries).
    /// `copy`: a current copy of the node, which every caller has read.
    fn rewrite(
        &mut self,
        mut copy: Box<NodeCopy>,
        path: &[Step],
        depth: usize,
        ends: &[Entry],
        adds: &[Entry],
    ) -> Result<()> {
        self.reshaped();
        let n = path[depth].node;
        // Entries for new children come with prefix words of whole keys
        // (`parent_entries`); an inner node with a shared prefix holds the
        // bytes after it. (A leaf's caller builds its entry at the leaf's.)
        let rebased;
        let adds = if copy.level > 0 && copy.plen > 0 {
            rebased = self.rebase(adds, 0, copy.plen)?;
            &rebased[..]
        } else {
            adds
        };
        if copy.dirty {
            self.compact(n)?;
            copy = self.read(n)?;
        }
        for e in ends {
            let slot = self.slot_of(n, &copy, e)?;
            if copy.level > 0 {
                // Its child dies with it: named snapshots may read it
                // after a crash, with no recovery walk to fix its order line.
                self.tree.dirty_orders.settle(self.pool, search::child_of(self.pool, e)?)?;
            }
            self.end_entry(n, copy.level, slot, e)?;
            self.touch(n);
        }
        if !ends.is_empty() {
            copy = self.read(n)?;
        }
        if adds.len() > NODE_SLOTS - copy.used && self.compact(n)? > 0 {
            copy = self.read(n)?;
        }
        if adds.len() <= NODE_SLOTS - copy.used {
            // The common case: room in the node. Only the live count
            // matters here (no list of live slots to build on every put).
            let live_count = copy.entries().iter().filter(|e| e.visible_at(self.w, &[])).count();
            let mut fresh = Some(copy);
            for a in adds {
                let c = match fresh.take() {
                    Some(c) => c,
                    None => self.read(n)?,
                };
                let rank = match search::entry_key_ref(self.pool, a)? {
                    Some(k) => search::bound(self.pool, c.entries(), k, a.prefix, true)?,
                    None => c.entries().len(),
                };
                let mut nw = NodeWriter::begin(self.pool, n, self.tree.session)?;
                nw.insert(rank, a)?;
                drop(nw);
                self.tree.dirty_orders.note(self.pool, n)?;
                self.touch(n);
            }
            if !ends.is_empty() {
                self.rebalance_if_low(path, depth, live_count + adds.len())?;
            }
            return Ok(());
        }
        let live = live_slots(&copy, self.w);
        let mut list = self.restart(&live);
        for a in adds {
            let idx = match search::entry_key(self.pool, a)? {
                Some(k) => search::bound(self.pool, &list, &k, a.prefix, true)?,
                None => list.len(),
            };
            list.insert(idx, *a);
        }
        if depth > 0 && list.len() < MIN_LIVE {
            let done = self.rebalance(path, depth, list.clone(), copy.plen)?;
            if done {
                return Ok(());
            }
        }
        self.split(path, depth, copy.level, list, copy.plen)
    }

    /// Copies of live entries as they start in the new version.
    fn restart(&self, live: &[(usize, Entry)]) -> Vec<Entry> {
        live.iter().map(|(_, e)| Entry::new(self.w, e.rec, e.prefix)).collect()
    }

    /// Splits `list` (whose prefix words are relative to `src_plen`) into
    /// one or two new nodes of `level` covering `[lo, hi)` (`None`:
    /// unbounded); returns each node with its upper-bound key (`None` for
    /// the last group: the caller's). A new leaf records the prefix its key
    /// range shares (`common_prefix`) and its slots the key bytes after it.
    fn build(
        &mut self,
        level: u8,
        list: Vec<Entry>,
        src_plen: usize,
        lo: Option<Vec<u8>>,
        hi: Option<Vec<u8>>,
    ) -> Result<Vec<(u64, Option<Vec<u8>>)>> {
        let groups: Vec<&[Entry]> = if list.len() > SPLIT_TWO {
            let at = if self.appends_at_tail(level, &list, hi.as_deref())? {
                list.len() - TAIL_SPLIT_RIGHT
            } else {
                list.len() / 2
            };
            vec![&list[..at], &list[at..]]
        } else {
            vec![&list[..]]
        };
        let mut out = Vec::new();
        let mut g_lo = lo;
        for (i, g) in groups.iter().enumerate() {
            let bound = if i + 1 < groups.len() {
                // Leaves: the right node's first key. Inner nodes: the left
                // node's last entry key (its child's exclusive upper bound).
                let e = if level == 0 { &groups[i + 1][0] } else { g.last().expect("non-empty group") };
                Some(
                    search::entry_key(self.pool, e)?
                        .ok_or_else(|| CddsError::invariant("sentinel inside a node", self.old_root))?,
                )
            } else {
                None
            };
            let g_hi = if bound.is_some() { bound.clone() } else { hi.clone() };
            let shared = common_prefix(g_lo.as_deref(), g_hi.as_deref());
            // A short shared prefix leaves enough varying bytes in the
            // prefix words: recording it would only cost rebases.
            let plen = if shared >= MIN_PLEN { shared } else { 0 };
            let entries = self.rebase(g, src_plen, plen)?;
            let n = node::create_in_batch(self.pool, level, plen, self.w, &entries)?;
            self.allocs.push(n);
            self.nodes_made.push(n);
            g_lo = bound.clone();
            out.push((n, bound));
        }
        Ok(out)
    }

    /// Whether a split of `list` is a put appending past every key of the
    /// tree's last leaf (ascending keys: an id or a timestamp). Halving
    /// such a leaf leaves the left half's room for keys that never come,
    /// so that a sequential load fills its leaves only half full and
    /// splits every ~15 puts; splitting at the tail instead leaves the left
    /// leaf holding all but [`TAIL_SPLIT_RIGHT`] entries and the right one
    /// room for ~18 more appends. Both stay above the live-entry bound
    /// (ml), the right one by 2·ml, so a few deletes at the tail do not
    /// merge it straight back.
    fn appends_at_tail(&self, level: u8, list: &[Entry], hi: Option<&[u8]>) -> Result<bool> {
        if level != 0 || hi.is_some() || !self.putting_finger {
            return Ok(false);
        }
        let Some(last) = list.last() else { return Ok(false) };
        Ok(search::entry_key_ref(self.pool, last)? == Some(self.finger.as_slice()))
    }

    /// `entries` with prefix words relative to `to` instead of `from`
    /// (reading their keys when the two differ).
    fn rebase(&self, entries: &[Entry], from: usize, to: usize) -> Result<Vec<Entry>> {
        if from == to {
            return Ok(entries.to_vec());
        }
        entries
            .iter()
            .map(|e| {
                Ok(match search::entry_key_ref(self.pool, e)? {
                    Some(k) => Entry { prefix: key_prefix_at(k, to), ..*e },
                    // The sentinel's prefix word is u64::MAX at any plen.
                    None => *e,
                })
            })
            .collect()
    }

    /// The key range `[lo, hi)` of node `path[depth]` at `w` (`None`:
    /// unbounded): its parent entry's key above, the previous visible
    /// entry's below (the parent's own lower bound for a first child).
    fn range_of(&self, path: &[Step], depth: usize) -> Result<KeyRange> {
        match path[depth].via {
            None => Ok((None, None)),
            Some(via) => self.range_of_child(path, depth - 1, &via),
        }
    }

    /// The key range of the child that entry `via` of node `path[pd]` names.
    fn range_of_child(&self, path: &[Step], pd: usize, via: &Entry) -> Result<KeyRange> {
        let pcopy = self.read(path[pd].node)?;
        self.range_of_child_in(path, pd, via, &pcopy)
    }

    /// [`Batch::range_of_child`] with `pcopy`, a current copy of
    /// `path[pd]` the caller has read (and will hand on to the rewrite of
    /// that node instead of reading it again).
    fn range_of_child_in(&self, path: &[Step], pd: usize, via: &Entry, pcopy: &NodeCopy) -> Result<KeyRange> {
        let hi = search::entry_key(self.pool, via)?;
        let parent = path[pd].node;
        let vis: Vec<&Entry> = pcopy.entries().iter().filter(|e| e.visible_at(self.w, &[])).collect();
        let j =
            vis.iter().position(|e| **e == *via).ok_or_else(|| CddsError::invariant("child entry missing", parent))?;
        let lo = if j > 0 { search::entry_key(self.pool, vis[j - 1])? } else { self.range_of(path, pd)?.0 };
        Ok((lo, hi))
    }

    /// Parent entries for new nodes: inner records with their bounds, the
    /// last one carrying `last_key` (the replaced range's upper bound).
    fn parent_entries(&mut self, built: Vec<(u64, Option<Vec<u8>>)>, last_key: Option<Vec<u8>>) -> Result<Vec<Entry>> {
        let mut out = Vec::new();
        let count = built.len();
        for (i, (n, bound)) in built.into_iter().enumerate() {
            let key = if i + 1 == count { last_key.clone() } else { bound };
            let rec = record::write_inner(self.pool, key.as_deref(), n)?;
            self.allocs.push(rec);
            out.push(Entry::new(self.w, rec, record::prefix_of(key.as_deref())));
        }
        Ok(out)
    }

    /// Replaces node `path[depth]` by new nodes holding `list`. The old
    /// node is not written: ending the parent's entry for it hides it from
    /// every version from `w` on, and its entries live at `w` stay as they
    /// are — their records now belong to the copies (see [`is_owner`]).
    fn split(&mut self, path: &[Step], depth: usize, level: u8, list: Vec<Entry>, src_plen: usize) -> Result<()> {
        self.reshaped();
        let n = path[depth].node;
        match path[depth].via {
            Some(via) => {
                // The parent's copy serves the range and then its rewrite:
                // building the new nodes does not touch the parent.
                let pcopy = self.read(path[depth - 1].node)?;
                let (lo, hi) = self.range_of_child_in(path, depth - 1, &via, &pcopy)?;
                let built = self.build(level, list, src_plen, lo, hi)?;
                let last = search::entry_key(self.pool, &via)?;
                let adds = self.parent_entries(built, last)?;
                self.rewrite(pcopy, path, depth - 1, &[via], &adds)
            }
            None => {
                let built = self.build(level, list, src_plen, None, None)?;
                // Root split: the new root keeps the old root visible to
                // every version before `w`.
                let old_rec = record::write_inner(self.pool, None, n)?;
                self.allocs.push(old_rec);
                let mut old = Entry::new(0, old_rec, u64::MAX);
                old.end = self.w;
                let mut entries = self.parent_entries(built, None)?;
                let at = entries.len() - 1;
                entries.insert(at, old);
                let root = node::create_in_batch(self.pool, level + 1, 0, self.w, &entries)?;
                self.allocs.push(root);
                self.nodes_made.push(root);
                // Readers at older versions go through it (and `old_rec`)
                // from the root store on.
                self.published.extend([root, old_rec]);
                // The old root dies at `w` (see `rewrite`).
                self.tree.dirty_orders.settle(self.pool, n)?;
                self.tree.meta.set_root(self.pool, root)
            }
        }
    }

    /// Node `path[depth]` is left with `list` live entries (fewer than ml):
    /// rebuild it together with a sibling into one or two new nodes. Returns
    /// `false` (doing nothing) when the node has no sibling. `list`'s
    /// prefix words are relative to `plen`, the node's.
    fn rebalance(&mut self, path: &[Step], depth: usize, list: Vec<Entry>, plen: usize) -> Result<bool> {
        self.reshaped();
        let n = path[depth].node;
        let via = path[depth].via.ok_or_else(|| CddsError::invariant("rebalance at the root", n))?;
        let parent = path[depth - 1].node;
        let pcopy = self.read(parent)?;
        let pvis: Vec<Entry> = pcopy.entries().iter().copied().filter(|e| e.visible_at(self.w, &[])).collect();
        let j =
            pvis.iter().position(|e| *e == via).ok_or_else(|| CddsError::invariant("child entry missing", parent))?;
        let (sj, sib_right) = if j + 1 < pvis.len() {
            (j + 1, true)
        } else if j > 0 {
            (j - 1, false)
        } else {
            return Ok(false);
        };
        let sib_via = pvis[sj];
        let sib = self.repaired(search::child_of(self.pool, &sib_via)?)?;
        let mut scopy = self.read(sib)?;
        if scopy.dirty {
            self.compact(sib)?;
            scopy = self.read(sib)?;
        }
        let slive = live_slots(&scopy, self.w);
        let slist = self.rebase(&self.restart(&slive), scopy.plen, plen)?;
        let level = scopy.level;
        let (lo, hi) = {
            let (n_lo, n_hi) = self.range_of_child_in(path, depth - 1, &via, &pcopy)?;
            let (s_lo, s_hi) = self.range_of_child_in(path, depth - 1, &sib_via, &pcopy)?;
            if sib_right {
                (n_lo, s_hi)
            } else {
                (s_lo, n_hi)
            }
        };
        let combined = if sib_right { [list, slist].concat() } else { [slist, list].concat() };
        let built = self.build(level, combined, plen, lo, hi)?;
        let right_via = if sib_right { sib_via } else { via };
        let last = search::entry_key(self.pool, &right_via)?;
        let adds = self.parent_entries(built, last)?;
        // Nothing since the parent was read changed it (the sibling's
        // compaction and the new nodes are elsewhere).
        self.rewrite(pcopy, path, depth - 1, &[via, sib_via], &adds)?;
        Ok(true)
    }

    /// Dead-slot reuse: removes torn slots, slots the order line does not
    /// name, and entries no retained version can see, retiring what only
    /// they owned. Returns the number of slots removed.
    pub(crate) fn compact(&mut self, n: u64) -> Result<u64> {
        self.reshaped();
        let slots = node::raw_slots(self.pool, n)?;
        let order = node::order_line(self.pool, n)?;
        let Some(named) = order.mask() else {
            return Err(CddsError::invariant("malformed order line", n));
        };
        let level = node::level(self.pool, n)?;
        let mut ranks = Vec::new();
        // Retired only once the node no longer names them: a compaction
        // that fails midway (a damaged node) must not hand on blocks the
        // node still points to.
        let mut owned = Vec::new();
        for (rank, &s) in order.slots().iter().enumerate() {
            match slots[s as usize] {
                Slot::Empty => return Err(CddsError::invariant(format!("the order line names empty slot {s}"), n)),
                Slot::Torn => ranks.push(rank),
                Slot::Valid(e) => {
                    if e.end != 0 && e.end <= self.oldest {
                        if !e.moved {
                            owned.push(e);
                        }
                        ranks.push(rank);
                    }
                }
            }
        }
        let stray: Vec<usize> = (0..NODE_SLOTS).filter(|&i| named & (1 << i) == 0 && slots[i] != Slot::Empty).collect();
        if ranks.is_empty() && stray.is_empty() {
            return Ok(0);
        }
        // Children first: `child_of` reads a record that may be damaged.
        let children = if level > 0 {
            owned.iter().map(|e| search::child_of(self.pool, e)).collect::<Result<Vec<_>>>()?
        } else {
            Vec::new()
        };
        let mut nw = NodeWriter::begin(self.pool, n, self.tree.session)?;
        nw.remove(&ranks, &stray)?;
        drop(nw);
        self.touch(n);
        // As `retire_owned` does: the subtree is walked when it is freed.
        self.retired_trees.extend(children);
        self.retired.extend(owned.iter().map(|e| e.rec));
        Ok((ranks.len() + stray.len()) as u64)
    }

    /// Retires the blocks a dead, not-moved entry owns: its record, and for
    /// an inner entry the child it alone kept (with what the child owned).
    fn retire_owned(&mut self, level: u8, e: &Entry) -> Result<()> {
        if level > 0 {
            // The subtree is walked when it is freed (see `limbo`).
            self.retired_trees.push(search::child_of(self.pool, e)?);
        }
        self.retired.push(e.rec);
        Ok(())
    }

    /// Undoes a failed batch: repairs every touched node back to version
    /// `w - 1`, restores the root, frees what the batch allocated.
    fn undo(&mut self) -> Result<()> {
        self.reshaped();
        let v = self.w - 1;
        self.touched.sort_unstable();
        self.touched.dedup();
        self.allocs.sort_unstable();
        self.allocs.dedup();
        for &n in &self.touched {
            if self.allocs.binary_search(&n).is_err() {
                crate::recover::repair_node(self.pool, self.tree.session, n, v, self.oldest)?;
            }
        }
        if self.tree.meta.root(self.pool)? != self.old_root {
            self.tree.meta.set_root(self.pool, self.old_root)?;
        }
        // Every node the batch made loses its entries that start at `w`
        // (all of them but a new root's entry for the old root), persisted
        // and under the node's version word, before any of them is freed:
        // the next batch writes `w` again, and a node of it given one of
        // these blocks back has the same slot salt (born `w`, same
        // offset), so a slot of ours that a crash brings back where it
        // keeps an unused slot zeroed only in the cache would read as its
        // valid entry. A reader still inside a published root retries and
        // finds the same entries visible at its version.
        for &n in &self.nodes_made {
            crate::recover::repair_node(self.pool, self.tree.session, n, v, self.oldest)?;
        }
        for &a in &self.allocs {
            if self.published.contains(&a) {
                // Freed by the limbo once no reader can be inside.
                self.retired.push(a);
            } else {
                let _ = self.pool.free(a);
            }
        }
        Ok(())
    }
}

/// The entries of `copy` visible at `w`, with their slots.
/// The shortest shared prefix a leaf records: with fewer shared bytes its
/// keys' prefix words still differ in at least 5 bytes (random keys share
/// 1–2 at a million keys), so recording it would buy nothing and cost a
/// rebase of the moved entries whenever it changes.
const MIN_PLEN: usize = 4;

/// A key range `[lo, hi)`; `None` is unbounded.
type KeyRange = (Option<Vec<u8>>, Option<Vec<u8>>);

/// How many leading bytes every key in `[lo, hi)` shares: the common prefix
/// of the two bounds (none when either is unbounded).
pub(crate) fn common_prefix(lo: Option<&[u8]>, hi: Option<&[u8]>) -> usize {
    match (lo, hi) {
        (Some(a), Some(b)) => a.iter().zip(b).take_while(|(x, y)| x == y).count().min(node::MAX_PLEN),
        _ => 0,
    }
}

pub(crate) fn live_slots(copy: &NodeCopy, w: u64) -> Vec<(usize, Entry)> {
    let mut live = Vec::with_capacity(copy.entries().len());
    live.extend(
        copy.entries().iter().zip(copy.slots()).filter(|(e, _)| e.visible_at(w, &[])).map(|(e, s)| (*s as usize, *e)),
    );
    live
}

/// Compares entry keys for sorting checks.
pub(crate) fn key_order(pool: &Pool, a: &Entry, b: &Entry) -> Result<Ordering> {
    record::cmp_entries(pool, a, b)
}

/// Whether an entry owns its record (and, in an inner node, its child).
/// A node replaced by a split or a merge is *dead*: the parent's entry for
/// it has ended, and its entries that were live then were copied into the
/// new nodes, which own their records from then on; those entries are
/// left as they were (end 0), so in a dead node an entry with end 0 owns
/// nothing. (Layout 1 marked them *moved* instead, one persisted end word
/// each; the flag is still honoured.) `dead`: the node was reached through
/// an entry that has ended.
#[inline]
pub(crate) fn is_owner(e: &Entry, dead: bool) -> bool {
    let copied = dead && e.end == 0;
    !e.moved && !copied
}
