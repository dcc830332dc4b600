//! The latency monitor (LATENCY LATEST / HISTORY / RESET / GRAPH / DOCTOR)
//! and the per-command latency histograms (LATENCY HISTOGRAM).
//!
//! As in Redis, an *event* (`command`, `fast-command`, `expire-cycle`) is
//! recorded when it takes at least `latency-monitor-threshold`
//! milliseconds (0, the default, records nothing); each event keeps its
//! last 160 samples, one per second (the largest of that second), and its
//! all-time maximum. Histograms count every call by powers of two of
//! microseconds, which is what LATENCY HISTOGRAM reports.

use std::collections::{BTreeMap, VecDeque};

/// Samples kept per event (Redis's `LATENCY_TS_LEN`).
const SAMPLES: usize = 160;

/// Buckets of a command histogram: bucket `i` counts calls of at most 2^i µs.
pub const BUCKETS: usize = 32;

/// The bucket of a call that took `usec` microseconds.
pub fn bucket(usec: u64) -> usize {
    let b = if usec <= 1 { 0 } else { 64 - (usec - 1).leading_zeros() as usize };
    b.min(BUCKETS - 1)
}

#[derive(Clone, Debug, Default)]
struct Series {
    /// (unix seconds, milliseconds), oldest first.
    samples: VecDeque<(u64, u64)>,
    max: u64,
}

/// Latency events above the threshold.
#[derive(Clone, Debug, Default)]
pub struct Monitor {
    /// `latency-monitor-threshold` in milliseconds; 0: off.
    pub threshold_ms: u64,
    /// `latency-tracking no`: INFO latencystats records nothing.
    pub tracking_off: bool,
    events: BTreeMap<&'static str, Series>,
}

impl Monitor {
    /// Records that `event` took `ms` milliseconds at `now_secs`, if that
    /// reaches the threshold.
    pub fn add(&mut self, event: &'static str, ms: u64, now_secs: u64) {
        if self.threshold_ms == 0 || ms < self.threshold_ms {
            return;
        }
        let s = self.events.entry(event).or_default();
        s.max = s.max.max(ms);
        match s.samples.back_mut() {
            Some((t, v)) if *t == now_secs => *v = (*v).max(ms),
            _ => {
                s.samples.push_back((now_secs, ms));
                if s.samples.len() > SAMPLES {
                    s.samples.pop_front();
                }
            }
        }
    }

    /// LATENCY LATEST: (event, time of the last sample, its latency, the maximum).
    pub fn latest(&self) -> Vec<(&'static str, u64, u64, u64)> {
        self.events.iter().filter_map(|(e, s)| s.samples.back().map(|&(t, v)| (*e, t, v, s.max))).collect()
    }

    /// LATENCY HISTORY event: its samples, oldest first.
    pub fn history(&self, event: &str) -> Vec<(u64, u64)> {
        self.events.get(event).map(|s| s.samples.iter().copied().collect()).unwrap_or_default()
    }

    /// LATENCY RESET [event …]: how many events were dropped.
    pub fn reset(&mut self, events: &[String]) -> usize {
        if events.is_empty() {
            let n = self.events.len();
            self.events.clear();
            return n;
        }
        events.iter().filter(|e| self.events.remove(e.as_str()).is_some()).count()
    }

    /// LATENCY GRAPH event: the samples as columns of `#`, tallest the
    /// maximum, with the seconds since each sample underneath.
    pub fn graph(&self, event: &str, now_secs: u64) -> Option<String> {
        let s = self.events.get(event)?;
        let (lo, hi) = s.samples.iter().fold((u64::MAX, 0), |(lo, hi), &(_, v)| (lo.min(v), hi.max(v)));
        let rows = 8u64;
        let mut out = format!("{event} - high {hi} ms, low {lo} ms (all time high {} ms)\n", s.max);
        out.push_str(&"-".repeat(80));
        out.push('\n');
        for row in (1..=rows).rev() {
            let line: String =
                s.samples.iter().map(|&(_, v)| if hi > 0 && v * rows >= row * hi { '#' } else { ' ' }).collect();
            out.push_str(line.trim_end());
            out.push('\n');
        }
        let ages: Vec<String> = s.samples.iter().map(|&(t, _)| format!("{}s", now_secs.saturating_sub(t))).collect();
        out.push_str(&ages.join(" "));
        out.push('\n');
        Some(out)
    }

