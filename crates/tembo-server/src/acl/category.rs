//! ACL categories (`+@read`, `-@dangerous`, `ACL CAT`): which commands and
//! subcommands belong to each.
//!
//! Redis attaches categories to each entry of its command table; ours are
//! derived from what the table already says — a command's flags (`write`,
//! `readonly`, `fast`, `admin`, `blocking`, `pubsub`) and its group — plus
//! the short lists below of what the flags cannot tell (which commands are
//! dangerous, which subcommands of a container only read). The derivation
//! is one function, so a new command gets its categories with its spec.

use std::collections::HashMap;
use std::sync::OnceLock;

use crate::cmd::{self, Spec};

/// The categories, in the order `ACL CAT` lists them (Redis 7.0's).
pub const NAMES: [&str; 21] = [
    "keyspace",
    "read",
    "write",
    "set",
    "sortedset",
    "list",
    "hash",
    "string",
    "bitmap",
    "hyperloglog",
    "geo",
    "stream",
    "pubsub",
    "admin",
    "fast",
    "slow",
    "blocking",
    "dangerous",
    "connection",
    "transaction",
    "scripting",
];

/// The bit of category `name` (without the `@`), case-insensitively.
pub fn bit(name: &str) -> Option<u32> {
    NAMES.iter().position(|n| n.eq_ignore_ascii_case(name)).map(|i| 1 << i)
}

fn b(name: &str) -> u32 {
    bit(name).expect("a category NAMES lists")
}

/// Commands Redis marks `@dangerous` though they are not `admin`.
const DANGEROUS: &[&str] = &[
    "flushdb",
    "flushall",
    "keys",
    "sort",
    "restore",
    "migrate",
    "swapdb",
    "info",
    "role",
    "lastsave",
    "save",
    "bgsave",
    "bgrewriteaof",
    "shutdown",
    "monitor",
    "debug",
    "config",
    "slowlog",
    "latency",
    "acl",
    "cluster",
    "replicaof",
    "slaveof",
    "failover",
    "sync",
    "psync",
    "replconf",
    "pfdebug",
    "pfselftest",
];

/// Subcommands of dangerous or writing containers that only read or
/// describe, and so lose `admin`, `dangerous` and `write`.
const HARMLESS_SUBS: &[&str] = &[
    "acl|whoami",
    "acl|cat",
    "acl|genpass",
    "acl|help",
    "client|id",
    "client|info",
    "client|getname",
    "client|setname",
    "client|setinfo",
    "client|reply",
    "client|getredir",
    "client|trackinginfo",
    "client|tracking",
    "client|caching",
    "client|help",
    "function|list",
    "function|stats",
    "function|dump",
    "function|help",
    "memory|usage",
    "memory|doctor",
    "memory|stats",
    "memory|help",
    "config|help",
    "slowlog|help",
    "object|encoding",
    "object|refcount",
    "object|idletime",
    "object|freq",
    "object|help",
    "latency|help",
    "cluster|countkeysinslot",
    "cluster|getkeysinslot",
    "cluster|help",
    "cluster|info",
    "cluster|keyslot",
    "cluster|links",
    "cluster|myid",
    "cluster|nodes",
    "cluster|shards",
    "cluster|slots",
];

/// Subcommands of containers that are not admin as a whole which Redis
/// marks `@admin @dangerous`.
const ADMIN_SUBS: &[&str] = &[
    "client|kill",
    "client|list",
    "client|no-evict",
    "client|pause",
    "client|unpause",
    "client|unblock",
    "module|list",
    "module|load",
    "module|loadex",
    "module|unload",
];

/// Commands whose categories in Redis 7.0 differ from what their flags and
/// group give: (command, categories added, categories removed). Checked
/// against redis-server 7.0.15's COMMAND output.
const OVERRIDES: &[(&str, &[&str], &[&str])] = &[
    ("dbsize", &["keyspace"], &[]),
    ("flushdb", &["keyspace"], &[]),
    ("flushall", &["keyspace"], &[]),
    ("swapdb", &["keyspace"], &[]),
    ("asking", &["connection"], &[]),
    ("command", &["connection"], &[]),
    ("readonly", &["connection"], &[]),
    ("readwrite", &["connection"], &[]),
    ("wait", &["connection"], &["keyspace"]),
    ("lastsave", &["admin"], &[]),
    ("role", &["admin"], &[]),
    ("sort", &["list", "set", "sortedset"], &["keyspace"]),
    ("sort_ro", &["list", "set", "sortedset", "dangerous"], &["keyspace"]),
    // Read-only scripts read through the commands they call.
    ("eval_ro", &[], &["read"]),
    ("evalsha_ro", &[], &["read"]),
    ("fcall_ro", &[], &["read"]),
];

