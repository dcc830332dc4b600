//! Keyspace notifications (`notify-keyspace-events`), as Redis 7.0 sends
//! them: for each key a command changes, a message on
//! `__keyspace@<db>__:<key>` (the event) and/or `__keyevent@<db>__:<event>`
//! (the key), filtered by event class.
//!
//! Rather than a call in every command, the write paths of
//! [`crate::keyspace`] note which keys a command touched (only while
//! notifications are on, so they cost nothing otherwise), whether it created
//! or removed them; when the command returns, [`events`] names the events
//! Redis would send for that command and key — per command, and for the
//! commands that move data between keys, per role (RENAME's source gets
//! `rename_from`, its destination `rename_to`). Expiry sends `expired` where
//! it happens. Messages leave with the group's replies, after its commit.

use crate::client::Client;
use crate::exec::{Ctx, State};

/// Event classes (Redis's letters in `notify-keyspace-events`).
pub const KEYSPACE: u32 = 1 << 0; // K
pub const KEYEVENT: u32 = 1 << 1; // E
pub const GENERIC: u32 = 1 << 2; // g
pub const STRING: u32 = 1 << 3; // $
pub const LIST: u32 = 1 << 4; // l
pub const SET: u32 = 1 << 5; // s
pub const HASH: u32 = 1 << 6; // h
pub const ZSET: u32 = 1 << 7; // z
pub const EXPIRED: u32 = 1 << 8; // x
pub const EVICTED: u32 = 1 << 9; // e
pub const STREAM: u32 = 1 << 10; // t
pub const KEY_MISS: u32 = 1 << 11; // m
pub const MODULE: u32 = 1 << 12; // d
pub const NEW: u32 = 1 << 13; // n
/// `A`: every class but key-miss and new.
const ALL: u32 = GENERIC | STRING | LIST | SET | HASH | ZSET | EXPIRED | EVICTED | STREAM | MODULE;

/// One key a command touched.
#[derive(Clone, Debug)]
pub struct Note {
    pub db: u8,
    pub key: Vec<u8>,
    pub created: bool,
    pub removed: bool,
}

/// Parses a `notify-keyspace-events` value; `None` names a bad class.
pub fn parse_flags(s: &str) -> Option<u32> {
    let mut flags = 0;
    for c in s.chars() {
        flags |= match c {
            'A' => ALL,
            'g' => GENERIC,
            '$' => STRING,
            'l' => LIST,
            's' => SET,
            'h' => HASH,
            'z' => ZSET,
            'x' => EXPIRED,
            'e' => EVICTED,
            'K' => KEYSPACE,
            'E' => KEYEVENT,
            't' => STREAM,
            'm' => KEY_MISS,
            'd' => MODULE,
            'n' => NEW,
            _ => return None,
        };
    }
    Some(flags)
}

/// The flags as CONFIG GET shows them (Redis's order).
pub fn format_flags(flags: u32) -> String {
    let mut s = String::new();
    if flags & ALL == ALL {
        s.push('A');
    } else {
        for (bit, c) in [
            (GENERIC, 'g'),
            (STRING, '$'),
            (LIST, 'l'),
            (SET, 's'),
            (HASH, 'h'),
            (ZSET, 'z'),
            (EXPIRED, 'x'),
            (EVICTED, 'e'),
            (STREAM, 't'),
            (MODULE, 'd'),
        ] {
            if flags & bit != 0 {
                s.push(c);
            }
        }
    }
    for (bit, c) in [(KEYSPACE, 'K'), (KEYEVENT, 'E'), (KEY_MISS, 'm'), (NEW, 'n')] {
        if flags & bit != 0 {
            s.push(c);
        }
    }
    s
}

/// Sends one event for `key` in `db`, if its class is enabled (`current`:
/// the client running the command, which may be subscribed itself).
pub fn send_from(st: &mut State, mut current: Option<&mut Client>, class: u32, event: &str, db: u8, key: &[u8]) {
    let flags = st.notify_flags;
    if flags & class == 0 {
        return;
    }
    if flags & KEYSPACE != 0 {
        let mut channel = format!("__keyspace@{db}__:").into_bytes();
        channel.extend_from_slice(key);
        crate::cmd::pubsub::publish_message(st, current.as_deref_mut(), &channel, event.as_bytes());
    }
    if flags & KEYEVENT != 0 {
        let channel = format!("__keyevent@{db}__:{event}").into_bytes();
        crate::cmd::pubsub::publish_message(st, current, &channel, key);
    }
}