    /// LATENCY DOCTOR: what was seen, and what to look at.
    pub fn doctor(&self) -> String {
        if self.threshold_ms == 0 {
            return "I'm sorry, Dave, I can't do that. Latency monitoring is disabled in this Tembo instance. \
                    You may use \"CONFIG SET latency-monitor-threshold <milliseconds>.\" in order to enable it.\n"
                .into();
        }
        if self.events.is_empty() {
            return "Dave, no latency spike was observed during the lifetime of this Tembo instance, not in the \
                    slightest bit. I honestly think you ought to sleep better.\n"
                .into();
        }
        let mut out = String::from("Dave, I have observed latency spikes in this Tembo instance.\n\n");
        for (i, (event, s)) in self.events.iter().enumerate() {
            let avg = s.samples.iter().map(|&(_, v)| v).sum::<u64>() / s.samples.len().max(1) as u64;
            out.push_str(&format!(
                "{}. {event}: {} latency spikes (average {avg}ms, all time high {}ms).\n",
                i + 1,
                s.samples.len(),
                s.max
            ));
        }
        out.push_str("\nI have a few advices for you:\n");
        if self.events.contains_key("command") || self.events.contains_key("fast-command") {
            out.push_str(
                "- Check SLOWLOG GET for the slow commands; O(N) commands on big keys (KEYS, SMEMBERS, \
                 LRANGE 0 -1, SORT) run for as long as the key is big, and every client waits.\n",
            );
        }
        if self.events.contains_key("expire-cycle") {
            out.push_str("- Many keys expired at once: spread expiry times to smooth the active expire cycle.\n");
        }
        out
    }
}

/// The histogram reply's pairs: each bucket's upper bound in µs and the
/// cumulative count up to it, for the buckets that added calls.
pub fn cumulative(buckets: &[u64; BUCKETS]) -> Vec<(u64, u64)> {
    let mut total = 0;
    let mut out = Vec::new();
    for (i, &n) in buckets.iter().enumerate() {
        if n > 0 {
            total += n;
            out.push((1u64 << i, total));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_keep_one_sample_per_second_and_the_maximum() {
        let mut m = Monitor::default();
        m.add("command", 500, 10);
        assert!(m.latest().is_empty(), "off while the threshold is 0");
        m.threshold_ms = 100;
        m.add("command", 50, 10);
        m.add("command", 300, 10);
        m.add("command", 400, 10);
        m.add("command", 200, 11);
        assert_eq!(m.history("command"), vec![(10, 400), (11, 200)]);
        assert_eq!(m.latest(), vec![("command", 11, 200, 400)]);
        for t in 0..200 {
            m.add("fast-command", 100, 100 + t);
        }
        assert_eq!(m.history("fast-command").len(), SAMPLES);
        assert!(m.graph("command", 12).unwrap().contains('#'));
        assert!(m.doctor().contains("command"));
        assert_eq!(m.reset(&["nosuch".into()]), 0);
        assert_eq!(m.reset(&[]), 2);
        assert!(m.latest().is_empty());
    }

    #[test]
    fn histogram_buckets_are_powers_of_two() {
        assert_eq!(bucket(0), 0);
        assert_eq!(bucket(1), 0);
        assert_eq!(bucket(2), 1);
        assert_eq!(bucket(3), 2);
        assert_eq!(bucket(4), 2);
        assert_eq!(bucket(5), 3);
        assert_eq!(bucket(u64::MAX), BUCKETS - 1);
        let mut b = [0u64; BUCKETS];
        b[bucket(1)] += 2;
        b[bucket(100)] += 1;
        assert_eq!(cumulative(&b), vec![(1, 2), (128, 3)]);
    }
}