/// The category bits of a command's group.
fn group_bits(group: &str) -> u32 {
    match group {
        "string" => b("string"),
        "list" => b("list"),
        "hash" => b("hash"),
        "set" => b("set"),
        "sorted-set" => b("sortedset"),
        "stream" => b("stream"),
        "bitmap" => b("bitmap"),
        "hyperloglog" => b("hyperloglog"),
        "geo" => b("geo"),
        "generic" | "keyspace" => b("keyspace"),
        "connection" => b("connection"),
        "transactions" => b("transaction"),
        "scripting" => b("scripting"),
        "pubsub" => b("pubsub"),
        _ => 0,
    }
}

fn derive(spec: &Spec, sub: Option<&str>) -> u32 {
    let has = |f: &str| spec.flags.contains(&f);
    let mut bits = group_bits(spec.group);
    if has("readonly") {
        bits |= b("read");
    }
    if has("write") {
        bits |= b("write");
    }
    bits |= if has("fast") { b("fast") } else { b("slow") };
    if has("admin") {
        bits |= b("admin") | b("dangerous");
    }
    if DANGEROUS.contains(&spec.name) {
        bits |= b("dangerous");
    }
    if has("blocking") {
        bits |= b("blocking");
    }
    if has("pubsub") {
        bits |= b("pubsub");
    }
    if let Some(sub) = sub {
        let full = format!("{}|{sub}", spec.name);
        // CLUSTER's subcommands are admin but for those that only describe.
        if ADMIN_SUBS.contains(&full.as_str()) || spec.name == "cluster" {
            bits |= b("admin") | b("dangerous");
        }
        if HARMLESS_SUBS.contains(&full.as_str()) {
            bits &= !(b("admin") | b("dangerous") | b("write"));
            if spec.name == "memory" || spec.name == "object" {
                bits |= b("read");
            }
        }
        if cmd::writing_subcommand(spec.name, sub) {
            bits |= b("write");
        }
        if sub == "help" || (spec.name == "memory" && sub != "usage") {
            // A container's HELP (and MEMORY's reports) only describe:
            // the family's own category and @slow, as Redis lists them.
            bits = (group_bits(spec.group) & !b("pubsub")) | b("slow");
        }
    }
    for (name, add, remove) in OVERRIDES {
        if *name == spec.name {
            add.iter().for_each(|c| bits |= b(c));
            remove.iter().for_each(|c| bits &= !b(c));
        }
    }
    bits
}

/// The categories of `spec` (and of its subcommand `sub`, if given), as bits.
pub fn of(spec: &Spec, sub: Option<&'static str>) -> u32 {
    type Key = (&'static str, Option<&'static str>);
    static CACHE: OnceLock<HashMap<Key, u32>> = OnceLock::new();
    let cache = CACHE.get_or_init(|| {
        let mut m = HashMap::new();
        for spec in cmd::table().values() {
            m.insert((spec.name, None), derive(spec, None));
            for s in cmd::subcommands_of(spec.name) {
                m.insert((spec.name, Some(s)), derive(spec, Some(s)));
            }
        }
        m
    });
    cache.get(&(spec.name, sub)).copied().unwrap_or_else(|| derive(spec, sub))
}

/// The names of the categories in `bits`, each with its `@`, in `NAMES` order.
pub fn names(bits: u32) -> Vec<String> {
    NAMES.iter().enumerate().filter(|(i, _)| bits & (1 << i) != 0).map(|(_, n)| format!("@{n}")).collect()
}

/// `ACL CAT category`: every command, and every subcommand as
/// `container|sub`, in the category.
pub fn members(bit: u32) -> Vec<String> {
    let mut out = Vec::new();
    for spec in cmd::table().values() {
        let subs = cmd::subcommands_of(spec.name);
        if subs.is_empty() {
            if of(spec, None) & bit != 0 {
                out.push(spec.name.to_string());
            }
        } else {
            out.extend(subs.iter().filter(|&&s| of(spec, Some(s)) & bit != 0).map(|s| format!("{}|{s}", spec.name)));
        }
    }
    out.sort();
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn categories_follow_flags_and_groups() {
        let spec = |n: &str| cmd::spec(n.as_bytes()).unwrap();
        let has = |s: &Spec, sub: Option<&'static str>, c: &str| of(s, sub) & bit(c).unwrap() != 0;
        assert!(has(spec("get"), None, "read") && has(spec("get"), None, "string") && has(spec("get"), None, "fast"));
        assert!(has(spec("set"), None, "write") && !has(spec("set"), None, "keyspace"));
        assert!(has(spec("flushall"), None, "dangerous"));
        assert!(has(spec("multi"), None, "transaction"));
        assert!(has(spec("blpop"), None, "blocking"));
        assert!(has(spec("function"), Some("list"), "scripting"));
        assert!(!has(spec("function"), Some("list"), "write"));
        assert!(has(spec("client"), Some("kill"), "dangerous"));
        assert!(!has(spec("client"), Some("id"), "dangerous"));
        assert!(members(bit("transaction").unwrap()).contains(&"multi".to_string()));
        assert!(members(bit("scripting").unwrap()).contains(&"function|list".to_string()));
        assert!(!members(bit("keyspace").unwrap()).contains(&"set".to_string()));
        assert_eq!(bit("NoSuch"), None);
    }
}
