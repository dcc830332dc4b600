//! Leak reclamation after an unclean shutdown: mark from the engines' roots,
//! then sweep every allocated block nobody reached.
//!
//! The pool knows nothing of trees; each engine describes what it can reach
//! through a [`LeakTracer`]. Marking also validates: a reference to something
//! that is not an allocated block (reachable but free, or pointing into the
//! middle of a block) is corruption, reported with its offset.
//!
//! The sweep frees with the ordinary, crash-safe `free` steps, so a crash in
//! the middle of it just leaves fewer leaks for the next recovery.

use super::AllocState;
use crate::error::{PmemError, Result};
use crate::{Pool, PoolOffset};

pub(super) use crate::offset_hash::OffsetSet;

/// Describes the blocks an engine can reach from its roots.
///
/// Tracers read the pool (no allocation or free: the allocator is locked
/// while they run) and call [`Marker::mark`] for every block they reach.
pub trait LeakTracer {
    /// Marks every block reachable from this tracer's roots.
    ///
    /// # Errors
    /// Whatever the traversal or [`Marker::mark`] reports.
    fn trace(&self, pool: &Pool, marker: &mut Marker<'_>) -> Result<()>;
}

impl<F> LeakTracer for F
where
    F: Fn(&Pool, &mut Marker<'_>) -> Result<()>,
{
    fn trace(&self, pool: &Pool, marker: &mut Marker<'_>) -> Result<()> {
        self(pool, marker)
    }
}

/// Collects the blocks reached while tracing.
#[derive(Debug)]
pub struct Marker<'a> {
    state: &'a AllocState,
    pool: &'a Pool,
    marked: OffsetSet,
}

impl Marker<'_> {
    /// Marks the block starting at `offset` as reachable. Returns `true` the
    /// first time a block is marked (so a traversal can stop at shared nodes).
    ///
    /// # Errors
    /// [`PmemError::Corrupted`] if `offset` is not the start of an allocated
    /// block: a reachable reference into free or foreign memory.
    pub fn mark(&mut self, offset: PoolOffset) -> Result<bool> {
        if self.marked.contains(&offset) {
            return Ok(false);
        }
        self.state
            .locate(self.pool, offset)
            .map_err(|why| PmemError::corrupted(format!("reachable reference to a block that is {why}"), offset))?;
        Ok(self.marked.insert(offset))
    }

    /// Number of blocks marked so far.
    pub fn marked(&self) -> usize {
        self.marked.len()
    }
}

/// What a reachability check found.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LeakReport {
    /// Allocated blocks reached from the roots.
    pub reachable_blocks: u64,
    /// Allocated blocks not reached: (offset, usable size).
    pub leaked: Vec<(PoolOffset, u64)>,
}

/// What one [`Pool::concurrent_sweep_free_step`] did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SweepFreeStep {
    /// Leaked blocks freed.
    pub freed_blocks: u64,
    /// Their usable bytes.
    pub freed_bytes: u64,
    /// Whether the whole heap has been swept.
    pub done: bool,
}

/// What [`Pool::reclaim_leaks`] did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ReclaimReport {
    /// Allocated blocks reached from the roots.
    pub reachable_blocks: u64,
    /// Leaked blocks freed.
    pub reclaimed_blocks: u64,
    /// Usable bytes of the freed blocks.
    pub reclaimed_bytes: u64,
}

/// Frees the listed blocks that are not marked: (blocks, usable bytes).
fn free_unmarked(
    pool: &Pool,
    st: &mut AllocState,
    blocks: Vec<(PoolOffset, u64)>,
    marked: &OffsetSet,
) -> Result<(u64, u64)> {
    let (mut count, mut bytes) = (0, 0);
    for (offset, usable) in blocks {
        if marked.contains(&offset) {
            continue;
        }
        let at = st.locate(pool, offset).map_err(|why| PmemError::Invariant {
            name: "alloc.slab_bitmap",
            detail: format!("listed block {offset:#x} does not locate: {why}"),
        })?;
        st.free_located(pool, at)?;
        count += 1;
        bytes += usable;
    }
    Ok((count, bytes))
}

fn mark_all(pool: &Pool, st: &AllocState, tracers: &[&dyn LeakTracer]) -> Result<OffsetSet> {
    let mut marker = Marker { state: st, pool, marked: OffsetSet::default() };
    for t in tracers {
        t.trace(pool, &mut marker)?;
    }
    Ok(marker.marked)
}

impl Pool {
    /// Lists allocated blocks that no tracer reaches, without freeing them.
    ///
    /// # Errors
    /// [`PmemError::Corrupted`] if a tracer reaches something that is not an
    /// allocated block; any error of the tracers.
    pub fn find_leaks(&self, tracers: &[&dyn LeakTracer]) -> Result<LeakReport> {
        let st = self.alloc.lock();
        let marked = mark_all(self, &st, tracers)?;
        let leaked: Vec<_> = st.blocks(self)?.into_iter().filter(|(o, _)| !marked.contains(o)).collect();
        Ok(LeakReport { reachable_blocks: marked.len() as u64, leaked })
    }

