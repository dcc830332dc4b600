//! Counters INFO reports.

use std::collections::BTreeMap;
use std::time::Instant;

use rustc_hash::FxHashMap;

/// Per-command counters (INFO commandstats).
#[derive(Clone, Debug, Default)]
pub struct CommandStat {
    /// Calls.
    pub calls: u64,
    /// Total nanoseconds spent executing (durability wait excluded);
    /// INFO shows microseconds, unrounded per call.
    pub nanos: u64,
    /// Calls that ran and replied with an error.
    pub failed: u64,
    /// Calls refused before they ran (arity, NOAUTH, NOPERM, …).
    pub rejected: u64,
    /// Calls by duration: bucket `i` counts those of at most 2^i µs.
    pub hist: [u64; crate::latency::BUCKETS],
    /// Calls by duration in ns, with 2 significant digits (INFO
    /// latencystats); made on the first call while `latency-tracking` is on.
    pub hdr: Option<Box<hdrhistogram::Histogram<u64>>>,
}

impl CommandStat {
    /// Records a call's duration for INFO latencystats.
    pub fn track(&mut self, nanos: u64) {
        let h = self.hdr.get_or_insert_with(|| {
            // 1 ns to 1 s, as Redis's histograms; longer calls count as 1 s.
            Box::new(hdrhistogram::Histogram::new_with_bounds(1, 1_000_000_000, 2).expect("valid bounds"))
        });
        h.saturating_record(nanos.clamp(1, 1_000_000_000));
    }
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
    /// Per command (or subcommand, `config|get`), updated by every call:
    /// hashed, since a tree's string comparisons showed in the executor's
    /// profile; [`Stats::per_command_sorted`] gives them in name order.
    pub per_command: FxHashMap<&'static str, CommandStat>,
    /// Commit groups made durable.
    pub commits: u64,
    /// Keys written by those commits.
    pub committed_writes: u64,
    /// Keys expired (lazily or by the active cycle).
    pub expired_keys: u64,
    /// Keys evicted under `maxmemory`.
    pub evicted_keys: u64,
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
    /// Active expire cycles that stopped at their key limit with more to do.
    pub expire_cap_reached: u64,
    /// Dropped collections the reclaimer finished (INFO lazyfreed_objects).
    pub lazyfreed: u64,
    /// Microseconds spent in active expire cycles.
    pub expire_cycle_us: u64,
    /// The most pool bytes in use seen (INFO used_memory_peak).
    pub peak_memory: u64,
    /// Samples for INFO's instantaneous rates (see [`Rates`]).
    pub rates: Rates,
    /// What the group being run counted, for its rollback.
    pub group: crate::stats_group::GroupTally,
}

/// INFO's `instantaneous_*` figures: as Redis, the mean rate over the last
/// 16 samples, one taken every cron tick (100 ms).
#[derive(Clone, Debug, Default)]
pub struct Rates {
    /// Per series (commands, input bytes, output bytes): the last total
    /// seen and the rates of the last 16 intervals, per second.
    series: [(u64, [f64; 16]); 3],
    next: usize,
    last: Option<Instant>,
}

/// Which rate (`Rates::sample` takes totals in this order).
#[derive(Clone, Copy, Debug)]
pub enum Rate {
    /// Commands per second.
    Ops = 0,
    /// Bytes read from clients per second.
    NetIn = 1,
    /// Bytes written to clients per second.
    NetOut = 2,
}

impl Rates {
    /// Takes a sample of the running totals at `now`.
    pub fn sample(&mut self, now: Instant, totals: [u64; 3]) {
        if let Some(last) = self.last {
            let secs = now.duration_since(last).as_secs_f64();
            if secs > 0.0 {
                for (s, t) in self.series.iter_mut().zip(totals) {
                    s.1[self.next] = t.saturating_sub(s.0) as f64 / secs;
                }
                self.next = (self.next + 1) % 16;
            }
        }
        for (s, t) in self.series.iter_mut().zip(totals) {
            s.0 = t;
        }
        self.last = Some(now);
    }

    /// The mean of the last 16 rates of `which`, per second.
    pub fn get(&self, which: Rate) -> f64 {
        self.series[which as usize].1.iter().sum::<f64>() / 16.0
    }
}

