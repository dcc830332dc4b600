// The logic of the `commands` fuzz target, shared with
// `crates/tembo-server/tests/command_sweep.rs` (both `include!` this file
// into a module of their own, so it holds items only and no inner
// attributes).
//
// The input is a sequence of commands: each names a command of the table
// (two bytes), then its arguments, each either a word of `WORDS` or `KEYS`
// (option words, numbers at the edges, ranges, scripts, ACL rules…) or raw
// bytes from the input. They run on a session whose keys hold every type.
// No command may panic: the dispatcher catches a panic and answers with an
// "internal error" reply, which is the failure this looks for (a stack
// overflow would abort the process, and the fuzzer reports it).

use tembo_server::resp::Reply;
use tembo_server::Session;

/// Commands a session cannot sweep: they end the process or the session,
/// sleep, or hold the session (CLIENT PAUSE sleeps it out).
pub const LEFT_OUT: &[&str] = &["shutdown", "debug", "monitor", "quit", "client|pause", "failover", "sync", "psync"];

pub const WORDS: &[&str] = &[
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

pub const KEYS: &[&str] = &["str", "num", "hash", "list", "set", "zset", "stream", "hll", "geo", "missing"];

/// Puts a value of every type under `KEYS` (and leaves the client plain:
/// no MULTI, subscriptions, tracking or selected database left over);
/// says which command failed, if one did.
pub fn seed_keys(s: &mut Session) -> Result<(), String> {
    let reset = s.call(&["RESET"]);
    if reset != Reply::Simple("RESET".into()) {
        return Err(format!("RESET: {reset:?}"));
    }
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
        if r.is_error() {
            return Err(format!("{line}: {r:?}"));
        }
    }
    Ok(())
}

/// Records an "internal error" reply (a caught panic), looking inside
/// arrays (EXEC's replies).
pub fn note_bugs(args: &[String], reply: &Reply, bugs: &mut Vec<String>) {
    match reply {
        Reply::Error(e) if e.contains("internal error") => bugs.push(format!("{args:?}: {e}")),
        Reply::Array(items) => items.iter().for_each(|r| note_bugs(args, r, bugs)),
        _ => {}
    }
}

/// The command table's names (`config|get` for subcommands), sorted.
pub fn names(s: &mut Session) -> Vec<String> {
    let Reply::Array(list) = s.call(&["COMMAND", "LIST"]) else { panic!("COMMAND LIST is not an array") };
    let mut out: Vec<String> = list
        .into_iter()
        .map(|r| match r {
            Reply::Bulk(b) => String::from_utf8(b).unwrap(),
            Reply::Simple(t) => t,
            other => panic!("command name {other:?}"),
        })
        .collect();
    out.retain(|n| !LEFT_OUT.iter().any(|l| n == l || n.starts_with(&format!("{l}|"))));
    out.sort();
    out
}

/// Runs the commands `data` spells (see the file's head) on a new session
/// of `db` (default settings: what an input changed in CONFIG or ACL stays
/// with its session), from an emptied database with freshly seeded keys;
/// returns the calls that panicked.
pub fn run_input(db: &std::sync::Arc<tembo_store::Db>, names: &[String], data: &[u8]) -> Vec<String> {
    let mut s = Session::new(db.clone()).expect("a session");
    if s.call(&["FLUSHALL"]).is_error() || seed_keys(&mut s).is_err() {
        // Only a full pool refuses these; the background work frees it.
        s.background();
        return Vec::new();
    }
    let mut bugs = Vec::new();
    let mut input = data.iter().copied();
    let mut byte = move || input.next();
    for _ in 0..16 {
        let (Some(hi), Some(lo), Some(argc)) = (byte(), byte(), byte()) else { break };
        let name = &names[usize::from(u16::from_be_bytes([hi, lo])) % names.len()];
        let mut args: Vec<Vec<u8>> = name.split('|').map(|p| p.as_bytes().to_vec()).collect();
        for i in 0..argc % 9 {
            let Some(b) = byte() else { break };
            let arg = match b {
                // The first argument is most often a key.
                0..=95 if i == 0 => KEYS[usize::from(b) % KEYS.len()].as_bytes().to_vec(),
                0..=199 => WORDS[usize::from(b) % WORDS.len()].as_bytes().to_vec(),
                200..=219 => KEYS[usize::from(b) % KEYS.len()].as_bytes().to_vec(),
                _ => {
                    let len = usize::from(byte().unwrap_or(0) % 48);
                    (0..len).filter_map(|_| byte()).collect()
                }
            };
            args.push(arg);
        }
        let reply = s.call(&args);
        let shown: Vec<String> = args.iter().map(|a| String::from_utf8_lossy(a).into_owned()).collect();
        note_bugs(&shown, &reply, &mut bugs);
        // Sometimes run what MULTI queued: EXEC's replies are checked too.
        if reply == Reply::Simple("QUEUED".into()) && args.len() % 3 == 0 {
            note_bugs(&shown, &s.call(&["EXEC"]), &mut bugs);
        }
    }
    s.background();
    bugs
}
