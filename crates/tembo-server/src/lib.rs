//! # tembo-server — a Redis-compatible server on the Tembo store
//!
//! `tembo serve` speaks RESP2 and RESP3 to unmodified Redis clients and
//! keeps every key in one [`tembo_store::Db`]: a Redis key is a metadata
//! record plus, for hashes, lists, sets and sorted sets, one ordered key per
//! element (see [`encoding`]). Writes are durable before their reply: the
//! executor commits each group of requests that arrived together with one
//! engine batch (group commit) and only then answers them; MULTI/EXEC is
//! inside one batch, all or nothing across crashes.
//!
//! ## Shape
//! - `net`: tokio accept loop and connection tasks (parse, forward, write back).
//! - `exec`: the executor task (command order, group commit, background work).
//! - `cmd`: the command table and one module per family.
//! - `store`: committed state plus the group's pending writes.
//! - `encoding`, `keyspace`: Redis types as ordered keys.
//! - `chunked`: strings edited in place, and big ones kept in chunks.
//! - `resp`: protocol parser and reply encoder.
//! - `acl`: users, their passwords and permissions, checked before each command.
//!
//! ## What it promises
//! - A reply to a write is sent only after the write is durable in the mode
//!   the pool reports (INFO persistence says which).
//! - A malformed or oversized request closes that connection with a
//!   protocol error; other clients are not affected.
//! - A full pool fails the commands whose writes cannot be stored (an OOM
//!   error reply) and loses nothing acknowledged.
//! - A command applies fully or not at all: one refused midway (a key over
//!   the engine's 64 KiB with its field) leaves nothing it staged, within a
//!   group shared with other clients, inside EXEC or a script, and when it
//!   serves a blocked client (see `store`).
//! - A big string is not copied needlessly: an argument of 32 KiB or more
//!   is read into a buffer of its own size (`resp`, `querybuf`), commands
//!   that need only a key's type, expiry, length or a range of it read
//!   only that (`keyspace::lookup_head`, `string_len`, `string_part`), and
//!   a reply's bulk values of 16 KiB or more go to the socket without a
//!   copy into the reply buffer (`resp::Reply::encode_spliced`).
//! - An edit of a string (APPEND, SETRANGE, SETBIT, BITFIELD) reads and
//!   writes it once; once a string over 256 KiB is edited it is kept in
//!   64 KiB chunks, and each later edit rewrites only the chunks it
//!   touches (`chunked`).
//!
//! ## What it does not do (yet)
//! Modules, replication (SYNC/PSYNC serve only snapshot-only clients such
//! as `redis-cli --rdb`: `rdb_sync`), cluster.

#![forbid(unsafe_code)]

mod access;
mod acl;
mod background;
mod bgsave;
mod blocking;
mod busy;
mod chunked;
mod client;
mod clock;
mod cmd;
mod config;
mod cursor;
pub mod encoding;
mod exec;
mod geohash;
mod hll;
mod info;
mod keyspace;
mod latency;
mod maxmemory;
mod net;
mod notify;
mod pause;
mod prefetch;
mod proc_stats;
mod pubsub;
mod querybuf;
mod ranks;
pub mod rdb;
pub mod rdb_load;
pub mod rdb_save;
pub mod rdb_stream;
mod rdb_sync;
pub mod rdb_value;
pub mod resp;
mod script;
mod script_json;
mod script_libs;
mod script_msgpack;
mod script_struct;
mod session;
pub mod size;
mod stats;
mod stats_group;
mod store;
mod stream;
mod stream_cg;
mod stream_id;
mod tracking;

use std::net::TcpListener as StdListener;
use std::path::PathBuf;
use std::sync::Arc;

pub use config::{Config, ConfigError, DEFAULT_POOL};
pub use exec::MAX_DATABASES;
pub use session::Session;
use tembo_store::{Db, DbError};

/// The Redis version whose semantics the server follows (reported by HELLO and INFO).
pub const REDIS_VERSION: &str = "7.0.15";

/// `source`, led by the pool's path unless it names the path already
/// (most database errors do: "pool X: X: locked" said it twice).
fn pool_message(path: &std::path::Path, source: &DbError) -> String {
    let text = source.to_string();
    if text.contains(&*path.to_string_lossy()) {
        text
    } else {
        format!("pool {}: {text}", path.display())
    }
}

