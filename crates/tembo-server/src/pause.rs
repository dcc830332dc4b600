//! CLIENT PAUSE: holding clients' commands while an operator (or a
//! failover) needs the data set to stand still.
//!
//! As in Redis 7.0, `CLIENT PAUSE ms [WRITE|ALL]` holds, until the time
//! has passed or CLIENT UNPAUSE, every command (`ALL`, the default) or
//! every command that may change data or be propagated (`WRITE`: write
//! commands, PUBLISH, SPUBLISH, PFCOUNT, scripts and functions not
//! declared `no-writes`, and an EXEC whose transaction holds one of
//! these). The check comes after the arity, authentication and ACL
//! checks, so a malformed command is answered at once, and before MULTI
//! queues a command. A held client waits, counted in `blocked_clients`,
//! with whatever it sent after; when the pause ends, the held clients run
//! again in the order they were held (a new pause may hold them again). A
//! second pause keeps the stricter mode and the later end. A pause issued
//! inside a transaction starts when the transaction ends.
//!
//! While clients are paused nothing is deleted behind their back: a key
//! past its expiry reads as missing, but neither a read nor the active
//! expire cycle deletes it (Redis's rule, so that a paused server's data
//! and `expired_keys` stay as they are).

use std::time::{Duration, Instant};

use crate::client::Client;
use crate::cmd::{self, Spec};
use crate::exec::State;

/// What a pause holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum PauseKind {
    /// Commands that may write or propagate.
    Write,
    /// Every command.
    All,
}

/// A pause in force.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Pause {
    /// What it holds.
    pub kind: PauseKind,
    /// When it ends by itself.
    pub until: Instant,
}

impl Pause {
    /// `self` joined with a pause already in force: the stricter kind and
    /// the later end, as Redis does for pauses of the same purpose.
    pub fn merged(self, old: Option<Pause>) -> Pause {
        match old {
            None => self,
            Some(o) => Pause { kind: self.kind.max(o.kind), until: self.until.max(o.until) },
        }
    }
}

/// The end of a pause of `ms` milliseconds from `now` (0 ends at once;
/// one too far for the clock ends in about a century).
pub fn until(now: Instant, ms: u64) -> Instant {
    now.checked_add(Duration::from_millis(ms))
        .or_else(|| now.checked_add(Duration::from_secs(100 * 365 * 86_400)))
        .unwrap_or(now)
}

impl State {
    /// The pause in force now, ending one whose time has passed (its
    /// clients are released to run again).
    pub fn pause_now(&mut self) -> Option<PauseKind> {
        let p = self.pause?;
        if p.until <= Instant::now() {
            self.unpause();
            return None;
        }
        Some(p.kind)
    }

    /// Whether a key past its expiry must be left in place (clients are
    /// paused). Ends no pause: only a commit group does that, so that the
    /// clients it releases run in that group.
    pub fn expiry_paused(&self) -> bool {
        self.pause.is_some_and(|p| p.until > Instant::now())
    }

    /// Whether the pause in force holds `client`'s call `args` of `spec`.
    pub fn pause_holds(&mut self, client: &Client, spec: &Spec, args: &[Vec<u8>]) -> bool {
        match self.pause_now() {
            None => false,
            Some(PauseKind::All) => true,
            Some(PauseKind::Write) => {
                if spec.name == "exec" {
                    let queued = client.multi.as_deref().unwrap_or(&[]);
                    return queued.iter().any(|q| cmd::spec(&q[0]).is_some_and(|s| self.may_write(s, q)));
                }
                self.may_write(spec, args)
            }
        }
    }

    /// Whether a call may change data or be propagated to replicas (Redis's
    /// `write` and `may-replicate` flags, scripts by their declared flags).
    pub(crate) fn may_write(&self, spec: &Spec, args: &[Vec<u8>]) -> bool {
        let flagged = spec.flags.contains(&"write") || spec.flags.contains(&"may_replicate");
        if let Some(sub) = cmd::subcommand(spec, args) {
            // A container's flags are not its subcommands'.
            return cmd::writing_subcommand(spec.name, sub) || (flagged && sub != "help");
        }
        if flagged {
            return true;
        }
        let engine = self.scripts.as_ref();
        match spec.name {
            // Without a shebang a script is may-replicate; with one, it
            // writes unless it says `no-writes`.
            "eval" => script_may_write(&args[1]),
            "evalsha" => {
                let sha = String::from_utf8_lossy(&args[1]).to_ascii_lowercase();
                engine.and_then(|e| e.source(&sha)).map_or(true, script_may_write)
            }
            "fcall" => engine.and_then(|e| e.function_writes(&args[1])).unwrap_or(true),
            _ => false,
        }
    }

    /// Starts (or extends) a pause.
    pub fn pause(&mut self, p: Pause) {
        self.pause = Some(p.merged(self.pause));
    }

    /// Ends the pause: every held client runs again, first held first.
    pub fn unpause(&mut self) {
        self.pause = None;
        let mut held: Vec<(u64, u64)> =
            self.clients.iter().filter_map(|(id, c)| c.postponed.as_ref().map(|p| (p.0, *id))).collect();
        held.sort_unstable();
        for (_, id) in held {
            self.release_postponed(id);
        }
    }

    /// Holds `client` (not in `clients` while it runs) with its requests
    /// from the held one on.
    pub fn postpone(&mut self, client: &mut Client, reqs: Vec<Vec<Vec<u8>>>) {
        self.pause_seq += 1;
        client.postponed = Some((self.pause_seq, reqs));
        client.conn.blocked.store(true, std::sync::atomic::Ordering::Relaxed);
    }

    /// Clients held now.
    pub fn postponed_count(&self) -> usize {
        self.clients.values().filter(|c| c.postponed.is_some()).count()
    }
}

fn script_may_write(source: &[u8]) -> bool {
    !source.starts_with(b"#!") || !cmd::scripting::shebang_read_only(source).unwrap_or(false)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_second_pause_keeps_the_stricter_kind_and_the_later_end() {
        let t0 = Instant::now();
        let all_short = Pause { kind: PauseKind::All, until: until(t0, 10) };
        let write_long = Pause { kind: PauseKind::Write, until: until(t0, 1000) };
        assert_eq!(write_long.merged(Some(all_short)), Pause { kind: PauseKind::All, until: until(t0, 1000) });
        assert_eq!(all_short.merged(None), all_short);
        assert!(until(t0, u64::MAX) > until(t0, 1_000_000));
    }

    #[test]
    fn scripts_write_unless_their_shebang_says_no_writes() {
        assert!(script_may_write(b"return 1"));
        assert!(script_may_write(b"#!lua\nreturn 1"));
        assert!(!script_may_write(b"#!lua flags=no-writes\nreturn 1"));
        assert!(!script_may_write(b"#!lua flags=allow-oom,no-writes\nreturn 1"));
        // A bad shebang fails when the script runs, not here.
        assert!(script_may_write(b"#!python\n"));
    }
}
