//! XINFO STREAM [FULL [COUNT n]], XINFO GROUPS, XINFO CONSUMERS and XINFO
//! HELP: a stream's state, groups and consumers as Redis 7.0 reports them
//! (maps in RESP3, flat arrays in RESP2). `radix-tree-keys` is the number
//! of nodes Tembo tracks for trimming; `radix-tree-nodes` has no
//! counterpart and is estimated from it.

use super::args::{int, is};
use super::streams::entries_reply;
use super::{CmdError, CmdResult, Spec};
use crate::exec::Ctx;
use crate::keyspace::Res;
use crate::resp::Reply;
use crate::stream::{self, Stream};
use crate::stream_cg::{self as cg, Group, INVALID};
use crate::stream_id::StreamId;

pub const COMMANDS: &[Spec] = &[Spec {
    name: "xinfo",
    arity: -2,
    flags: &["readonly"],
    keys: (2, 2, 1),
    group: "stream",
    summary: "XINFO STREAM key [FULL [COUNT n]] | GROUPS key | CONSUMERS key group | HELP",
    run: xinfo,
}];

const XINFO_HELP: &[&str] = &[
    "XINFO <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
    "CONSUMERS <key> <groupname>",
    "    Show consumers of <groupname>.",
    "GROUPS <key>",
    "    Show the stream consumer groups.",
    "STREAM <key> [FULL [COUNT <count>]",
    "    Show information about the stream.",
    "HELP",
    "    Print this help.",
];

fn syntax(a: &[Vec<u8>]) -> CmdError {
    CmdError::err(format!(
        "unknown subcommand or wrong number of arguments for '{}'. Try XINFO HELP.",
        String::from_utf8_lossy(&a[1][..a[1].len().min(128)])
    ))
}

fn field(name: &str, v: Reply) -> (Reply, Reply) {
    (Reply::bulk(name), v)
}

fn id(i: StreamId) -> Reply {
    Reply::bulk(i.to_string())
}

fn xinfo(cx: &mut Ctx, a: &[Vec<u8>]) -> CmdResult {
    let sub = String::from_utf8_lossy(&a[1]).to_ascii_lowercase();
    let arity_ok = match sub.as_str() {
        "help" => a.len() == 2,
        "stream" => a.len() >= 3,
        "groups" => a.len() == 3,
        "consumers" => a.len() == 4,
        _ => {
            return Err(CmdError::err(format!(
                "unknown subcommand '{}'. Try XINFO HELP.",
                String::from_utf8_lossy(&a[1])
            )))
        }
    };
    if !arity_ok {
        return Err(CmdError::arity(&format!("xinfo|{sub}")));
    }
    if sub == "help" {
        return Ok(super::help(XINFO_HELP));
    }
    let key = &a[2];
    let s = stream::load(cx, key)?.ok_or_else(|| CmdError::err("no such key"))?;
    match sub.as_str() {
        "consumers" => {
            let g = cg::group_get(cx, key, &s, &a[3])?.ok_or_else(|| {
                CmdError(format!(
                    "NOGROUP No such consumer group '{}' for key name '{}'",
                    String::from_utf8_lossy(&a[3]),
                    String::from_utf8_lossy(key)
                ))
            })?;
            let now = cx.now as i64;
            let mut out = Vec::new();
            for (name, seen) in cg::consumers(cx, key, &s, &g.name)? {
                let pending = cg::consumer_pel(cx, key, &s, &g.name, &name, StreamId::MIN, StreamId::MAX, usize::MAX)?;
                out.push(Reply::Map(vec![
                    field("name", Reply::Bulk(name)),
                    field("pending", Reply::Int(pending.len() as i64)),
                    field("idle", Reply::Int(now.wrapping_sub(seen as i64).max(0))),
                ]));
            }
            Ok(Reply::Array(out))
        }
        "groups" => {
            let mut out = Vec::new();
            for g in cg::groups(cx, key, &s)? {
                let consumers = cg::consumers(cx, key, &s, &g.name)?.len();
                let pending = cg::pel_len(cx, key, &s, &g.name)?;
                out.push(Reply::Map(vec![
                    field("name", Reply::Bulk(g.name.clone())),
                    field("consumers", Reply::Int(consumers as i64)),
                    field("pending", Reply::Int(pending as i64)),
                    field("last-delivered-id", id(g.last_id)),
                    field("entries-read", entries_read(&g)),
                    field("lag", cg::lag(&s, &g).map_or(Reply::Nil, Reply::Int)),
                ]));
            }
            Ok(Reply::Array(out))
        }
        _ => stream_info(cx, a, key, &s),
    }
}

