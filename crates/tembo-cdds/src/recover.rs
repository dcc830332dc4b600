//! Recovery after an unclean shutdown (thesis §4.4.5, Alg. 6) and the
//! tracer that tells the pool which blocks the tree owns.
//!
//! The batch in flight at the crash can only have used version `v + 1`
//! (`v` = the commit word) and only touched nodes of version `v`'s tree and
//! nodes it allocated. Repair walks version `v`'s nodes and, in each, resets
//! ends above `v` to live and removes entries that start above `v`, torn
//! slots and shift duplicates; then the leak sweep frees what the aborted
//! batch allocated (records, new nodes) and what committed batches retired
//! but had not freed yet. The sweep also keeps the block of every other
//! pool root (the store's engine record), so a pool shared with other
//! roots loses nothing. Every repair step is an ordinary persisted store
//! or shift, so a crash during recovery leaves a pool the next recovery
//! repairs the same way.

use std::collections::HashSet;
use std::time::{Duration, Instant};

use tembo_pmem::{Marker, PmemError, Pool};

use crate::entry::{Entry, Slot};
use crate::error::{CddsError, Result};
use crate::node::{self, NodeWriter, NODE_SLOTS};
use crate::search;
use crate::tree::TreeCore;

/// What recovery did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RecoveryReport {
    /// Whether the pool was opened after an unclean shutdown.
    pub ran: bool,
    /// Nodes walked.
    pub nodes_visited: u64,
    /// Nodes that needed a change.
    pub nodes_repaired: u64,
    /// Slots removed (torn, duplicate, or from the aborted version).
    pub slots_removed: u64,
    /// Entries whose end from the aborted version was reset to live.
    pub ends_reset: u64,
    /// Leaked blocks freed by the sweep.
    pub leaks_freed: u64,
    /// Their usable bytes.
    pub leak_bytes: u64,
    /// Wall time of the repair walk.
    pub repair_time: Duration,
    /// Wall time of the leak sweep (which runs in the background: see
    /// [`crate::Tree::recovery_report`]).
    pub sweep_time: Duration,
    /// Why the leak sweep failed, if it did (the pool then stays marked
    /// for recovery at the next open).
    pub sweep_error: Option<String>,
}

/// Brings node `n` back to exactly version `v`: returns (slots removed,
/// ends reset).
pub fn repair_node(pool: &Pool, session: u64, n: u64, v: u64) -> Result<(u64, u64)> {
    let slots = node::raw_slots(pool, n)?;
    let used = slots.iter().position(|s| *s == Slot::Empty).unwrap_or(NODE_SLOTS);
    let mut reset = 0;
    for (i, s) in slots.iter().enumerate().take(used) {
        if let Slot::Valid(e) = s {
            if e.start <= v && e.end > v {
                node::set_end(pool, n, i, e, 0, false)?;
                reset += 1;
            }
        }
    }
    if reset > 0 {
        pool.fence();
    }
    let mut remove = Vec::new();
    for i in 0..used {
        let drop = match slots[i] {
            Slot::Empty => false,
            Slot::Torn => true,
            Slot::Valid(e) => e.start > v || (i > 0 && dup_of(&slots[i - 1], &e, v)),
        };
        if drop {
            remove.push(i);
        }
    }
    if !remove.is_empty() {
        let mut nw = NodeWriter::begin(pool, n, session)?;
        let mut used = used;
        for &i in remove.iter().rev() {
            nw.remove_at(i, used)?;
            used -= 1;
        }
    }
    Ok((remove.len() as u64, reset))
}

/// Whether `e` duplicates the slot to its left (after the end reset).
fn dup_of(left: &Slot, e: &Entry, v: u64) -> bool {
    match left {
        Slot::Valid(l) => {
            let norm = |x: &Entry| if x.start <= v && x.end > v { Entry { end: 0, moved: false, ..*x } } else { *x };
            norm(l) == norm(e)
        }
        _ => false,
    }
}

