//! A key whose records are damaged (a flipped bit, a word set to an
//! extreme, a record cut short or lengthened) is bad input like any other:
//! every command on it must answer — a value, nil or an error reply — and
//! never panic (the server answers a panicking command with an "internal
//! error … Tembo bug" reply), loop for ever or allocate without bound.
//!
//! For each type (strings small and chunked, hashes, lists, sets, sorted
//! sets, streams with a consumer group), the key's metadata record, or
//! another of its records (an element, a score, a string chunk, a stream
//! node or group), is replaced, in the pool itself, by a damaged copy; a
//! fresh session (as a
//! restarted server would) then runs a battery of reads and writes on it
//! and on the whole keyspace. `TEMBO_SEED` picks the damage; CI fixes it.
//! Debug builds check arithmetic overflow, so a length or index that
//! overflows shows here as a panic too.

use std::sync::mpsc;
use std::sync::Arc;
use std::time::Duration;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use tembo_server::resp::Reply;
use tembo_server::Session;
use tembo_store::{Db, Options};

/// Damaged copies tried per type.
const DAMAGES: usize = 60;

/// How each type's key `k` is made.
fn setups() -> Vec<(&'static str, Vec<Vec<String>>)> {
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
fn battery() -> Vec<Vec<&'static str>> {
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

/// The one metadata record of a keyspace holding one key.
fn meta_record(db: &Db) -> (Vec<u8>, Vec<u8>) {
    let metas: Vec<_> = db.scan_prefix(&[tembo_server::encoding::META]).map(|kv| kv.expect("scan")).collect();
    assert_eq!(metas.len(), 1, "one key's metadata");
    metas.into_iter().next().expect("one")
}

/// A record of the keyspace other than its metadata (the metadata when
/// there is none).
fn other_record(db: &Db, rng: &mut StdRng) -> (Vec<u8>, Vec<u8>) {
    let others: Vec<_> = db
        .iter()
        .map(|kv| kv.expect("scan"))
        .filter(|(k, _)| {
            k.first() != Some(&tembo_server::encoding::META) && k.first() != Some(&tembo_server::encoding::GLOBAL)
        })
        .collect();
    if others.is_empty() {
        return meta_record(db);
    }
    others[rng.gen_range(0..others.len())].clone()
}

/// A damaged copy of `rec`.
fn damage(rec: &[u8], rng: &mut StdRng) -> Vec<u8> {
    let mut d = rec.to_vec();
    match rng.gen_range(0..5) {
        0 => {
            let bit = rng.gen_range(0..d.len() * 8);
            d[bit / 8] ^= 1 << (bit % 8);
        }
        1 => {
            for _ in 0..rng.gen_range(1..4) {
                let at = rng.gen_range(0..d.len());
                d[at] = rng.gen();
            }
        }
        2 => d.truncate(rng.gen_range(0..d.len())),
        3 => d.extend((0..rng.gen_range(1..24)).map(|_| rng.gen::<u8>())),
        _ => {
            // An 8-byte word at any offset set to an extreme.
            let extremes = [0u64, 1, u64::MAX, u64::MAX - 1, 1 << 63, 1 << 32, u32::MAX as u64];
            let w = extremes[rng.gen_range(0..extremes.len())].to_be_bytes();
            if d.len() >= 8 {
                let at = rng.gen_range(0..=d.len() - 8);
                d[at..at + 8].copy_from_slice(&w);
            }
        }
    }
    d
}

/// Runs the battery on a fresh session over `db`; returns the first reply
/// that reports a panic, if any.
fn run_battery(db: Arc<Db>) -> Option<String> {
    let mut s = match Session::new(db) {
        Ok(s) => s,
        // Refusing to open a keyspace it cannot read is a clear answer.
        Err(_) => return None,
    };
    for cmd in battery() {
        let reply = s.call(&cmd);
        if let Reply::Error(e) = &reply {
            if e.contains("Tembo bug") {
                return Some(format!("{cmd:?}: {e}"));
            }
        }
    }
    None
}

#[test]
fn damaged_metadata_gets_replies_not_panics() {
    let seed = std::env::var("TEMBO_SEED").ok().and_then(|s| s.parse().ok()).unwrap_or(0x6d65_7461u64);
    let mut rng = StdRng::seed_from_u64(seed);
    let mut failures = Vec::new();
    for (name, setup) in setups() {
        for i in 0..DAMAGES {
            let db = Arc::new(Db::in_memory(&Options::with_size(16 << 20)).expect("db"));
            {
                let mut s = Session::new(db.clone()).expect("session");
                for cmd in &setup {
                    let r = s.call(cmd);
                    assert!(!matches!(r, Reply::Error(_)), "{name} setup {cmd:?}: {r:?}");
                }
            }
            // The metadata record, or (every other time) another record
            // of the key: an element, a score, a stream entry or node.
            let (mk, rec) = if i % 2 == 0 { meta_record(&db) } else { other_record(&db, &mut rng) };
            let damaged = if rec.is_empty() { vec![rng.gen()] } else { damage(&rec, &mut rng) };
            db.put(&mk, &damaged).expect("put the damaged record");
            // A watchdog: a command that loops for ever fails the test.
            let (tx, rx) = mpsc::channel();
            let worker = db.clone();
            std::thread::spawn(move || {
                let _ = tx.send(run_battery(worker));
            });
            match rx.recv_timeout(Duration::from_secs(60)) {
                Ok(None) => {}
                Ok(Some(f)) => failures.push(format!("{name} #{i} (record {damaged:02x?}): {f}")),
                Err(_) => {
                    panic!("{name} #{i}: the battery did not finish in 60 s (record {damaged:02x?}, seed {seed})")
                }
            }
        }
    }
    assert!(
        failures.is_empty(),
        "seed {seed}: {} damaged records made commands panic:\n{}",
        failures.len(),
        failures.join("\n")
    );
}