fn entries_read(g: &Group) -> Reply {
    if g.entries_read == INVALID {
        Reply::Nil
    } else {
        Reply::Int(g.entries_read)
    }
}

fn stream_info(cx: &mut Ctx, a: &[Vec<u8>], key: &[u8], s: &Stream) -> CmdResult {
    let opts = &a[3..];
    let mut full_count = None;
    if !opts.is_empty() {
        if (opts.len() != 1 && opts.len() != 3) || !is(&opts[0], "full") {
            return Err(syntax(a));
        }
        let mut count = 10;
        if opts.len() == 3 {
            if !is(&opts[1], "count") {
                return Err(syntax(a));
            }
            count = int(&opts[2])?;
            if count < 0 {
                count = 10;
            }
        }
        full_count = Some(count as usize);
    }
    let nodes = stream::node_count(cx, key, s)? as i64;
    let mut m = vec![
        field("length", Reply::Int(s.len() as i64)),
        field("radix-tree-keys", Reply::Int(nodes)),
        field("radix-tree-nodes", Reply::Int(if nodes == 0 { 1 } else { nodes * 2 })),
        field("last-generated-id", id(s.st.last_id)),
        field("max-deleted-entry-id", id(s.st.max_deleted)),
        field("entries-added", Reply::Int(s.st.entries_added as i64)),
        field("recorded-first-entry-id", id(s.st.first_id)),
    ];
    let edge = |cx: &Ctx, last: bool| -> Res<Reply> {
        let e = stream::range(cx, key, s, StreamId::MIN, StreamId::MAX, last, 1)?;
        Ok(match entries_reply(e) {
            Reply::Array(mut v) if !v.is_empty() => v.remove(0),
            _ => Reply::Nil,
        })
    };
    let Some(count) = full_count else {
        m.push(field("groups", Reply::Int(cg::groups(cx, key, s)?.len() as i64)));
        m.push(field("first-entry", edge(cx, false)?));
        m.push(field("last-entry", edge(cx, true)?));
        return Ok(Reply::Map(m));
    };
    let entries = stream::range(cx, key, s, StreamId::MIN, StreamId::MAX, false, count)?;
    m.push(field("entries", entries_reply(entries)));
    let mut groups = Vec::new();
    for g in cg::groups(cx, key, s)? {
        let pel = cg::pel_range(cx, key, s, &g.name, StreamId::MIN, StreamId::MAX, usize::MAX)?;
        let limit = if count == 0 { usize::MAX } else { count };
        let pending = pel
            .iter()
            .take(limit)
            .map(|n| {
                Reply::Array(vec![
                    id(n.id),
                    Reply::Bulk(n.consumer.clone()),
                    Reply::Int(n.delivery_time as i64),
                    Reply::Int(n.delivery_count as i64),
                ])
            })
            .collect();
        let mut consumers = Vec::new();
        for (name, seen) in cg::consumers(cx, key, s, &g.name)? {
            let mine: Vec<_> = pel.iter().filter(|n| n.consumer == name).collect();
            let cpending = mine
                .iter()
                .take(limit)
                .map(|n| {
                    Reply::Array(vec![
                        id(n.id),
                        Reply::Int(n.delivery_time as i64),
                        Reply::Int(n.delivery_count as i64),
                    ])
                })
                .collect();
            consumers.push(Reply::Map(vec![
                field("name", Reply::Bulk(name)),
                field("seen-time", Reply::Int(seen as i64)),
                field("pel-count", Reply::Int(mine.len() as i64)),
                field("pending", Reply::Array(cpending)),
            ]));
        }
        groups.push(Reply::Map(vec![
            field("name", Reply::Bulk(g.name.clone())),
            field("last-delivered-id", id(g.last_id)),
            field("entries-read", entries_read(&g)),
            field("lag", cg::lag(s, &g).map_or(Reply::Nil, Reply::Int)),
            field("pel-count", Reply::Int(pel.len() as i64)),
            field("pending", Reply::Array(pending)),
            field("consumers", Reply::Array(consumers)),
        ]));
    }
    m.push(field("groups", Reply::Array(groups)));
    Ok(Reply::Map(m))
}
