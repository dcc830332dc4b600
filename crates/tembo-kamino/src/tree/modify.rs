//! Changing the tree inside one transaction: insert with splits, delete
//! with borrow and merge, both bottom-up along the descent path, and the
//! root growing and shrinking. Every node or record is declared with
//! [`Tx::write`] before its first store; new objects come from [`Tx::alloc`].

use tembo_pmem::{PPtr, PoolOffset};

use super::node::{child_off, entry_off, prefix, Reader, CHILDREN, H_META, H_NEXT, MAXK, MINK, NODE_BYTES};
use super::{Tree, A_ROOT};
use crate::error::{invariant, KaminoError, Result};
use crate::tx::{Tx, Writable};

/// What a write may do: the fast path touches one leaf and its records
/// under the shared structure lock, so it gives up when the leaf must
/// split or underflows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Scope {
    LeafOnly,
    Full,
}

/// The marker error a leaf-only write returns when it needs the full path.
pub(crate) const NEEDS_FULL: &str = "tree restructure needed";

fn needs_full() -> KaminoError {
    KaminoError::Aborted(NEEDS_FULL.into())
}

type N = PPtr<()>;

fn n(o: PoolOffset) -> N {
    PPtr::new(o)
}

pub(crate) struct Op<'a, 't, 'h> {
    pub tree: &'t Tree,
    pub tx: &'a mut Tx<'h>,
    pub scope: Scope,
}

