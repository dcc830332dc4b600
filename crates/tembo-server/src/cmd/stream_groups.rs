//! Consumer-group commands: XGROUP (CREATE SETID DESTROY CREATECONSUMER
//! DELCONSUMER HELP), XREADGROUP (blocking included) and XACK, with Redis
//! 7.0's replies and error words. Records are in [`crate::stream_cg`]; the
//! PEL inspection and claiming commands are in `stream_pel`.

use super::args::{int, is};
use super::blpop::block;
use super::streams::{entries_reply, parse_read, read_reply};
use super::{CmdError, CmdResult, Spec};
use crate::blocking::BlockOp;
use crate::exec::Ctx;
use crate::keyspace::Res;
use crate::resp::Reply;
use crate::stream::{self, Stream};
use crate::stream_cg::{self as cg, Group, Nack, INVALID};
use crate::stream_id::{self, StreamId};

pub const COMMANDS: &[Spec] = &[
    Spec {
        name: "xgroup",
        arity: -2,
        flags: &["write", "denyoom"],
        keys: (2, 2, 1),
        group: "stream",
        summary: "XGROUP CREATE|SETID|DESTROY|CREATECONSUMER|DELCONSUMER|HELP: manages consumer groups.",
        run: xgroup,
    },
    Spec {
        name: "xreadgroup",
        arity: -7,
        flags: &["write", "blocking", "movablekeys"],
        keys: (0, 0, 0),
        group: "stream",
        summary: "XREADGROUP GROUP g c [COUNT n] [BLOCK ms] [NOACK] STREAMS key... id...: reads as a consumer.",
        run: xreadgroup,
    },
    Spec {
        name: "xack",
        arity: -4,
        flags: &["write", "fast"],
        keys: (1, 1, 1),
        group: "stream",
        summary: "XACK key group id...: removes entries from a group's pending list.",
        run: xack,
    },
];

/// `-NOGROUP No such key … or consumer group …` for XPENDING, XCLAIM, XAUTOCLAIM.
pub(super) fn nogroup(key: &[u8], group: &[u8]) -> CmdError {
    CmdError(format!(
        "NOGROUP No such key '{}' or consumer group '{}'",
        String::from_utf8_lossy(key),
        String::from_utf8_lossy(group)
    ))
}

/// The stream at `key` and its group `name`; NOGROUP if either is missing.
pub(super) fn stream_and_group(cx: &mut Ctx, key: &[u8], name: &[u8]) -> Res<(Stream, Group)> {
    let s = stream::load(cx, key)?.ok_or_else(|| nogroup(key, name))?;
    let g = cg::group_get(cx, key, &s, name)?.ok_or_else(|| nogroup(key, name))?;
    Ok((s, g))
}

const XGROUP_HELP: &[&str] = &[
    "XGROUP <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
    "CREATE <key> <groupname> <id|$> [option]",
    "    Create a new consumer group. Options are:",
    "    * MKSTREAM",
    "      Create the empty stream if it does not exist.",
    "    * ENTRIESREAD entries_read",
    "      Set the group's entries_read counter (internal use).",
    "CREATECONSUMER <key> <groupname> <consumer>",
    "    Create a new consumer in the specified group.",
    "DELCONSUMER <key> <groupname> <consumer>",
    "    Remove the specified consumer.",
    "DESTROY <key> <groupname>",
    "    Remove the specified group.",
    "SETID <key> <groupname> <id|$> [ENTRIESREAD entries_read]",
    "    Set the current group ID and entries_read counter.",
    "HELP",
    "    Print this help.",
];

