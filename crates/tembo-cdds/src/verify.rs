//! `check` and `stats`: one walk over the tree that counts and, for
//! `check`, validates every invariant the tree promises.
//!
//! Checked: node magic and levels; no torn or duplicate slot (outside
//! recovery); entries sorted by (key, start) with `start <= end`; at the
//! current version, inner entries partition the key space (strictly
//! increasing, the rightmost node of a level ending in the +∞ sentinel),
//! every leaf key lies inside its parent's bounds, a leaf's prefix length
//! is shared by its whole key range and its slots' prefix words hold the
//! key bytes after it, at most one visible
//! entry per key, every non-root node keeps a live entry; record
//! checksums; every owned block is allocated and every allocated block is
//! owned (or retired and waiting for readers to finish); the allocator's
//! own `check`.

use std::collections::HashSet;

use tembo_pmem::{Marker, Pool};

use crate::entry::{Entry, ReadAt, Slot};
use crate::error::Result;
use crate::node;
use crate::record;
use crate::search;
use crate::tree::TreeCore;
use crate::write::{is_owner, MIN_LIVE};

/// What a walk of the tree counted.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TreeStats {
    /// The current version.
    pub version: u64,
    /// Keys visible at the current version.
    pub keys: u64,
    /// Entries visible at the current version (leaf and inner).
    pub live_entries: u64,
    /// Entries kept only for older versions or waiting for reuse.
    pub dead_entries: u64,
    /// Nodes owned by the tree (live and retained).
    pub nodes: u64,
    /// Nodes of the current version.
    pub live_nodes: u64,
    /// Non-root nodes of the current version with fewer than ml live entries.
    pub underfull_nodes: u64,
    /// Levels of the current version (1 = a single leaf).
    pub height: u64,
    /// Leaves of the current version whose keys share a recorded prefix
    /// (their slots compare the key bytes after it).
    pub prefixed_leaves: u64,
    /// Inner nodes of the current version whose key range shares a
    /// recorded prefix (the same, one level up).
    pub prefixed_inner_nodes: u64,
    /// Key bytes plus value bytes visible at the current version.
    pub data_bytes: u64,
    /// Bytes of nodes and records the tree owns (before allocator rounding).
    pub owned_bytes: u64,
}

/// `check`'s verdict.
#[derive(Clone, Debug, Default)]
pub struct TreeCheck {
    /// What the walk counted.
    pub stats: TreeStats,
    /// Every violated tree invariant, with where.
    pub violations: Vec<String>,
    /// The allocator's own violations (`Pool::check`), kept apart so that
    /// callers that also report the pool's check list them once.
    pub allocator: Vec<String>,
}

impl TreeCheck {
    /// Whether every invariant held, the allocator's included.
    pub fn is_ok(&self) -> bool {
        self.violations.is_empty() && self.allocator.is_empty()
    }
}

struct Walk<'a> {
    tree: &'a TreeCore,
    pool: &'a Pool,
    v: u64,
    full: bool,
    out: TreeCheck,
}