/// Why the server could not start or stop cleanly.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    /// Bad settings.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// The pool could not be opened, created or closed.
    #[error("{}", pool_message(.path, .source))]
    Pool {
        /// The pool.
        path: PathBuf,
        /// What failed.
        #[source]
        source: DbError,
    },
    /// The pool holds server data this build cannot read.
    #[error("pool {path}: {why}")]
    Layout {
        /// The pool.
        path: PathBuf,
        /// What is wrong and what to do.
        why: String,
    },
    /// The address could not be bound, or the runtime could not start.
    #[error("{what}: {source}")]
    Io {
        /// What was being done.
        what: String,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
}

/// Binds the Unix domain socket `cfg.unixsocket` asks for (none when it is
/// empty), with `unixsocketperm`'s permissions. Redis unlinks whatever is
/// at the path first; Tembo replaces a socket file left by a server that
/// is gone and an empty file (a placeholder, as test helpers make with
/// `mktemp`), and refuses a socket a live server answers on or a file
/// with data in it.
fn bind_unix(cfg: &Config) -> Result<Option<std::os::unix::net::UnixListener>, ServeError> {
    use std::os::unix::fs::{FileTypeExt, PermissionsExt};
    if cfg.unixsocket.is_empty() {
        return Ok(None);
    }
    let path = std::path::Path::new(&cfg.unixsocket);
    let fail = |what: String| move |source| ServeError::Io { what, source };
    if let Ok(meta) = std::fs::symlink_metadata(path) {
        let placeholder = meta.file_type().is_file() && meta.len() == 0;
        if !meta.file_type().is_socket() && !placeholder {
            let e = std::io::Error::from(std::io::ErrorKind::AlreadyExists);
            return Err(fail(format!(
                "binding unix socket {} (a file that is not a socket is there: move it or choose another --unixsocket)",
                path.display()
            ))(e));
        }
        if std::os::unix::net::UnixStream::connect(path).is_ok() {
            let e = std::io::Error::from(std::io::ErrorKind::AddrInUse);
            return Err(fail(format!(
                "binding unix socket {} (another server listens there: stop it or choose another --unixsocket)",
                path.display()
            ))(e));
        }
        std::fs::remove_file(path).map_err(fail(format!("removing the stale socket {}", path.display())))?;
    }
    let listener = std::os::unix::net::UnixListener::bind(path)
        .map_err(fail(format!("binding unix socket {}", path.display())))?;
    let mode = cfg.unixsocket_mode()?;
    if mode != 0 {
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode))
            .map_err(fail(format!("setting the permissions of {}", path.display())))?;
    }
    listener.set_nonblocking(true).map_err(fail("unix socket listener".into()))?;
    Ok(Some(listener))
}

struct StderrLog;

impl log::Log for StderrLog {
    fn enabled(&self, m: &log::Metadata) -> bool {
        m.level() <= log::max_level()
    }
    fn log(&self, r: &log::Record) {
        if self.enabled(r.metadata()) {
            let ms = exec::now_ms();
            eprintln!("{}:M {}.{:03} {} {}", std::process::id(), ms / 1000, ms % 1000, r.level(), r.args());
        }
    }
    fn flush(&self) {}
}

