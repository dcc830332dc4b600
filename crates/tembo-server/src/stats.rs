//! Counters INFO reports.

use std::collections::BTreeMap;
use std::time::Instant;

/// Per-command counters (INFO commandstats).
#[derive(Clone, Debug, Default)]
pub struct CommandStat {
    /// Calls.
    pub calls: u64,
    /// Total microseconds spent executing (durability wait excluded).
    pub usec: u64,
    /// Calls that replied with an error.
    pub failed: u64,
}

/// Server counters.
#[derive(Debug)]
pub struct Stats {
    /// Server start.
    pub started: Instant,
    /// Connections accepted.
    pub connections: u64,
    /// Commands processed.
    pub commands: u64,
    /// Per command.
    pub per_command: BTreeMap<&'static str, CommandStat>,
    /// Commit groups made durable.
    pub commits: u64,
    /// Keys written by those commits.
    pub committed_writes: u64,
    /// Keys expired (lazily or by the active cycle).
    pub expired_keys: u64,
    /// Stale collection elements deleted by the reclaimer.
    pub reclaimed: u64,
    /// Reads that found their key.
    pub hits: u64,
    /// Reads that did not.
    pub misses: u64,
    /// Error replies.
    pub errors: u64,
}

impl Stats {
    /// Zeroed counters.
    pub fn new() -> Stats {
        Stats {
            started: Instant::now(),
            connections: 0,
            commands: 0,
            per_command: BTreeMap::new(),
            commits: 0,
            committed_writes: 0,
            expired_keys: 0,
            reclaimed: 0,
            hits: 0,
            misses: 0,
            errors: 0,
        }
    }

    /// CONFIG RESETSTAT.
    pub fn reset(&mut self) {
        let started = self.started;
        *self = Stats::new();
        self.started = started;
    }
}

impl Default for Stats {
    fn default() -> Self {
        Stats::new()
    }
}
