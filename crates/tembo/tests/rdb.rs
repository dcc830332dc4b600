//! `tembo rdb export / import / inspect` as a user runs them: a pool
//! written through the server's commands goes out as an RDB file and back
//! into a new pool with the same DEBUG DIGEST (every key, value, type and
//! expiry); a damaged file, a key clash, a database past `--databases`, a
//! pool in use and a pool of raw engine keys each fail with a message that
//! says what to do, and write nothing.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;

use tembo_server::resp::Reply;
use tembo_server::Session;
use tembo_store::{Db, ModeRequest, Options};

fn tembo(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_tembo")).args(args).output().expect("the tembo binary runs")
}

fn text(o: &Output) -> String {
    format!("stdout: {}\nstderr: {}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr))
}

fn ok(o: &Output) -> String {
    assert!(o.status.success(), "failed ({:?}):\n{}", o.status, text(o));
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn fails(o: &Output, words: &str) {
    assert!(!o.status.success(), "succeeded:\n{}", text(o));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains(words), "expected {words:?} in:\n{err}");
    assert!(!err.contains("panicked"), "{err}");
}

struct TempDir(PathBuf);

impl TempDir {
    fn new() -> TempDir {
        static NEXT: AtomicU32 = AtomicU32::new(0);
        let shm = Path::new("/dev/shm");
        let parent = if shm.is_dir() { shm.to_path_buf() } else { std::env::temp_dir() };
        let p = parent.join(format!("tembo-rdb-test-{}-{}", std::process::id(), NEXT.fetch_add(1, Ordering::Relaxed)));
        std::fs::create_dir_all(&p).unwrap();
        TempDir(p)
    }
    fn file(&self, name: &str) -> String {
        self.0.join(name).display().to_string()
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn opts() -> Options {
    Options { size: 16 << 20, mode: ModeRequest::Emulated, ..Options::default() }
}

/// Runs `f` on a session over the pool at `path` (created if absent), then closes the pool.
fn with_session<T>(path: &str, f: impl FnOnce(&mut Session) -> T) -> T {
    let db = Arc::new(Db::open_or_create(path, &opts()).unwrap());
    let mut s = Session::new(Arc::clone(&db)).unwrap();
    let out = f(&mut s);
    drop(s);
    match Arc::try_unwrap(db) {
        Ok(db) => db.close().unwrap(),
        Err(_) => panic!("the session did not let go of the pool"),
    }
    out
}

fn call(s: &mut Session, line: &str) -> Reply {
    let r = s.call_line(line);
    assert!(!matches!(r, Reply::Error(_)), "{line}: {r:?}");
    r
}

fn digest(s: &mut Session) -> Reply {
    call(s, "DEBUG DIGEST")
}

fn fill(s: &mut Session) {
    call(s, "SET plain hello");
    call(s, "SET int 12345");
    call(s, "SET ttl soon EX 3600");
    call(s, "RPUSH list a b c 1 2 3");
    call(s, "HSET hash f1 v1 f2 v2");
    call(s, "SADD intset 1 2 3 100000");
    call(s, "SADD set x y z");
    call(s, "ZADD zset 1.5 a -2 b 3e10 c");
    call(s, "XADD stream 1-1 f v");
    call(s, "XADD stream 2-0 g w");
    call(s, "XGROUP CREATE stream grp 0");
    call(s, "XREADGROUP GROUP grp alice COUNT 1 STREAMS stream >");
    for i in 0..3000 {
        call(s, &format!("HSET big f{i} v{}", "v".repeat(i % 50)));
    }
    call(s, "SELECT 7");
    call(s, "SET seven 7");
    call(s, "SELECT 0");
    call(s, "SWAPDB 7 8");
    call(s, "FUNCTION LOAD \"#!lua name=rdblib\nredis.register_function('rdbf', function() return 1 end)\"");
}

#[test]
fn export_then_import_gives_the_same_digest() {
    let dir = TempDir::new();
    let (src, rdb, dst) = (dir.file("src.pool"), dir.file("dump.rdb"), dir.file("dst.pool"));
    let want = with_session(&src, |s| {
        fill(s);
        digest(s)
    });
    let out = ok(&tembo(&["rdb", "export", "--pool", &src, &rdb]));
    assert!(out.contains("exported 11 keys and 1 function libraries"), "{out}");
    assert!(!Path::new(&format!("{rdb}.partial")).exists());
    let out = ok(&tembo(&["rdb", "inspect", &rdb]));
    assert!(out.contains("RDB version 10"), "{out}");
    assert!(out.contains("db0: keys=10 expires=1"), "{out}");
    assert!(out.contains("db8: keys=1 expires=0 (string 1)"), "{out}");
    let out = ok(&tembo(&["rdb", "import", &rdb, "--pool", &dst]));
    assert!(out.contains("imported 11 keys and 1 function libraries"), "{out}");
    let (got, ttl, lib) = with_session(&dst, |s| (digest(s), call(s, "TTL ttl"), call(s, "FCALL rdbf 0")));
    assert_eq!(got, want);
    assert!(matches!(ttl, Reply::Int(t) if (3590..=3600).contains(&t)), "{ttl:?}");
    assert_eq!(lib, Reply::Int(1));
    // The functions-only file holds the libraries alone.
    let fonly = dir.file("functions.rdb");
    ok(&tembo(&["rdb", "export", "--pool", &src, "--functions-only", &fonly]));
    let out = ok(&tembo(&["rdb", "inspect", &fonly]));
    assert!(out.contains("function libraries: 1") && !out.contains("db0"), "{out}");
}

#[test]
fn a_bad_file_or_a_clash_writes_nothing() {
    let dir = TempDir::new();
    let (src, rdb) = (dir.file("src.pool"), dir.file("dump.rdb"));
    with_session(&src, fill);
    ok(&tembo(&["rdb", "export", "--pool", &src, &rdb]));
    let good = std::fs::read(&rdb).unwrap();

    // A flipped byte: the checksum says so, and no pool is created.
    let mut bad = good.clone();
    let at = bad.len() / 2;
    bad[at] ^= 0x40;
    let damaged = dir.file("damaged.rdb");
    std::fs::write(&damaged, &bad).unwrap();
    let fresh = dir.file("fresh.pool");
    let o = tembo(&["rdb", "import", &damaged, "--pool", &fresh]);
    assert!(!o.status.success(), "{}", text(&o));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("damaged") || err.contains("checksum"), "{err}");
    assert!(!Path::new(&fresh).exists(), "a refused import created the pool");

    // Cut short: refused the same way.
    std::fs::write(&damaged, &good[..good.len() - 20]).unwrap();
    fails(&tembo(&["rdb", "import", &damaged, "--pool", &fresh]), "damaged RDB file");
    fails(&tembo(&["rdb", "import", "/etc/hostname", "--pool", &fresh]), "not an RDB file");
    fails(&tembo(&["rdb", "import", &dir.file("absent.rdb"), "--pool", &fresh]), "cannot read");

    // A database past --databases.
    fails(&tembo(&["rdb", "import", &rdb, "--pool", &fresh, "--databases", "4"]), "pass --databases 9 or more");

    // A clash: nothing of the file is written, not even its new keys.
    let dst = dir.file("dst.pool");
    with_session(&dst, |s| {
        call(s, "SET plain mine");
    });
    fails(&tembo(&["rdb", "import", &rdb, "--pool", &dst]), "pass --replace");
    let (plain, list) = with_session(&dst, |s| (call(s, "GET plain"), call(s, "EXISTS list")));
    assert_eq!(plain, Reply::Bulk(b"mine".to_vec()));
    assert_eq!(list, Reply::Int(0));
    ok(&tembo(&["rdb", "import", &rdb, "--pool", &dst, "--replace"]));
    let plain = with_session(&dst, |s| call(s, "GET plain"));
    assert_eq!(plain, Reply::Bulk(b"hello".to_vec()));
}

#[test]
fn export_refuses_a_pool_in_use_and_raw_engine_keys() {
    let dir = TempDir::new();
    let (src, good) = (dir.file("src.pool"), dir.file("good.rdb"));
    with_session(&src, |s| {
        call(s, "SET k v");
    });
    ok(&tembo(&["rdb", "export", "--pool", &src, &good]));
    let pool = dir.file("raw.pool");
    let db = Db::open_or_create(&pool, &opts()).unwrap();
    db.put(b"not-a-redis-key", b"v").unwrap();
    fails(&tembo(&["rdb", "export", "--pool", &pool, &dir.file("x.rdb")]), "redis-cli -p PORT --rdb");
    fails(&tembo(&["rdb", "import", &good, "--pool", &pool]), "stop the server first");
    db.close().unwrap();
    fails(&tembo(&["rdb", "export", "--pool", &pool, &dir.file("x.rdb")]), "did not write");
    assert!(!Path::new(&dir.file("x.rdb")).exists() && !Path::new(&dir.file("x.rdb.partial")).exists());
    fails(&tembo(&["rdb", "export", "--pool", &dir.file("none.pool"), &dir.file("x.rdb")]), "no pool at");
}

#[test]
fn an_import_that_fills_the_pool_keeps_what_it_committed_and_says_so() {
    let dir = TempDir::new();
    let (src, rdb, dst) = (dir.file("src.pool"), dir.file("big.rdb"), dir.file("small.pool"));
    let db = Arc::new(Db::open_or_create(&src, &Options { size: 64 << 20, ..opts() }).unwrap());
    let mut s = Session::new(Arc::clone(&db)).unwrap();
    for i in 0..2000 {
        call(&mut s, &format!("SET key:{i:05} {}", "x".repeat(2000 + i)));
    }
    drop(s);
    match Arc::try_unwrap(db) {
        Ok(db) => db.close().unwrap(),
        Err(_) => panic!("the session did not let go of the pool"),
    }
    ok(&tembo(&["rdb", "export", "--pool", &src, &rdb]));
    let o = tembo(&["rdb", "import", &rdb, "--pool", &dst, "--pool-size", "1M", "--pool-max-size", "4M"]);
    fails(&o, "keys imported and kept");
    let err = String::from_utf8_lossy(&o.stderr).into_owned();
    let kept: u64 = err.split(" keys imported").next().and_then(|h| h.rsplit('(').next()).unwrap().parse().unwrap();
    assert!(kept > 0 && kept < 2000, "{err}");
    // The pool opens, passes its check, and holds exactly the kept keys.
    ok(&tembo(&["pool", "check", &dst]));
    let (n, lens) = with_session(&dst, |s| {
        let lens: Vec<Reply> = (0..2000).map(|i| call(s, &format!("STRLEN key:{i:05}"))).collect();
        (call(s, "DBSIZE"), lens)
    });
    assert_eq!(n, Reply::Int(kept as i64));
    // Each key is whole or absent (the file's order is the pool's, not the names').
    let present = lens.iter().enumerate().filter(|(i, l)| {
        assert!(matches!(l, Reply::Int(0)) || **l == Reply::Int(2000 + *i as i64), "key {i}: {l:?}");
        **l != Reply::Int(0)
    });
    assert_eq!(present.count() as u64, kept);
}
