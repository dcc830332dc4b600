//! ACL LOG: the most recent refusals and failed logins, newest first.
//!
//! As in Redis, a refusal like one already logged in the last minute
//! (same reason, context, object and user) counts into that entry instead
//! of adding one, and the log keeps at most `acllog-max-len` entries.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

/// How long a logged refusal absorbs similar ones.
const GROUPING: Duration = Duration::from_secs(60);

/// One entry.
#[derive(Clone, Debug)]
pub struct LogEntry {
    /// How many similar events it stands for.
    pub count: u64,
    /// `command`, `key`, `channel` or `auth`.
    pub reason: &'static str,
    /// `toplevel`, `multi` or `lua`.
    pub context: &'static str,
    /// The command, key, channel, or `AUTH`.
    pub object: Vec<u8>,
    /// The user.
    pub username: String,
    /// When it last happened.
    pub when: Instant,
    /// CLIENT INFO of the client it last happened to.
    pub client_info: String,
}

/// The log.
#[derive(Clone, Debug)]
pub struct AclLog {
    entries: VecDeque<LogEntry>,
    /// `acllog-max-len`.
    pub max_len: usize,
    /// Refusals since start (or CONFIG RESETSTAT) by reason: auth, command,
    /// key, channel (INFO stats' `acl_access_denied_*`).
    pub denied: [u64; 4],
}

impl AclLog {
    /// An empty log keeping `max_len` entries.
    pub fn new(max_len: usize) -> AclLog {
        AclLog { entries: VecDeque::new(), max_len, denied: [0; 4] }
    }

    /// Records an event.
    pub fn add(
        &mut self,
        reason: &'static str,
        context: &'static str,
        object: Vec<u8>,
        username: &str,
        client_info: String,
    ) {
        let slot = ["auth", "command", "key", "channel"].iter().position(|r| *r == reason).unwrap_or(0);
        self.denied[slot] += 1;
        let now = Instant::now();
        let similar = self.entries.iter().position(|e| {
            e.reason == reason
                && e.context == context
                && e.object == object
                && e.username == username
                && now.duration_since(e.when) < GROUPING
        });
        if let Some(i) = similar {
            let mut e = self.entries.remove(i).expect("a found entry");
            e.count += 1;
            e.when = now;
            e.client_info = client_info;
            self.entries.push_front(e);
        } else {
            self.entries.push_front(LogEntry {
                count: 1,
                reason,
                context,
                object,
                username: username.to_string(),
                when: now,
                client_info,
            });
        }
        self.trim();
    }

    /// Drops the oldest entries past `max_len`.
    pub fn trim(&mut self) {
        self.entries.truncate(self.max_len);
    }

    /// ACL LOG RESET.
    pub fn reset(&mut self) {
        self.entries.clear();
    }

    /// The newest `n` entries.
    pub fn newest(&self, n: usize) -> impl Iterator<Item = &LogEntry> {
        self.entries.iter().take(n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn similar_events_group_and_the_log_is_bounded() {
        let mut log = AclLog::new(3);
        for _ in 0..3 {
            log.add("command", "toplevel", b"get".to_vec(), "u", String::new());
        }
        assert_eq!(log.newest(10).count(), 1);
        assert_eq!(log.newest(1).next().unwrap().count, 3);
        for k in 0..5 {
            log.add("key", "toplevel", format!("k{k}").into_bytes(), "u", String::new());
        }
        assert_eq!(log.newest(10).count(), 3);
        assert_eq!(log.newest(1).next().unwrap().object, b"k4");
        log.reset();
        assert_eq!(log.newest(10).count(), 0);
    }
}
