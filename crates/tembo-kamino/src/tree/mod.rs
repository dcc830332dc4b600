//! An in-place (unversioned) persistent B+tree on Kamino-Tx transactions:
//! the `kamino`, `kamino-dynamic` and `undo` engines of `tembo-store`.
//!
//! Every put or delete is one transaction; a batch is one transaction.
//! Nodes hold 32 keys (the shape of the PMDK peer in `tembo-bench`):
//! entries are (8-byte key prefix, record), records hold key and value, an
//! update that fits the record is done in place.
//!
//! Concurrency: a DRAM structure lock. A single put or delete first runs
//! under the shared lock and touches only its leaf (exclusive object lock)
//! and that leaf's records, so writers on different leaves run in
//! parallel; if the leaf must split or underflows it aborts and reruns
//! under the exclusive lock, with the full algorithm (splits, borrow,
//! merge, root changes). Batches run under the exclusive lock. Readers take
//! the shared lock and a read lock on each leaf they read; inner nodes
//! change only under the exclusive lock. No two writers ever wait on each
//! other's object locks in opposite orders, so there are no deadlocks.
//!
//! Invariants (checked by [`Tree::check`]):
//! - `kamino.tree.sorted`: keys strictly increase within a node and across
//!   the leaf chain, and lie within their separators' bounds;
//! - `kamino.tree.fill`: every node but the root holds at least `MINK` keys;
//! - `kamino.tree.balanced`: every leaf is at the same depth;
//! - `kamino.tree.chain`: the leaf chain visits exactly the leaves, in order;
//! - `kamino.tree.prefix`: each entry's prefix is its key's;
//!
//! and every heap invariant ([`Heap::check`]) for every object.

mod modify;
pub mod node;
mod sample;

use std::ops::Bound;
use std::sync::Arc;

use crossbeam_utils::sync::{ShardedLock, ShardedLockReadGuard, ShardedLockWriteGuard};
use tembo_pmem::{Marker, PPtr, PmemError, Pool, PoolOffset, ReclaimReport};

use crate::error::{invariant, KaminoError, Result};
use crate::heap::{Heap, HeapOptions, HeapRecovery, HeapStats};
use modify::{Op, Scope, NEEDS_FULL};
use node::{prefix, Reader, H_NEXT, MAXK, MINK, NODE_BYTES};

/// Anchor object: the root node.
pub(crate) const A_ROOT: u64 = 0;
const ANCHOR_BYTES: u64 = 8;
/// Pairs read per structure-lock hold during a scan.
const SCAN_CHUNK: usize = 256;

/// Key and value size limits.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TreeLimits {
    /// Largest key in bytes.
    pub max_key: usize,
    /// Largest value in bytes.
    pub max_value: usize,
}

/// One operation of a batch.
#[derive(Clone, Copy, Debug)]
pub enum TreeOp<'a> {
    /// Set a key.
    Put(&'a [u8], &'a [u8]),
    /// Remove a key.
    Delete(&'a [u8]),
}

/// What [`Tree::stats`] counts (a walk of the whole tree).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct KTreeStats {
    /// Keys.
    pub keys: u64,
    /// Nodes.
    pub nodes: u64,
    /// Levels.
    pub height: u32,
    /// Bytes of objects (nodes, records, separators), headers included.
    pub object_bytes: u64,
    /// Bytes of their backup copies.
    pub backup_bytes: u64,
    /// Objects with a backup copy.
    pub objects_with_backup: u64,
    /// The heap's counters.
    pub heap: HeapStats,
}

/// The in-place B+tree.
#[derive(Debug)]
pub struct Tree {
    pub(crate) heap: Heap,
    pub(crate) anchor: PoolOffset,
    /// Sharded: every operation takes it shared, and one lock word taken
    /// by every core was a point they all met.
    structure: ShardedLock<()>,
    limits: TreeLimits,
    leaks: Option<ReclaimReport>,
}

impl Tree {
    /// The structure lock, shared. It guards no data of its own, so a
    /// panic under it (its transaction aborted) leaves nothing to poison.
    fn shared(&self) -> ShardedLockReadGuard<'_, ()> {
        self.structure.read().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The structure lock, exclusive.
    fn exclusive(&self) -> ShardedLockWriteGuard<'_, ()> {
        self.structure.write().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Creates an empty tree and its heap on `pool`.
    ///
    /// # Errors
    /// As [`Heap::create`].
    pub fn create(pool: Arc<Pool>, opts: &HeapOptions, limits: TreeLimits) -> Result<Tree> {
        let heap = Heap::create(pool, opts)?;
        Tree::with_heap(heap, limits)
    }

