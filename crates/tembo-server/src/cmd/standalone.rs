//! What a standalone Tembo answers for Redis features it has no part in:
//! replication (ROLE, REPLICAOF/SLAVEOF, WAIT), cluster (CLUSTER, READONLY,
//! READWRITE, ASKING) and the append-only file (BGREWRITEAOF), plus LOLWUT.
//!
//! Clients probe these at connect or after writes; each gets the answer a
//! standalone Redis master without replicas would give, or Redis's own
//! error for a server without cluster support, so that client libraries
//! take their standalone paths. WAIT returns at once: there are no replicas
//! to wait for, and every acknowledged write is already durable in the pool.

use super::args::{int, is};
use super::{CmdError, CmdResult, Spec};
use crate::exec::Ctx;
use crate::resp::Reply;

pub const COMMANDS: &[Spec] = &[
    Spec {
        name: "role",
        arity: 1,
        flags: &["noscript", "loading", "stale", "fast"],
        keys: (0, 0, 0),
        group: "server",
        summary: "ROLE: this server's replication role (always a master without replicas).",
        run: role,
    },
    Spec {
        name: "replicaof",
        arity: 3,
        flags: &["admin", "noscript", "stale", "no_async_loading"],
        keys: (0, 0, 0),
        group: "server",
        summary: "REPLICAOF NO ONE: accepted (Tembo is always a master); replicating another server is not supported.",
        run: replicaof,
    },
    Spec {
        name: "slaveof",
        arity: 3,
        flags: &["admin", "noscript", "stale", "no_async_loading"],
        keys: (0, 0, 0),
        group: "server",
        summary: "SLAVEOF NO ONE: REPLICAOF's old name.",
        run: replicaof,
    },
    Spec {
        name: "wait",
        arity: 3,
        flags: &["noscript"],
        keys: (0, 0, 0),
        group: "generic",
        summary: "WAIT numreplicas timeout: 0 at once (no replicas; writes are durable before their replies).",
        run: wait,
    },
    Spec {
        name: "module",
        arity: -2,
        flags: &[],
        keys: (0, 0, 0),
        group: "server",
        summary: "MODULE LIST: no modules (Tembo loads none; LOAD, LOADEX and UNLOAD are refused).",
        run: module,
    },
    Spec {
        name: "cluster",
        arity: -2,
        flags: &["stale"],
        keys: (0, 0, 0),
        group: "cluster",
        summary: "CLUSTER: not supported (standalone server).",
        run: no_cluster,
    },
    Spec {
        name: "readonly",
        arity: 1,
        flags: &["loading", "stale", "fast"],
        keys: (0, 0, 0),
        group: "cluster",
        summary: "READONLY: cluster only.",
        run: no_cluster,
    },
    Spec {
        name: "readwrite",
        arity: 1,
        flags: &["loading", "stale", "fast"],
        keys: (0, 0, 0),
        group: "cluster",
        summary: "READWRITE: cluster only.",
        run: no_cluster,
    },
    Spec {
        name: "asking",
        arity: 1,
        flags: &["fast"],
        keys: (0, 0, 0),
        group: "cluster",
        summary: "ASKING: cluster only.",
        run: no_cluster,
    },
    Spec {
        name: "bgrewriteaof",
        arity: 1,
        flags: &["admin", "noscript", "no_async_loading"],
        keys: (0, 0, 0),
        group: "server",
        summary: "BGREWRITEAOF: nothing to rewrite (no append-only file: the pool is the only copy).",
        run: bgrewriteaof,
    },
    Spec {
        name: "lolwut",
        arity: -1,
        flags: &["readonly", "fast"],
        keys: (0, 0, 0),
        group: "server",
        summary: "LOLWUT [VERSION v]: the server's version, with art in Redis.",
        run: lolwut,
    },
];

fn role(_: &mut Ctx, _: &[Vec<u8>]) -> CmdResult {
    Ok(Reply::Array(vec![Reply::bulk("master"), Reply::Int(0), Reply::Array(Vec::new())]))
}

fn replicaof(_: &mut Ctx, a: &[Vec<u8>]) -> CmdResult {
    if is(&a[1], "no") && is(&a[2], "one") {
        return Ok(Reply::ok());
    }
    Err(CmdError::err("Tembo does not replicate: REPLICAOF accepts only NO ONE (this server is a master)"))
}

fn wait(_: &mut Ctx, a: &[Vec<u8>]) -> CmdResult {
    if int(&a[1])? < 0 {
        return Err(CmdError::err("value is out of range, must be positive"));
    }
    if int(&a[2])? < 0 {
        return Err(CmdError::err("timeout is negative"));
    }
    Ok(Reply::Int(0))
}

fn no_cluster(_: &mut Ctx, a: &[Vec<u8>]) -> CmdResult {
    // Redis's command table refuses an unknown CLUSTER subcommand before
    // the command itself says that cluster support is off (READONLY,
    // READWRITE and ASKING have no subcommands).
    let is_cluster = a[0].eq_ignore_ascii_case(b"cluster");
    if is_cluster && super::spec(b"cluster").and_then(|s| super::subcommand(s, a)).is_none() {
        let sub = String::from_utf8_lossy(&a[1]);
        return Err(CmdError::err(format!("unknown subcommand '{sub:.128}'. Try CLUSTER HELP.")));
    }
    Err(CmdError::err("This instance has cluster support disabled"))
}

/// MODULE: Tembo runs no Redis modules. LIST answers (clients probe it for
/// RedisJSON and the like); loading is refused with Redis's words for a
/// server whose `enable-module-command` is `no`, which CONFIG GET shows.
fn module(_: &mut Ctx, a: &[Vec<u8>]) -> CmdResult {
    let sub = String::from_utf8_lossy(&a[1]).to_ascii_lowercase();
    match (sub.as_str(), a.len()) {
        ("list", 2) => Ok(Reply::Array(Vec::new())),
        ("load" | "loadex", n) if n >= 3 => Err(CmdError::err(MODULE_REFUSED)),
        ("unload", 3) => Err(CmdError::err(MODULE_REFUSED)),
        ("help", 2) => Ok(super::help(&[
            "MODULE <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
            "LIST",
            "    Return a list of loaded modules (Tembo loads none).",
            "LOAD <path> [<arg> ...]",
            "LOADEX <path> [[CONFIG NAME VALUE] [CONFIG NAME VALUE]] [ARGS ...]",
            "UNLOAD <name>",
            "    Refused: Tembo does not run Redis modules.",
        ])),
        _ => Err(CmdError::err(format!("unknown subcommand '{sub:.128}'. Try MODULE HELP."))),
    }
}

const MODULE_REFUSED: &str = "MODULE command not allowed. If the enable-module-command option is set to \"local\", you can run it from a local connection, otherwise you need to set this option in the configuration file, and then restart the server.";

fn bgrewriteaof(_: &mut Ctx, _: &[Vec<u8>]) -> CmdResult {
    Ok(Reply::Simple(
        "Background append only file rewriting started (Tembo keeps no append-only file: nothing to do)".into(),
    ))
}

/// LOLWUT draws no art here, but ends with Redis's `Redis ver. X` words,
/// which clients' tests look for.
fn lolwut(_: &mut Ctx, _: &[Vec<u8>]) -> CmdResult {
    Ok(Reply::Verbatim(format!(
        "Tembo ver. {}, speaking the protocol of Redis ver. {}\n",
        env!("CARGO_PKG_VERSION"),
        crate::REDIS_VERSION
    )))
}
