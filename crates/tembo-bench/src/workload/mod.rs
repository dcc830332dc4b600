//! Workloads and the measuring loop they share.
//!
//! A workload drives one [`Target`] through named
//! *phases* (put, get, delete; load, run…). [`PhaseMeter`] times every
//! operation of a phase (one clock read per operation: the end of one is the
//! start of the next), keeps an HdrHistogram per kind of operation, and
//! reads the target's flush and fence counters around the phase. The runner
//! ([`crate::report::run`]) repeats a workload on a fresh instance of each
//! target, interleaving targets run by run so a noisy machine hits every
//! target alike, and reports medians.

pub mod micro;
pub mod ordering;
pub mod ycsb;
pub mod ycsb_bench;

use std::time::{Duration, Instant};

use anyhow::Result;
use hdrhistogram::Histogram;
use tembo_pmem::WriteStats;

use crate::targets::Target;

/// Latencies are recorded in nanoseconds, up to an hour, 3 significant digits.
pub(crate) fn new_histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, 3_600_000_000_000, 3).expect("constant, valid histogram bounds")
}

/// What one phase of one run measured.
#[derive(Clone, Debug)]
pub struct PhaseSample {
    /// Phase name ("put", "load", "run", …).
    pub name: String,
    /// Operations done.
    pub ops: u64,
    /// Wall time of the phase.
    pub elapsed: Duration,
    /// Per-kind latency histograms (ns), in first-seen order.
    pub kinds: Vec<(String, Histogram<u64>)>,
    /// Flushes and fences during the phase, for targets that count them.
    pub writes: Option<WriteStats>,
}

/// Times the operations of one phase.
#[derive(Debug)]
pub struct PhaseMeter {
    name: String,
    start: Instant,
    last: Instant,
    ops: u64,
    kinds: Vec<(String, Histogram<u64>)>,
    writes_before: Option<WriteStats>,
}

impl PhaseMeter {
    /// Starts a phase now.
    pub fn start(name: &str, target: &dyn Target) -> PhaseMeter {
        let writes_before = target.write_stats();
        let now = Instant::now();
        PhaseMeter { name: name.to_string(), start: now, last: now, ops: 0, kinds: Vec::new(), writes_before }
    }

    /// Records that an operation of `kind` just finished.
    #[inline]
    pub fn done(&mut self, kind: &'static str) {
        let now = Instant::now();
        let ns = now.duration_since(self.last).as_nanos().max(1) as u64;
        self.last = now;
        self.ops += 1;
        let slot = match self.kinds.iter().position(|(k, _)| k == kind) {
            Some(i) => i,
            None => {
                self.kinds.push((kind.to_string(), new_histogram()));
                self.kinds.len() - 1
            }
        };
        self.kinds[slot].1.saturating_record(ns);
    }

    /// Leaves out the time since the last operation (setup between
    /// operations that is not part of any).
    pub fn skip_gap(&mut self) {
        let now = Instant::now();
        self.start += now.duration_since(self.last);
        self.last = now;
    }

    /// Ends the phase.
    pub fn finish(self, target: &dyn Target) -> PhaseSample {
        let elapsed = self.last.duration_since(self.start);
        let writes = match (self.writes_before, target.write_stats()) {
            (Some(a), Some(b)) => Some(b.since(&a)),
            _ => None,
        };
        PhaseSample { name: self.name, ops: self.ops, elapsed, kinds: self.kinds, writes }
    }
}

/// A workload: a description for reports, a size hint for targets, and the
/// phases of one run.
pub trait Workload {
    /// Short name ("micro", "ycsb-a", …).
    fn name(&self) -> String;
    /// Parameters, for the JSON report.
    fn params(&self) -> serde_json::Value;
    /// Bytes of data the targets should expect.
    fn size_hint(&self) -> u64;
    /// Whether the workload scans (a network target keeps a key index only
    /// then: Redis has no key order of its own).
    fn scans(&self) -> bool {
        true
    }
    /// Runs all phases once on a fresh target.
    ///
    /// # Errors
    /// The target's errors, and wrong answers (a key that must be there is not).
    fn run(&self, target: &mut dyn Target, run: usize) -> Result<Vec<PhaseSample>>;
}

pub use ycsb::Rng;

/// `n` distinct random keys of `len` printable bytes (the CDDS
/// microbenchmark's keys), deterministic for `seed`.
pub fn random_keys(n: usize, len: usize, seed: u64) -> Vec<Vec<u8>> {
    let mut rng = Rng::seed_from_u64(seed);
    let mut seen = std::collections::HashSet::with_capacity(n);
    let mut out = Vec::with_capacity(n);
    while out.len() < n {
        let k: Vec<u8> = (0..len).map(|_| b'!' + rng.below(94) as u8).collect();
        if seen.insert(k.clone()) {
            out.push(k);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rng_is_deterministic_and_in_range() {
        let a: Vec<u64> = {
            let mut r = Rng::seed_from_u64(5);
            (0..100).map(|_| r.below(10)).collect()
        };
        let b: Vec<u64> = {
            let mut r = Rng::seed_from_u64(5);
            (0..100).map(|_| r.below(10)).collect()
        };
        assert_eq!(a, b);
        assert!(a.iter().all(|&x| x < 10));
        let mut p = Rng::seed_from_u64(1).permutation(1000);
        p.sort_unstable();
        assert_eq!(p, (0..1000).collect::<Vec<_>>());
        let ks = random_keys(500, 3, 9);
        assert_eq!(ks.len(), 500);
        assert_eq!(ks.iter().collect::<std::collections::HashSet<_>>().len(), 500);
    }
}
