//! What `tembo pool stat` (and `init`) report about a pool: one struct,
//! printed as text for people or as JSON for scripts, so both always say
//! the same thing. A pool holding a database (a `tembo-db` root) also
//! reports the database: its engine's counts, named snapshots, and whether
//! opening it ran recovery.

use std::fmt::Write;

use serde::Serialize;
use tembo_pmem::Pool;
use tembo_store::{Db, RecoveryReport};

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
    /// The database, when the pool holds one and it could be opened and walked.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub database: Option<DbStat>,
    /// Why the database the pool holds could not be opened or walked.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub database_error: Option<String>,
}

/// The database in a pool.
#[derive(Debug, Serialize)]
pub struct DbStat {
    /// The engine (`cdds`).
    pub engine: String,
    /// The current (last committed) version.
    pub version: u64,
    /// Keys visible at the current version.
    pub keys: u64,
    /// Entries visible at the current version (leaf and inner).
    pub live_entries: u64,
    /// Entries kept only for older versions or waiting for reuse.
    pub dead_entries: u64,
    /// Nodes of the current version.
    pub live_nodes: u64,
    /// Nodes the engine owns (live and retained for older versions).
    pub owned_nodes: u64,
    /// Levels of the current version (1 = a single leaf).
    pub height: u64,
    /// Key plus value bytes visible at the current version.
    pub data_bytes: u64,
    /// Bytes of nodes and records the engine owns (before allocator rounding).
    pub owned_bytes: u64,
    /// Named snapshots, oldest first.
    pub named_snapshots: Vec<SnapshotStat>,
    /// The in-place engines' backup: bytes of copies against bytes of
    /// objects, and how many objects have one (`None` for cdds).
    pub backup: Option<BackupStat>,
    /// What recovery did when this command opened the database.
    pub recovery: RecoveryStat,
}

/// The backup of an in-place engine (kamino, kamino-dynamic; undo has none).
#[derive(Debug, Serialize)]
pub struct BackupStat {
    /// Transaction mode.
    pub mode: String,
    /// α (kamino-dynamic).
    pub alpha: f64,
    /// Bytes of the tree's objects, headers included.
    pub object_bytes: u64,
    /// Bytes of their backup copies.
    pub backup_bytes: u64,
    /// Objects with a copy.
    pub objects_with_backup: u64,
}

/// A named snapshot.
#[derive(Debug, Serialize)]
pub struct SnapshotStat {
    /// Its name.
    pub name: String,
    /// The version it keeps.
    pub version: u64,
}

/// What recovery did when the database was opened.
#[derive(Debug, Serialize)]
pub struct RecoveryStat {
    /// Whether it ran (the previous session did not close the pool cleanly).
    pub ran: bool,
    /// Nodes walked.
    pub nodes_visited: u64,
    /// Nodes that needed a change.
    pub nodes_repaired: u64,
    /// Slots removed (torn, duplicate, or from the aborted batch).
    pub slots_removed: u64,
    /// Entries whose end from the aborted batch was reset to live.
    pub ends_reset: u64,
    /// Leaked blocks freed.
    pub leaks_freed: u64,
    /// Their usable bytes.
    pub leak_bytes: u64,
}

impl RecoveryStat {
    /// From the engine's report.
    pub fn of(r: &RecoveryReport) -> RecoveryStat {
        RecoveryStat {
            ran: r.ran,
            nodes_visited: r.nodes_visited,
            nodes_repaired: r.nodes_repaired,
            slots_removed: r.slots_removed,
            ends_reset: r.ends_reset,
            leaks_freed: r.leaks_freed,
            leak_bytes: r.leak_bytes,
        }
    }

    /// One line for people (only meaningful when `ran`).
    pub fn summary(&self) -> String {
        format!(
            "the last session did not close the pool cleanly, so opening the database ran recovery: \
             {} nodes walked, {} repaired, {} slots removed, {} ends reset, {} leaked blocks ({}) freed",
            self.nodes_visited,
            self.nodes_repaired,
            self.slots_removed,
            self.ends_reset,
            self.leaks_freed,
            human(self.leak_bytes)
        )
    }
}

