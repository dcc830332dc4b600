//! `tembo serve` as a process: the default pool, protocol errors that close
//! only their connection, pipelining, the protected-mode refusal, clean
//! SHUTDOWN, and restart after `kill -9` with every acknowledged write.
//! Real Redis clients (redis-cli, redis-benchmark, redis-py, YCSB) are run
//! against it by `scripts/test-server`.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

struct Server {
    child: Child,
    port: u16,
}

impl Server {
    fn start(dir: &Path, extra: &[&str]) -> Server {
        let port = TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let mut args = vec!["serve".to_string(), "--port".into(), port.to_string()];
        args.extend(extra.iter().map(|s| s.to_string()));
        let child = Command::new(env!("CARGO_BIN_EXE_tembo"))
            .args(&args)
            .current_dir(dir)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let mut s = Server { child, port };
        let deadline = Instant::now() + Duration::from_secs(20);
        let pid = format!("process_id:{}", s.child.id());
        while Instant::now() < deadline {
            // Another test may have been handed the same free port: make sure
            // the server answering is ours (its pid), and that ours still runs.
            assert!(s.child.try_wait().unwrap().is_none(), "tembo serve exited at start (port {port} taken?)");
            if let Ok(mut c) = s.try_connect() {
                // A reset or a closed connection here is another test's
                // server on this port going away (a kill -9 round): retry.
                c.send_raw(&encode(&["INFO", "server"]));
                match c.read() {
                    Ok(R::Bulk(Some(text))) if String::from_utf8_lossy(&text).contains(&pid) => return s,
                    Ok(R::Err(e)) if e.starts_with("NOAUTH") => return s,
                    _ => {}
                }
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        panic!("server did not answer");
    }

    fn try_connect(&self) -> std::io::Result<Conn> {
        let s = TcpStream::connect(("127.0.0.1", self.port))?;
        s.set_read_timeout(Some(Duration::from_secs(20)))?;
        Ok(Conn { r: BufReader::new(s.try_clone()?), w: s })
    }

    fn connect(&self) -> Conn {
        self.try_connect().unwrap()
    }

    fn kill9(mut self) {
        self.child.kill().unwrap();
        self.child.wait().unwrap();
    }

    fn wait_exit(mut self) -> std::process::ExitStatus {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            if let Some(st) = self.child.try_wait().unwrap() {
                return st;
            }
            assert!(Instant::now() < deadline, "server did not exit");
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[derive(Debug, PartialEq, Clone)]
enum R {
    Simple(String),
    Err(String),
    Int(i64),
    Bulk(Option<Vec<u8>>),
    Arr(Option<Vec<R>>),
}

struct Conn {
    r: BufReader<TcpStream>,
    w: TcpStream,
}

fn encode(args: &[&str]) -> Vec<u8> {
    let mut out = format!("*{}\r\n", args.len()).into_bytes();
    for a in args {
        out.extend_from_slice(format!("${}\r\n{a}\r\n", a.len()).as_bytes());
    }
    out
}

impl Conn {
    fn send_raw(&mut self, b: &[u8]) {
        self.w.write_all(b).unwrap();
    }

    fn read(&mut self) -> std::io::Result<R> {
        let mut line = String::new();
        if self.r.read_line(&mut line)? == 0 {
            return Err(std::io::ErrorKind::UnexpectedEof.into());
        }
        let line = line.trim_end_matches("\r\n");
        let (tag, rest) = line.split_at(1);
        Ok(match tag {
            "+" => R::Simple(rest.into()),
            "-" => R::Err(rest.into()),
            ":" => R::Int(rest.parse().unwrap()),
            "$" => {
                let n: i64 = rest.parse().unwrap();
                if n < 0 {
                    R::Bulk(None)
                } else {
                    let mut b = vec![0; n as usize + 2];
                    self.r.read_exact(&mut b)?;
                    b.truncate(n as usize);
                    R::Bulk(Some(b))
                }
            }
            "*" => {
                let n: i64 = rest.parse().unwrap();
                if n < 0 {
                    R::Arr(None)
                } else {
                    R::Arr(Some((0..n).map(|_| self.read()).collect::<Result<_, _>>()?))
                }
            }
            t => panic!("unexpected reply type {t:?} in {line:?}"),
        })
    }

    fn call(&mut self, args: &[&str]) -> R {
        self.send_raw(&encode(args));
        self.read().unwrap()
    }
}

fn bulk(s: &str) -> R {
    R::Bulk(Some(s.as_bytes().to_vec()))
}

/// Runs `tembo ARGS` in `dir` to completion.
fn tembo_in(dir: &Path, args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_tembo")).args(args).current_dir(dir).output().unwrap()
}

#[test]
fn default_pool_pipelining_and_protocol_errors() {
    let dir = tempfile_dir("basic");
    let srv = Server::start(&dir, &[]);
    assert!(dir.join("tembo-data/tembo.pool").exists(), "serve with no --pool creates tembo-data/tembo.pool");
    let mut a = srv.connect();
    let mut b = srv.connect();
    // 1000 pipelined commands in one write.
    let mut batch = Vec::new();
    for i in 0..1000 {
        batch.extend(encode(&["SET", &format!("k{i}"), &format!("v{i}")]));
    }
    batch.extend(encode(&["DBSIZE"]));
    a.send_raw(&batch);
    for _ in 0..1000 {
        assert_eq!(a.read().unwrap(), R::Simple("OK".into()));
    }
    assert_eq!(a.read().unwrap(), R::Int(1000));
    // Inline commands.
    a.send_raw(b"GET k7\r\nPING\r\n");
    assert_eq!(a.read().unwrap(), bulk("v7"));
    assert_eq!(a.read().unwrap(), R::Simple("PONG".into()));
    // A malformed request closes that connection only.
    b.send_raw(b"*1\r\n$abc\r\n");
    match b.read().unwrap() {
        R::Err(e) => assert!(e.starts_with("ERR Protocol error"), "{e}"),
        other => panic!("{other:?}"),
    }
    assert!(b.read().is_err(), "connection closed after a protocol error");
    let mut c = srv.connect();
    c.send_raw(b"*1\r\n$600000000\r\n");
    assert_eq!(c.read().unwrap(), R::Err("ERR Protocol error: invalid bulk length".into()));
    assert_eq!(a.call(&["GET", "k999"]), bulk("v999"));
    match a.call(&["NOSUCH", "x"]) {
        R::Err(e) => assert!(e.starts_with("ERR unknown command 'NOSUCH'"), "{e}"),
        other => panic!("{other:?}"),
    }
    match a.call(&["GET"]) {
        R::Err(e) => assert_eq!(e, "ERR wrong number of arguments for 'get' command"),
        other => panic!("{other:?}"),
    }
    // A second server on the same pool is refused with a clear error that
    // names the pool once, and harms nothing.
    let free = TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port().to_string();
    let second = tembo_in(&dir, &["serve", "--port", &free]);
    assert!(!second.status.success());
    let err = String::from_utf8_lossy(&second.stderr);
    assert!(err.contains("locked by another process"), "{err}");
    assert_eq!(err.matches("tembo-data/tembo.pool").count(), 1, "{err}");
    assert_eq!(a.call(&["GET", "k998"]), bulk("v998"));
    // A server whose port is taken fails before it touches any pool.
    let taken = tembo_in(&dir, &["serve", "--port", &srv.port.to_string(), "--pool", "other.pool"]);
    assert!(!taken.status.success());
    let err = String::from_utf8_lossy(&taken.stderr);
    assert!(err.contains("another server listens there"), "{err}");
    assert!(!dir.join("other.pool").exists(), "a pool was created by a server that could not listen");
    // SHUTDOWN closes the pool cleanly and the process exits 0.
    a.send_raw(&encode(&["SHUTDOWN"]));
    assert!(a.read().is_err());
    assert!(srv.wait_exit().success());
    let stat = tembo_in(&dir, &["pool", "stat", "tembo-data/tembo.pool", "--json"]);
    let text = String::from_utf8_lossy(&stat.stdout);
    assert!(text.contains("\"last_shutdown_clean\": true"), "{text}");
    // Restart: the data is there.
    let srv = Server::start(&dir, &[]);
    assert_eq!(srv.connect().call(&["GET", "k500"]), bulk("v500"));
}

#[test]
fn serves_a_pool_made_by_pool_create() {
    // `tembo pool create` makes a pool with no database in it: the server
    // gives it one instead of refusing it.
    let dir = tempfile_dir("precreated");
    let made = tembo_in(&dir, &["pool", "create", "made.pool", "--size", "64M"]);
    assert!(made.status.success(), "{}", String::from_utf8_lossy(&made.stderr));
    let srv = Server::start(&dir, &["--pool", "made.pool"]);
    let mut c = srv.connect();
    assert_eq!(c.call(&["SET", "k", "v"]), R::Simple("OK".into()));
    assert_eq!(c.call(&["GET", "k"]), bulk("v"));
}

#[test]
fn refuses_unprotected_public_bind_and_checks_passwords() {
    let dir = tempfile_dir("auth");
    let out = tembo_in(&dir, &["serve", "--bind", "0.0.0.0", "--port", "1"]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("requirepass"));
    let srv = Server::start(&dir, &["--requirepass", "s3cret", "--pool", "p.pool"]);
    let mut c = srv.connect();
    assert_eq!(c.call(&["GET", "x"]), R::Err("NOAUTH Authentication required.".into()));
    assert!(matches!(c.call(&["AUTH", "nope"]), R::Err(e) if e.starts_with("WRONGPASS")));
    assert_eq!(c.call(&["AUTH", "s3cret"]), R::Simple("OK".into()));
    assert_eq!(c.call(&["GET", "x"]), R::Bulk(None));
}

#[test]
fn kill9_keeps_every_acknowledged_write() {
    let dir = tempfile_dir("kill9");
    let mut acked: Vec<(String, String)> = Vec::new();
    for round in 0..5 {
        let srv = Server::start(&dir, &["--pool", "p.pool"]);
        let mut c = srv.connect();
        for (k, v) in &acked {
            assert_eq!(c.call(&["GET", k]), bulk(v), "round {round}: acknowledged {k} lost");
        }
        // MULTI/EXEC groups are all or nothing.
        for g in 0..round * 10 {
            let vals: Vec<R> = (0..4).map(|i| c.call(&["GET", &format!("g{g}:{i}")])).collect();
            assert!(vals.windows(2).all(|w| w[0] == w[1]), "round {round}: torn transaction {g}: {vals:?}");
        }
        let mut writer = srv.connect();
        let port = srv.port;
        let killer = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(150 + 97 * round as u64));
            srv.kill9();
        });
        let _ = port;
        for i in 0.. {
            let (k, v) = (format!("r{round}k{i}"), format!("v{i}"));
            writer.send_raw(&encode(&["SET", &k, &v]));
            match writer.read() {
                Ok(R::Simple(s)) if s == "OK" => acked.push((k, v)),
                _ => break,
            }
            let g = round * 10 + (i % 10);
            let token = format!("t{round}.{i}");
            let mut tx = encode(&["MULTI"]);
            for j in 0..4 {
                tx.extend(encode(&["SET", &format!("g{g}:{j}"), &token]));
            }
            tx.extend(encode(&["EXEC"]));
            writer.send_raw(&tx);
            if (0..6).any(|_| writer.read().is_err()) {
                break;
            }
        }
        killer.join().unwrap();
    }
    assert!(acked.len() > 10, "the load wrote too little ({}) to mean anything", acked.len());
}

#[test]
fn a_full_pool_fails_writes_with_oom_and_loses_nothing() {
    let dir = tempfile_dir("full");
    let srv = Server::start(&dir, &["--pool", "p.pool", "--pool-size", "4M", "--pool-max-size", "4M"]);
    let mut c = srv.connect();
    let value = "x".repeat(4000);
    let mut stored = 0;
    let mut oom = None;
    for i in 0..5000 {
        match c.call(&["SET", &format!("k{i}"), &value]) {
            R::Simple(s) if s == "OK" => stored += 1,
            R::Err(e) => {
                oom = Some(e);
                break;
            }
            other => panic!("{other:?}"),
        }
    }
    let oom = oom.expect("a 4 MiB pool must fill up");
    assert!(oom.starts_with("OOM"), "{oom}");
    assert!(stored > 10, "only {stored} keys fit");
    // Everything acknowledged is there and reads still work.
    assert_eq!(c.call(&["GET", "k0"]), bulk(&value));
    assert_eq!(c.call(&["GET", &format!("k{}", stored - 1)]), bulk(&value));
    assert_eq!(c.call(&["DBSIZE"]), R::Int(stored));
    // A pipeline into the full pool: small writes may still fit, large ones
    // fail alone with OOM, and nothing is half-done.
    let mut batch = Vec::new();
    for i in 0..200 {
        let v = if i % 2 == 0 { "s".to_string() } else { value.clone() };
        batch.extend(encode(&["SET", &format!("p{i}"), &v]));
    }
    c.send_raw(&batch);
    let replies: Vec<R> = (0..200).map(|_| c.read().unwrap()).collect();
    assert!(replies.iter().all(|r| *r == R::Simple("OK".into()) || matches!(r, R::Err(e) if e.starts_with("OOM"))));
    assert!(replies.iter().any(|r| *r != R::Simple("OK".into())), "a full pool took 200 more SETs");
    drop(c);
    srv.kill9();
    let srv = Server::start(&dir, &["--pool", "p.pool"]);
    let mut c = srv.connect();
    assert_eq!(c.call(&["GET", &format!("k{}", stored - 1)]), bulk(&value));
    for (i, r) in replies.iter().enumerate() {
        let got = c.call(&["GET", &format!("p{i}")]);
        if *r == R::Simple("OK".into()) {
            let v = if i % 2 == 0 { "s".to_string() } else { value.clone() };
            assert_eq!(got, bulk(&v), "acknowledged p{i} lost");
        } else {
            assert_eq!(got, R::Bulk(None), "failed SET p{i} left a value");
        }
    }
}

fn tempfile_dir(tag: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("tembo-serve-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}
