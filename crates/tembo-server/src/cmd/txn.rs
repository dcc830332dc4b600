//! Transactions: MULTI EXEC DISCARD WATCH UNWATCH.
//!
//! EXEC runs the queued commands back to back in the executor, so nothing
//! interleaves, and their writes join the current commit group: they become
//! durable together with one batch or not at all (stronger than Redis,
//! whose AOF can hold half a transaction after a crash).

use super::{run, spec, CmdError, CmdResult, Spec};
use crate::exec::Ctx;
use crate::resp::Reply;

pub const COMMANDS: &[Spec] = &[
    Spec {
        name: "multi",
        arity: 1,
        flags: &["noscript", "loading", "stale", "fast", "allow_busy"],
        keys: (0, 0, 0),
        group: "transactions",
        summary: "Starts a transaction.",
        run: multi,
    },
    Spec {
        name: "exec",
        arity: 1,
        flags: &["noscript", "loading", "stale", "skip_slowlog"],
        keys: (0, 0, 0),
        group: "transactions",
        summary: "Runs the queued commands atomically; durable as one batch.",
        run: exec,
    },
    Spec {
        name: "discard",
        arity: 1,
        flags: &["noscript", "loading", "stale", "fast", "allow_busy"],
        keys: (0, 0, 0),
        group: "transactions",
        summary: "Discards the queued commands.",
        run: discard,
    },
    Spec {
        name: "watch",
        arity: -2,
        flags: &["noscript", "loading", "stale", "fast", "allow_busy"],
        keys: (1, -1, 1),
        group: "transactions",
        summary: "Makes the next EXEC fail if any of the keys changes.",
        run: watch,
    },
    Spec {
        name: "unwatch",
        arity: 1,
        flags: &["noscript", "loading", "stale", "fast", "allow_busy"],
        keys: (0, 0, 0),
        group: "transactions",
        summary: "Forgets the watched keys.",
        run: unwatch,
    },
];

fn multi(cx: &mut Ctx, _: &[Vec<u8>]) -> CmdResult {
    if cx.client.multi.is_some() {
        return Err(CmdError::err("MULTI calls can not be nested"));
    }
    cx.client.multi = Some(Vec::new());
    cx.client.multi_error = false;
    Ok(Reply::ok())
}

fn exec(cx: &mut Ctx, _: &[Vec<u8>]) -> CmdResult {
    let Some(queue) = cx.client.multi.take() else { return Err(CmdError::err("EXEC without MULTI")) };
    let aborted = std::mem::take(&mut cx.client.multi_error);
    let dirty = cx.client.watch_dirty || watched_key_expired(cx)?;
    cx.st.unwatch(cx.client);
    if aborted {
        return Err(CmdError("EXECABORT Transaction discarded because of previous errors.".into()));
    }
    if dirty {
        return Ok(Reply::NilArray);
    }
    let mut replies = Vec::with_capacity(queue.len());
    // Blocking commands answer at once inside a transaction, as in Redis.
    let no_block = std::mem::replace(&mut cx.client.no_block, true);
    for args in queue {
        // Queued commands were looked up when they were queued.
        let Some(spec) = spec(&args[0]) else { continue };
        // Permissions may have changed since the command was queued.
        if let Some(denied) = super::acl_denied(cx.st, cx.client, spec, &args, "multi") {
            let why = match denied {
                crate::acl::Denied::Command(_) => "no permission to execute the command or subcommand",
                crate::acl::Denied::Key(_) => "no permission to touch the specified keys",
                crate::acl::Denied::Channel(_) => "no permission to access one of the channels used as arguments",
            };
            let msg = format!(
                "NOPERM ACLs rules changed between the moment the transaction was accumulated and the EXEC call. This command is no longer allowed for the following reason: {why}"
            );
            cx.st.stats.rejected(super::full_name(spec, &args), &msg);
            replies.push(Reply::Error(msg));
            continue;
        }
        replies.push(run(cx.st, cx.client, spec, &args));
        cx.st.slowlog.record(cx.client, &args, cx.st.last_call.as_micros() as i64);
        if cx.st.torn {
            // None of the transaction is applied: say so for all of it.
            cx.client.no_block = no_block;
            return Err(CmdError(format!(
                "EXECABORT Transaction discarded because '{}' failed with an internal error (a Tembo bug: please report it)",
                spec.name
            )));
        }
    }
    cx.client.no_block = no_block;
    Ok(Reply::Array(replies))
}

/// Whether a key watched while alive has expired since (Redis 7.0's
/// `isWatchedKeyExpired`): EXEC fails then, though no command touched the
/// key. A key already expired when it was watched does not count.
fn watched_key_expired(cx: &mut Ctx) -> Result<bool, CmdError> {
    let selected = cx.client.db;
    let mut expired = Ok(false);
    for (db, key) in cx.client.watching.clone() {
        if cx.client.watch_stale.contains(&(db, key.clone())) {
            continue;
        }
        cx.client.db = db;
        expired = cx.expired_unremoved(&key);
        if !matches!(expired, Ok(false)) {
            break;
        }
    }
    cx.client.db = selected;
    expired
}

fn discard(cx: &mut Ctx, _: &[Vec<u8>]) -> CmdResult {
    if cx.client.multi.take().is_none() {
        return Err(CmdError::err("DISCARD without MULTI"));
    }
    cx.client.multi_error = false;
    cx.st.unwatch(cx.client);
    Ok(Reply::ok())
}

fn watch(cx: &mut Ctx, a: &[Vec<u8>]) -> CmdResult {
    if cx.client.multi.is_some() {
        return Err(CmdError::err("WATCH inside MULTI is not allowed"));
    }
    // Watches follow the database the client selected (SWAPDB may move its keys).
    let db = cx.client.db;
    for key in &a[1..] {
        let entry = (db, key.clone());
        if cx.client.watching.contains(&entry) {
            continue;
        }
        cx.st.watchers.entry(entry.clone()).or_default().push(cx.client.id);
        if cx.expired_unremoved(key)? {
            cx.client.watch_stale.push(entry.clone());
        }
        cx.client.watching.push(entry);
    }
    Ok(Reply::ok())
}

fn unwatch(cx: &mut Ctx, _: &[Vec<u8>]) -> CmdResult {
    cx.st.unwatch(cx.client);
    Ok(Reply::ok())
}
