//! `maxmemory` and `maxmemory-policy`: what is refused over the limit under
//! `noeviction` (as Redis 7.0 refuses it), and which keys each eviction
//! policy deletes. The limits are set relative to the pool's use as INFO
//! reports it, so the tests do not depend on the engine's exact sizes.

use std::sync::Arc;

use tembo_server::resp::Reply;
use tembo_server::{Config, Session};
use tembo_store::{Db, Options};

const OOM: &str = "OOM command not allowed when used memory > 'maxmemory'.";

fn session() -> Session {
    Session::new(Arc::new(Db::in_memory(&Options::with_size(32 << 20)).unwrap())).unwrap()
}

fn ok() -> Reply {
    Reply::Simple("OK".into())
}

fn oom() -> Reply {
    Reply::Error(OOM.into())
}

fn bulk(s: &str) -> Reply {
    Reply::Bulk(s.as_bytes().to_vec())
}

/// A field of INFO `section`.
fn info(s: &mut Session, section: &str, field: &str) -> String {
    let Reply::Verbatim(text) = s.call(&["INFO", section]) else { panic!("INFO is a verbatim string") };
    let prefix = format!("{field}:");
    text.lines().find_map(|l| l.strip_prefix(&prefix)).unwrap_or_else(|| panic!("no {field} in INFO")).to_string()
}

fn used(s: &mut Session) -> u64 {
    info(s, "memory", "used_memory").parse().unwrap()
}

fn evicted(s: &mut Session) -> u64 {
    info(s, "stats", "evicted_keys").parse().unwrap()
}

/// The keys of the selected database, read in one command (each command
/// may evict, so counting with one EXISTS per key would move the target).
fn keys(s: &mut Session) -> Vec<String> {
    let Reply::Array(keys) = s.call(&["KEYS", "*"]) else { panic!("KEYS is an array") };
    keys.into_iter()
        .map(|k| match k {
            Reply::Bulk(b) => String::from_utf8(b).unwrap(),
            other => panic!("{other:?}"),
        })
        .collect()
}

/// How many of `prefix:0` .. `prefix:{n-1}` are not in `left`.
fn gone(left: &[String], prefix: &str, n: usize) -> usize {
    (0..n).filter(|i| !left.contains(&format!("{prefix}:{i}"))).count()
}

/// RESTORE `key` from `payload` with `option` (IDLETIME or FREQ) `value`.
fn restore(s: &mut Session, key: &str, payload: &[u8], option: &str, value: &str) {
    let args = [b"RESTORE", key.as_bytes(), b"0", payload, option.as_bytes(), value.as_bytes()];
    assert_eq!(s.call(&args), ok());
}

fn exists(s: &mut Session, key: &str) -> bool {
    s.call(&["EXISTS", key]) == Reply::Int(1)
}

/// Sets a limit `bytes` below the pool's use now, with eviction steps
/// unbounded in time (tenacity 100) so that one command evicts all it must.
fn squeeze(s: &mut Session, bytes: u64) {
    assert_eq!(s.call(&["CONFIG", "SET", "maxmemory-eviction-tenacity", "100"]), ok());
    let limit = used(s).saturating_sub(bytes).max(1);
    assert_eq!(s.call(&["CONFIG", "SET", "maxmemory", &limit.to_string()]), ok());
}

#[test]
fn noeviction_refuses_what_could_add_data_and_serves_the_rest() {
    let mut s = session();
    assert_eq!(s.call(&["SET", "x", "123"]), ok());
    assert_eq!(s.call(&["SET", "gone", "1"]), ok());
    assert_eq!(s.call(&["CONFIG", "SET", "maxmemory", "1"]), ok());
    // denyoom commands are refused; reads, deletes and admin commands run.
    assert_eq!(s.call(&["SET", "y", "1"]), oom());
    assert_eq!(s.call(&["INCR", "x"]), oom());
    assert_eq!(s.call(&["LPUSH", "l", "a"]), oom());
    assert_eq!(s.call(&["GET", "x"]), bulk("123"));
    assert_eq!(s.call(&["DEL", "gone"]), Reply::Int(1));
    assert_eq!(s.call(&["EXPIRE", "x", "100"]), Reply::Int(1));
    assert_eq!(s.call(&["PING"]), Reply::Simple("PONG".into()));
    // Nothing is evicted under noeviction.
    assert!(exists(&mut s, "x"));
    assert_eq!(evicted(&mut s), 0);
    assert_eq!(info(&mut s, "memory", "maxmemory"), "1");
    assert_eq!(info(&mut s, "memory", "maxmemory_policy"), "noeviction");
    // Any command queued in MULTI is refused over the limit, and EXEC then
    // aborts; DISCARD still works.
    assert_eq!(s.call(&["MULTI"]), ok());
    assert_eq!(s.call(&["GET", "x"]), oom());
    assert_eq!(s.call(&["EXEC"]), Reply::Error("EXECABORT Transaction discarded because of previous errors.".into()));
    assert_eq!(s.call(&["MULTI"]), ok());
    assert_eq!(s.call(&["SET", "y", "1"]), oom());
    assert_eq!(s.call(&["DISCARD"]), ok());
    // Under the limit again, everything runs.
    assert_eq!(s.call(&["CONFIG", "SET", "maxmemory", "0"]), ok());
    assert_eq!(s.call(&["SET", "y", "1"]), ok());
}

