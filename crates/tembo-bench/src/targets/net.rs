//! Servers measured over the network: `tembo serve` and `redis-server`
//! with its append-only file synced on every write (`always`), once a
//! second (`everysec`) or not at all (`off`), each started for real on
//! loopback with its files in the run's directory, and driven through the
//! same RESP client ([`super::resp`]) by the same workloads as the embedded
//! targets, so a report holds both.
//!
//! One connection, one request at a time: a put is `SET`, a get `GET`, a
//! delete `DEL`, each answered only once the server's mode makes it durable
//! (Tembo: committed and flushed; Redis `always`: written and fsynced before
//! the reply). What the figures are is the server's cost plus a loopback
//! round trip, the shape of an application that waits for each write; the
//! many-client and pipelined shapes are `bench/server_bench.py`'s
//! (redis-benchmark). The client's cost is the same for every server.
//!
//! Ordered scans: Redis has no key order, so a workload that scans (YCSB E)
//! runs with an index, as YCSB's own Redis binding keeps one: every put
//! also adds its key to a sorted set (`ZADD idx 0 key`, sent in the same
//! write as the `SET`), every delete removes it, and a scan is
//! `ZRANGE idx [start + BYLEX LIMIT 0 n` followed by one `MGET`. Without
//! scans no index is kept and `scan` is an error that says so.
//!
//! Each server is checked to be the child that was started (its INFO
//! `process_id`) before it is measured, and a start that loses its port to
//! another process is retried on a new one. Servers are stopped when their
//! target is dropped, on errors and panics too; they share the bench's
//! process group, so Ctrl-C stops them with it, but a bench killed with
//! SIGKILL leaves them running (their working directory is the run's).

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};

use super::resp::{Client, Reply};
use super::Target;

/// Which server, in which mode.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Server {
    /// `tembo serve` on a pool in the run's directory.
    Tembo,
    /// `redis-server --appendonly yes --appendfsync always`.
    RedisAlways,
    /// `redis-server --appendonly yes --appendfsync everysec`.
    RedisEverysec,
    /// `redis-server --appendonly no --save ""`: nothing persisted.
    RedisOff,
}

/// The sorted set that indexes keys for scans.
const INDEX_KEY: &[u8] = b"tembo-bench:index";
/// How long a server may take to answer its first PING.
const START_TIMEOUT: Duration = Duration::from_secs(30);

static TEMBO_BINARY: OnceLock<PathBuf> = OnceLock::new();

/// Names the `tembo` executable that the `tembo-serve` target starts
/// (the CLI passes its own path). Without it, `$TEMBO_BIN`, then `tembo`
/// on `PATH`, are tried.
pub fn set_tembo_binary(path: PathBuf) {
    let _ = TEMBO_BINARY.set(path);
}

fn tembo_binary() -> Option<PathBuf> {
    if let Some(p) = TEMBO_BINARY.get() {
        return Some(p.clone());
    }
    if let Some(p) = std::env::var_os("TEMBO_BIN").map(PathBuf::from).filter(|p| p.is_file()) {
        return Some(p);
    }
    on_path("tembo")
}

fn on_path(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path).map(|d| d.join(name)).find(|p| p.is_file())
}

impl Server {
    /// The program this server needs, if it can be found.
    pub fn program(self) -> Option<PathBuf> {
        match self {
            Server::Tembo => tembo_binary(),
            _ => on_path("redis-server"),
        }
    }

