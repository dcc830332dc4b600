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
    /// Calls that ran and replied with an error.
    pub failed: u64,
    /// Calls refused before they ran (arity, NOAUTH, NOPERM, …).
    pub rejected: u64,
    /// Calls by duration: bucket `i` counts those of at most 2^i µs.
    pub hist: [u64; crate::latency::BUCKETS],
}

/// Most distinct error codes INFO errorstats tracks; past them it stops
/// (as Redis does), so clients inventing codes cannot grow it without end.
const MAX_ERROR_CODES: usize = 128;

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
    /// Error replies by code (their first word: ERR, WRONGTYPE, NOPERM…).
    pub error_codes: BTreeMap<String, u64>,
    /// More than [`MAX_ERROR_CODES`] codes were seen: errorstats is off
    /// until CONFIG RESETSTAT.
    pub error_codes_off: bool,
    /// Errors counted for commands a running script called: the script's
    /// own error reply, when it passes one of them on, is not counted again.
    pub script_errors: Vec<String>,
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
            error_codes: BTreeMap::new(),
            error_codes_off: false,
            script_errors: Vec::new(),
        }
    }

    /// Counts an error reply (without its leading `-`).
    pub fn error_reply(&mut self, msg: &str) {
        self.errors += 1;
        if self.error_codes_off {
            return;
        }
        let code = msg.split(' ').next().filter(|c| !c.is_empty()).unwrap_or("ERR");
        if !self.error_codes.contains_key(code) && self.error_codes.len() >= MAX_ERROR_CODES {
            log::warn!(
                "errorstats: more than {MAX_ERROR_CODES} error codes; tracking them stops until CONFIG RESETSTAT"
            );
            self.error_codes_off = true;
            self.error_codes.clear();
            return;
        }
        *self.error_codes.entry(code.to_string()).or_default() += 1;
    }

    /// Counts a call of `cmd` refused before it ran, and its error reply.
    pub fn rejected(&mut self, cmd: &'static str, msg: &str) {
        self.per_command.entry(cmd).or_default().rejected += 1;
        self.error_reply(msg);
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
