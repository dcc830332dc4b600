// The logic of the `damaged_record` fuzz target, shared with
// `crates/tembo-server/tests/damaged_records.rs` (both `include!` this file
// into a module of their own, so it holds items only and no inner
// attributes).
//
// The input damages one record of a keyspace holding one key of a type
// (strings small and chunked, hashes, lists, sets, sorted sets, GEO,
// HyperLogLog, streams with a consumer group, a function library beside a
// string): the first byte picks the type, the second the record (its
// metadata first, then its other records in key order), the rest is what
// the record holds instead. A fresh session (as a restarted server would)
// then runs a battery of reads and writes on the key and the keyspace:
// every command must answer — a value, nil or an error reply — and never
// panic (the server answers a panicking command with an "internal error …
// Tembo bug" reply).

use std::sync::Arc;

use tembo_server::resp::Reply;
use tembo_server::Session;
use tembo_store::{Db, Options};

/// How each type's key `k` is made.
pub fn setups() -> Vec<(&'static str, Vec<Vec<String>>)> {
    let s = |v: &[&str]| v.iter().map(|a| a.to_string()).collect::<Vec<_>>();
    vec![
        ("string", vec![s(&["SET", "k", "hello world"]), s(&["EXPIRE", "k", "1000"])]),
        ("chunked", vec![vec!["SET".into(), "k".into(), "x".repeat(300 * 1024)]]),
        ("hash", vec![s(&["HSET", "k", "f1", "v1", "f2", "v2", "f3", "3"])]),
        ("list", vec![s(&["RPUSH", "k", "a", "b", "c", "d", "e"])]),
        ("set", vec![s(&["SADD", "k", "1", "2", "x", "y"])]),
        ("intset", vec![s(&["SADD", "k", "1", "2", "3"])]),
        ("zset", vec![s(&["ZADD", "k", "1", "a", "2", "b", "3", "c"])]),
        ("geo", vec![s(&["GEOADD", "k", "13.36", "38.11", "a", "15.08", "37.50", "b"])]),
        ("hll", vec![s(&["PFADD", "k", "a", "b", "c", "d"])]),
        (
            // A collection deleted (its elements left to the reclaimer)
            // beside a string with an expiry.
            "garbage",
            vec![
                s(&["HSET", "gone", "a", "1", "b", "2", "c", "3"]),
                s(&["DEL", "gone"]),
                s(&["SET", "k", "v", "PX", "1"]),
            ],
        ),
        (
            "function",
            vec![
                s(&["FUNCTION", "LOAD", "#!lua name=lib\nredis.register_function('f', function(keys, args) return redis.call('GET', keys[1]) end)"]),
                s(&["SET", "k", "v"]),
            ],
        ),
        (
            "stream",
            vec![
                s(&["XADD", "k", "1-1", "f", "v"]),
                s(&["XADD", "k", "2-1", "g", "w"]),
                s(&["XGROUP", "CREATE", "k", "grp", "0"]),
                s(&["XREADGROUP", "GROUP", "grp", "c1", "COUNT", "1", "STREAMS", "k", ">"]),
            ],
        ),
    ]
}

