//! The parts of Redis's configuration that CONFIG GET shows and CONFIG SET
//! judges beyond Tembo's own settings: the immutable settings (shown,
//! refused with Redis's words), `client-output-buffer-limit` (its pub/sub and normal classes enforced), and
//! the checks of settings whose values have a shape (`maxmemory-clients`).
//!
//! Tools read these (redis-cli, exporters, Redis's own test suite), and
//! clients write back what CONFIG GET gave them; a setting Tembo has no
//! machinery for shows the value a Redis without that activity shows.

use crate::size;

/// Settings fixed when a server starts, with this server's values: CONFIG
/// SET refuses them (even to the same value) as Redis does.
pub const IMMUTABLE: &[(&str, &str)] = &[
    ("daemonize", "no"),
    ("supervised", "no"),
    ("pidfile", ""),
    ("logfile", ""),
    ("syslog-enabled", "no"),
    ("syslog-ident", "redis"),
    ("syslog-facility", "local0"),
    ("io-threads", "1"),
    ("io-threads-do-reads", "no"),
    ("tcp-backlog", "511"),
    ("always-show-logo", "no"),
    ("unixsocket", ""),
    ("unixsocketperm", "0"),
    ("cluster-enabled", "no"),
    ("appendfilename", "appendonly.aof"),
    ("appenddirname", "appendonlydir"),
    ("set-proc-title", "yes"),
    // A master without replicas.
    ("replicaof", ""),
    ("slaveof", ""),
    ("enable-protected-configs", "no"),
    ("enable-debug-command", "no"),
    ("enable-module-command", "no"),
    // Debian's Redis (its fix for CVE-2025-46818): scripts get no getfenv,
    // setfenv or newproxy. Hidden from `CONFIG GET *`, as there.
    ("lua-enable-deprecated-api", "no"),
];

/// Redis's reply to CONFIG SET of an immutable setting (after the common prefix).
pub const IMMUTABLE_ERROR: &str = "can't set immutable config";

/// Whether `name` is immutable.
pub fn is_immutable(name: &str) -> bool {
    IMMUTABLE.iter().any(|(k, _)| *k == name)
}

/// Settings Redis types as memory sizes (`1gb`, `64mb`): a value that is
/// not one gets "argument must be a memory value" rather than the integer
/// settings' wording (asked of redis-server 7.0.15, setting by setting).
const MEMORY_SETTINGS: &[&str] = &[
    "active-defrag-ignore-bytes",
    "auto-aof-rewrite-min-size",
    "client-query-buffer-limit",
    "cluster-link-sendbuf-limit",
    "hash-max-listpack-value",
    "hash-max-ziplist-value",
    "hll-sparse-max-bytes",
    "maxmemory",
    "proto-max-bulk-len",
    "repl-backlog-size",
    "stream-node-max-bytes",
    "zset-max-listpack-value",
    "zset-max-ziplist-value",
];

/// Redis's complaint about a value of setting `name` that does not parse as
/// its number.
pub fn not_a_number(name: &str) -> &'static str {
    if MEMORY_SETTINGS.contains(&name) {
        "argument must be a memory value"
    } else {
        "argument couldn't be parsed into an integer"
    }
}

/// `maxmemory-clients`: a size or a percentage of at most 100.
pub fn check_memory_or_percent(v: &str) -> Result<(), &'static str> {
    if let Some(p) = v.strip_suffix('%') {
        let p: u64 = p.parse().map_err(|_| "argument must be a memory or percent value")?;
        if p > 100 {
            return Err("percentage argument must be less or equal to 100");
        }
        return Ok(());
    }
    size::parse(v).map(|_| ()).ok_or("argument must be a memory or percent value")
}

/// One client class's output-buffer limits.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limit {
    /// Bytes past which the client is closed at once (0: none).
    pub hard: u64,
    /// Bytes past which, for `soft_secs` in a row, it is closed (0: none).
    pub soft: u64,
    /// See `soft`.
    pub soft_secs: u64,
}

/// `client-output-buffer-limit` for the classes normal, replica, pubsub.
///
/// Only the pub/sub class acts here: a normal client's replies never pile
/// up (its connection reads no more requests until they are written), and
/// there are no replicas.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OutputLimits {
    /// Normal clients.
    pub normal: Limit,
    /// Replicas.
    pub replica: Limit,
    /// Pub/sub subscribers.
    pub pubsub: Limit,
}

impl Default for OutputLimits {
    /// Redis's defaults.
    fn default() -> Self {
        OutputLimits {
            normal: Limit { hard: 0, soft: 0, soft_secs: 0 },
            replica: Limit { hard: 256 << 20, soft: 64 << 20, soft_secs: 60 },
            pubsub: Limit { hard: 32 << 20, soft: 8 << 20, soft_secs: 60 },
        }
    }
}

impl OutputLimits {
    /// Applies `class hard soft seconds [class hard soft seconds ...]`
    /// (all or nothing), with Redis's words for a bad value.
    pub fn set(&mut self, v: &str) -> Result<(), &'static str> {
        let words: Vec<&str> = v.split_whitespace().collect();
        if words.len() % 4 != 0 {
            return Err("Wrong number of arguments in buffer limit configuration.");
        }
        let mut next = *self;
        for group in words.chunks(4) {
            let class = match group[0].to_ascii_lowercase().as_str() {
                "normal" => &mut next.normal,
                "slave" | "replica" => &mut next.replica,
                "pubsub" => &mut next.pubsub,
                _ => return Err("Invalid client class specified in buffer limit configuration."),
            };
            let hard = size::parse(group[1]);
            let soft = size::parse(group[2]);
            let secs = group[3].parse::<u64>().ok();
            let (Some(hard), Some(soft), Some(soft_secs)) = (hard, soft, secs) else {
                return Err("Error in hard, soft or soft_seconds setting in buffer limit configuration.");
            };
            *class = Limit { hard, soft, soft_secs };
        }
        *self = next;
        Ok(())
    }

    /// As CONFIG GET shows it.
    pub fn show(&self) -> String {
        let one = |name: &str, l: &Limit| format!("{name} {} {} {}", l.hard, l.soft, l.soft_secs);
        [one("normal", &self.normal), one("slave", &self.replica), one("pubsub", &self.pubsub)].join(" ")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn output_limits_parse_and_show_as_redis() {
        let mut l = OutputLimits::default();
        assert_eq!(l.show(), "normal 0 0 0 slave 268435456 67108864 60 pubsub 33554432 8388608 60");
        l.set("pubsub 1mb 512kb 30").unwrap();
        assert_eq!(l.pubsub, Limit { hard: 1 << 20, soft: 512 << 10, soft_secs: 30 });
        assert!(l.set("foo 1 2 3").unwrap_err().contains("Invalid client class"));
        assert!(l.set("pubsub 1 2").unwrap_err().contains("Wrong number"));
        // All or nothing: the good first group is not applied either.
        assert!(l.set("normal 1 1 1 pubsub x 0 0").is_err());
        assert_eq!(l.normal.hard, 0);
        l.set(&l.show()).unwrap();
        assert_eq!(l.pubsub.soft_secs, 30);
    }

    #[test]
    fn memory_or_percent() {
        assert!(check_memory_or_percent("0").is_ok());
        assert!(check_memory_or_percent("10%").is_ok());
        assert!(check_memory_or_percent("64mb").is_ok());
        assert_eq!(check_memory_or_percent("200%"), Err("percentage argument must be less or equal to 100"));
        assert_eq!(check_memory_or_percent("abc"), Err("argument must be a memory or percent value"));
    }
}