impl<'t> Op<'_, 't, '_> {
    fn rd(&self) -> Reader<'t> {
        let tree: &'t Tree = self.tree;
        Reader { pool: tree.heap.pool() }
    }

    fn root(&self) -> Result<PoolOffset> {
        self.tx.get_u64(n(self.tree.anchor), A_ROOT)
    }

    /// The leaf for `key` and the path to it: (inner node, child index).
    fn descend(&self, key: &[u8]) -> Result<(PoolOffset, Vec<(PoolOffset, usize)>)> {
        let rd = self.rd();
        let mut node = self.root()?;
        let mut path = Vec::new();
        loop {
            let (level, count) = rd.meta(node)?;
            if level == 0 {
                return Ok((node, path));
            }
            if path.len() > 64 {
                return Err(invariant("kamino.tree.depth", node, "tree deeper than 64 levels"));
            }
            let i = rd.route(node, count, key, false)?;
            path.push((node, i));
            node = rd.child(node, i)?;
        }
    }

    fn set_meta(&mut self, w: Writable<()>, level: u32, count: usize) -> Result<()> {
        self.tx.set_u64(w, H_META, u64::from(level) << 32 | count as u64)
    }

    fn set_entry(&mut self, w: Writable<()>, i: usize, e: (u64, u64)) -> Result<()> {
        let mut b = [0u8; 16];
        b[..8].copy_from_slice(&e.0.to_le_bytes());
        b[8..].copy_from_slice(&e.1.to_le_bytes());
        self.tx.set(w, entry_off(i), &b)
    }

    fn entry(&self, node: PoolOffset, i: usize) -> Result<(u64, u64)> {
        let rd = self.rd();
        Ok((rd.word(node, entry_off(i))?, rd.word(node, entry_off(i) + 8)?))
    }

    fn entries(&self, node: PoolOffset, count: usize) -> Result<Vec<(u64, u64)>> {
        (0..count).map(|i| self.entry(node, i)).collect()
    }

    fn children(&self, node: PoolOffset, count: usize) -> Result<Vec<u64>> {
        let rd = self.rd();
        (0..=count).map(|i| rd.child(node, i)).collect()
    }

    /// Rewrites a node's entries and children from index `from` on.
    fn put_all(&mut self, w: Writable<()>, from: usize, es: &[(u64, u64)], cs: Option<&[u64]>) -> Result<()> {
        if !es.is_empty() {
            let mut b = Vec::with_capacity(es.len() * 16);
            for e in es {
                b.extend_from_slice(&e.0.to_le_bytes());
                b.extend_from_slice(&e.1.to_le_bytes());
            }
            self.tx.set(w, entry_off(from), &b)?;
        }
        if let Some(cs) = cs {
            let b: Vec<u8> = cs.iter().flat_map(|c| c.to_le_bytes()).collect();
            self.tx.set(w, child_off(from), &b)?;
        }
        Ok(())
    }

    fn new_record(&mut self, key: &[u8], value: &[u8]) -> Result<u64> {
        let w = self.tx.alloc::<()>(8 + key.len() as u64 + value.len() as u64)?;
        self.tx.set_u64(w, 0, (key.len() as u64) << 32 | value.len() as u64)?;
        self.tx.set(w, 8, key)?;
        self.tx.set(w, 8 + key.len() as u64, value)?;
        Ok(w.obj().offset())
    }

    fn new_node(&mut self, level: u32) -> Result<Writable<()>> {
        let w = self.tx.alloc::<()>(NODE_BYTES)?;
        self.set_meta(w, level, 0)?;
        Ok(w)
    }

    // ----- insert ---------------------------------------------------------------

    /// Sets `key` to `value`; returns whether it existed.
    pub fn put(&mut self, key: &[u8], value: &[u8]) -> Result<bool> {
        let (leaf, path) = self.descend(key)?;
        self.tx.lock(n(leaf))?;
        let rd = self.rd();
        let (_, count) = rd.meta(leaf)?;
        let (i, found) = rd.search(leaf, count, key, false)?;
        if found {
            let rec = rd.rec(leaf, i)?;
            let (kl, _) = rd.rec_lens(rec)?;
            let cap = self.tree.heap.len(n(rec))? - 8 - kl;
            if value.len() as u64 <= cap {
                // In place: the case Kamino-Tx makes cheap.
                let w = self.tx.write(n(rec))?;
                self.tx.set(w, 8 + kl, value)?;
                self.tx.set_u64(w, 0, kl << 32 | value.len() as u64)?;
            } else {
                let new = self.new_record(key, value)?;
                let w = self.tx.write(n(leaf))?;
                self.tx.set_u64(w, entry_off(i) + 8, new)?;
                self.tx.free(n(rec))?;
            }
            return Ok(true);
        }
        if count == MAXK && self.scope == Scope::LeafOnly {
            return Err(needs_full());
        }
        let rec = self.new_record(key, value)?;
        self.insert_at(leaf, path, i, (prefix(key), rec), 0)?;
        Ok(false)
    }

    /// Inserts entry `e` at index `i` of `node` (with right child `right`
    /// for inner nodes), splitting upwards as needed.
    fn insert_at(
        &mut self,
        node: PoolOffset,
        mut path: Vec<(PoolOffset, usize)>,
        i: usize,
        e: (u64, u64),
        right: u64,
    ) -> Result<()> {
        let rd = self.rd();
        let (level, count) = rd.meta(node)?;
        let w = self.tx.write(n(node))?;
        if count < MAXK {
            self.tx.copy_within(w, entry_off(i), entry_off(i + 1), (count - i) as u64 * 16)?;
            self.set_entry(w, i, e)?;
            if level > 0 {
                self.tx.copy_within(w, child_off(i + 1), child_off(i + 2), (count - i) as u64 * 8)?;
                self.tx.set_u64(w, child_off(i + 1), right)?;
            }
            return self.set_meta(w, level, count + 1);
        }
        // Split: MAXK + 1 entries over two nodes.
        let mut es = self.entries(node, count)?;
        es.insert(i, e);
        let rw = self.new_node(level)?;
        let sep = if level == 0 {
            let l = es.len().div_ceil(2);
            self.put_all(w, 0, &es[..l], None)?;
            self.put_all(rw, 0, &es[l..], None)?;
            self.set_meta(w, 0, l)?;
            self.set_meta(rw, 0, es.len() - l)?;
            let next = rd.word(node, H_NEXT)?;
            self.tx.set_u64(rw, H_NEXT, next)?;
            self.tx.set_u64(w, H_NEXT, rw.obj().offset())?;
            // The separator is a copy of the right node's first key.
            let k = rd.rec_key(es[l].1)?;
            (es[l].0, self.new_record(&k, &[])?)
        } else {
            let mut cs = self.children(node, count)?;
            cs.insert(i + 1, right);
            let m = es.len() / 2;
            self.put_all(w, 0, &es[..m], Some(&cs[..=m]))?;
            self.put_all(rw, 0, &es[m + 1..], Some(&cs[m + 1..]))?;
            self.set_meta(w, level, m)?;
            self.set_meta(rw, level, es.len() - m - 1)?;
            es[m]
        };
        let r = rw.obj().offset();
        match path.pop() {
            Some((parent, pi)) => self.insert_at(parent, path, pi, sep, r),
            None => {
                let root = self.new_node(level + 1)?;
                self.set_entry(root, 0, sep)?;
                self.tx.set_u64(root, CHILDREN, node)?;
                self.tx.set_u64(root, child_off(1), r)?;
                self.set_meta(root, level + 1, 1)?;
                let a = self.tx.write(n(self.tree.anchor))?;
                self.tx.set_u64(a, A_ROOT, root.obj().offset())
            }
        }
    }

    // ----- delete ---------------------------------------------------------------

    /// Removes `key`; returns whether it existed.
    pub fn delete(&mut self, key: &[u8]) -> Result<bool> {
        let (leaf, path) = self.descend(key)?;
        self.tx.lock(n(leaf))?;
        let rd = self.rd();
        let (_, count) = rd.meta(leaf)?;
        let (i, found) = rd.search(leaf, count, key, false)?;
        if !found {
            return Ok(false);
        }
        if self.scope == Scope::LeafOnly && !path.is_empty() && count <= MINK {
            return Err(needs_full());
        }
        let rec = rd.rec(leaf, i)?;
        let w = self.tx.write(n(leaf))?;
        self.tx.copy_within(w, entry_off(i + 1), entry_off(i), (count - i - 1) as u64 * 16)?;
        self.set_meta(w, 0, count - 1)?;
        self.tx.free(n(rec))?;
        self.rebalance(leaf, path)?;
        Ok(true)
    }

    /// Restores the minimum fill of `node` after a removal, borrowing from a
    /// sibling or merging with one, up to the root.
    fn rebalance(&mut self, mut node: PoolOffset, mut path: Vec<(PoolOffset, usize)>) -> Result<()> {
        loop {
            let rd = self.rd();
            let (level, count) = rd.meta(node)?;
            let Some((p, i)) = path.pop() else {
                if level > 0 && count == 0 {
                    // The root lost its last separator: its child is the root.
                    let child = rd.child(node, 0)?;
                    let a = self.tx.write(n(self.tree.anchor))?;
                    self.tx.set_u64(a, A_ROOT, child)?;
                    self.tx.free(n(node))?;
                }
                return Ok(());
            };
            if count >= MINK {
                return Ok(());
            }
            let (_, pcount) = rd.meta(p)?;
            let left = if i > 0 { Some(rd.child(p, i - 1)?) } else { None };
            let right = if i < pcount { Some(rd.child(p, i + 1)?) } else { None };
            if let Some(l) = left.filter(|&l| rd.meta(l).map(|m| m.1 > MINK).unwrap_or(false)) {
                return self.borrow_left(node, l, p, i);
            }
            if let Some(r) = right.filter(|&r| rd.meta(r).map(|m| m.1 > MINK).unwrap_or(false)) {
                return self.borrow_right(node, r, p, i);
            }
            match (left, right) {
                (Some(l), _) => self.merge(l, node, p, i - 1)?,
                (None, Some(r)) => self.merge(node, r, p, i)?,
                (None, None) => return Err(invariant("kamino.tree.siblings", p, "inner node with one child")),
            }
            node = p;
        }
    }

    /// Replaces separator `si` of `p` with a copy of `key`'s record key.
    fn reseparate(&mut self, p: PoolOffset, si: usize, from_rec: u64, kp: u64) -> Result<()> {
        let old = self.entry(p, si)?.1;
        let k = self.rd().rec_key(from_rec)?;
        let sep = self.new_record(&k, &[])?;
        let pw = self.tx.write(n(p))?;
        self.set_entry(pw, si, (kp, sep))?;
        self.tx.free(n(old))
    }

    fn borrow_left(&mut self, node: PoolOffset, l: PoolOffset, p: PoolOffset, i: usize) -> Result<()> {
        let rd = self.rd();
        let (level, count) = rd.meta(node)?;
        let (_, lc) = rd.meta(l)?;
        let nw = self.tx.write(n(node))?;
        let lw = self.tx.write(n(l))?;
        self.tx.copy_within(nw, entry_off(0), entry_off(1), count as u64 * 16)?;
        if level == 0 {
            let e = self.entry(l, lc - 1)?;
            self.set_entry(nw, 0, e)?;
            self.set_meta(lw, 0, lc - 1)?;
            self.set_meta(nw, 0, count + 1)?;
            self.reseparate(p, i - 1, e.1, e.0)
        } else {
            self.tx.copy_within(nw, child_off(0), child_off(1), (count + 1) as u64 * 8)?;
            let down = self.entry(p, i - 1)?;
            self.set_entry(nw, 0, down)?;
            let c = rd.child(l, lc)?;
            self.tx.set_u64(nw, child_off(0), c)?;
            let up = self.entry(l, lc - 1)?;
            let pw = self.tx.write(n(p))?;
            self.set_entry(pw, i - 1, up)?;
            self.set_meta(lw, level, lc - 1)?;
            self.set_meta(nw, level, count + 1)
        }
    }

    fn borrow_right(&mut self, node: PoolOffset, r: PoolOffset, p: PoolOffset, i: usize) -> Result<()> {
        let rd = self.rd();
        let (level, count) = rd.meta(node)?;
        let (_, rc) = rd.meta(r)?;
        let nw = self.tx.write(n(node))?;
        let rw = self.tx.write(n(r))?;
        if level == 0 {
            let e = self.entry(r, 0)?;
            self.set_entry(nw, count, e)?;
            self.tx.copy_within(rw, entry_off(1), entry_off(0), (rc - 1) as u64 * 16)?;
            self.set_meta(rw, 0, rc - 1)?;
            self.set_meta(nw, 0, count + 1)?;
            let first = self.entry(r, 0)?;
            self.reseparate(p, i, first.1, first.0)
        } else {
            let down = self.entry(p, i)?;
            self.set_entry(nw, count, down)?;
            let c = rd.child(r, 0)?;
            self.tx.set_u64(nw, child_off(count + 1), c)?;
            let up = self.entry(r, 0)?;
            let pw = self.tx.write(n(p))?;
            self.set_entry(pw, i, up)?;
            self.tx.copy_within(rw, entry_off(1), entry_off(0), (rc - 1) as u64 * 16)?;
            self.tx.copy_within(rw, child_off(1), child_off(0), rc as u64 * 8)?;
            self.set_meta(rw, level, rc - 1)?;
            self.set_meta(nw, level, count + 1)
        }
    }

    /// Merges `r` (child `si + 1` of `p`) into `l` (child `si`) and removes
    /// separator `si` from `p`.
    fn merge(&mut self, l: PoolOffset, r: PoolOffset, p: PoolOffset, si: usize) -> Result<()> {
        let rd = self.rd();
        let (level, lc) = rd.meta(l)?;
        let (_, rc) = rd.meta(r)?;
        let (_, pc) = rd.meta(p)?;
        let lw = self.tx.write(n(l))?;
        let sep = self.entry(p, si)?;
        if level == 0 {
            let es = self.entries(r, rc)?;
            self.put_all(lw, lc, &es, None)?;
            let next = rd.word(r, H_NEXT)?;
            self.tx.set_u64(lw, H_NEXT, next)?;
            self.set_meta(lw, 0, lc + rc)?;
            self.tx.free(n(sep.1))?;
        } else {
            let mut es = vec![sep];
            es.extend(self.entries(r, rc)?);
            let cs = self.children(r, rc)?;
            self.put_all(lw, lc, &es, None)?;
            self.put_all(lw, lc + 1, &[], Some(&cs))?;
            self.set_meta(lw, level, lc + 1 + rc)?;
        }
        self.tx.free(n(r))?;
        let pw = self.tx.write(n(p))?;
        self.tx.copy_within(pw, entry_off(si + 1), entry_off(si), (pc - si - 1) as u64 * 16)?;
        self.tx.copy_within(pw, child_off(si + 2), child_off(si + 1), (pc - si - 1) as u64 * 8)?;
        let (plevel, _) = rd.meta(p)?;
        self.set_meta(pw, plevel, pc - 1)
    }
}