    /// The target's name.
    pub fn name(self) -> &'static str {
        match self {
            Server::Tembo => "tembo-serve",
            Server::RedisAlways => "redis-always",
            Server::RedisEverysec => "redis-everysec",
            Server::RedisOff => "redis-off",
        }
    }

    /// What to do when [`Server::program`] finds nothing.
    pub fn missing_program_advice(self) -> &'static str {
        match self {
            Server::Tembo => {
                "the tembo-serve target needs the tembo executable: run it from `tembo bench`, or set TEMBO_BIN"
            }
            _ => "the redis-* targets need redis-server on PATH (Debian: apt-get install redis-server)",
        }
    }

    /// Whether writes are durable before their reply.
    pub fn durable(self) -> bool {
        matches!(self, Server::Tembo | Server::RedisAlways)
    }

    fn args(self, port: u16, dir: &Path, size_hint: u64) -> Vec<String> {
        let port = port.to_string();
        let dir_s = dir.display().to_string();
        match self {
            Server::Tembo => {
                // The server keeps a metadata entry beside each string, and
                // the pool grows on demand past this.
                let size = ((size_hint * 3).max(256 << 20)).next_multiple_of(1 << 20);
                let mut v: Vec<String> =
                    ["serve", "--bind", "127.0.0.1", "--port", &port, "--pool"].map(String::from).into();
                v.push(dir.join("tembo.pool").display().to_string());
                v.extend(["--pool-size".into(), format!("{}M", size >> 20), "--loglevel".into(), "warn".into()]);
                v
            }
            _ => {
                let (aof, fsync) = match self {
                    Server::RedisAlways => ("yes", "always"),
                    Server::RedisEverysec => ("yes", "everysec"),
                    _ => ("no", "no"),
                };
                [
                    "--port",
                    &port,
                    "--bind",
                    "127.0.0.1",
                    "--dir",
                    &dir_s,
                    "--save",
                    "",
                    "--appendonly",
                    aof,
                    "--appendfsync",
                    fsync,
                    "--loglevel",
                    "warning",
                    "--daemonize",
                    "no",
                ]
                .map(String::from)
                .into()
            }
        }
    }
}

/// A running server and the bench's connection to it.
pub(super) struct NetTarget {
    server: Server,
    child: Option<Child>,
    client: Client,
    log: PathBuf,
    indexed: bool,
    mode: String,
    /// A scan's value buffer, reused for every pair.
    scratch: Vec<u8>,
}

/// How many ports a server is offered before opening fails (another
/// process may take a free port before the server binds it).
const START_ATTEMPTS: usize = 3;

/// Starts `server` with its files in the empty directory `dir` and
/// connects to it; `indexed`: keep the key index scans need.
///
/// # Errors
/// The program missing (with what to install), a server that exits or does
/// not answer within [`START_TIMEOUT`] (with the end of its log), on every
/// port tried.
pub(super) fn open(server: Server, dir: &Path, size_hint: u64, indexed: bool) -> Result<Box<dyn Target>> {
    let Some(program) = server.program() else {
        bail!(server.missing_program_advice());
    };
    let log = dir.join("server.log");
    let mut last = None;
    for _ in 0..START_ATTEMPTS {
        match start(server, &program, dir, &log, size_hint) {
            Ok((child, client)) => {
                let mut t = NetTarget {
                    server,
                    child: Some(child),
                    client,
                    log,
                    indexed,
                    mode: String::new(),
                    scratch: Vec::new(),
                };
                t.mode = t.describe()?;
                return Ok(Box::new(t));
            }
            Err(e) => last = Some(e),
        }
    }
    let e = last.expect("START_ATTEMPTS is not zero");
    Err(e.context(format!(
        "starting {} for the {} target ({START_ATTEMPTS} ports tried)",
        program.display(),
        server.name()
    )))
}

/// One try: the server on a fresh port, and a connection to it that has
/// checked, by its process id, that it is this child that answers.
fn start(server: Server, program: &Path, dir: &Path, log: &Path, size_hint: u64) -> Result<(Child, Client)> {
    let port = free_port()?;
    let out = std::fs::File::options()
        .create(true)
        .append(true)
        .open(log)
        .with_context(|| format!("creating {}", log.display()))?;
    let mut child = Command::new(program)
        .args(server.args(port, dir, size_hint))
        .current_dir(dir)
        .stdin(Stdio::null())
        .stdout(out.try_clone()?)
        .stderr(out)
        .spawn()
        .with_context(|| format!("starting {}", program.display()))?;
    match connect_when_ready(port, log, &mut child) {
        Ok(c) => Ok((child, c)),
        Err(e) => {
            let _ = child.kill();
            let _ = child.wait();
            Err(e)
        }
    }
}

fn free_port() -> Result<u16> {
    // The kernel picks a free port; the server binds it a moment later.
    let l = std::net::TcpListener::bind(("127.0.0.1", 0)).context("finding a free loopback port")?;
    Ok(l.local_addr()?.port())
}

fn log_tail(log: &Path) -> String {
    let text = std::fs::read_to_string(log).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(12)..].join("\n")
}

/// The value of `name` in an INFO reply's `name:value` lines.
fn info_field(info: &str, name: &str) -> Option<String> {
    info.lines().find_map(|l| l.strip_prefix(name).and_then(|r| r.strip_prefix(':'))).map(|v| v.trim().to_string())
}

