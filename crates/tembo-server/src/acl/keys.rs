//! What a call does to each of its keys, as ACL key patterns judge it.
//!
//! Redis 7 checks a key against a user's patterns with the flags of the
//! key's spec: a key whose data the command returns or uses needs read
//! permission (`%R~`), one it inserts, updates or deletes needs write
//! permission (`%W~`), one it does both to needs a pattern granting both,
//! and one it only tests for existence or size (EXISTS, TYPE, STRLEN,
//! HEXISTS…) needs a pattern of either kind. This module gives those
//! needs for each key of a call: by the command's `readonly`/`write`
//! flag, with the commands that differ named here — those that read what
//! they write (INCR, LPOP…), those with a destination among their sources
//! (SUNIONSTORE, LMOVE, COPY…), and the options that change a key's role
//! (SET … GET, BITFIELD's GET and SET, SORT/GEORADIUS … STORE).

use crate::cmd::{self, args::is, Spec};

/// The permission a key of a call needs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Need {
    /// Any pattern that matches the key (existence and size tests).
    Any,
    /// A pattern granting read.
    Read,
    /// A pattern granting write.
    Write,
    /// One pattern granting both.
    ReadWrite,
}

impl Need {
    /// Whether a pattern with these permissions satisfies the need.
    pub fn granted_by(self, read: bool, write: bool) -> bool {
        match self {
            Need::Any => true,
            Need::Read => read,
            Need::Write => write,
            Need::ReadWrite => read && write,
        }
    }
}

/// Commands that test a key's existence, type or size without its data.
const EXISTENCE: &[&str] = &[
    "exists",
    "type",
    "ttl",
    "pttl",
    "expiretime",
    "pexpiretime",
    "touch",
    "object",
    "memory",
    "strlen",
    "hlen",
    "llen",
    "scard",
    "zcard",
    "xlen",
    "hexists",
    "hstrlen",
    "sismember",
    "smismember",
    "watch",
];

/// Writing commands that also return or use the data they change.
const READ_WRITE: &[&str] = &[
    "migrate",
    "incr",
    "decr",
    "incrby",
    "decrby",
    "incrbyfloat",
    "getset",
    "getdel",
    "getex",
    "setbit",
    "lpop",
    "rpop",
    "spop",
    "zpopmin",
    "zpopmax",
    "blpop",
    "brpop",
    "bzpopmin",
    "bzpopmax",
    "lmpop",
    "blmpop",
    "zmpop",
    "bzmpop",
    "hincrby",
    "hincrbyfloat",
    "zincrby",
    "xreadgroup",
    "xclaim",
    "xautoclaim",
    "eval",
    "evalsha",
    "fcall",
];

/// Commands whose first key is a destination and the rest sources.
const STORE_FIRST: &[&str] = &[
    "sinterstore",
    "sunionstore",
    "sdiffstore",
    "zunionstore",
    "zinterstore",
    "zdiffstore",
    "zrangestore",
    "geosearchstore",
    "bitop",
];

/// Commands whose first key is a source they take from and the second a destination.
const MOVE: &[&str] = &["lmove", "blmove", "rpoplpush", "brpoplpush", "smove", "rename", "renamenx"];

