//! `tembo serve`: the Redis-compatible server.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, Result};
use clap::Args;
use tembo_server::Config;

/// Options of `tembo serve`; each overrides the config file.
#[derive(Debug, Args)]
pub struct ServeArgs {
    /// TOML config file (keys: bind, port, unixsocket, unixsocketperm, pool, pool_size, pool_max_size, mode, engine, requirepass,
    /// maxclients, databases, loglevel, allow_unprotected, proto_max_bulk_len,
    /// client_query_buffer_limit, users, aclfile, acl_pubsub_default, acllog_max_len, backup_path,
    /// maxmemory, maxmemory_policy)
    #[arg(long, short = 'c')]
    config: Option<PathBuf>,
    /// Address to listen on [default: 127.0.0.1]
    #[arg(long)]
    bind: Option<String>,
    /// TCP port [default: 6379]
    #[arg(long, short = 'p')]
    port: Option<u16>,
    /// Also listen on this Unix domain socket (e.g. /tmp/tembo.sock; redis-cli -s
    /// PATH); a socket a stopped server left there is replaced
    #[arg(long, value_name = "PATH")]
    unixsocket: Option<String>,
    /// Permissions of the Unix socket, octal (e.g. 700, 770) [default: as the umask leaves them]
    #[arg(long, value_name = "OCTAL")]
    unixsocketperm: Option<String>,
    /// Pool file, created on first run [default: tembo-data/tembo.pool]
    #[arg(long)]
    pool: Option<PathBuf>,
    /// Size of a new pool, e.g. 256M, 4G [default: 256M]
    #[arg(long, value_parser = crate::size::parse_size)]
    pool_size: Option<u64>,
    /// Largest size the pool may grow to [default: 16 x pool size, at least 1G]
    #[arg(long, value_parser = crate::size::parse_size)]
    pool_max_size: Option<u64>,
    /// Durability mode: auto (dax where MAP_SYNC works, emulated on tmpfs, else msync),
    /// dax, emulated (process crashes only; fastest on a disk file), msync (power
    /// failure; an msync per fence) [default: auto]
    #[arg(long)]
    mode: Option<String>,
    /// Engine of a new pool: cdds (multi-version B+tree), kamino (in-place B+tree on
    /// Kamino-Tx), kamino-dynamic (the same with a partial backup), undo (the same on
    /// undo-log transactions); an existing pool keeps its own [default: cdds]
    #[arg(long)]
    engine: Option<String>,
    /// Password clients must give with AUTH or HELLO
    #[arg(long)]
    requirepass: Option<String>,
    /// An ACL user, as after Redis's `user` directive: a name and its rules, e.g.
    /// --user "alice on >secret ~app:* +@read"; repeat for more users
    #[arg(long = "user", value_name = "RULES")]
    users: Vec<String>,
    /// ACL file that ACL LOAD reads and ACL SAVE writes (one `user …` line per
    /// user); its users are loaded at start
    #[arg(long)]
    aclfile: Option<String>,
    /// Where BGSAVE writes its backup, a pool file `tembo serve --pool` can
    /// serve [default: <pool stem>-backup.pool beside the pool]
    #[arg(long)]
    backup_path: Option<PathBuf>,
    /// Most pool bytes the data may take, e.g. 512M; past it the policy applies
    /// (0: no limit but the pool's maximum size) [default: 0]
    #[arg(long, value_parser = crate::size::parse_size)]
    maxmemory: Option<u64>,
    /// What to do past --maxmemory: noeviction (refuse commands that add data),
    /// allkeys-lru, allkeys-lfu, allkeys-random, volatile-lru, volatile-lfu,
    /// volatile-random or volatile-ttl (evict keys, those with a TTL for volatile-*)
    /// [default: noeviction]
    #[arg(long)]
    maxmemory_policy: Option<String>,
    /// Most simultaneous clients [default: 10000]
    #[arg(long)]
    maxclients: Option<usize>,
    /// Number of databases (SELECT 0..N-1) [default: 16]
    #[arg(long)]
    databases: Option<usize>,
    /// error, warn, info or debug [default: info]
    #[arg(long)]
    loglevel: Option<String>,
    /// Allow a non-loopback --bind without --requirepass (only on a trusted network)
    #[arg(long)]
    allow_unprotected: bool,
}

/// Runs the server in the foreground.
pub fn run(args: ServeArgs) -> Result<ExitCode> {
    let mut cfg = match &args.config {
        Some(path) => Config::from_file(path)?,
        None => Config::default(),
    };
    if let Some(v) = args.bind {
        cfg.bind = v;
    }
    if let Some(v) = args.port {
        cfg.port = v;
    }
    if let Some(v) = args.unixsocket {
        cfg.unixsocket = v;
    }
    if let Some(v) = args.unixsocketperm {
        cfg.unixsocketperm = v;
    }
    if let Some(v) = args.pool {
        cfg.pool = v;
    }
    if let Some(v) = args.pool_size {
        cfg.pool_size = v;
    }
    if let Some(v) = args.pool_max_size {
        cfg.pool_max_size = v;
    }
    if let Some(v) = args.mode {
        cfg.mode = v;
    }
    if let Some(v) = args.engine {
        cfg.engine = v;
    }
    if let Some(v) = args.requirepass {
        cfg.requirepass = v;
    }
    if !args.users.is_empty() {
        cfg.users = args.users;
    }
    if let Some(v) = args.aclfile {
        cfg.aclfile = v;
    }
    if let Some(v) = args.backup_path {
        cfg.backup_path = v;
    }
    if let Some(v) = args.maxmemory {
        cfg.maxmemory = v;
    }
    if let Some(v) = args.maxmemory_policy {
        cfg.maxmemory_policy = v;
    }
    if let Some(v) = args.maxclients {
        cfg.maxclients = v;
    }
    if let Some(v) = args.databases {
        cfg.databases = v;
    }
    if let Some(v) = args.loglevel {
        cfg.loglevel = v;
    }
    cfg.allow_unprotected |= args.allow_unprotected;
    tembo_server::serve(cfg, args.config).context("tembo serve")?;
    Ok(ExitCode::SUCCESS)
}
