//! REPLCONF, SYNC and PSYNC: the replication handshake, for the clients
//! that want a snapshot of the data set in Redis's RDB format and nothing
//! after it — `redis-cli --rdb FILE`, `redis-cli --functions-rdb FILE`,
//! and backup tools that speak the same handshake.
//!
//! Such a client says `REPLCONF rdb-only 1` (and, for the libraries only,
//! `REPLCONF rdb-filter-only functions`), then `SYNC` or `PSYNC`. The
//! command answers nothing itself: once its group is committed and its
//! earlier replies are out, `crate::rdb_sync` writes the RDB of that
//! committed version (the group's writes included) to the connection and
//! closes it. A connection that gets other messages (MONITOR, pub/sub,
//! client tracking) cannot SYNC: they would land inside the file. What the client
//! pipelines after SYNC is dropped, as a Redis replica's commands are not
//! answered.
//!
//! A SYNC or PSYNC without `rdb-only` — a Redis replica attaching — is
//! refused with an error that says why: Tembo streams no writes to
//! replicas (every acknowledged write is durable in its pool instead).

use super::args::{int, is};
use super::{CmdError, CmdResult, Spec};
use crate::exec::Ctx;
use crate::rdb_save::Filter;
use crate::rdb_sync::Request;
use crate::resp::Reply;

pub const COMMANDS: &[Spec] = &[
    Spec {
        name: "replconf",
        arity: -1,
        flags: &["admin", "noscript", "loading", "stale", "allow_busy"],
        keys: (0, 0, 0),
        group: "server",
        summary: "REPLCONF option value [option value ...]: replication handshake settings (rdb-only, rdb-filter-only, capa).",
        run: replconf,
    },
    Spec {
        name: "sync",
        arity: 1,
        flags: &["admin", "noscript", "no_async_loading", "no_multi"],
        keys: (0, 0, 0),
        group: "server",
        summary: "SYNC: after REPLCONF rdb-only 1, sends an RDB snapshot of the data set and closes the connection.",
        run: sync,
    },
    Spec {
        name: "psync",
        arity: -3,
        flags: &["admin", "noscript", "no_async_loading", "no_multi"],
        keys: (0, 0, 0),
        group: "server",
        summary: "PSYNC replid offset: as SYNC, after +FULLRESYNC (there is never a partial resync).",
        run: psync,
    },
];

/// Why a replica cannot attach.
pub const NOT_A_PRIMARY: &str = "Tembo does not stream writes to replicas: SYNC and PSYNC send only an RDB \
     snapshot, to a client that asked for it with REPLCONF rdb-only 1 (as redis-cli --rdb does)";

fn replconf(cx: &mut Ctx, a: &[Vec<u8>]) -> CmdResult {
    if a.len() % 2 == 0 {
        return Err(CmdError::syntax());
    }
    // Checked whole first: a bad pair changes nothing, as in Redis (which
    // stops at the bad pair having applied the ones before it; a client
    // that gets an error starts over either way).
    let mut conf = cx.client.replconf.clone();
    let mut ack = false;
    for pair in a[1..].chunks(2) {
        let (opt, val) = (&pair[0], &pair[1]);
        if is(opt, "listening-port") {
            int(val)?;
        } else if is(opt, "ip-address") {
        } else if is(opt, "capa") {
            conf.capa_eof |= is(val, "eof");
        } else if is(opt, "ack") || is(opt, "fack") || is(opt, "getack") {
            // A replica's acknowledgement, or a primary's request for one:
            // Redis answers neither (here, no replica and no primary).
            ack = true;
        } else if is(opt, "rdb-only") {
            conf.rdb_only = match int(val)? {
                0 => false,
                1 => true,
                // Redis's words, typo included.
                _ => return Err(CmdError::err("value is out of range, value must between 0 and 1")),
            };
        } else if is(opt, "rdb-filter-only") {
            conf.filter = filter(val)?;
        } else {
            return Err(CmdError::err(format!("Unrecognized REPLCONF option: {}", String::from_utf8_lossy(opt))));
        }
    }
    cx.client.replconf = conf;
    Ok(if ack { Reply::Many(Vec::new()) } else { Reply::ok() })
}

/// `rdb-filter-only`'s value: space-separated parts to include, of which
/// there is one, `functions`; an empty value includes nothing.
fn filter(val: &[u8]) -> Result<Filter, CmdError> {
    let mut f = Filter { keys: false, functions: false };
    for part in val.split(|&b| b == b' ' || b == b'\t').filter(|p| !p.is_empty()) {
        if is(part, "functions") {
            f.functions = true;
        } else {
            return Err(CmdError::err(format!(
                "Unsupported rdb-filter-only option: {}",
                String::from_utf8_lossy(part)
            )));
        }
    }
    Ok(f)
}

fn sync(cx: &mut Ctx, _: &[Vec<u8>]) -> CmdResult {
    start(cx, None)
}

fn psync(cx: &mut Ctx, a: &[Vec<u8>]) -> CmdResult {
    // Redis reads the offset first, and ignores arguments after it (but
    // a FAILOVER request, which only a replica answers).
    int(&a[2])?;
    let replid = cx.st.replid.clone();
    start(cx, Some(replid))
}

/// Queues the transfer; it starts once this group's replies are out.
fn start(cx: &mut Ctx, fullresync: Option<String>) -> CmdResult {
    if !cx.client.replconf.rdb_only {
        return Err(CmdError::err(NOT_A_PRIMARY));
    }
    if cx.client.fd < 0 {
        return Err(CmdError::err("SYNC needs a network connection to send the snapshot to"));
    }
    // Nothing else may reach the connection once the file flows on it.
    let busy = if cx.client.monitor {
        Some("in MONITOR mode")
    } else if cx.client.subscribed() {
        Some("with pub/sub subscriptions")
    } else if cx.client.tracking.on {
        Some("with CLIENT TRACKING on")
    } else {
        None
    };
    if let Some(state) = busy {
        return Err(CmdError::err(format!(
            "SYNC is not possible on a connection {state}: the RDB would be mixed with its messages; use a new \
             connection"
        )));
    }
    let engine = cx.st.store.db().engine();
    if engine != tembo_store::Engine::Cdds {
        return Err(CmdError::err(format!(
            "SYNC needs a snapshot, which the {engine} engine does not keep (copy the pool file while the server \
             is stopped to back it up)"
        )));
    }
    // No commit here: the transfer starts once the group is committed and
    // answered (`State::flush_outbox`); committing midway would let a
    // failed group's rerun apply its earlier commands twice.
    cx.client.syncing = true;
    cx.st.syncs.requests.push(Request { client: cx.client.id, conf: cx.client.replconf.clone(), fullresync });
    Ok(Reply::Many(Vec::new()))
}

#[cfg(test)]
mod tests {
    use super::filter;
    use crate::rdb_save::Filter;

    #[test]
    fn rdb_filter_only_takes_functions_or_nothing() {
        assert_eq!(filter(b"functions").unwrap(), Filter { keys: false, functions: true });
        assert_eq!(filter(b"").unwrap(), Filter { keys: false, functions: false });
        assert_eq!(filter(b" FUNCTIONS ").unwrap(), Filter { keys: false, functions: true });
        let e = filter(b"functions keys").unwrap_err();
        assert_eq!(e.0, "ERR Unsupported rdb-filter-only option: keys");
    }
}