    /// Frees every allocated block that no tracer reaches. Engines call it
    /// during recovery after an unclean shutdown, passing tracers for every
    /// root of the pool (a block only some unlisted root reaches would be
    /// freed).
    ///
    /// # Errors
    /// As [`Pool::find_leaks`]; nothing is freed if marking fails.
    pub fn reclaim_leaks(&self, tracers: &[&dyn LeakTracer]) -> Result<ReclaimReport> {
        let mut st = self.alloc.lock();
        let marked = mark_all(self, &st, tracers)?;
        let blocks = st.blocks(self)?;
        let (reclaimed_blocks, reclaimed_bytes) = free_unmarked(self, &mut st, blocks, &marked)?;
        let report = ReclaimReport { reachable_blocks: marked.len() as u64, reclaimed_blocks, reclaimed_bytes };
        self.set_leaks_reclaimed();
        Ok(report)
    }
}

/// A leak sweep that runs while the engine keeps allocating and freeing:
/// the engine marks what it reaches in as many calls as it likes, in
/// between its own writes, and every block allocated after
/// [`Pool::begin_concurrent_sweep`] counts as marked. The engine is
/// responsible for the rest of the argument: that whatever it can reach at
/// the free phase ([`Pool::concurrent_sweep_free_step`]) was marked, or was allocated after
/// the sweep began, and that no block it marked was freed meanwhile
/// without its knowledge (an engine defers its frees while it sweeps).
impl Pool {
    /// Starts a concurrent sweep (replacing one already running).
    pub fn begin_concurrent_sweep(&self) {
        // Sized for every block there is and a quarter more, so that no
        // rehash of millions of marks stalls an allocation mid-sweep; built
        // before the allocator lock is taken.
        let blocks = self.alloc.lock().blocks as usize;
        let marks = OffsetSet::with_capacity_and_hasher(blocks + blocks / 4 + 1024, Default::default());
        let mut st = self.alloc.lock();
        // Blocks set aside for deferred allocations are allocated on the
        // media and reached by nothing: the free phase would free them
        // under the allocator's feet. They go back first (and none are set
        // aside while the sweep runs).
        let _ = st.release_reserved(self);
        st.concurrent_marks = Some(marks);
        st.concurrent_cursor = 0;
    }

    /// Whether a concurrent sweep is running.
    pub fn concurrent_sweep_running(&self) -> bool {
        self.alloc.lock().concurrent_marks.is_some()
    }

    /// Marks `offsets` as reachable. `strict`: each must be the start of an
    /// allocated block (a reference the engine knows is valid); otherwise
    /// offsets that are not are skipped (a possibly stale reference the
    /// engine follows only to be safe).
    ///
    /// # Errors
    /// [`PmemError::Corrupted`] for a strict offset that is not an allocated
    /// block; [`PmemError::Invariant`] when no concurrent sweep runs.
    pub fn concurrent_sweep_mark(&self, offsets: &[PoolOffset], strict: bool) -> Result<()> {
        let mut st = self.alloc.lock();
        let Some(mut marks) = st.concurrent_marks.take() else {
            return Err(PmemError::Invariant { name: "alloc.sweep", detail: "no concurrent sweep is running".into() });
        };
        let mut result = Ok(());
        for &o in offsets {
            if marks.contains(&o) {
                continue;
            }
            match st.locate(self, o) {
                Ok(_) => {
                    marks.insert(o);
                }
                Err(why) if strict => {
                    result = Err(PmemError::corrupted(format!("reachable reference to a block that is {why}"), o));
                    break;
                }
                Err(_) => {}
            }
        }
        st.concurrent_marks = Some(marks);
        result
    }

    /// One step of the concurrent sweep's free phase, which the engine
    /// starts once it has marked everything it can reach (and changes
    /// nothing meanwhile): every allocated block not marked then is garbage
    /// and stays so, while blocks allocated since keep being marked. Frees
    /// the unmarked blocks of the next runs (about `budget` blocks looked
    /// at, under the allocator lock only), so writers go on between steps.
    ///
    /// # Errors
    /// [`PmemError::Invariant`] when no concurrent sweep runs; allocator
    /// errors of the frees.
    pub fn concurrent_sweep_free_step(&self, budget: usize) -> Result<SweepFreeStep> {
        let mut st = self.alloc.lock();
        let Some(marks) = st.concurrent_marks.take() else {
            return Err(PmemError::Invariant { name: "alloc.sweep", detail: "no concurrent sweep is running".into() });
        };
        let result = (|| {
            let (blocks, next) = st.blocks_from(self, st.concurrent_cursor, budget.max(1))?;
            let (freed_blocks, freed_bytes) = free_unmarked(self, &mut st, blocks, &marks)?;
            st.concurrent_cursor = next.unwrap_or(u64::MAX);
            Ok(SweepFreeStep { freed_blocks, freed_bytes, done: next.is_none() })
        })();
        st.concurrent_marks = Some(marks);
        result
    }

    /// Ends a concurrent sweep whose free phase is done.
    pub fn end_concurrent_sweep(&self) {
        // Dropped after the lock is released: freeing a set of millions of
        // marks takes a while.
        let marks = self.alloc.lock().concurrent_marks.take();
        drop(marks);
        self.set_leaks_reclaimed();
    }

    /// Drops a running concurrent sweep without freeing anything.
    pub fn abandon_concurrent_sweep(&self) {
        let marks = self.alloc.lock().concurrent_marks.take();
        drop(marks);
    }
}