fn send(cx: &mut Ctx, class: u32, event: &str, db: u8, key: &[u8]) {
    send_from(cx.st, Some(&mut *cx.client), class, event, db, key);
}

/// Records that the running command touched `key` (called by the write
/// paths only while notifications are on).
pub fn note(st: &mut State, db: u8, key: &[u8], created: bool, removed: bool) {
    match st.notes.iter_mut().find(|n| n.db == db && n.key == key) {
        Some(n) => {
            n.created |= created;
            n.removed |= removed;
        }
        None => st.notes.push(Note { db, key: key.to_vec(), created, removed }),
    }
}

/// Sends the events of the command `args` just ran, for the keys it touched.
pub fn after_command(cx: &mut Ctx, args: &[Vec<u8>]) {
    let notes = std::mem::take(&mut cx.st.notes);
    if cx.st.torn {
        return; // nothing of the command is applied
    }
    let name = String::from_utf8_lossy(&args[0]).to_ascii_lowercase();
    for note in notes {
        let evs = events(&name, args, &note, cx.client.db);
        if evs.is_empty() {
            continue;
        }
        if note.created {
            send(cx, NEW, "new", note.db, &note.key);
        }
        let mut deleted = false;
        for (class, event) in &evs {
            send(cx, *class, event, note.db, &note.key);
            deleted |= matches!(*event, "del" | "rename_from" | "move_from");
        }
        if note.removed && !deleted {
            send(cx, GENERIC, "del", note.db, &note.key);
        }
    }
}

fn has(args: &[Vec<u8>], word: &str) -> bool {
    args.iter().skip(1).any(|a| a.eq_ignore_ascii_case(word.as_bytes()))
}