impl Walk<'_> {
    fn bad(&mut self, at: u64, what: impl Into<String>) {
        if self.out.violations.len() < 100 {
            self.out.violations.push(format!("{at:#x}: {}", what.into()));
        }
    }

    /// Walks the current version under `n`, whose keys lie in `[lo, hi)`
    /// (`None` = unbounded).
    fn live(
        &mut self,
        n: u64,
        lo: Option<Vec<u8>>,
        hi: Option<Vec<u8>>,
        level: u8,
        root: bool,
        only: bool,
    ) -> Result<()> {
        let copy = node::read_checked(self.pool, n, self.tree.session, ReadAt { version: self.v, aborted: &[] })?;
        self.out.stats.live_nodes += 1;
        if copy.level != level {
            self.bad(n, format!("level {} where {level} expected", copy.level));
            return Ok(());
        }
        let vis: Vec<Entry> = copy.entries().iter().copied().filter(|e| e.visible_at(self.v, &[])).collect();
        // An only child may empty out; the next batch collapses the root.
        if !root && !only && vis.is_empty() {
            self.bad(n, "non-root node with no live entry");
        }
        if !root && vis.len() < MIN_LIVE {
            self.out.stats.underfull_nodes += 1;
        }
        self.out.stats.live_entries += vis.len() as u64;
        if copy.plen > 0 && level == 0 {
            self.out.stats.prefixed_leaves += 1;
        } else if copy.plen > 0 {
            self.out.stats.prefixed_inner_nodes += 1;
        }
        if copy.plen > crate::write::common_prefix(lo.as_deref(), hi.as_deref()) {
            self.bad(n, format!("prefix length {} beyond what the node's key range shares", copy.plen));
        }
        let mut prev: Option<Vec<u8>> = lo.clone();
        for (i, e) in vis.iter().enumerate() {
            let key = search::entry_key(self.pool, e)?;
            let last = i + 1 == vis.len();
            if let (Some(p), Some(k)) = (&prev, &key) {
                let ok = if i == 0 { k >= p } else { k > p };
                if !ok {
                    self.bad(n, format!("visible key {k:?} not above {p:?}"));
                }
            }
            match (&key, &hi) {
                (Some(k), Some(h)) if (level == 0 && k >= h) || (level > 0 && k > h) => {
                    self.bad(n, format!("key {k:?} beyond the node's bound {h:?}"))
                }
                (None, Some(_)) => self.bad(n, "sentinel in a node that is not rightmost"),
                (None, None) if level == 0 => self.bad(n, "sentinel in a leaf"),
                (None, None) if !last => self.bad(n, "sentinel before the last entry"),
                (Some(_), None) if level > 0 && last => self.bad(n, "rightmost inner node lacks the sentinel"),
                _ => {}
            }
            if let Some(k) = &key {
                if e.prefix != crate::entry::key_prefix_at(k, copy.plen) {
                    self.bad(n, format!("the prefix word of key {k:?} does not hold its bytes after {}", copy.plen));
                }
            }
            if level == 0 {
                let h = record::header(self.pool, e.rec)?;
                self.out.stats.keys += 1;
                self.out.stats.data_bytes += h.key_len + h.word;
            } else {
                let child = search::child_of(self.pool, e)?;
                self.live(child, prev.clone(), key.clone(), level - 1, false, vis.len() == 1)?;
            }
            if key.is_some() {
                prev = key;
            }
        }
        Ok(())
    }

    /// Walks every owned node (live and retained) for structure and counts.
    fn owned(&mut self, root: u64) -> Result<()> {
        let mut stack = vec![(root, false)];
        let mut seen = HashSet::new();
        while let Some((n, dead)) = stack.pop() {
            if !seen.insert(n) {
                self.bad(n, "node owned twice");
                continue;
            }
            self.out.stats.nodes += 1;
            self.out.stats.owned_bytes += node::NODE_BYTES;
            let level = node::level(self.pool, n)?;
            let slots = node::raw_slots(self.pool, n)?;
            let order = node::order_line(self.pool, n)?;
            let Some(named) = order.mask() else {
                self.bad(n, "malformed order line");
                continue;
            };
            let birth = node::birth(self.pool, n)?;
            for (i, s) in slots.iter().enumerate() {
                // Slots a node did not persist at birth may hold stale
                // words (torn) after a crash, or after a clean close that
                // power failed before the cache wrote them back; repair
                // clears them in the nodes it walks, and they are harmless
                // anywhere: no reader reads a slot the order line does not
                // name, and an insert overwrites all of it.
                let stale = *s == Slot::Torn && birth.unpersisted(i);
                if named & (1 << i) == 0 && *s != Slot::Empty && !stale {
                    self.bad(n, format!("slot {i} is used but not in the order line"));
                }
            }
            let mut prev: Option<Entry> = None;
            for &i in order.slots() {
                let e = match slots[i as usize] {
                    Slot::Torn => {
                        self.bad(n, "torn slot");
                        continue;
                    }
                    Slot::Valid(e) => e,
                    Slot::Empty => {
                        self.bad(n, format!("the order line names empty slot {i}"));
                        continue;
                    }
                };
                if e.end != 0 && e.end < e.start {
                    self.bad(n, format!("entry ends ({}) before it starts ({})", e.end, e.start));
                }
                let owner = is_owner(&e, dead);
                if !owner || e.end != 0 || !e.visible_at(self.v, &[]) {
                    self.out.stats.dead_entries += 1;
                }
                // A copied entry's record belongs to its copy, which may have
                // been deleted and freed since: only owners are compared.
                if let Some(p) = prev.filter(|p| is_owner(p, dead) && owner) {
                    match crate::write::key_order(self.pool, &p, &e)? {
                        std::cmp::Ordering::Greater => self.bad(n, "entries out of key order"),
                        std::cmp::Ordering::Equal if p.start > e.start => self.bad(n, "equal keys out of start order"),
                        std::cmp::Ordering::Equal if p == e => self.bad(n, "duplicate slot"),
                        _ => {}
                    }
                }
                prev = Some(e);
                if !owner {
                    continue;
                }
                if self.full {
                    if let Err(err) = record::verify(self.pool, e.rec) {
                        self.bad(e.rec, err.to_string());
                        continue;
                    }
                }
                let h = record::header(self.pool, e.rec)?;
                self.out.stats.owned_bytes +=
                    record::footprint(h.key_len as usize, 0) + if level == 0 { h.word } else { 0 };
                if level > 0 {
                    let child = search::child_of(self.pool, &e)?;
                    if node::level(self.pool, child)? + 1 != level {
                        self.bad(child, "child level is not parent level - 1");
                    }
                    stack.push((child, e.end != 0));
                }
            }
        }
        Ok(())
    }
}