/// The keys of a call (`args[0]` the command) with the permission each
/// needs and its argument position. Unreadable key arguments (a bad key
/// count) give no keys: the command itself will refuse the call.
pub fn needs<'a>(spec: &Spec, args: &'a [Vec<u8>]) -> Vec<(usize, &'a [u8], Need)> {
    // Shard channels sit where keys do (for cluster slots), but ACL
    // checks them as channels.
    if matches!(spec.name, "spublish" | "ssubscribe" | "sunsubscribe") {
        return Vec::new();
    }
    let Some(keys) = cmd::command_keys(spec, args) else { return Vec::new() };
    let position = |k: &[u8]| args.iter().position(|a| std::ptr::eq(a.as_slice(), k)).unwrap_or(0);
    let base = base_need(spec, args);
    let out: Vec<(usize, &'a [u8], Need)> = keys
        .iter()
        .enumerate()
        .map(|(i, &k)| {
            let need = match roles(spec.name) {
                Some((first, _)) if i == 0 => first,
                Some((_, rest)) => rest,
                None => base,
            };
            (position(k), k, need)
        })
        .collect();
    out
}

/// For commands whose first key plays another role than the rest: the
/// need of the first key and of the others.
fn roles(name: &str) -> Option<(Need, Need)> {
    if STORE_FIRST.contains(&name) {
        return Some((Need::Write, Need::Read));
    }
    if MOVE.contains(&name) {
        return Some((Need::ReadWrite, Need::Write));
    }
    match name {
        // GEORADIUS[BYMEMBER] … STORE|STOREDIST dest: the source is read.
        "copy" | "sort" | "georadius" | "georadiusbymember" => Some((Need::Read, Need::Write)),
        "pfmerge" => Some((Need::ReadWrite, Need::Read)),
        _ => None,
    }
}

/// The need of a call's keys by the command's kind and options.
fn base_need(spec: &Spec, args: &[Vec<u8>]) -> Need {
    let name = spec.name;
    if EXISTENCE.contains(&name) {
        return Need::Any;
    }
    if READ_WRITE.contains(&name) {
        return Need::ReadWrite;
    }
    match name {
        "set" if args.iter().skip(3).any(|a| is(a, "get")) => return Need::ReadWrite,
        "bitfield" => {
            // SET and INCRBY reply with the value they change.
            let writes = args.iter().skip(2).any(|a| is(a, "set") || is(a, "incrby"));
            return if writes { Need::ReadWrite } else { Need::Read };
        }
        "pfcount" | "eval_ro" | "evalsha_ro" | "fcall_ro" => return Need::Read,
        _ => {}
    }
    if spec.flags.contains(&"write") {
        Need::Write
    } else {
        Need::Read
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn call(words: &[&str]) -> Vec<(usize, Vec<u8>, Need)> {
        let args: Vec<Vec<u8>> = words.iter().map(|w| w.as_bytes().to_vec()).collect();
        let spec = cmd::spec(&args[0]).unwrap();
        needs(spec, &args).into_iter().map(|(p, k, n)| (p, k.to_vec(), n)).collect()
    }

    #[test]
    fn needs_follow_what_the_command_does_to_each_key() {
        assert_eq!(call(&["get", "k"]), vec![(1, b"k".to_vec(), Need::Read)]);
        assert_eq!(call(&["set", "k", "v"]), vec![(1, b"k".to_vec(), Need::Write)]);
        assert_eq!(call(&["set", "k", "v", "GET"]), vec![(1, b"k".to_vec(), Need::ReadWrite)]);
        assert_eq!(call(&["incr", "k"])[0].2, Need::ReadWrite);
        assert_eq!(call(&["exists", "a", "b"]).iter().map(|x| x.2).collect::<Vec<_>>(), vec![Need::Any, Need::Any]);
        assert_eq!(
            call(&["sunionstore", "d", "a", "b"]).iter().map(|x| x.2).collect::<Vec<_>>(),
            vec![Need::Write, Need::Read, Need::Read]
        );
        assert_eq!(
            call(&["lmove", "s", "d", "left", "right"]).iter().map(|x| x.2).collect::<Vec<_>>(),
            vec![Need::ReadWrite, Need::Write]
        );
        assert_eq!(
            call(&["sort", "s", "STORE", "d"]).iter().map(|x| (x.0, x.2)).collect::<Vec<_>>(),
            vec![(1, Need::Read), (3, Need::Write)]
        );
        assert_eq!(
            call(&["georadius", "g", "0", "0", "1", "m", "STOREDIST", "d"])
                .iter()
                .map(|x| (x.0, x.2))
                .collect::<Vec<_>>(),
            vec![(1, Need::Read), (7, Need::Write)]
        );
        assert_eq!(call(&["eval", "", "1", "k"])[0].2, Need::ReadWrite);
        assert_eq!(call(&["eval_ro", "", "1", "k"])[0].2, Need::Read);
        assert!(call(&["eval", "", "3", "k"]).is_empty());
        assert_eq!(call(&["bitfield", "k", "GET", "u8", "0"])[0].2, Need::Read);
        assert_eq!(call(&["bitfield", "k", "SET", "u8", "0", "1"])[0].2, Need::ReadWrite);
        assert!(call(&["spublish", "chan", "msg"]).is_empty());
    }
}