fn xgroup(cx: &mut Ctx, a: &[Vec<u8>]) -> CmdResult {
    let sub = String::from_utf8_lossy(&a[1]).to_ascii_lowercase();
    let arity_ok = match sub.as_str() {
        "help" => a.len() == 2,
        "create" => a.len() >= 5,
        "setid" => a.len() >= 5,
        "destroy" => a.len() == 4,
        "createconsumer" | "delconsumer" => a.len() == 5,
        _ => {
            return Err(CmdError::err(format!(
                "unknown subcommand '{}'. Try XGROUP HELP.",
                String::from_utf8_lossy(&a[1])
            )))
        }
    };
    if !arity_ok {
        return Err(CmdError::arity(&format!("xgroup|{sub}")));
    }
    if sub == "help" {
        return Ok(super::help(XGROUP_HELP));
    }
    let (mut mkstream, mut entries_read) = (false, INVALID);
    let mut i = 5;
    while i < a.len() {
        if sub == "create" && is(&a[i], "mkstream") {
            mkstream = true;
            i += 1;
        } else if (sub == "create" || sub == "setid") && is(&a[i], "entriesread") && i + 1 < a.len() {
            entries_read = int(&a[i + 1])?;
            if entries_read < 0 && entries_read != INVALID {
                return Err(CmdError::err("value for ENTRIESREAD must be positive or -1"));
            }
            i += 2;
        } else {
            return Err(super::subcommand_error(a, "XGROUP"));
        }
    }
    let (key, name) = (&a[2], &a[3]);
    let old = stream::load(cx, key)?;
    let group = match &old {
        Some(s) => cg::group_get(cx, key, s, name)?,
        None if mkstream => None,
        None => {
            return Err(CmdError::err(
                "The XGROUP subcommand requires the key to exist. Note that for CREATE you may want to use the MKSTREAM option to create an empty stream automatically.",
            ))
        }
    };
    if group.is_none() && matches!(sub.as_str(), "setid" | "createconsumer" | "delconsumer") {
        return Err(CmdError(format!(
            "NOGROUP No such consumer group '{}' for key name '{}'",
            String::from_utf8_lossy(name),
            String::from_utf8_lossy(key)
        )));
    }
    match sub.as_str() {
        "create" if a.len() <= 8 => {
            let id = match &old {
                _ if a[4].as_slice() != b"$" => stream_id::parse_strict(&a[4], 0)?,
                Some(s) => s.st.last_id,
                None => StreamId::MIN,
            };
            let s = match old {
                Some(s) => s,
                None => {
                    let s = stream::create(cx);
                    stream::save(cx, key, None, &s)?;
                    s
                }
            };
            if group.is_some() {
                return Err(CmdError("BUSYGROUP Consumer Group name already exists".into()));
            }
            cg::group_put(cx, key, &s, &Group { name: name.clone(), last_id: id, entries_read })?;
            stream_event(cx, "xgroup-create", key);
            Ok(Reply::ok())
        }
        "setid" if a.len() == 5 || a.len() == 7 => {
            let s = old.ok_or_else(CmdError::syntax)?;
            let id = if a[4].as_slice() == b"$" { s.st.last_id } else { stream_id::parse(&a[4], 0)? };
            cg::group_put(cx, key, &s, &Group { name: name.clone(), last_id: id, entries_read })?;
            stream_event(cx, "xgroup-setid", key);
            Ok(Reply::ok())
        }
        "destroy" => {
            let s = old.ok_or_else(CmdError::syntax)?;
            if group.is_none() {
                return Ok(Reply::Int(0));
            }
            cg::group_destroy(cx, key, &s, name)?;
            stream_event(cx, "xgroup-destroy", key);
            // Its blocked XREADGROUP clients get an error.
            let db = cx.client.db;
            cx.st.blocking.signal(db, key);
            Ok(Reply::Int(1))
        }
        "createconsumer" => {
            let s = old.ok_or_else(CmdError::syntax)?;
            if cg::consumer_get(cx, key, &s, name, &a[4])?.is_some() {
                return Ok(Reply::Int(0));
            }
            cg::consumer_touch(cx, key, &s, name, &a[4])?;
            Ok(Reply::Int(1))
        }
        "delconsumer" => {
            let s = old.ok_or_else(CmdError::syntax)?;
            if cg::consumer_get(cx, key, &s, name, &a[4])?.is_none() {
                return Ok(Reply::Int(0));
            }
            let pending = cg::consumer_del(cx, key, &s, name, &a[4])?;
            stream_event(cx, "xgroup-delconsumer", key);
            Ok(Reply::Int(pending as i64))
        }
        _ => Err(super::subcommand_error(a, "XGROUP")),
    }
}

/// Delivers entries after the group's last ID to `consumer`
/// (`streamReplyWithRange` with a group), creating PEL entries unless `noack`.
fn deliver_new(
    cx: &mut Ctx,
    key: &[u8],
    s: &Stream,
    g: &mut Group,
    consumer: &[u8],
    count: u64,
    noack: bool,
) -> Res<Reply> {
    let entries = super::streams::read_after(cx, key, s, g.last_id, count)?;
    let now = cx.now;
    for (id, _) in &entries {
        cg::advance(s, g, *id);
        if !noack {
            let old = cg::nack_get(cx, key, s, &g.name, *id)?;
            let n = Nack { id: *id, consumer: consumer.to_vec(), delivery_time: now, delivery_count: 1 };
            cg::nack_put(cx, key, s, &g.name, &n, old.as_ref().map(|o| o.consumer.as_slice()))?;
        }
    }
    cg::group_put(cx, key, s, g)?;
    Ok(entries_reply(entries))
}

/// The consumer's own pending entries after `gt` (history), delivered again.
fn deliver_history(
    cx: &mut Ctx,
    key: &[u8],
    s: &Stream,
    g: &Group,
    consumer: &[u8],
    gt: StreamId,
    count: u64,
) -> Res<Reply> {
    let Some(start) = gt.incr() else { return Ok(Reply::Array(vec![])) };
    let limit = if count == 0 { usize::MAX } else { count as usize };
    let ids = cg::consumer_pel(cx, key, s, &g.name, consumer, start, StreamId::MAX, limit)?;
    let now = cx.now;
    let mut out = Vec::with_capacity(ids.len());
    for id in ids {
        match stream::get(cx, key, s, id)? {
            Some(fv) => {
                if let Some(mut n) = cg::nack_get(cx, key, s, &g.name, id)? {
                    n.delivery_time = now;
                    n.delivery_count = n.delivery_count.wrapping_add(1);
                    cg::nack_put(cx, key, s, &g.name, &n, Some(consumer))?;
                }
                out.push(Reply::Array(vec![Reply::bulk(id.to_string()), Reply::bulks(fv)]));
            }
            None => out.push(Reply::Array(vec![Reply::bulk(id.to_string()), Reply::NilArray])),
        }
    }
    Ok(Reply::Array(out))
}