#[test]
fn exec_is_refused_only_for_a_transaction_that_could_add_data() {
    let mut s = session();
    assert_eq!(s.call(&["SET", "x", "value"]), ok());
    // Queued under the limit, executed over it.
    assert_eq!(s.call(&["MULTI"]), ok());
    assert_eq!(s.call(&["GET", "x"]), Reply::Simple("QUEUED".into()));
    assert_eq!(s.call(&["PING"]), Reply::Simple("QUEUED".into()));
    assert_eq!(s.call(&["CONFIG", "SET", "maxmemory", "1"]), Reply::Simple("QUEUED".into()));
    // CONFIG SET inside the transaction sets the limit as EXEC runs.
    assert_eq!(s.call(&["EXEC"]), Reply::Array(vec![bulk("value"), Reply::Simple("PONG".into()), ok()]));
    assert_eq!(s.call(&["CONFIG", "SET", "maxmemory", "0"]), ok());
    assert_eq!(s.call(&["MULTI"]), ok());
    assert_eq!(s.call(&["SET", "x", "new"]), Reply::Simple("QUEUED".into()));
    assert_eq!(s.call(&["CONFIG", "SET", "maxmemory", "1"]), Reply::Simple("QUEUED".into()));
    assert_eq!(s.call(&["EXEC"]), Reply::Array(vec![ok(), ok()]));
    assert_eq!(s.call(&["MULTI"]), ok());
    // Over the limit now: queueing anything is refused.
    assert_eq!(s.call(&["SET", "x", "newer"]), oom());
    assert_eq!(s.call(&["DISCARD"]), ok());
    assert_eq!(s.call(&["GET", "x"]), bulk("new"));
}

#[test]
fn scripts_and_functions_follow_their_declared_flags_over_the_limit() {
    let mut s = session();
    assert_eq!(s.call(&["SET", "x", "123"]), ok());
    let lib = "#!lua name=lib\n\
        redis.register_function('plain', function() return redis.call('set', 'x', '1') end)\n\
        redis.register_function{function_name='oomok', callback=function() return redis.call('set', 'x', '2') end, flags={'allow-oom'}}\n\
        redis.register_function{function_name='reader', callback=function() return redis.call('get', 'x') end, flags={'no-writes'}}";
    assert_eq!(s.call(&["FUNCTION", "LOAD", lib]), bulk("lib"));
    assert_eq!(s.call(&["CONFIG", "SET", "maxmemory", "1"]), ok());
    // Without a shebang, a script runs and is stopped at its first write.
    let Reply::Error(e) = s.call(&["EVAL", "return redis.call('set', 'x', 1)", "0"]) else { panic!("refused") };
    assert!(e.starts_with(OOM), "{e}");
    assert_eq!(s.call(&["EVAL", "return redis.call('get', 'x')", "0"]), bulk("123"));
    // pcall gives the refusal back as an error table, without the dash.
    let pcall = "local t = redis.pcall('set', 'x', 'y') return t['err']";
    assert_eq!(s.call(&["EVAL", pcall, "0"]), bulk(OOM));
    // With a shebang, flags decide before the script runs.
    assert_eq!(s.call(&["EVAL", "#!lua flags=\nreturn 1", "0"]), oom());
    assert_eq!(s.call(&["EVAL", "#!lua flags=allow-oom\nreturn redis.call('set', 'x', 5)", "0"]), ok());
    assert_eq!(s.call(&["EVAL", "#!lua flags=no-writes\nreturn redis.call('get', 'x')", "0"]), bulk("5"));
    assert_eq!(s.call(&["EVAL_RO", "#!lua flags=no-writes\nreturn redis.call('get', 'x')", "0"]), bulk("5"));
    // EVALSHA reads the cached script's flags.
    let Reply::Bulk(sha) = s.call(&["SCRIPT", "LOAD", "#!lua\nreturn 1"]) else { panic!("a sha") };
    assert_eq!(s.call(&[b"EVALSHA".to_vec(), sha, b"0".to_vec()]), oom());
    // Functions: by their registered flags.
    assert_eq!(s.call(&["FCALL", "plain", "0"]), oom());
    assert_eq!(s.call(&["FCALL", "oomok", "0"]), ok());
    assert_eq!(s.call(&["FCALL", "reader", "0"]), bulk("2"));
    assert_eq!(s.call(&["FCALL_RO", "reader", "0"]), bulk("2"));
    // Loading and restoring libraries may add data: refused.
    assert_eq!(s.call(&["FUNCTION", "LOAD", "REPLACE", lib]), oom());
    assert_eq!(s.call(&["CONFIG", "SET", "maxmemory", "0"]), ok());
    assert_eq!(s.call(&["FCALL", "plain", "0"]), ok());
}