impl DbStat {
    /// Collects the stat of an open database (walks the whole tree).
    ///
    /// # Errors
    /// The walk or the snapshot table cannot be read (a damaged pool).
    pub fn of(db: &Db) -> tembo_store::Result<DbStat> {
        let st = db.stats()?;
        let backup = st.in_place.as_ref().map(|k| BackupStat {
            mode: k.heap.mode.map_or("?", |m| m.name()).into(),
            alpha: k.heap.alpha,
            object_bytes: k.object_bytes,
            backup_bytes: k.backup_bytes,
            objects_with_backup: k.objects_with_backup,
        });
        let t = st.tree;
        let named_snapshots =
            db.named_snapshots()?.into_iter().map(|s| SnapshotStat { name: s.name, version: s.version }).collect();
        Ok(DbStat {
            engine: db.engine().name().into(),
            version: t.version,
            keys: t.keys,
            live_entries: t.live_entries,
            dead_entries: t.dead_entries,
            live_nodes: t.live_nodes,
            owned_nodes: t.nodes,
            height: t.height,
            data_bytes: t.data_bytes,
            owned_bytes: t.owned_bytes,
            named_snapshots,
            backup,
            recovery: RecoveryStat::of(db.recovery_report()),
        })
    }
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
    /// Free bytes kept back at the maximum size for deletes
    /// (`Pool::with_reserve`).
    pub reserve_bytes: u64,
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
                reserve_bytes: a.reserve_bytes,
            },
            roots: pool.roots().into_iter().map(|r| RootStat { name: r.name, offset: r.offset }).collect(),
            database: None,
            database_error: None,
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
        let recovered = self.database.as_ref().is_some_and(|d| d.recovery.ran);
        let shutdown = if self.last_shutdown_clean {
            "clean".to_string()
        } else if recovered {
            "NOT clean (the last session crashed): recovered now, see `recovery` below".to_string()
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
        let _ = writeln!(s, "  reserve        {} (kept for deletes at the maximum size)", human(h.reserve_bytes));
        if self.roots.is_empty() {
            let _ = writeln!(s, "roots            (none)");
        } else {
            let _ = writeln!(s, "roots            {}", self.roots.len());
            for r in &self.roots {
                let _ = writeln!(s, "  {:<24} {:#x}", r.name, r.offset);
            }
        }
        if let Some(d) = &self.database {
            d.render_into(&mut s);
        }
        if let Some(e) = &self.database_error {
            let _ = writeln!(s, "database         ERROR: {e}");
        }
        s
    }
}

impl DbStat {
    fn render_into(&self, s: &mut String) {
        let _ = writeln!(s, "database         {} engine, version {}", self.engine, self.version);
        let _ = writeln!(s, "  keys           {}", self.keys);
        let _ = writeln!(s, "  entries        {} live, {} dead", self.live_entries, self.dead_entries);
        let _ = writeln!(s, "  nodes          {} live, {} owned", self.live_nodes, self.owned_nodes);
        let _ = writeln!(s, "  height         {}", self.height);
        let _ = writeln!(s, "  data           {}", human(self.data_bytes));
        let _ = writeln!(s, "  owned          {}", human(self.owned_bytes));
        if let Some(b) = &self.backup {
            let _ = writeln!(
                s,
                "  backup         {} of {} objects ({:.0}%), {} objects have a copy ({} mode{})",
                human(b.backup_bytes),
                human(b.object_bytes),
                100.0 * b.backup_bytes as f64 / b.object_bytes.max(1) as f64,
                b.objects_with_backup,
                b.mode,
                if b.mode == "kamino-dynamic" { format!(", alpha {}", b.alpha) } else { String::new() }
            );
        }
        if self.named_snapshots.is_empty() {
            let _ = writeln!(s, "  snapshots      (none)");
        } else {
            let _ = writeln!(s, "  snapshots      {}", self.named_snapshots.len());
            for n in &self.named_snapshots {
                let _ = writeln!(s, "    {:<22} version {}", n.name, n.version);
            }
        }
        if self.recovery.ran {
            let _ = writeln!(s, "  recovery       ran: {}", self.recovery.summary());
        } else {
            let _ = writeln!(s, "  recovery       not needed (clean shutdown)");
        }
    }
}