    /// Opens the tree on `pool`, recovering the heap's log and then
    /// reclaiming leaked objects if the pool was not closed cleanly.
    ///
    /// # Errors
    /// As [`Heap::open`]; [`KaminoError::Invariant`] if the tree is damaged.
    pub fn open(pool: Arc<Pool>, opts: &HeapOptions, limits: TreeLimits) -> Result<Tree> {
        let unclean = pool.opened_unclean();
        let heap = Heap::open(pool, opts)?;
        let mut t = Tree::with_heap(heap, limits)?;
        if unclean {
            let anchor = t.anchor;
            let tracer = move |p: &Pool, m: &mut Marker<'_>| trace(p, anchor, m);
            match t.heap.reclaim_leaks(&tracer) {
                Ok(r) => t.leaks = Some(r),
                Err(e) => {
                    t.heap.pool().keep_unclean();
                    return Err(e);
                }
            }
        }
        Ok(t)
    }

    fn with_heap(heap: Heap, limits: TreeLimits) -> Result<Tree> {
        let mut anchor = heap.app_root()?;
        if anchor == 0 {
            // New, or a creation cut short (its objects are leaks).
            anchor = heap.transaction(|tx| {
                let a = tx.alloc::<()>(ANCHOR_BYTES)?;
                let root = tx.alloc::<()>(NODE_BYTES)?;
                tx.set_u64(a, A_ROOT, root.obj().offset())?;
                Ok(a.obj().offset())
            })?;
            heap.set_app_root(anchor)?;
        }
        Ok(Tree { heap, anchor, structure: ShardedLock::new(()), limits, leaks: None })
    }

    /// The heap.
    pub fn heap(&self) -> &Heap {
        &self.heap
    }

    /// The pool.
    pub fn pool(&self) -> &Arc<Pool> {
        self.heap.pool()
    }

    /// The limits in force.
    pub fn limits(&self) -> TreeLimits {
        self.limits
    }

    /// What recovery did at open: the log's part and the leak sweep's.
    pub fn recovery(&self) -> (&HeapRecovery, Option<&ReclaimReport>) {
        (self.heap.recovery(), self.leaks.as_ref())
    }