#[test]
fn config_checks_the_settings_and_reports_them() {
    let mut s = session();
    assert_eq!(s.call(&["CONFIG", "SET", "maxmemory", "10mb"]), ok());
    assert_eq!(s.call(&["CONFIG", "GET", "maxmemory"]), Reply::Map(vec![(bulk("maxmemory"), bulk("10485760"))]));
    let Reply::Error(e) = s.call(&["CONFIG", "SET", "maxmemory-policy", "lru"]) else { panic!("refused") };
    assert!(e.contains("allkeys-lru") && e.contains("volatile-ttl"), "{e}");
    assert_eq!(s.call(&["CONFIG", "SET", "maxmemory-policy", "ALLKEYS-LFU"]), ok());
    assert_eq!(
        s.call(&["CONFIG", "GET", "maxmemory-policy"]),
        Reply::Map(vec![(bulk("maxmemory-policy"), bulk("allkeys-lfu"))])
    );
    assert!(matches!(s.call(&["CONFIG", "SET", "maxmemory-samples", "0"]), Reply::Error(_)));
    assert!(matches!(s.call(&["CONFIG", "SET", "maxmemory-eviction-tenacity", "101"]), Reply::Error(_)));
    assert!(matches!(s.call(&["CONFIG", "SET", "maxmemory", "-1"]), Reply::Error(_)));
    // A failed setting in a multi-setting CONFIG SET undoes the others.
    assert!(matches!(s.call(&["CONFIG", "SET", "maxmemory", "1", "maxmemory-policy", "nope"]), Reply::Error(_)));
    assert_eq!(s.call(&["CONFIG", "GET", "maxmemory"]), Reply::Map(vec![(bulk("maxmemory"), bulk("10485760"))]));
    assert_eq!(info(&mut s, "memory", "maxmemory_policy"), "allkeys-lfu");
    // From the config file.
    let cfg = Config { maxmemory: 1, maxmemory_policy: "volatile-ttl".into(), ..Config::default() };
    cfg.validate().unwrap();
    let db = Arc::new(Db::in_memory(&Options::with_size(16 << 20)).unwrap());
    let mut t = Session::with_config(db, cfg).unwrap();
    assert_eq!(info(&mut t, "memory", "maxmemory_policy"), "volatile-ttl");
    // Nothing has a TTL: nothing to evict, so writes are refused.
    assert_eq!(t.call(&["SET", "a", "1"]), oom());
    let bad = Config { maxmemory_policy: "sometimes".into(), ..Config::default() };
    assert!(bad.validate().is_err());
}

