//! Every command in the command table, called with random arguments of
//! every shape a client might send (missing, extra, wrong types, huge or
//! negative numbers, option words in odd places), on keys of every type.
//!
//! A command that panics is caught by the dispatcher and answered with an
//! "internal error" reply (the server survives), so that reply is what this
//! sweep looks for: every one is a bug. After the sweep the store must
//! still pass its full check. This found READONLY indexing a subcommand it
//! does not have.

use std::sync::Arc;

use tembo_server::resp::Reply;
use tembo_server::Session;
use tembo_store::{Db, Engine, Options};

/// Commands a session cannot sweep: they end the process or the session,
/// sleep, or hold the session (CLIENT PAUSE sleeps it out).
const LEFT_OUT: &[&str] = &["shutdown", "debug", "monitor", "quit", "client|pause", "failover", "sync", "psync"];

const WORDS: &[&str] = &[
    "0",
    "-1",
    "1",
    "2",
    "7",
    "x",
    "1.5",
    "-0.5",
    "inf",
    "-inf",
    "+inf",
    "nan",
    "99999999999999999999",
    "9223372036854775807",
    "-9223372036854775808",
    "",
    "(1",
    "[a",
    "(a",
    "+",
    "-",
    "*",
    "$",
    "0-0",
    "1-1",
    "NX",
    "XX",
    "GT",
    "LT",
    "CH",
    "INCR",
    "WITHSCORES",
    "LIMIT",
    "COUNT",
    "MATCH",
    "TYPE",
    "BYSCORE",
    "BYLEX",
    "REV",
    "GET",
    "EX",
    "PX",
    "EXAT",
    "PXAT",
    "KEEPTTL",
    "PERSIST",
    "LEFT",
    "RIGHT",
    "BEFORE",
    "AFTER",
    "STORE",
    "ALPHA",
    "ASC",
    "DESC",
    "BY",
    "WEIGHTS",
    "AGGREGATE",
    "SUM",
    "MIN",
    "MAX",
    "IDLE",
    "RETRYCOUNT",
    "JUSTID",
    "FORCE",
    "LASTID",
    "MAXLEN",
    "MINID",
    "NOMKSTREAM",
    "~",
    "=",
    "RANK",
    "WITHVALUES",
    "STREAMS",
    "GROUP",
    "MKSTREAM",
    "IDX",
    "LEN",
    "WITHMATCHLEN",
    "MINMATCHLEN",
    "FIELDS",
    "ID",
    "ON",
    "OFF",
    "YES",
    "NO",
    "BCAST",
    "PREFIX",
    "REDIRECT",
    "SETNAME",
    "return 1",
    "return redis.call('get', KEYS[1])",
    "#!lua name=l\nredis.register_function('f', function() return 1 end)",
    "u8",
    "i64",
    "#1",
    "OVERFLOW",
    "WRAP",
    "SAT",
    "FAIL",
    "INCRBY",
    "SET",
    "m",
    "km",
    "WITHCOORD",
    "WITHDIST",
    "WITHHASH",
    "FROMMEMBER",
    "FROMLONLAT",
    "BYRADIUS",
    "BYBOX",
    "ANY",
    "REPLACE",
    "ABSTTL",
    "FREQ",
    "DB",
    "COPY",
    "SCHEDULE",
    "ASYNC",
    "SYNC",
    "RESETPASS",
    "nopass",
    ">pw",
    "+@all",
    "~*",
    "allkeys",
    "on",
    "default",
];

const KEYS: &[&str] = &["str", "num", "hash", "list", "set", "zset", "stream", "hll", "geo", "missing"];

/// A small deterministic generator (the sweep must be reproducible).
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn pick<'a>(&mut self, from: &[&'a str]) -> &'a str {
        from[(self.next() % from.len() as u64) as usize]
    }
}