impl TreeCore {
    fn walk(&self, full: bool) -> Result<TreeCheck> {
        let mut ws = self.writer.lock();
        let pool = &*self.pool;
        let v = self.current_version()?;
        let root = self.meta.root(pool)?;
        let mut w = Walk { tree: self, pool, v, full, out: TreeCheck::default() };
        w.out.stats.version = v;
        let root_level = node::level(pool, root)?;
        w.out.stats.height = root_level as u64 + 1;
        w.live(root, None, None, root_level, true, false)?;
        w.owned(root)?;
        if full {
            if let Err(e) = ws.limbo.expand_all(pool) {
                w.bad(0, format!("walking retired subtrees: {e}"));
            }
            let limbo: HashSet<u64> = ws.limbo.blocks().collect();
            match pool.find_leaks(&[&|p: &Pool, m: &mut Marker<'_>| self.trace(p, m)]) {
                Ok(rep) => {
                    for (off, size) in rep.leaked {
                        if !limbo.contains(&off) && !self.foreign_root_block(off) {
                            w.bad(off, format!("allocated block of {size} bytes that the tree does not own (leak)"));
                        }
                    }
                }
                Err(e) => w.bad(0, format!("reachability: {e}")),
            }
            let ac = pool.check();
            w.out.allocator = ac.violations.iter().map(|x| format!("{}: {}", x.name, x.detail)).collect();
        }
        Ok(w.out)
    }

    fn foreign_root_block(&self, off: u64) -> bool {
        self.pool.roots().iter().any(|r| r.offset == off && r.name != crate::meta::ROOT_NAME)
    }

    /// Validates every invariant (see the module docs); pool errors only
    /// if the walk itself cannot proceed.
    ///
    /// # Errors
    /// Pool or invariant errors that stop the walk.
    pub fn check(&self) -> Result<TreeCheck> {
        let _ = self.recovery_report(); // the walk expects a repaired tree
        self.walk(true)
    }

    /// Counts keys, entries, nodes and bytes (a full walk, O(tree)).
    ///
    /// # Errors
    /// As [`TreeCore::check`].
    pub fn stats(&self) -> Result<TreeStats> {
        let _ = self.recovery_report();
        Ok(self.walk(false)?.stats)
    }
}

impl TreeCore {
    /// A human-readable dump of node `n`'s slots (debugging aid).
    pub fn dump_node(&self, n: u64) -> Result<String> {
        let mut s = format!(
            "node {n:#x} level {} order {:?}\n",
            node::level(&self.pool, n)?,
            node::order_line(&self.pool, n)?.slots()
        );
        for (i, sl) in node::raw_slots(&self.pool, n)?.iter().enumerate() {
            match sl {
                Slot::Empty => continue,
                Slot::Torn => s.push_str(&format!("  {i}: torn\n")),
                Slot::Valid(e) => {
                    let k = search::entry_key(&self.pool, e)?;
                    s.push_str(&format!(
                        "  {i}: [{}, {}) moved={} key={:?}\n",
                        e.start,
                        e.end,
                        e.moved,
                        k.map(|k| String::from_utf8_lossy(&k).into_owned())
                    ));
                }
            }
        }
        Ok(s)
    }
}