#[test]
fn allkeys_lru_evicts_the_longest_unused_keys() {
    let mut s = session();
    assert_eq!(s.call(&["CONFIG", "SET", "maxmemory-policy", "allkeys-lru"]), ok());
    assert_eq!(s.call(&["SET", "probe", "v"]), ok());
    let Reply::Bulk(payload) = s.call(&["DUMP", "probe"]) else { panic!("a payload") };
    assert_eq!(s.call(&["DEL", "probe"]), Reply::Int(1));
    // 200 keys unused for an hour, 100 used now.
    for i in 0..200 {
        for (prefix, idle) in [("old", "3600"), ("hot", "0")] {
            if prefix == "hot" && i >= 100 {
                continue;
            }
            restore(&mut s, &format!("{prefix}:{i}"), &payload, "IDLETIME", idle);
        }
    }
    let Reply::Int(per_key) = s.call(&["MEMORY", "USAGE", "old:0"]) else { panic!("a size") };
    squeeze(&mut s, 100 * per_key as u64);
    let left = keys(&mut s);
    let (gone_old, gone_hot) = (gone(&left, "old", 200), gone(&left, "hot", 100));
    // About 100 keys had to go (more where the deletions' own garbage,
    // not yet collected, counts); sampling with a pool of candidates picks
    // the idle ones (a used key goes only when no idle one was sampled).
    assert!((80..=200).contains(&(gone_old + gone_hot)), "{gone_old} + {gone_hot}");
    assert!(gone_hot <= 5, "{gone_hot} used keys evicted, {gone_old} idle ones");
    assert!(evicted(&mut s) >= (gone_old + gone_hot) as u64);
    // The freed room takes new writes.
    assert_eq!(s.call(&["SET", "new", "v"]), ok());
}

#[test]
fn allkeys_lfu_evicts_the_least_used_keys_and_object_freq_reads_the_counter() {
    let mut s = session();
    assert_eq!(s.call(&["SET", "k", "v"]), ok());
    let lru_only = s.call(&["OBJECT", "FREQ", "k"]);
    assert!(matches!(&lru_only, Reply::Error(e) if e.contains("LFU maxmemory policy is not selected")));
    assert_eq!(s.call(&["CONFIG", "SET", "maxmemory-policy", "allkeys-lfu"]), ok());
    assert!(
        matches!(s.call(&["OBJECT", "IDLETIME", "k"]), Reply::Error(e) if e.contains("LFU maxmemory policy is selected"))
    );
    let Reply::Bulk(payload) = s.call(&["DUMP", "k"]) else { panic!("a payload") };
    for i in 0..200 {
        for (prefix, freq) in [("cold", "0"), ("warm", "200")] {
            if prefix == "warm" && i >= 100 {
                continue;
            }
            restore(&mut s, &format!("{prefix}:{i}"), &payload, "FREQ", freq);
        }
    }
    assert_eq!(s.call(&["OBJECT", "FREQ", "warm:7"]), Reply::Int(200));
    assert_eq!(s.call(&["OBJECT", "FREQ", "cold:7"]), Reply::Int(0));
    let Reply::Int(per_key) = s.call(&["MEMORY", "USAGE", "cold:0"]) else { panic!("a size") };
    squeeze(&mut s, 100 * per_key as u64);
    let left = keys(&mut s);
    let (gone_cold, gone_warm) = (gone(&left, "cold", 200), gone(&left, "warm", 100));
    assert!((80..=200).contains(&(gone_cold + gone_warm)), "{gone_cold} + {gone_warm}");
    assert!(gone_warm <= 5, "{gone_warm} often used keys evicted, {gone_cold} unused ones");
}

#[test]
fn volatile_ttl_evicts_the_soonest_to_expire_and_only_keys_with_a_ttl() {
    let mut s = session();
    assert_eq!(s.call(&["CONFIG", "SET", "maxmemory-policy", "volatile-ttl"]), ok());
    for i in 0..100 {
        let ttl = (1000 + i).to_string();
        assert_eq!(s.call(&["SET", &format!("ttl:{i}"), "some value", "EX", &ttl]), ok());
        assert_eq!(s.call(&["SET", &format!("plain:{i}"), "some value"]), ok());
    }
    let Reply::Int(per_key) = s.call(&["MEMORY", "USAGE", "ttl:0"]) else { panic!("a size") };
    squeeze(&mut s, 30 * per_key as u64);
    let left = keys(&mut s);
    let gone_ttl: Vec<usize> = (0..100).filter(|i| !left.contains(&format!("ttl:{i}"))).collect();
    // The nearest expiries, in order: the expiry index is exact.
    assert!(gone_ttl.len() >= 20, "{gone_ttl:?}");
    assert_eq!(gone_ttl, (0..gone_ttl.len()).collect::<Vec<_>>());
    assert_eq!(gone(&left, "plain", 100), 0);
    // Once no key has a TTL, writes are refused.
    squeeze(&mut s, 1 << 30);
    assert_eq!(s.call(&["SET", "more", "v"]), oom());
    assert_eq!(s.call(&["DBSIZE"]), Reply::Int(100));
    assert!((0..100).all(|i| !exists(&mut s, &format!("ttl:{i}"))));
}