fn seed_keys(s: &mut Session) {
    assert_eq!(s.call(&["RESET"]), Reply::Simple("RESET".into()));
    for line in [
        "DEL str num hash list set zset stream hll geo",
        "SET str hello",
        "SET num 10",
        "HSET hash f v g 2",
        "RPUSH list a b c 1",
        "SADD set a b 1",
        "ZADD zset 1 a 2 b 3 c",
        "XADD stream 1-1 f v",
        "XGROUP CREATE stream g 0",
        "PFADD hll a b",
        "GEOADD geo 13.36 38.11 a 15.08 37.5 b",
    ] {
        let r = s.call_line(line);
        assert!(!r.is_error(), "{line}: {r:?}");
    }
}

fn names(s: &mut Session) -> Vec<String> {
    let Reply::Array(list) = s.call(&["COMMAND", "LIST"]) else { panic!("COMMAND LIST is not an array") };
    let mut out: Vec<String> = list
        .into_iter()
        .map(|r| match r {
            Reply::Bulk(b) => String::from_utf8(b).unwrap(),
            Reply::Simple(t) => t,
            other => panic!("command name {other:?}"),
        })
        .collect();
    out.sort();
    out
}

/// Records an "internal error" reply (a caught panic), looking inside
/// arrays (EXEC's replies).
fn note_bugs(args: &[String], reply: &Reply, bugs: &mut Vec<String>) {
    match reply {
        Reply::Error(e) if e.contains("internal error") => bugs.push(format!("{args:?}: {e}")),
        Reply::Array(items) => items.iter().for_each(|r| note_bugs(args, r, bugs)),
        _ => {}
    }
}

fn sweep(engine: Engine, seed: u64, calls_per_arity: usize) {
    let db = Arc::new(Db::in_memory(&Options { engine, ..Options::with_size(64 << 20) }).unwrap());
    let mut s = Session::new(db.clone()).unwrap();
    let mut rng = Rng(seed);
    let mut bugs = Vec::new();
    let mut calls = 0;
    for name in names(&mut s) {
        if LEFT_OUT.iter().any(|l| name == *l || name.starts_with(&format!("{l}|"))) {
            continue;
        }
        // Back to a plain client (no MULTI, subscriptions, tracking, REPLY
        // OFF or selected database left over from the last command).
        seed_keys(&mut s);
        let base: Vec<String> = name.split('|').map(str::to_string).collect();
        for extra in 0..7 {
            for _ in 0..if extra == 0 { 1 } else { calls_per_arity } {
                let mut args = base.clone();
                for i in 0..extra {
                    let key_here = i == 0 || rng.next() % 5 == 0;
                    args.push(if key_here { rng.pick(KEYS) } else { rng.pick(WORDS) }.to_string());
                }
                calls += 1;
                let reply = s.call(&args);
                if std::env::var_os("SWEEP_TRACE").is_some() {
                    eprintln!("{args:?} -> {reply:?}");
                }
                let queued = reply == Reply::Simple("QUEUED".into());
                note_bugs(&args, &reply, &mut bugs);
                if queued && rng.next() % 4 == 0 {
                    // Run what MULTI queued: EXEC's replies are swept too.
                    note_bugs(&args, &s.call(&["EXEC"]), &mut bugs);
                }
                if calls % 50 == 0 {
                    s.background();
                }
            }
        }
    }
    assert!(calls > 1000, "only {calls} calls");
    assert!(bugs.is_empty(), "{} commands panicked:\n{}", bugs.len(), bugs.join("\n"));
    let report = db.check().unwrap();
    assert!(report.is_ok(), "store check after the sweep: {report:?}");
}

#[test]
fn no_command_panics_on_random_arguments_cdds() {
    // SWEEP_SEEDS=n sweeps n more seeds (a longer hunt than CI's).
    let more: u64 = std::env::var("SWEEP_SEEDS").ok().and_then(|v| v.parse().ok()).unwrap_or(0);
    for seed in [0x9E37_79B9_7F4A_7C15, 7, 12345].into_iter().chain((1..=more).map(|i| i * 0x2545_F491_4F6C_DD1D)) {
        sweep(Engine::Cdds, seed, 4);
    }
}

#[test]
fn no_command_panics_on_random_arguments_kamino() {
    sweep(Engine::Kamino, 99, 3);
}
