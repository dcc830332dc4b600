//! What `tembo pool stat` (and `init`) report about a pool: one struct,
//! printed as text for people or as JSON for scripts, so both always say
//! the same thing.

use std::fmt::Write;

use serde::Serialize;
use tembo_pmem::Pool;

use crate::size::{human, human_exact};

/// A pool's identity, durability and heap usage.
#[derive(Debug, Serialize)]
pub struct PoolStat {
    /// The pool file.
    pub path: String,
    /// Pool UUID.
    pub uuid: String,
    /// Durability mode of this open (`dax`, `emulated`, `msync`).
    pub mode: String,
    /// What an acknowledged write survives in this mode.
    pub guarantee: String,
    /// Flush instruction in use.
    pub flush_instruction: String,
    /// Ordering mode (`fast`, `full`, `none`).
    pub ordering: String,
    /// Current size in bytes.
    pub size_bytes: u64,
    /// Growth limit in bytes.
    pub max_size_bytes: u64,
    /// Whether the previous session closed the pool cleanly.
    pub last_shutdown_clean: bool,
    /// Heap usage.
    pub heap: HeapStat,
    /// Named roots.
    pub roots: Vec<RootStat>,
}

/// Heap usage from the allocator.
#[derive(Debug, Serialize)]
pub struct HeapStat {
    /// Heap bytes (pool size less the header).
    pub heap_bytes: u64,
    /// Usable bytes of allocated blocks.
    pub used_bytes: u64,
    /// Bytes allocatable without growing.
    pub free_bytes: u64,
    /// Allocated blocks.
    pub allocated_blocks: u64,
    /// Slabs (runs of small blocks).
    pub slabs: u64,
    /// Runs holding one large block each.
    pub large_runs: u64,
    /// Free page runs.
    pub free_runs: u64,
    /// Bytes in free runs.
    pub free_run_bytes: u64,
    /// The largest free run.
    pub largest_free_run_bytes: u64,
    /// 1 − largest free run / free run bytes.
    pub fragmentation: f64,
    /// Metadata, slab tails and rounding.
    pub overhead_bytes: u64,
    /// Bytes the pool may still grow by.
    pub growable_bytes: u64,
}

/// A named root.
#[derive(Debug, Serialize)]
pub struct RootStat {
    /// Its name.
    pub name: String,
    /// The pool offset it points to.
    pub offset: u64,
}

impl PoolStat {
    /// Collects the stat of an open pool.
    pub fn of(pool: &Pool) -> PoolStat {
        let a = pool.alloc_stats();
        PoolStat {
            path: pool.path().display().to_string(),
            uuid: pool.uuid().to_string(),
            mode: pool.mode().name().into(),
            guarantee: pool.mode().guarantee().into(),
            flush_instruction: pool.flush_instruction().name().into(),
            ordering: pool.ordering().name().into(),
            size_bytes: pool.size(),
            max_size_bytes: pool.max_size(),
            last_shutdown_clean: !pool.opened_unclean(),
            heap: HeapStat {
                heap_bytes: a.heap_bytes,
                used_bytes: a.used_bytes,
                free_bytes: a.free_bytes,
                allocated_blocks: a.allocated_blocks,
                slabs: a.slabs,
                large_runs: a.large_runs,
                free_runs: a.free_runs,
                free_run_bytes: a.free_run_bytes,
                largest_free_run_bytes: a.largest_free_run_bytes,
                fragmentation: a.fragmentation,
                overhead_bytes: a.overhead_bytes,
                growable_bytes: a.growable_bytes,
            },
            roots: pool.roots().into_iter().map(|r| RootStat { name: r.name, offset: r.offset }).collect(),
        }
    }

    /// The text form.
    pub fn render(&self) -> String {
        let h = &self.heap;
        let pct = |n: u64| if h.heap_bytes == 0 { 0.0 } else { n as f64 * 100.0 / h.heap_bytes as f64 };
        let mut s = String::new();
        let _ = writeln!(s, "pool             {}", self.path);
        let _ = writeln!(s, "uuid             {}", self.uuid);
        let _ = writeln!(s, "mode             {} — survives {}", self.mode, self.guarantee);
        let _ = writeln!(s, "flush            {} (ordering: {})", self.flush_instruction, self.ordering);
        let _ = writeln!(s, "size             {}", human_exact(self.size_bytes));
        let _ = writeln!(s, "max size         {}", human_exact(self.max_size_bytes));
        let shutdown = if self.last_shutdown_clean {
            "clean".to_string()
        } else {
            "NOT clean (the last session crashed): the engine runs recovery at its next open".to_string()
        };
        let _ = writeln!(s, "last shutdown    {shutdown}");
        let _ = writeln!(s, "heap             {}", human_exact(h.heap_bytes));
        let _ = writeln!(s, "  used           {} ({:.1}%)", human(h.used_bytes), pct(h.used_bytes));
        let _ = writeln!(s, "  free           {} ({:.1}%)", human(h.free_bytes), pct(h.free_bytes));
        let _ = writeln!(s, "  overhead       {}", human(h.overhead_bytes));
        let _ = writeln!(s, "  blocks         {}", h.allocated_blocks);
        let _ = writeln!(s, "  slabs          {}", h.slabs);
        let _ = writeln!(s, "  large runs     {}", h.large_runs);
        let _ = writeln!(s, "  free runs      {} ({})", h.free_runs, human(h.free_run_bytes));
        let _ = writeln!(s, "  largest free   {}", human(h.largest_free_run_bytes));
        let _ = writeln!(s, "  fragmentation  {:.1}%", h.fragmentation * 100.0);
        let _ = writeln!(s, "  growable by    {}", human(h.growable_bytes));
        if self.roots.is_empty() {
            let _ = writeln!(s, "roots            (none)");
        } else {
            let _ = writeln!(s, "roots            {}", self.roots.len());
            for r in &self.roots {
                let _ = writeln!(s, "  {:<24} {:#x}", r.name, r.offset);
            }
        }
        s
    }
}