impl TreeCore {
    /// Repairs the tree to its committed version and sweeps leaks.
    pub(crate) fn recover(&self) -> Result<RecoveryReport> {
        let _ws = self.writer.lock();
        let pool = &*self.pool;
        let v = self.current_version()?;
        let mut r = RecoveryReport { ran: true, ..Default::default() };
        let t0 = Instant::now();
        let mut stack = vec![self.meta.root(pool)?];
        let mut seen = HashSet::new();
        while let Some(n) = stack.pop() {
            if !seen.insert(n) {
                continue;
            }
            r.nodes_visited += 1;
            let (removed, reset) = repair_node(pool, self.session, n, v)?;
            if removed + reset > 0 {
                r.nodes_repaired += 1;
                r.slots_removed += removed;
                r.ends_reset += reset;
            }
            let copy = node::read(pool, n, self.session)?;
            if copy.level > 0 {
                for e in copy.entries().iter().filter(|e| e.visible_at(v, &[])) {
                    stack.push(search::child_of(pool, e)?);
                }
            }
        }
        r.repair_time = t0.elapsed();
        Ok(r)
    }

    /// Starts the leak sweep on a background thread that holds the writer
    /// lock until it is done: reads are served meanwhile (they never touch
    /// a leaked block, and the sweep only reads the tree), writes wait.
    /// Returns once the thread holds the lock, so no write can come first.
    pub(crate) fn start_sweep(&self) -> std::thread::JoinHandle<SweepOutcome> {
        let (pool, meta, writer) = (self.pool.clone(), self.meta, self.writer.clone());
        let (locked_tx, locked_rx) = std::sync::mpsc::channel();
        let handle = std::thread::spawn(move || {
            let _ws = writer.lock();
            let _ = locked_tx.send(());
            let t1 = Instant::now();
            let traced = |p: &Pool, m: &mut Marker<'_>| trace_owned(p, meta, m);
            let rep = pool.reclaim_leaks(&[&traced, &trace_foreign_roots]);
            if rep.is_err() {
                // The next open must recover again.
                pool.keep_unclean();
            }
            SweepOutcome { result: rep.map_err(|e| e.to_string()), time: t1.elapsed() }
        });
        let _ = locked_rx.recv();
        handle
    }
    /// Marks every block the tree owns: the metadata block, the snapshot
    /// table, every node reachable through non-moved entries, and the
    /// records of non-moved entries (a moved entry's record belongs to its copy).
    pub fn trace(&self, pool: &Pool, m: &mut Marker<'_>) -> std::result::Result<(), PmemError> {
        trace_owned(pool, self.meta, m)
    }
}

/// What the background leak sweep did.
#[derive(Debug)]
pub(crate) struct SweepOutcome {
    pub result: std::result::Result<tembo_pmem::ReclaimReport, String>,
    pub time: Duration,
}

fn trace_owned(pool: &Pool, meta: crate::meta::Meta, m: &mut Marker<'_>) -> std::result::Result<(), PmemError> {
    m.mark(meta.off)?;
    let table = meta.snapshots(pool).map_err(to_pmem)?;
    if table != 0 {
        m.mark(table)?;
    }
    let root = meta.root(pool).map_err(to_pmem)?;
    let mut stack = vec![root];
    m.mark(root)?;
    while let Some(n) = stack.pop() {
        let level = node::level(pool, n).map_err(to_pmem)?;
        for s in node::raw_slots(pool, n).map_err(to_pmem)? {
            let Slot::Valid(e) = s else { continue };
            if e.moved {
                continue;
            }
            m.mark(e.rec)?;
            if level > 0 {
                let child = search::child_of(pool, &e).map_err(to_pmem)?;
                if m.mark(child)? {
                    stack.push(child);
                }
            }
        }
    }
    Ok(())
}

/// Marks the block each pool root other than the tree's own points to, so
/// the sweep never frees what another user of the pool keeps there (e.g. the
/// store's `tembo-db` engine record). Only that block: whoever links more
/// blocks from it must trace them. A root that is not the start of an
/// allocated block is not the tree's to judge and is skipped.
fn trace_foreign_roots(pool: &Pool, m: &mut Marker<'_>) -> std::result::Result<(), PmemError> {
    for r in pool.roots() {
        if r.name != crate::meta::ROOT_NAME && r.offset != 0 {
            let _ = m.mark(r.offset);
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