fn xreadgroup(cx: &mut Ctx, a: &[Vec<u8>]) -> CmdResult {
    let r = parse_read(a, true)?;
    let (gname, consumer) = r.group.clone().ok_or_else(CmdError::syntax)?;
    let mut ids = Vec::with_capacity(r.keys.len());
    for (key, arg) in r.keys.iter().zip(&r.ids) {
        let s = stream::load(cx, key)?;
        let g = match &s {
            Some(s) => cg::group_get(cx, key, s, &gname)?,
            None => None,
        };
        if g.is_none() {
            return Err(CmdError(format!(
                "NOGROUP No such key '{}' or consumer group '{}' in XREADGROUP with GROUP option",
                String::from_utf8_lossy(key),
                String::from_utf8_lossy(&gname)
            )));
        }
        if arg.as_slice() == b"$" {
            return Err(CmdError::err("The $ ID is meaningless in the context of XREADGROUP: you want to read the history of this consumer by specifying a proper ID, or use the > ID to get new messages. The $ ID would just return an empty result set."));
        }
        ids.push(if arg.as_slice() == b">" { StreamId::MAX } else { stream_id::parse_strict(arg, 0)? });
    }
    let mut out = Vec::new();
    for (key, gt) in r.keys.iter().zip(&ids) {
        let Some(s) = stream::load(cx, key)? else { continue };
        let Some(mut g) = cg::group_get(cx, key, &s, &gname)? else { continue };
        let history = *gt != StreamId::MAX;
        let sync = history || stream::edge(cx, key, &s, true)?.is_some_and(|top| top > g.last_id);
        if !sync {
            continue;
        }
        cg::consumer_touch(cx, key, &s, &gname, &consumer)?;
        let reply = if history {
            deliver_history(cx, key, &s, &g, &consumer, *gt, r.count)?
        } else {
            deliver_new(cx, key, &s, &mut g, &consumer, r.count, r.noack)?
        };
        out.push((key.clone(), reply));
    }
    if !out.is_empty() {
        return Ok(read_reply(cx.client.proto, out));
    }
    match r.timeout {
        Some(t) => {
            let count = if r.count == 0 { 1000 } else { r.count };
            let op = BlockOp::XReadGroup { group: gname, consumer, noack: r.noack, count };
            block(cx, r.keys, t, op, Reply::NilArray)
        }
        None => Ok(Reply::NilArray),
    }
}

/// Serves a client blocked in XREADGROUP on `key`, just written: new
/// entries, or an error if the stream or the group is gone.
pub(super) fn serve(cx: &mut Ctx, key: &[u8], op: &BlockOp) -> Option<Reply> {
    let BlockOp::XReadGroup { group, consumer, noack, count } = op else { return None };
    let Ok(Some(s)) = stream::load(cx, key) else {
        return Some(Reply::Error("UNBLOCKED the stream key no longer exists".into()));
    };
    let mut g = match cg::group_get(cx, key, &s, group) {
        Ok(Some(g)) => g,
        Ok(None) => {
            return Some(Reply::Error("NOGROUP the consumer group this client was blocked on no longer exists".into()))
        }
        Err(e) => return Some(Reply::Error(e.0)),
    };
    if s.st.last_id <= g.last_id {
        return None;
    }
    let served = cg::consumer_touch(cx, key, &s, group, consumer)
        .and_then(|_| deliver_new(cx, key, &s, &mut g, consumer, *count, *noack))
        .map(|r| read_reply(cx.client.proto, vec![(key.to_vec(), r)]));
    Some(served.unwrap_or_else(|e| Reply::Error(e.0)))
}

fn xack(cx: &mut Ctx, a: &[Vec<u8>]) -> CmdResult {
    let key = &a[1];
    let Some(s) = stream::load(cx, key)? else { return Ok(Reply::Int(0)) };
    let Some(g) = cg::group_get(cx, key, &s, &a[2])? else { return Ok(Reply::Int(0)) };
    let ids = a[3..].iter().map(|x| stream_id::parse_strict(x, 0)).collect::<Res<Vec<_>>>()?;
    let mut acked = 0;
    for id in ids {
        if let Some(n) = cg::nack_get(cx, key, &s, &g.name, id)? {
            cg::nack_del(cx, key, &s, &g.name, &n);
            acked += 1;
        }
    }
    Ok(Reply::Int(acked))
}

/// A stream keyspace notification sent where it happens (group changes do
/// not go through the key-level write paths that note the others).
pub(crate) fn stream_event(cx: &mut Ctx, event: &str, key: &[u8]) {
    if cx.st.notify_flags != 0 {
        let db = cx.client.db;
        crate::notify::send_from(cx.st, Some(&mut *cx.client), crate::notify::STREAM, event, db, key);
    }
}