fn info(client: &mut Client, section: &[u8]) -> Result<String> {
    match client.call(&[b"INFO", section])? {
        Reply::Bulk(Some(b)) => Ok(String::from_utf8_lossy(&b).into_owned()),
        other => bail!("INFO {} answered {other:?}", String::from_utf8_lossy(section)),
    }
}

fn connect_when_ready(port: u16, log: &Path, child: &mut Child) -> Result<Client> {
    let deadline = Instant::now() + START_TIMEOUT;
    let mut last;
    loop {
        if let Some(status) = child.try_wait()? {
            bail!("the server exited ({status}) before answering; its log ends:\n{}", log_tail(log));
        }
        // Short timeouts while probing, so a listener that never answers
        // cannot hold the start past its deadline.
        match Client::connect(port, Duration::from_millis(500)) {
            Ok(mut c) => match c.call(&[b"PING"]) {
                Ok(Reply::Status(s)) if s == "PONG" => {
                    let pid = info_field(&info(&mut c, b"server")?, "process_id");
                    if pid.as_deref() != Some(child.id().to_string().as_str()) {
                        bail!("another process (pid {}) answered on port {port}", pid.unwrap_or_else(|| "?".into()));
                    }
                    c.use_request_timeout()?;
                    return Ok(c);
                }
                // Redis answers -LOADING while it reads its files.
                Ok(Reply::Error(e)) => last = format!("PING answered -{e}"),
                Err(e) => last = format!("{e:#}"),
                Ok(other) => bail!("server on port {port} answered PING with {other:?}"),
            },
            Err(e) => last = format!("{e:#}"),
        }
        if Instant::now() > deadline {
            bail!(
                "the server on port {port} did not answer PING within {START_TIMEOUT:?} (last: {last}); its log ends:\n{}",
                log_tail(log)
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

impl NetTarget {
    /// The mode in words, from the server's own INFO (and, for Redis, its
    /// `appendfsync`), so a report says what actually ran.
    fn describe(&mut self) -> Result<String> {
        let how = if self.indexed { "one connection, keys indexed for scans" } else { "one connection" };
        let server = info(&mut self.client, b"server")?;
        let persistence = info(&mut self.client, b"persistence")?;
        Ok(match self.server {
            Server::Tembo => {
                let pool_mode = info_field(&persistence, "pool_mode").unwrap_or_else(|| "?".into());
                format!("tembo serve over loopback, pool mode {pool_mode}, {how}")
            }
            _ => {
                let version = info_field(&server, "redis_version").unwrap_or_else(|| "?".into());
                let aof = if info_field(&persistence, "aof_enabled").as_deref() == Some("1") {
                    let fsync = match self.client.call(&[b"CONFIG", b"GET", b"appendfsync"])? {
                        Reply::Array(Some(kv)) => match kv.get(1) {
                            Some(Reply::Bulk(Some(v))) => String::from_utf8_lossy(v).into_owned(),
                            _ => "?".into(),
                        },
                        other => bail!("CONFIG GET appendfsync answered {other:?}"),
                    };
                    format!("AOF fsync {fsync}")
                } else {
                    "no AOF, no RDB".into()
                };
                format!("redis-server {version} over loopback, {aof}, {how}")
            }
        })
    }
}

impl Target for NetTarget {
    fn put(&mut self, key: &[u8], value: &[u8]) -> Result<()> {
        let r = self.put_once(key, value);
        self.explain(r)
    }

    fn get(&mut self, key: &[u8], buf: &mut Vec<u8>) -> Result<bool> {
        let r = self.get_once(key, buf);
        self.explain(r)
    }

    fn delete(&mut self, key: &[u8]) -> Result<bool> {
        let r = self.delete_once(key);
        self.explain(r)
    }

    fn scan(&mut self, start: &[u8], n: usize) -> Result<usize> {
        let r = self.scan_once(start, n);
        self.explain(r)
    }

    fn mode(&self) -> String {
        self.mode.clone()
    }
}

impl NetTarget {
    /// A failed request of a server that has exited says so, with its log.
    fn explain<T>(&mut self, r: Result<T>) -> Result<T> {
        r.map_err(|e| match self.child.as_mut().map(Child::try_wait) {
            Some(Ok(Some(status))) => {
                e.context(format!("the server exited ({status}); its log ends:\n{}", log_tail(&self.log)))
            }
            _ => e,
        })
    }

    /// Sends `write` and, when the key index is kept, `index` in the same
    /// write; both replies are read before either is judged, so that a
    /// refusal leaves the connection in step.
    fn indexed_write(&mut self, write: &[&[u8]], index: &[&[u8]]) -> Result<(Reply, Option<Reply>)> {
        self.client.queue(write);
        if self.indexed {
            self.client.queue(index);
        }
        self.client.flush()?;
        let first = self.client.reply()?;
        let second = if self.indexed { Some(self.client.reply()?) } else { None };
        Ok((first, second))
    }

    fn put_once(&mut self, key: &[u8], value: &[u8]) -> Result<()> {
        let (set, zadd) = self.indexed_write(&[b"SET", key, value], &[b"ZADD", INDEX_KEY, b"0", key])?;
        expect_ok("SET", set)?;
        zadd.map(|r| expect_int("ZADD", r)).transpose()?;
        Ok(())
    }

    fn get_once(&mut self, key: &[u8], buf: &mut Vec<u8>) -> Result<bool> {
        match self.client.call(&[b"GET", key])? {
            Reply::Bulk(Some(v)) => {
                *buf = v;
                Ok(true)
            }
            Reply::Bulk(None) => Ok(false),
            other => bail!("GET answered {other:?}"),
        }
    }

    fn delete_once(&mut self, key: &[u8]) -> Result<bool> {
        let (del, zrem) = self.indexed_write(&[b"DEL", key], &[b"ZREM", INDEX_KEY, key])?;
        let n = expect_int("DEL", del)?;
        zrem.map(|r| expect_int("ZREM", r)).transpose()?;
        Ok(n == 1)
    }

    fn scan_once(&mut self, start: &[u8], n: usize) -> Result<usize> {
        if !self.indexed {
            bail!("this run keeps no key index, so it cannot scan (a workload with scans asks for one)");
        }
        if n == 0 {
            return Ok(0);
        }
        let mut from = Vec::with_capacity(start.len() + 1);
        from.push(b'[');
        from.extend_from_slice(start);
        let count = n.to_string();
        let keys =
            match self.client.call(&[b"ZRANGE", INDEX_KEY, &from, b"+", b"BYLEX", b"LIMIT", b"0", count.as_bytes()])? {
                Reply::Array(Some(items)) => items,
                other => bail!("ZRANGE BYLEX answered {other:?}"),
            };
        if keys.is_empty() {
            return Ok(0);
        }
        let mut args: Vec<&[u8]> = Vec::with_capacity(keys.len() + 1);
        args.push(b"MGET");
        for k in &keys {
            match k {
                Reply::Bulk(Some(k)) => args.push(k),
                other => bail!("ZRANGE BYLEX returned {other:?} as a key"),
            }
        }
        let values = match self.client.call(&args)? {
            Reply::Array(Some(v)) => v,
            other => bail!("MGET answered {other:?}"),
        };
        let mut read = 0;
        for v in values {
            if let Reply::Bulk(Some(v)) = v {
                // Copied once into a reused buffer, as every target does.
                self.scratch.clear();
                self.scratch.extend_from_slice(&v);
                std::hint::black_box(&self.scratch);
                read += 1;
            }
        }
        Ok(read)
    }
}

fn expect_ok(what: &str, r: Reply) -> Result<()> {
    match r {
        Reply::Status(s) if s == "OK" => Ok(()),
        other => bail!("{what} answered {other:?}"),
    }
}

fn expect_int(what: &str, r: Reply) -> Result<i64> {
    match r {
        Reply::Int(n) => Ok(n),
        other => bail!("{what} answered {other:?}"),
    }
}

impl Drop for NetTarget {
    fn drop(&mut self) {
        // SHUTDOWN NOSAVE stops both servers at once (no RDB for Redis; a
        // clean close of Tembo's pool); a server that does not go within a
        // few seconds is killed, so a run never leaves one behind.
        let _ = self.client.call(&[b"SHUTDOWN", b"NOSAVE"]);
        if let Some(mut child) = self.child.take() {
            let deadline = Instant::now() + Duration::from_secs(10);
            loop {
                match child.try_wait() {
                    Ok(Some(_)) => break,
                    Ok(None) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(10)),
                    _ => {
                        let _ = child.kill();
                        let _ = child.wait();
                        break;
                    }
                }
            }
        }
    }
}