    fn rd(&self) -> Reader<'_> {
        Reader { pool: self.heap.pool() }
    }

    fn check_sizes(&self, key: &[u8], value: Option<&[u8]>) -> Result<()> {
        if key.len() > self.limits.max_key {
            return Err(KaminoError::TooLarge { what: "key", len: key.len(), limit: self.limits.max_key });
        }
        if let Some(v) = value {
            if v.len() > self.limits.max_value {
                return Err(KaminoError::TooLarge { what: "value", len: v.len(), limit: self.limits.max_value });
            }
        }
        Ok(())
    }

    /// The value of `key`.
    ///
    /// # Errors
    /// [`KaminoError::Invariant`] or [`KaminoError::Pmem`] if the tree is damaged.
    pub fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        let mut v = Vec::new();
        Ok(self.get_into(key, &mut v)?.then_some(v))
    }

    /// [`Tree::get`] into `buf` (cleared first; left empty for a
    /// missing key), reusing its allocation. Returns whether `key` exists.
    ///
    /// # Errors
    /// As [`Tree::get`].
    pub fn get_into(&self, key: &[u8], buf: &mut Vec<u8>) -> Result<bool> {
        Ok(self.get_range_into(key, 0, usize::MAX, buf)?.is_some())
    }

    /// At most `limit` bytes of `key`'s value from byte `offset` on into
    /// `buf` (cleared first), and the value's whole length; `None` if missing.
    ///
    /// # Errors
    /// As [`Tree::get`].
    pub fn get_range_into(&self, key: &[u8], offset: u64, limit: usize, buf: &mut Vec<u8>) -> Result<Option<u64>> {
        buf.clear();
        let _s = self.shared();
        let rd = self.rd();
        let leaf = self.leaf_for(key, false)?;
        let _g = self.heap.read_lock(PPtr::<()>::new(leaf))?;
        let (_, count) = rd.meta(leaf)?;
        let (i, found) = rd.search(leaf, count, key, false)?;
        if !found {
            return Ok(None);
        }
        Ok(Some(rd.rec_value_range_into(rd.rec(leaf, i)?, offset, limit as u64, buf)?))
    }

    fn leaf_for(&self, key: &[u8], before: bool) -> Result<PoolOffset> {
        let rd = self.rd();
        let mut node = root_of(rd.pool, self.anchor)?;
        for _ in 0..64 {
            let (level, count) = rd.meta(node)?;
            if level == 0 {
                return Ok(node);
            }
            node = rd.child(node, rd.route(node, count, key, before)?)?;
        }
        Err(invariant("kamino.tree.depth", node, "tree deeper than 64 levels"))
    }

    /// Sets `key` to `value`, durably; returns whether it existed.
    ///
    /// # Errors
    /// [`KaminoError::TooLarge`]; [`KaminoError::Pmem`] when the pool is full
    /// (nothing changed).
    pub fn put(&self, key: &[u8], value: &[u8]) -> Result<bool> {
        self.check_sizes(key, Some(value))?;
        self.single(|op| op.put(key, value))
    }

    /// Removes `key`, durably; returns whether it existed.
    ///
    /// # Errors
    /// As [`Tree::put`].
    pub fn delete(&self, key: &[u8]) -> Result<bool> {
        self.check_sizes(key, None)?;
        reserve_if_full(self.heap.pool(), || self.single(|op| op.delete(key)))
    }

    fn single(&self, f: impl Fn(&mut Op<'_, '_, '_>) -> Result<bool>) -> Result<bool> {
        {
            let _s = self.shared();
            match self.heap.transaction(|tx| f(&mut Op { tree: self, tx, scope: Scope::LeafOnly })) {
                Err(KaminoError::Aborted(m)) if m == NEEDS_FULL => {}
                other => return other,
            }
        }
        let _s = self.exclusive();
        self.heap.transaction(|tx| f(&mut Op { tree: self, tx, scope: Scope::Full }))
    }

    /// Applies `ops` in order as one transaction: all or nothing, durable
    /// when it returns. Returns, per operation, whether its key existed.
    ///
    /// # Errors
    /// As [`Tree::put`]; then nothing of the batch is applied.
    pub fn write(&self, ops: &[TreeOp<'_>]) -> Result<Vec<bool>> {
        for op in ops {
            match *op {
                TreeOp::Put(k, v) => self.check_sizes(k, Some(v))?,
                TreeOp::Delete(k) => self.check_sizes(k, None)?,
            }
        }
        let _s = self.exclusive();
        let run = || {
            self.heap.transaction(|tx| {
                let mut op = Op { tree: self, tx, scope: Scope::Full };
                ops.iter()
                    .map(|o| match *o {
                        TreeOp::Put(k, v) => op.put(k, v),
                        TreeOp::Delete(k) => op.delete(k),
                    })
                    .collect()
            })
        };
        if ops.iter().all(|o| matches!(o, TreeOp::Delete(_))) {
            reserve_if_full(self.heap.pool(), run)
        } else {
            run()
        }
    }

    /// Up to `SCAN_CHUNK` pairs in `(lo, hi)` in key order (`rev`: from the
    /// top down), each chunk consistent (read under locks); the caller
    /// continues after the last key returned.
    ///
    /// # Errors
    /// [`KaminoError::Invariant`] or [`KaminoError::Pmem`] if the tree is damaged.
    pub fn scan_chunk(&self, lo: Bound<&[u8]>, hi: Bound<&[u8]>, rev: bool) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
        let _s = self.shared();
        let rd = self.rd();
        let above_lo = |k: &[u8]| match lo {
            Bound::Included(l) => k >= l,
            Bound::Excluded(l) => k > l,
            Bound::Unbounded => true,
        };
        let below_hi = |k: &[u8]| match hi {
            Bound::Included(h) => k <= h,
            Bound::Excluded(h) => k < h,
            Bound::Unbounded => true,
        };
        let mut out = Vec::new();
        if !rev {
            let mut leaf = match lo {
                Bound::Included(l) | Bound::Excluded(l) => self.leaf_for(l, false)?,
                Bound::Unbounded => self.leaf_for(&[], false)?,
            };
            while leaf != 0 && out.len() < SCAN_CHUNK {
                let _g = self.heap.read_lock(PPtr::<()>::new(leaf))?;
                let (_, count) = rd.meta(leaf)?;
                for i in 0..count {
                    let rec = rd.rec(leaf, i)?;
                    let k = rd.rec_key(rec)?;
                    if !above_lo(&k) {
                        continue;
                    }
                    if !below_hi(&k) {
                        return Ok(out);
                    }
                    out.push((k, rd.rec_value(rec)?));
                }
                leaf = rd.word(leaf, H_NEXT)?;
            }
            return Ok(out);
        }
        // Reverse: descend towards the upper bound keeping the path, then
        // step to the previous leaf through the path.
        let mut path: Vec<(PoolOffset, usize)> = Vec::new();
        let mut node = root_of(rd.pool, self.anchor)?;
        loop {
            let (level, count) = rd.meta(node)?;
            if level == 0 {
                break;
            }
            if path.len() > 64 {
                return Err(invariant("kamino.tree.depth", node, "tree deeper than 64 levels"));
            }
            let i = match hi {
                Bound::Unbounded => count,
                Bound::Included(h) => rd.route(node, count, h, false)?,
                Bound::Excluded(h) => rd.route(node, count, h, true)?,
            };
            path.push((node, i));
            node = rd.child(node, i)?;
        }
        loop {
            {
                let _g = self.heap.read_lock(PPtr::<()>::new(node))?;
                let (_, count) = rd.meta(node)?;
                for i in (0..count).rev() {
                    let rec = rd.rec(node, i)?;
                    let k = rd.rec_key(rec)?;
                    if !below_hi(&k) {
                        continue;
                    }
                    if !above_lo(&k) {
                        return Ok(out);
                    }
                    out.push((k, rd.rec_value(rec)?));
                }
            }
            if out.len() >= SCAN_CHUNK {
                return Ok(out);
            }
            loop {
                match path.pop() {
                    None => return Ok(out),
                    Some((p, i)) if i > 0 => {
                        path.push((p, i - 1));
                        node = rd.child(p, i - 1)?;
                        break;
                    }
                    Some(_) => {}
                }
            }
            loop {
                let (level, count) = rd.meta(node)?;
                if level == 0 {
                    break;
                }
                path.push((node, count));
                node = rd.child(node, count)?;
            }
        }
    }

    /// Every object of the tree: anchor, nodes, records, separators.
    pub fn objects(&self) -> Result<Vec<PoolOffset>> {
        let _s = self.exclusive();
        all_objects(self.heap.pool(), self.anchor)
    }

    /// Counts keys, nodes, height and bytes (walks the tree).
    ///
    /// # Errors
    /// If the walk finds damage.
    pub fn stats(&self) -> Result<KTreeStats> {
        let _s = self.exclusive();
        let pool = self.heap.pool();
        let rd = self.rd();
        let mut st = KTreeStats { heap: self.heap.stats(), ..KTreeStats::default() };
        let root = root_of(rd.pool, self.anchor)?;
        st.height = rd.meta(root)?.0 + 1;
        for o in all_objects(pool, self.anchor)? {
            let (len, b) = self.heap.object_info(PPtr::<()>::new(o))?;
            st.object_bytes += crate::layout::OBJ_HEADER + len;
            if b != 0 {
                st.backup_bytes += crate::layout::OBJ_HEADER + len;
                st.objects_with_backup += 1;
            }
        }
        let mut stack = vec![root];
        while let Some(nd) = stack.pop() {
            st.nodes += 1;
            let (level, count) = rd.meta(nd)?;
            if level == 0 {
                st.keys += count as u64;
            } else {
                for i in 0..=count {
                    stack.push(rd.child(nd, i)?);
                }
            }
        }
        Ok(st)
    }

    /// Checks every tree and heap invariant; returns the violations.
    ///
    /// # Errors
    /// If the walk cannot proceed.
    pub fn check(&self) -> Result<Vec<String>> {
        let _s = self.exclusive();
        let rd = self.rd();
        let mut v = Vec::new();
        let root = root_of(rd.pool, self.anchor)?;
        let mut leaves = Vec::new();
        let mut leaf_depth = None;
        // (node, depth, lower bound, upper bound)
        type Visit = (PoolOffset, u32, Option<Vec<u8>>, Option<Vec<u8>>);
        let mut stack: Vec<Visit> = vec![(root, 0, None, None)];
        while let Some((nd, depth, lo, hi)) = stack.pop() {
            let (level, count) = rd.meta(nd)?;
            if nd != root && count < MINK {
                v.push(format!("kamino.tree.fill: node {nd:#x} holds {count} keys, fewer than {MINK}"));
            }
            let mut keys = Vec::with_capacity(count);
            for i in 0..count {
                let rec = rd.rec(nd, i)?;
                let k = rd.rec_key(rec)?;
                if rd.word(nd, node::entry_off(i))? != prefix(&k) {
                    v.push(format!("kamino.tree.prefix: node {nd:#x} entry {i}"));
                }
                if lo.as_ref().is_some_and(|l| k < *l) || hi.as_ref().is_some_and(|h| k >= *h) {
                    v.push(format!("kamino.tree.sorted: node {nd:#x} key {i} outside its separators"));
                }
                if keys.last().is_some_and(|p: &Vec<u8>| *p >= k) {
                    v.push(format!("kamino.tree.sorted: node {nd:#x} keys {} and {i} out of order", i - 1));
                }
                keys.push(k);
            }
            if level == 0 {
                match leaf_depth {
                    None => leaf_depth = Some(depth),
                    Some(d) if d != depth => {
                        v.push(format!("kamino.tree.balanced: leaf {nd:#x} at depth {depth}, another at {d}"))
                    }
                    _ => {}
                }
                leaves.push(nd);
            } else {
                for i in (0..=count).rev() {
                    let clo = if i == 0 { lo.clone() } else { Some(keys[i - 1].clone()) };
                    let chi = if i == count { hi.clone() } else { Some(keys[i].clone()) };
                    stack.push((rd.child(nd, i)?, depth + 1, clo, chi));
                }
            }
        }
        // The chain must visit the leaves in key order (the walk's order).
        let mut chain = Vec::new();
        let mut l = leaves.first().copied().unwrap_or(0);
        while l != 0 && chain.len() <= leaves.len() {
            chain.push(l);
            l = rd.word(l, H_NEXT)?;
        }
        if chain != leaves {
            v.push(format!("kamino.tree.chain: the leaf chain has {} leaves, the tree {}", chain.len(), leaves.len()));
        }
        v.extend(self.heap.check(&all_objects(rd.pool, self.anchor)?)?);
        Ok(v)
    }
}