#[test]
fn random_policies_evict_across_databases_and_volatile_keeps_persistent_keys() {
    let mut s = session();
    assert_eq!(s.call(&["CONFIG", "SET", "maxmemory-policy", "volatile-random"]), ok());
    for db in ["0", "3"] {
        assert_eq!(s.call(&["SELECT", db]), ok());
        for i in 0..50 {
            assert_eq!(s.call(&["SET", &format!("v:{i}"), "x", "EX", "5000"]), ok());
            assert_eq!(s.call(&["SET", &format!("p:{i}"), "x"]), ok());
        }
    }
    squeeze(&mut s, 1 << 30);
    assert_eq!(s.call(&["SET", "more", "v"]), oom());
    for db in ["0", "3"] {
        assert_eq!(s.call(&["SELECT", db]), ok());
        assert_eq!(s.call(&["DBSIZE"]), Reply::Int(50));
        assert!((0..50).all(|i| exists(&mut s, &format!("p:{i}"))));
    }
    assert_eq!(evicted(&mut s), 100);
    // allkeys-random takes the rest, from every database.
    assert_eq!(s.call(&["CONFIG", "SET", "maxmemory-policy", "allkeys-random"]), ok());
    assert_eq!(s.call(&["DBSIZE"]), Reply::Int(0));
    assert_eq!(s.call(&["SELECT", "0"]), ok());
    assert_eq!(s.call(&["DBSIZE"]), Reply::Int(0));
    assert_eq!(evicted(&mut s), 200);
}

#[test]
fn an_eviction_breaks_watches_and_a_big_collection_counts_its_elements() {
    let mut s = session();
    assert_eq!(s.call(&["CONFIG", "SET", "maxmemory-policy", "allkeys-random"]), ok());
    let mut args = vec!["HSET".to_string(), "big".to_string()];
    for i in 0..2000 {
        args.push(format!("field:{i}"));
        args.push(format!("value:{i}"));
    }
    assert_eq!(s.call(&args), Reply::Int(2000));
    assert_eq!(s.call(&["SET", "small", "1"]), ok());
    let Reply::Int(big) = s.call(&["MEMORY", "USAGE", "big", "SAMPLES", "0"]) else { panic!("a size") };
    assert!(big > 2000 * 20, "{big}");
    assert_eq!(s.call(&["WATCH", "big", "small"]), ok());
    // Room for about half the hash: evicting it alone is enough, and the
    // small key stays unless it was drawn first.
    squeeze(&mut s, big as u64 / 2);
    assert_eq!(s.call(&["MULTI"]), ok());
    assert_eq!(s.call(&["GET", "small"]), Reply::Simple("QUEUED".into()));
    assert_eq!(s.call(&["EXEC"]), Reply::NilArray);
    assert!(!exists(&mut s, "big"));
    assert!((1..=2).contains(&evicted(&mut s)));
}

#[test]
fn a_function_loaded_only_as_it_runs_is_still_refused_over_the_limit() {
    let db = Arc::new(Db::in_memory(&Options::with_size(32 << 20)).unwrap());
    {
        let mut s = Session::new(db.clone()).unwrap();
        let lib = "#!lua name=lib\nredis.register_function('w', function() return redis.call('del', 'x') end)";
        assert_eq!(s.call(&["FUNCTION", "LOAD", lib]), bulk("lib"));
    }
    // A new server on the same data: the libraries load with the first
    // script, after the check before the command.
    let mut s = Session::new(db).unwrap();
    assert_eq!(s.call(&["CONFIG", "SET", "maxmemory", "1"]), ok());
    assert_eq!(
        s.call(&["FCALL", "w", "0"]),
        Reply::Error(
            "OOM allow-oom flag is not set on the script, can not run it when used memory > 'maxmemory'".into()
        )
    );
    assert_eq!(s.call(&["CONFIG", "SET", "maxmemory", "0"]), ok());
    assert_eq!(s.call(&["FCALL", "w", "0"]), Reply::Int(0));
}