/// The events Redis 7.0 sends for command `name` on the touched key `note`.
fn events(name: &str, args: &[Vec<u8>], note: &Note, client_db: u8) -> Vec<(u32, &'static str)> {
    let key_is = |i: usize| args.get(i).is_some_and(|k| k.as_slice() == note.key.as_slice());
    let one = |class, event| vec![(class, event)];
    // Commands that store a result at a destination delete it when the
    // result is empty: that is a plain `del`.
    let stored = |event| if note.removed { vec![(GENERIC, "del")] } else { vec![(class_of(event), event)] };
    match name {
        "set" => {
            let mut v = vec![(STRING, "set")];
            if ["ex", "px", "exat", "pxat"].iter().any(|w| has(args, w)) {
                v.push((GENERIC, "expire"));
            }
            v
        }
        "setnx" | "getset" | "mset" | "msetnx" => one(STRING, "set"),
        "setex" | "psetex" => vec![(STRING, "set"), (GENERIC, "expire")],
        "getex" if has(args, "persist") => one(GENERIC, "persist"),
        "getex" => one(GENERIC, "expire"),
        "getdel" | "del" | "unlink" => one(GENERIC, "del"),
        "incr" | "decr" | "incrby" | "decrby" => one(STRING, "incrby"),
        "incrbyfloat" => one(STRING, "incrbyfloat"),
        "append" => one(STRING, "append"),
        "setrange" => one(STRING, "setrange"),
        "setbit" | "bitfield" => one(STRING, "setbit"),
        "bitop" => stored("set"),
        "expire" | "pexpire" | "expireat" | "pexpireat" if note.removed => one(GENERIC, "del"),
        "expire" | "pexpire" | "expireat" | "pexpireat" => one(GENERIC, "expire"),
        "persist" => one(GENERIC, "persist"),
        "rename" | "renamenx" if key_is(1) && !note.removed => vec![(GENERIC, "rename_from"), (GENERIC, "rename_to")],
        "rename" | "renamenx" if key_is(1) => one(GENERIC, "rename_from"),
        "rename" | "renamenx" => one(GENERIC, "rename_to"),
        "move" if note.db == client_db => one(GENERIC, "move_from"),
        "move" => one(GENERIC, "move_to"),
        "copy" => one(GENERIC, "copy_to"),
        "restore" if note.removed => one(GENERIC, "del"),
        "restore" => one(GENERIC, "restore"),
        "sort" => stored("sortstore"),
        "lpush" | "lpushx" => one(LIST, "lpush"),
        "rpush" | "rpushx" => one(LIST, "rpush"),
        "lpop" | "blpop" => one(LIST, "lpop"),
        "rpop" | "brpop" => one(LIST, "rpop"),
        "linsert" => one(LIST, "linsert"),
        "lset" => one(LIST, "lset"),
        "lrem" => one(LIST, "lrem"),
        "ltrim" => one(LIST, "ltrim"),
        "lmpop" | "blmpop" if has(args, "right") => one(LIST, "rpop"),
        "lmpop" | "blmpop" => one(LIST, "lpop"),
        "rpoplpush" | "brpoplpush" | "lmove" | "blmove" => {
            let (from, to) = match name {
                "rpoplpush" | "brpoplpush" => ("rpop", "lpush"),
                _ => {
                    let side = |i: usize, l: &'static str, r: &'static str| {
                        if args.get(i).is_some_and(|a| a.eq_ignore_ascii_case(b"left")) {
                            l
                        } else {
                            r
                        }
                    };
                    (side(3, "lpop", "rpop"), side(4, "lpush", "rpush"))
                }
            };
            match (key_is(1), key_is(2)) {
                (true, true) => vec![(LIST, from), (LIST, to)],
                (true, false) => one(LIST, from),
                _ => one(LIST, to),
            }
        }
        "hset" | "hmset" | "hsetnx" => one(HASH, "hset"),
        "hdel" => one(HASH, "hdel"),
        "hincrby" => one(HASH, "hincrby"),
        "hincrbyfloat" => one(HASH, "hincrbyfloat"),
        "sadd" => one(SET, "sadd"),
        "srem" => one(SET, "srem"),
        "spop" => one(SET, "spop"),
        "smove" if key_is(1) => one(SET, "srem"),
        "smove" => one(SET, "sadd"),
        "sinterstore" => stored("sinterstore"),
        "sunionstore" => stored("sunionstore"),
        "sdiffstore" => stored("sdiffstore"),
        "zadd" if has(args, "incr") => one(ZSET, "zincr"),
        "zadd" => one(ZSET, "zadd"),
        "zincrby" => one(ZSET, "zincr"),
        "zrem" => one(ZSET, "zrem"),
        "zremrangebyscore" => one(ZSET, "zremrangebyscore"),
        "zremrangebyrank" => one(ZSET, "zremrangebyrank"),
        "zremrangebylex" => one(ZSET, "zremrangebylex"),
        "zpopmin" | "bzpopmin" => one(ZSET, "zpopmin"),
        "zpopmax" | "bzpopmax" => one(ZSET, "zpopmax"),
        "zmpop" | "bzmpop" if has(args, "max") => one(ZSET, "zpopmax"),
        "zmpop" | "bzmpop" => one(ZSET, "zpopmin"),
        "zunionstore" => stored("zunionstore"),
        "zinterstore" => stored("zinterstore"),
        "zdiffstore" => stored("zdiffstore"),
        "zrangestore" => stored("zrangestore"),
        "xadd" => one(STREAM, "xadd"),
        "xdel" => one(STREAM, "xdel"),
        "xtrim" => one(STREAM, "xtrim"),
        "xsetid" => one(STREAM, "xsetid"),
        // XGROUP's and consumers' events are sent where they happen
        // (`cmd::stream_groups::stream_event`).
        _ => Vec::new(),
    }
}

fn class_of(event: &str) -> u32 {
    if event.starts_with('z') {
        ZSET
    } else if event.starts_with('s') && event != "set" && event != "sortstore" {
        SET
    } else if event == "set" {
        STRING
    } else {
        GENERIC
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flags_round_trip_in_redis_order() {
        assert_eq!(parse_flags("KEA").map(format_flags).as_deref(), Some("AKE"));
        assert_eq!(parse_flags("Elg$").map(format_flags).as_deref(), Some("g$lE"));
        assert_eq!(parse_flags("").map(format_flags).as_deref(), Some(""));
        assert_eq!(parse_flags("Kxn").map(format_flags).as_deref(), Some("xKn"));
        assert!(parse_flags("Kq").is_none());
    }
}