/// The root node.
fn root_of(pool: &Pool, anchor: PoolOffset) -> Result<PoolOffset> {
    Ok(pool.load_u64(crate::layout::payload(anchor) + A_ROOT)?)
}

/// The anchor and every object reachable from it.
fn all_objects(pool: &Pool, anchor: PoolOffset) -> Result<Vec<PoolOffset>> {
    let mut v = vec![anchor];
    walk(pool, anchor, &mut |o| {
        v.push(o);
        Ok(())
    })?;
    Ok(v)
}

/// Calls `f` on every object reachable from the anchor (not the anchor).
fn walk(pool: &Pool, anchor: PoolOffset, f: &mut dyn FnMut(PoolOffset) -> Result<()>) -> Result<()> {
    let rd = Reader { pool };
    let mut stack = vec![root_of(pool, anchor)?];
    let mut seen = 0u64;
    while let Some(nd) = stack.pop() {
        seen += 1;
        if seen > pool.size() / NODE_BYTES + 1 {
            return Err(invariant("kamino.tree.acyclic", nd, "the walk visits more nodes than fit in the pool"));
        }
        f(nd)?;
        let (level, count) = rd.meta(nd)?;
        for i in 0..count {
            f(rd.rec(nd, i)?)?;
        }
        if level > 0 {
            for i in 0..=count {
                stack.push(rd.child(nd, i)?);
            }
        }
    }
    Ok(())
}

/// The tree's leak tracer: every object and its backup.
fn trace(pool: &Pool, anchor: PoolOffset, m: &mut Marker<'_>) -> Result<(), PmemError> {
    Heap::mark_object(pool, m, anchor)?;
    walk(pool, anchor, &mut |o| Heap::mark_object(pool, m, o).map(|_| ()).map_err(KaminoError::from)).map_err(|e| {
        match e {
            KaminoError::Pmem(p) => p,
            other => PmemError::Corrupted { what: other.to_string(), offset: 0 },
        }
    })
}

#[allow(dead_code)]
const _: () = assert!(MAXK >= 4);

/// Runs a transaction that only deletes; should the pool be full (a
/// rebalance may need a new separator record or node), runs it again with
/// the pool's reserve open (`Pool::with_reserve`): deletes are how a full
/// pool gets room back. A failed transaction changed nothing.
fn reserve_if_full<T>(pool: &Pool, run: impl Fn() -> Result<T>) -> Result<T> {
    match run() {
        Err(KaminoError::Pmem(PmemError::PoolFull { .. })) => pool.with_reserve(run),
        r => r,
    }
}