/// Commands run on the damaged key, then on the keyspace.
pub fn battery() -> Vec<Vec<&'static str>> {
    vec![
        vec!["TYPE", "k"],
        vec!["EXISTS", "k"],
        vec!["PTTL", "k"],
        vec!["OBJECT", "ENCODING", "k"],
        vec!["OBJECT", "FREQ", "k"],
        vec!["MEMORY", "USAGE", "k"],
        vec!["DUMP", "k"],
        vec!["DEBUG", "OBJECT", "k"],
        vec!["GET", "k"],
        vec!["STRLEN", "k"],
        vec!["GETRANGE", "k", "0", "-1"],
        vec!["GETRANGE", "k", "-5", "-1"],
        vec!["GETBIT", "k", "100"],
        vec!["BITCOUNT", "k"],
        vec!["PFCOUNT", "k"],
        vec!["HGETALL", "k"],
        vec!["HLEN", "k"],
        vec!["HGET", "k", "f1"],
        vec!["HRANDFIELD", "k", "-5"],
        vec!["HSCAN", "k", "0"],
        vec!["LRANGE", "k", "0", "-1"],
        vec!["LRANGE", "k", "-3", "-1"],
        vec!["LLEN", "k"],
        vec!["LINDEX", "k", "0"],
        vec!["LINDEX", "k", "-1"],
        vec!["LPOS", "k", "c"],
        vec!["SORT", "k", "ALPHA"],
        vec!["SMEMBERS", "k"],
        vec!["SCARD", "k"],
        vec!["SISMEMBER", "k", "x"],
        vec!["SRANDMEMBER", "k", "-5"],
        vec!["SRANDMEMBER", "k", "3"],
        vec!["SINTERCARD", "1", "k"],
        vec!["ZRANGE", "k", "0", "-1", "WITHSCORES"],
        vec!["ZRANGE", "k", "-2", "-1"],
        vec!["ZCARD", "k"],
        vec!["ZSCORE", "k", "a"],
        vec!["ZRANK", "k", "b"],
        vec!["ZRANGEBYSCORE", "k", "-inf", "+inf"],
        vec!["ZRANDMEMBER", "k", "-5"],
        vec!["XRANGE", "k", "-", "+"],
        vec!["XREVRANGE", "k", "+", "-", "COUNT", "1"],
        vec!["XLEN", "k"],
        vec!["XINFO", "STREAM", "k", "FULL"],
        vec!["XINFO", "GROUPS", "k"],
        vec!["XPENDING", "k", "grp"],
        vec!["XREAD", "COUNT", "2", "STREAMS", "k", "0"],
        vec!["PFADD", "k", "zz"],
        vec!["PFMERGE", "k4", "k"],
        vec!["GEOPOS", "k", "a"],
        vec!["GEODIST", "k", "a", "b"],
        vec!["GEOSEARCH", "k", "FROMLONLAT", "15", "37", "BYRADIUS", "500", "km", "ASC"],
        vec!["BITFIELD", "k", "GET", "u8", "0"],
        vec!["BITPOS", "k", "1"],
        vec!["HKEYS", "k"],
        vec!["SINTER", "k", "k"],
        vec!["SUNIONSTORE", "k5", "k"],
        vec!["ZUNIONSTORE", "k6", "1", "k"],
        vec!["ZRANGESTORE", "k7", "k", "0", "-1"],
        vec!["OBJECT", "IDLETIME", "k"],
        vec!["FCALL", "f", "1", "k"],
        vec!["FUNCTION", "LIST", "WITHCODE"],
        vec!["FUNCTION", "DUMP"],
        vec!["SCAN", "0", "COUNT", "100"],
        vec!["KEYS", "*"],
        vec!["RANDOMKEY"],
        vec!["DBSIZE"],
        vec!["COPY", "k", "k2"],
        vec!["APPEND", "k", "more"],
        vec!["SETRANGE", "k", "3", "ab"],
        vec!["INCR", "k"],
        vec!["HSET", "k", "f9", "v9"],
        vec!["HDEL", "k", "f1"],
        vec!["HINCRBY", "k", "f3", "1"],
        vec!["RPUSH", "k", "z"],
        vec!["LPUSH", "k", "y"],
        vec!["LPOP", "k"],
        vec!["RPOP", "k", "2"],
        vec!["LSET", "k", "0", "q"],
        vec!["LTRIM", "k", "1", "-2"],
        vec!["LINSERT", "k", "BEFORE", "c", "q"],
        vec!["LREM", "k", "0", "c"],
        vec!["LMOVE", "k", "k8", "LEFT", "RIGHT"],
        vec!["SMOVE", "k", "k9", "2"],
        vec!["SETBIT", "k", "7", "1"],
        vec!["SADD", "k", "q"],
        vec!["SREM", "k", "1"],
        vec!["SPOP", "k", "2"],
        vec!["ZADD", "k", "9", "q"],
        vec!["ZINCRBY", "k", "1", "a"],
        vec!["ZREM", "k", "b"],
        vec!["ZPOPMIN", "k", "2"],
        vec!["ZREMRANGEBYRANK", "k", "0", "0"],
        vec!["XADD", "k", "*", "f", "v"],
        vec!["XTRIM", "k", "MAXLEN", "1"],
        vec!["XDEL", "k", "1-1"],
        vec!["XACK", "k", "grp", "1-1"],
        vec!["XAUTOCLAIM", "k", "grp", "c2", "0", "0"],
        vec!["EXPIRE", "k", "100"],
        vec!["PERSIST", "k"],
        vec!["RENAME", "k", "k3"],
        vec!["DEL", "k3"],
        vec!["DEL", "k", "k2"],
        vec!["SET", "k", "fresh"],
        vec!["GET", "k"],
        vec!["FLUSHALL"],
        vec!["DBSIZE"],
    ]
}

/// A database holding setup `i`'s key.
pub fn prepared(i: usize) -> Arc<Db> {
    let setups = setups();
    let (name, cmds) = &setups[i % setups.len()];
    let db = Arc::new(Db::in_memory(&Options::with_size(16 << 20)).expect("db"));
    let mut s = Session::new(db.clone()).expect("session");
    for cmd in cmds {
        let r = s.call(cmd);
        assert!(!matches!(r, Reply::Error(_)), "{name} setup {cmd:?}: {r:?}");
    }
    db
}

/// The keyspace's records: the metadata first, then the others (elements,
/// scores, chunks, stream nodes and groups, expiry entries, libraries) in
/// key order; the layout record is left out.
pub fn records(db: &Db) -> Vec<(Vec<u8>, Vec<u8>)> {
    let all: Vec<_> = db.iter().map(|kv| kv.expect("scan")).collect();
    let is_meta = |k: &Vec<u8>| k.first() == Some(&tembo_server::encoding::META);
    let mut out: Vec<_> = all.iter().filter(|(k, _)| is_meta(k)).cloned().collect();
    out.extend(
        all.iter().filter(|(k, _)| !is_meta(k) && k.first() != Some(&tembo_server::encoding::GLOBAL)).cloned(),
    );
    out
}

/// Runs the battery on a fresh session over `db`; returns the first reply
/// that reports a panic, if any.
pub fn run_battery(db: Arc<Db>) -> Option<String> {
    let mut s = match Session::new(db) {
        Ok(s) => s,
        // Refusing to open a keyspace it cannot read is a clear answer.
        Err(_) => return None,
    };
    // The background work (the expire cycle, the reclaimer of deleted
    // collections) meets the damage too: first, half way and at the end.
    s.background();
    for (i, cmd) in battery().into_iter().enumerate() {
        let reply = s.call(&cmd);
        if let Reply::Error(e) = &reply {
            if e.contains("Tembo bug") {
                return Some(format!("{cmd:?}: {e}"));
            }
        }
        if i == 40 {
            s.background();
        }
    }
    s.background();
    None
}

/// The fuzz input's damage applied and the battery run: the failure, if any.
pub fn damaged_record(data: &[u8]) -> Option<String> {
    let [setup, which, record @ ..] = data else { return None };
    let db = prepared(*setup as usize);
    let recs = records(&db);
    let (key, _) = &recs[*which as usize % recs.len()];
    db.put(key, record).expect("put the damaged record");
    run_battery(db)
}