impl Stats {
    /// Zeroed counters.
    pub fn new() -> Stats {
        Stats {
            started: Instant::now(),
            connections: 0,
            commands: 0,
            per_command: FxHashMap::default(),
            commits: 0,
            committed_writes: 0,
            expired_keys: 0,
            evicted_keys: 0,
            reclaimed: 0,
            hits: 0,
            misses: 0,
            errors: 0,
            error_codes: BTreeMap::new(),
            error_codes_off: false,
            script_errors: Vec::new(),
            expire_cap_reached: 0,
            expire_cycle_us: 0,
            lazyfreed: 0,
            peak_memory: 0,
            rates: Rates::default(),
            group: Default::default(),
        }
    }

    /// Counts an error reply (without its leading `-`).
    pub fn error_reply(&mut self, msg: &str) {
        self.errors += 1;
        if self.error_codes_off {
            return;
        }
        self.save_codes();
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

    /// The per-command statistics in name order (INFO, LATENCY HISTOGRAM).
    pub fn per_command_sorted(&self) -> Vec<(&'static str, &CommandStat)> {
        let mut all: Vec<_> = self.per_command.iter().map(|(name, c)| (*name, c)).collect();
        all.sort_unstable_by_key(|(name, _)| *name);
        all
    }

    /// Counts a call of `cmd` refused before it ran, and its error reply.
    pub fn rejected(&mut self, cmd: &'static str, msg: &str) {
        self.per_command.entry(cmd).or_default().rejected += 1;
        self.group.note_rejected(cmd);
        self.error_reply(msg);
    }

    /// Counts a call of `cmd` that ran for `nanos` (INFO commandstats, and
    /// latencystats when `track`).
    pub fn count_call(&mut self, cmd: &'static str, nanos: u64, track: bool) {
        self.commands += 1;
        let stat = self.per_command.entry(cmd).or_default();
        stat.calls += 1;
        stat.nanos += nanos;
        stat.hist[crate::latency::bucket(nanos / 1000)] += 1;
        if track {
            stat.track(nanos);
        }
        self.group.note_call(cmd, nanos, track);
    }

    /// Counts a call of `cmd` that replied with an error (counted apart).
    pub fn count_failed(&mut self, cmd: &'static str) {
        self.per_command.entry(cmd).or_default().failed += 1;
        self.group.note_failed(cmd);
    }

    /// CONFIG RESETSTAT.
    pub fn reset(&mut self) {
        let started = self.started;
        let rates = std::mem::take(&mut self.rates);
        let group = std::mem::take(&mut self.group);
        *self = Stats::new();
        self.started = started;
        self.rates = rates;
        self.group = group;
    }
}

impl Default for Stats {
    fn default() -> Self {
        Stats::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn rates_are_the_mean_of_the_last_sixteen_intervals() {
        let mut r = Rates::default();
        let t0 = Instant::now();
        r.sample(t0, [0, 0, 0]);
        // 100 commands in 100 ms: 1000/s for one interval of sixteen.
        r.sample(t0 + Duration::from_millis(100), [100, 10, 0]);
        assert!((r.get(Rate::Ops) - 1000.0 / 16.0).abs() < 1e-6);
        assert!((r.get(Rate::NetIn) - 100.0 / 16.0).abs() < 1e-6);
        for i in 2..=17 {
            r.sample(t0 + Duration::from_millis(100 * i), [100 * i, 0, 0]);
        }
        assert!((r.get(Rate::Ops) - 1000.0).abs() < 1e-6);
    }

    #[test]
    fn latency_tracking_keeps_two_significant_digits() {
        let mut c = CommandStat::default();
        for ns in [1_000u64, 2_000, 3_000, 4_000, 100_000] {
            c.track(ns);
        }
        let h = c.hdr.as_ref().unwrap();
        let p50 = h.value_at_quantile(0.5);
        assert!((3_000..=3_100).contains(&p50), "{p50}");
        // Beyond the range: counted as 1 s, not lost.
        c.track(5_000_000_000);
        assert_eq!(c.hdr.as_ref().unwrap().len(), 6);
    }
}
