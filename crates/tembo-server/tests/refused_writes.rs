//! A command refused midway — a key or value over the engine's limits,
//! found after some of its writes were staged — applies nothing: not its
//! earlier writes, not its key count, not its expiry entry, and not an
//! orphan element of a collection it was creating. Inside MULTI/EXEC and
//! scripts only the refused command is undone, as a failed command is in
//! Redis. The pool here has small limits so that the refusals are cheap.

use std::sync::Arc;

use tembo_server::resp::Reply;
use tembo_server::Session;
use tembo_store::{Db, Limits, Options};

const MAX_KEY: usize = 100;
const MAX_VALUE: usize = 1000;

struct Pool {
    dir: std::path::PathBuf,
    path: std::path::PathBuf,
    opts: Options,
}

impl Pool {
    fn new() -> Pool {
        let dir = std::env::temp_dir().join(format!("tembo-refused-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let opts = Options {
            limits: Limits { max_key_bytes: MAX_KEY, max_value_bytes: MAX_VALUE },
            ..Options::with_size(32 << 20)
        };
        Pool { path: dir.join("p.pool"), dir, opts }
    }
    fn create(&self) -> Session {
        Session::new(Arc::new(Db::create(&self.path, &self.opts).unwrap())).unwrap()
    }
    fn reopen(&self) -> Session {
        Session::new(Arc::new(Db::open(&self.path, &self.opts).unwrap())).unwrap()
    }
}

impl Drop for Pool {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn bulk(s: &str) -> Reply {
    Reply::Bulk(s.as_bytes().to_vec())
}

fn is_limit_error(r: &Reply) -> bool {
    matches!(r, Reply::Error(e) if e.starts_with("ERR") && e.contains("limit"))
}

/// Every key and value the engine holds.
fn engine_entries(s: &Session) -> Vec<(Vec<u8>, Vec<u8>)> {
    s.db().scan::<Vec<u8>, _>(..).map(|kv| kv.unwrap()).collect()
}

/// DBSIZE agrees with KEYS, and is `n`.
fn assert_keys(s: &mut Session, n: usize) {
    let Reply::Array(keys) = s.call_line("KEYS *") else { panic!("KEYS") };
    assert_eq!(keys.len(), n, "KEYS: {keys:?}");
    assert_eq!(s.call_line("DBSIZE"), Reply::Int(n as i64));
}

#[test]
fn a_command_refused_midway_applies_nothing() {
    let pool = Pool::new();
    let long = "k".repeat(MAX_KEY + 1);
    let huge = "v".repeat(MAX_VALUE + 1);
    let mut s = pool.create();
    let before = engine_entries(&s);

    // New keys and collections whose second part is refused.
    assert!(is_limit_error(&s.call(&["MSET", "a", "1", &long, "2"])));
    assert!(is_limit_error(&s.call(&["SET", &long, "x"])));
    assert!(is_limit_error(&s.call(&["SET", "b", &huge, "EX", "100"])));
    assert!(is_limit_error(&s.call(&["HSET", "h", "f1", "v1", &long, "v2"])));
    assert!(is_limit_error(&s.call(&["SADD", "s", "m1", &long])));
    assert!(is_limit_error(&s.call(&["ZADD", "z", "1", "m1", "2", &long])));
    assert!(is_limit_error(&s.call(&["XADD", &long, "*", "f", "v"])));
    assert!(is_limit_error(&s.call(&["PFADD", &long, "x"])));
    assert_keys(&mut s, 0);
    assert_eq!(s.call_line("GET a"), Reply::Nil);
    assert_eq!(engine_entries(&s), before, "a refused command left entries in the engine");

    // Existing keys keep their values, expiries and elements.
    assert_eq!(s.call_line("SET k v EX 100"), Reply::ok());
    assert_eq!(s.call_line("HSET h f1 v1"), Reply::Int(1));
    assert!(is_limit_error(&s.call(&["SET", "k", &huge, "KEEPTTL"])));
    assert!(is_limit_error(&s.call(&["APPEND", "k", &huge])));
    assert!(is_limit_error(&s.call(&["RENAME", "k", &long])));
    assert!(is_limit_error(&s.call(&["HSET", "h", "f1", "v2", &long, "v3"])));
    assert!(is_limit_error(&s.call(&["COPY", "h", &long])));
    assert_eq!(s.call_line("GET k"), bulk("v"));
    assert!(matches!(s.call_line("TTL k"), Reply::Int(t) if t > 90));
    assert_eq!(s.call_line("HGET h f1"), bulk("v1"));
    assert_eq!(s.call_line("HLEN h"), Reply::Int(1));
    assert_keys(&mut s, 2);

    // In a transaction only the refused command is undone.
    assert_eq!(s.call_line("MULTI"), Reply::ok());
    s.call_line("SET m1 x");
    s.call(&["SET", &long, "y"]);
    s.call_line("SET m2 z");
    let Reply::Array(replies) = s.call_line("EXEC") else { panic!("EXEC") };
    assert_eq!(replies[0], Reply::ok());
    assert!(is_limit_error(&replies[1]));
    assert_eq!(replies[2], Reply::ok());
    assert_keys(&mut s, 4);

    // A script that catches the refusal keeps its other writes.
    let script = "redis.call('set', 'e1', '1'); return redis.pcall('set', ARGV[1], '2')";
    assert!(is_limit_error(&s.call(&["EVAL", script, "0", &long])));
    assert_eq!(s.call_line("GET e1"), bulk("1"));
    assert_keys(&mut s, 5);
    drop(s);

    let mut s = pool.reopen();
    assert_keys(&mut s, 5);
    assert_eq!(s.call_line("GET k"), bulk("v"));
    assert_eq!(s.call_line("HLEN h"), Reply::Int(1));
    s.db().check().unwrap();
}
