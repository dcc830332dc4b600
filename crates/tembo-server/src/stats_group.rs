//! What the commands of the group being run added to the counters, so
//! that a group rolled back and rerun one command per commit (its commit
//! failed, or a command in it must run alone: BGSAVE, a key over the
//! limits, a script stopped midway) counts each of its commands once.
//!
//! Copying the counters at every group's start would cost more than the
//! commands (each command's latency histogram is tens of KiB): instead the
//! scalar counters are copied (a few words), and every call appends what
//! it added to a journal that a rollback subtracts. Only the first run of
//! a group keeps a journal; outside one (the rerun, the cron, in-process
//! sessions) nothing is appended, so it never grows past one group.
//! One imprecision is left: the commands a busy script lets other clients
//! run meanwhile (`exec::State::serve_now`) are answered at once, not
//! rerun, and a rollback of the group takes their counts away too.

use std::collections::BTreeMap;

use super::stats::Stats;

/// One counted call, as [`Stats::count_call`] added it.
#[derive(Debug, Clone, Copy)]
struct Call {
    name: &'static str,
    nanos: u64,
    tracked: bool,
}

/// The journal of the group being run (see the module docs).
#[derive(Debug, Default)]
pub struct GroupTally {
    open: bool,
    /// commands, hits, misses, expired_keys, evicted_keys, errors.
    scalars: [u64; 6],
    calls: Vec<Call>,
    /// Names whose `failed` or `rejected` count a call raised.
    failed: Vec<&'static str>,
    rejected: Vec<&'static str>,
    /// The error codes as they were before the group's first error.
    codes_before: Option<(BTreeMap<String, u64>, bool)>,
}

impl GroupTally {
    pub fn note_call(&mut self, name: &'static str, nanos: u64, tracked: bool) {
        if self.open {
            self.calls.push(Call { name, nanos, tracked });
        }
    }

    pub fn note_failed(&mut self, name: &'static str) {
        if self.open {
            self.failed.push(name);
        }
    }

    pub fn note_rejected(&mut self, name: &'static str) {
        if self.open {
            self.rejected.push(name);
        }
    }
}

impl Stats {
    /// The counters a group's start copies and its rollback puts back.
    fn scalars(&mut self) -> [&mut u64; 6] {
        [
            &mut self.commands,
            &mut self.hits,
            &mut self.misses,
            &mut self.expired_keys,
            &mut self.evicted_keys,
            &mut self.errors,
        ]
    }

    /// A group starts (or its part so far is committed): what follows is
    /// journaled until [`Stats::end_group`] or [`Stats::roll_back_group`].
    pub fn begin_group(&mut self) {
        let scalars = self.scalars().map(|v| *v);
        let g = &mut self.group;
        g.open = true;
        g.scalars = scalars;
        g.calls.clear();
        g.failed.clear();
        g.rejected.clear();
        g.codes_before = None;
    }

    /// The group is committed: its counts stand.
    pub fn end_group(&mut self) {
        self.begin_group();
        self.group.open = false;
    }

    /// Before an error code is counted within a group.
    pub(crate) fn save_codes(&mut self) {
        if self.group.open && self.group.codes_before.is_none() {
            self.group.codes_before = Some((self.error_codes.clone(), self.error_codes_off));
        }
    }

    /// The group is rolled back: takes away what its calls counted (the
    /// rerun counts them again) and closes the journal.
    pub fn roll_back_group(&mut self) {
        if !self.group.open {
            return;
        }
        let g = std::mem::take(&mut self.group);
        for (v, was) in self.scalars().into_iter().zip(g.scalars) {
            *v = was;
        }
        if let Some((codes, off)) = g.codes_before {
            self.error_codes = codes;
            self.error_codes_off = off;
        }
        let mut untrack: BTreeMap<&'static str, Vec<u64>> = BTreeMap::new();
        for c in &g.calls {
            // A CONFIG RESETSTAT in the group may have zeroed it since.
            let Some(stat) = self.per_command.get_mut(c.name) else { continue };
            stat.calls = stat.calls.saturating_sub(1);
            stat.nanos = stat.nanos.saturating_sub(c.nanos);
            let b = &mut stat.hist[crate::latency::bucket(c.nanos / 1000)];
            *b = b.saturating_sub(1);
            if c.tracked {
                untrack.entry(c.name).or_default().push(c.nanos);
            }
        }
        for name in &g.failed {
            if let Some(stat) = self.per_command.get_mut(name) {
                stat.failed = stat.failed.saturating_sub(1);
            }
        }
        for name in &g.rejected {
            if let Some(stat) = self.per_command.get_mut(name) {
                stat.rejected = stat.rejected.saturating_sub(1);
            }
        }
        for (name, nanos) in untrack {
            if let Some(h) = self.per_command.get_mut(name).and_then(|s| s.hdr.as_mut()) {
                let mut less = hdrhistogram::Histogram::<u64>::new_from(h);
                for n in nanos {
                    less.saturating_record(n.clamp(1, 1_000_000_000));
                }
                // Fails only if a value is missing (a RESETSTAT in the
                // group): the histogram then holds the rerun's calls alone.
                let _ = h.subtract(&less);
            }
        }
        // A call counted with nothing else left (all its calls were in the
        // group) is as if never made: INFO does not list it.
        self.per_command.retain(|_, s| s.calls > 0 || s.failed > 0 || s.rejected > 0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn count(st: &mut Stats, name: &'static str, nanos: u64, error: Option<&str>) {
        st.count_call(name, nanos, true);
        if let Some(e) = error {
            st.count_failed(name);
            st.error_reply(e);
        }
    }

    fn summary(st: &Stats) -> String {
        let per: Vec<_> = st
            .per_command_sorted()
            .into_iter()
            .map(|(n, c)| (n, c.calls, c.nanos, c.failed, c.rejected, c.hist, c.hdr.as_ref().map(|h| h.len())))
            .collect();
        format!("{:?}", (st.commands, st.hits, st.errors, &st.error_codes, per))
    }

    #[test]
    fn a_rolled_back_group_leaves_the_counts_it_found() {
        let mut st = Stats::new();
        st.begin_group();
        count(&mut st, "get", 1_500, None);
        count(&mut st, "incr", 2_000, Some("ERR value is not an integer"));
        st.hits += 1;
        st.end_group();
        let before = summary(&st);

        st.begin_group();
        count(&mut st, "get", 900, None);
        count(&mut st, "set", 3_000, Some("WRONGTYPE Operation against a key"));
        st.rejected("set", "NOPERM no");
        st.misses += 2;
        st.roll_back_group();
        assert_eq!(before, summary(&st));
        assert_eq!(st.misses, 0);
        assert_eq!(st.per_command["get"].hdr.as_ref().unwrap().len(), 1);
    }

    #[test]
    fn nothing_is_journaled_outside_a_group() {
        let mut st = Stats::new();
        count(&mut st, "get", 1_000, None);
        st.roll_back_group();
        assert_eq!(st.per_command["get"].calls, 1);
        assert!(!st.group.open && st.group.calls.is_empty());
    }
}