/// Runs the server until SHUTDOWN, SIGTERM or SIGINT; the pool is closed
/// cleanly (its clean-shutdown flag set) before this returns.
pub fn serve(cfg: Config, config_file: Option<PathBuf>) -> Result<(), ServeError> {
    cfg.validate()?;
    let _ = log::set_logger(&StderrLog);
    log::set_max_level(cfg.level());
    let io = |what: String| move |source| ServeError::Io { what, source };
    // The port first: a server that cannot listen must not create or
    // recover a pool on its way to failing. Connections that arrive while
    // the pool opens wait in the listen backlog.
    let addr = format!("{}:{}", cfg.bind, cfg.port);
    let listener = StdListener::bind(&addr).map_err(|e| {
        let what = if e.kind() == std::io::ErrorKind::AddrInUse {
            format!("binding {addr} (another server listens there: stop it or choose another --port)")
        } else {
            format!("binding {addr}")
        };
        ServeError::Io { what, source: e }
    })?;
    let unix_listener = bind_unix(&cfg)?;
    if let Some(dir) = cfg.pool.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).map_err(io(format!("creating {}", dir.display())))?;
    }
    let opts = cfg.store_options()?;
    let pool_err = |source| ServeError::Pool { path: cfg.pool.clone(), source };
    let db = Db::open_or_create(&cfg.pool, &opts).map_err(pool_err)?;
    let report = db.recovery_progress();
    if report.ran {
        log::warn!(
            "the pool was not closed cleanly: serving now; repair and leak sweep {} ({} nodes repaired so far)",
            if report.finished { "done" } else { "continue in the background" },
            report.nodes_repaired,
        );
    }
    let mode = db.mode();
    let db = Arc::new(db);
    listener.set_nonblocking(true).map_err(io("listener".into()))?;
    let shared = Arc::new(net::Shared::new(&cfg));
    let mut state = exec::State::new(db, cfg.clone(), shared.clone()).map_err(|e| match e {
        exec::OpenError::Db(e) => pool_err(e),
        exec::OpenError::Layout(why) => ServeError::Layout { path: cfg.pool.clone(), why },
        exec::OpenError::Acl(why) => ServeError::Config(crate::config::ConfigError::Invalid(format!("ACL: {why}"))),
    })?;
    state.config_file = config_file.map(|p| p.display().to_string()).unwrap_or_default();
    log::info!(
        "Tembo {} (Redis {REDIS_VERSION} protocol) on {addr}, pool {} ({mode}: {}), {} keys",
        env!("CARGO_PKG_VERSION"),
        cfg.pool.display(),
        mode.guarantee(),
        state.keys.iter().sum::<i64>()
    );
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
    // One thread for sockets and the executor, as in Redis: the executor is
    // CPU-bound on the engine and a hand-off between threads per commit
    // group cost more than the parallelism gave on two cores (and a
    // multi-thread runtime with one worker cost 5-7% of redis-benchmark's
    // throughput). The executor drives the runtime from this thread
    // (`State::run`); a busy script has a helper thread drive it (`busy`).
    let rt = Arc::new(
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(io("starting the runtime".into()))?,
    );
    let mut accept = Vec::new();
    {
        let _in_runtime = rt.enter();
        match tokio::net::TcpListener::from_std(listener) {
            Ok(listener) => {
                log::info!("Ready to accept connections tcp");
                accept.push(rt.spawn(net::accept_loop(net::Listener::Tcp(listener), tx.clone(), shared.clone())));
            }
            Err(e) => {
                log::error!("listener: {e}");
                let _ = tx.send(exec::Msg::Shutdown);
            }
        }
        if let Some(unix) = unix_listener {
            match tokio::net::UnixListener::from_std(unix) {
                Ok(listener) => {
                    log::info!("Ready to accept connections unix");
                    let at = net::Listener::Unix(listener, cfg.unixsocket.clone());
                    accept.push(rt.spawn(net::accept_loop(at, tx.clone(), shared)));
                }
                Err(e) => {
                    log::error!("unix socket listener: {e}");
                    let _ = tx.send(exec::Msg::Shutdown);
                }
            }
        }
    }
    let signals = rt.spawn({
        let tx = tx.clone();
        async move {
            let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()).ok();
            let sig = tokio::select! {
                _ = tokio::signal::ctrl_c() => "SIGINT",
                _ = async { match term.as_mut() { Some(t) => { t.recv().await; } None => std::future::pending().await } } => "SIGTERM",
            };
            log::info!("received {sig}: shutting down");
            let _ = tx.send(exec::Msg::Shutdown);
        }
    });
    let db = state.run(&rt, rx);
    for task in accept {
        task.abort();
    }
    if !cfg.unixsocket.is_empty() {
        // As Redis at shutdown: the socket goes with the server.
        let _ = std::fs::remove_file(&cfg.unixsocket);
    }
    signals.abort();
    match Arc::try_unwrap(rt) {
        Ok(rt) => rt.shutdown_timeout(std::time::Duration::from_secs(1)),
        // Not expected (the executor and its helpers are done with it); the
        // pool is closed all the same.
        Err(_) => log::warn!("the runtime is still in use at shutdown"),
    }
    let db = Arc::try_unwrap(db).map_err(|_| ServeError::Io {
        what: "closing the pool".into(),
        source: std::io::Error::other("the database is still in use"),
    })?;
    db.close().map_err(|source| ServeError::Pool { path: cfg.pool.clone(), source })?;
    log::info!("pool closed cleanly; bye");
    Ok(())
}
