//! Pub/Sub: SUBSCRIBE UNSUBSCRIBE PSUBSCRIBE PUNSUBSCRIBE PUBLISH PUBSUB,
//! and sharded pub/sub (SSUBSCRIBE SUNSUBSCRIBE SPUBLISH): shard channels
//! are a namespace of their own, as on a standalone Redis 7 (one shard);
//! their messages are `smessage`.
//!
//! Messages go to subscribers in the order PUBLISH ran, after the commit of
//! the group PUBLISH ran in (with the replies of that group), so that a
//! subscriber never sees a message about a write that could still be lost.
//! In RESP2 a subscribed client may only (un)subscribe, PING, QUIT and
//! RESET (see `dispatch`); in RESP3 every command stays allowed and
//! messages arrive as push (`>`) frames. A subscriber that does not read is
//! disconnected past Redis's pub/sub output-buffer limits
//! ([`crate::pubsub::HARD_LIMIT`]).

use super::args::is;
use super::{CmdError, CmdResult, Spec};
use crate::client::{Client, Out};
use crate::exec::{Ctx, State};
use crate::resp::Reply;

const PS: &[&str] = &["pubsub", "noscript", "loading", "stale"];

pub const COMMANDS: &[Spec] = &[
    Spec {
        name: "subscribe",
        arity: -2,
        flags: PS,
        keys: (0, 0, 0),
        group: "pubsub",
        summary: "Listens for messages published to channels.",
        run: subscribe,
    },
    Spec {
        name: "unsubscribe",
        arity: -1,
        flags: PS,
        keys: (0, 0, 0),
        group: "pubsub",
        summary: "Stops listening to channels (all of them without arguments).",
        run: unsubscribe,
    },
    Spec {
        name: "psubscribe",
        arity: -2,
        flags: PS,
        keys: (0, 0, 0),
        group: "pubsub",
        summary: "Listens for messages published to channels that match glob patterns.",
        run: psubscribe,
    },
    Spec {
        name: "punsubscribe",
        arity: -1,
        flags: PS,
        keys: (0, 0, 0),
        group: "pubsub",
        summary: "Stops listening to patterns (all of them without arguments).",
        run: punsubscribe,
    },
    Spec {
        name: "publish",
        arity: 3,
        flags: &["pubsub", "loading", "stale", "fast", "may_replicate"],
        keys: (0, 0, 0),
        group: "pubsub",
        summary: "Posts a message to a channel; returns how many clients received it.",
        run: publish,
    },
    Spec {
        name: "ssubscribe",
        arity: -2,
        flags: PS,
        keys: (1, -1, 1),
        group: "pubsub",
        summary: "Listens for messages published to shard channels.",
        run: ssubscribe,
    },
    Spec {
        name: "sunsubscribe",
        arity: -1,
        flags: PS,
        keys: (1, -1, 1),
        group: "pubsub",
        summary: "Stops listening to shard channels (all of them without arguments).",
        run: sunsubscribe,
    },
    Spec {
        name: "spublish",
        arity: 3,
        flags: &["pubsub", "loading", "stale", "fast", "may_replicate"],
        keys: (1, 1, 1),
        group: "pubsub",
        summary: "Posts a message to a shard channel; returns how many clients received it.",
        run: spublish,
    },
    Spec {
        name: "pubsub",
        arity: -2,
        flags: &["pubsub", "loading", "stale"],
        keys: (0, 0, 0),
        group: "pubsub",
        summary: "PUBSUB CHANNELS [pattern] | NUMSUB [channel...] | NUMPAT | SHARDCHANNELS | SHARDNUMSUB | HELP.",
        run: pubsub,
    },
];

/// Commands a RESP2 client may run while subscribed.
pub const ALLOWED_SUBSCRIBED: &[&str] =
    &["subscribe", "unsubscribe", "psubscribe", "punsubscribe", "ssubscribe", "sunsubscribe", "ping", "quit", "reset"];

/// `[kind, name, count]`: the confirmation of one (un)subscription.
fn confirm(kind: &str, name: Option<&[u8]>, count: usize) -> Reply {
    Reply::Push(vec![Reply::bulk(kind), name.map_or(Reply::Nil, Reply::bulk), Reply::Int(count as i64)])
}

fn subscribe(cx: &mut Ctx, a: &[Vec<u8>]) -> CmdResult {
    let mut out = Vec::with_capacity(a.len() - 1);
    for ch in &a[1..] {
        if cx.client.channels.insert(ch.clone()) {
            cx.st.pubsub.subscribe(cx.client.id, ch);
        }
        out.push(confirm("subscribe", Some(ch), cx.client.subscriptions()));
    }
    Ok(Reply::Many(out))
}

fn psubscribe(cx: &mut Ctx, a: &[Vec<u8>]) -> CmdResult {
    let mut out = Vec::with_capacity(a.len() - 1);
    for p in &a[1..] {
        if cx.client.patterns.insert(p.clone()) {
            cx.st.pubsub.psubscribe(cx.client.id, p);
        }
        out.push(confirm("psubscribe", Some(p), cx.client.subscriptions()));
    }
    Ok(Reply::Many(out))
}

fn unsubscribe(cx: &mut Ctx, a: &[Vec<u8>]) -> CmdResult {
    let names: Vec<Vec<u8>> = if a.len() > 1 { a[1..].to_vec() } else { cx.client.channels.iter().cloned().collect() };
    if names.is_empty() {
        return Ok(confirm("unsubscribe", None, cx.client.subscriptions()));
    }
    let mut out = Vec::with_capacity(names.len());
    for ch in names {
        if cx.client.channels.remove(&ch) {
            cx.st.pubsub.unsubscribe(cx.client.id, &ch);
        }
        out.push(confirm("unsubscribe", Some(&ch), cx.client.subscriptions()));
    }
    Ok(Reply::Many(out))
}

fn punsubscribe(cx: &mut Ctx, a: &[Vec<u8>]) -> CmdResult {
    let names: Vec<Vec<u8>> = if a.len() > 1 { a[1..].to_vec() } else { cx.client.patterns.iter().cloned().collect() };
    if names.is_empty() {
        return Ok(confirm("punsubscribe", None, cx.client.subscriptions()));
    }
    let mut out = Vec::with_capacity(names.len());
    for p in names {
        if cx.client.patterns.remove(&p) {
            cx.st.pubsub.punsubscribe(cx.client.id, &p);
        }
        out.push(confirm("punsubscribe", Some(&p), cx.client.subscriptions()));
    }
    Ok(Reply::Many(out))
}

fn ssubscribe(cx: &mut Ctx, a: &[Vec<u8>]) -> CmdResult {
    let mut out = Vec::with_capacity(a.len() - 1);
    for ch in &a[1..] {
        if cx.client.shard_channels.insert(ch.clone()) {
            cx.st.pubsub.ssubscribe(cx.client.id, ch);
        }
        out.push(confirm("ssubscribe", Some(ch), cx.client.shard_channels.len()));
    }
    Ok(Reply::Many(out))
}

fn sunsubscribe(cx: &mut Ctx, a: &[Vec<u8>]) -> CmdResult {
    let names: Vec<Vec<u8>> =
        if a.len() > 1 { a[1..].to_vec() } else { cx.client.shard_channels.iter().cloned().collect() };
    if names.is_empty() {
        return Ok(confirm("sunsubscribe", None, 0));
    }
    let mut out = Vec::with_capacity(names.len());
    for ch in names {
        if cx.client.shard_channels.remove(&ch) {
            cx.st.pubsub.sunsubscribe(cx.client.id, &ch);
        }
        out.push(confirm("sunsubscribe", Some(&ch), cx.client.shard_channels.len()));
    }
    Ok(Reply::Many(out))
}

fn spublish(cx: &mut Ctx, a: &[Vec<u8>]) -> CmdResult {
    let subs = cx.st.pubsub.shard_subscribers(&a[1]).to_vec();
    let mut m = Encoded {
        msg: Reply::Push(vec![Reply::bulk("smessage"), Reply::bulk(&a[1]), Reply::bulk(&a[2])]),
        resp2: None,
        resp3: None,
    };
    let mut current = Some(&mut *cx.client);
    let mut receivers = 0i64;
    for id in subs {
        receivers += deliver(cx.st, &mut current, id, &mut m) as i64;
    }
    Ok(Reply::Int(receivers))
}

/// Drops every subscription of the running client without replies (RESET).
pub fn unsubscribe_all(cx: &mut Ctx) {
    cx.st.pubsub.remove_client(cx.client);
    cx.client.channels.clear();
    cx.client.patterns.clear();
    cx.client.shard_channels.clear();
}

/// One message encoded once per protocol version, for many receivers.
struct Encoded {
    msg: Reply,
    resp2: Option<Vec<u8>>,
    resp3: Option<Vec<u8>>,
}

impl Encoded {
    fn bytes(&mut self, proto: u8) -> Vec<u8> {
        let slot = if proto >= 3 { &mut self.resp3 } else { &mut self.resp2 };
        slot.get_or_insert_with(|| {
            let mut b = Vec::new();
            self.msg.encode(proto, &mut b);
            b
        })
        .clone()
    }
}

/// Queues `m` for client `id`: into the running client's own output if it
/// publishes to itself, else into the group's outbox.
fn deliver(st: &mut State, current: &mut Option<&mut Client>, id: u64, m: &mut Encoded) -> bool {
    if let Some(c) = current.as_deref_mut().filter(|c| c.id == id) {
        let b = m.bytes(c.proto);
        c.pushbuf.extend_from_slice(&b);
        return true;
    }
    let Some(proto) = st.clients.get(&id).map(|c| c.proto) else { return false };
    let b = m.bytes(proto);
    st.outbox.push((id, Out::Push(b)));
    true
}

/// Sends `message` to the subscribers of `channel` and of the patterns
/// matching it (`current`: the client running the command, if any); how
/// many received it.
pub fn publish_message(st: &mut State, mut current: Option<&mut Client>, channel: &[u8], message: &[u8]) -> i64 {
    let mut receivers = 0i64;
    let subs = st.pubsub.subscribers(channel).to_vec();
    if !subs.is_empty() {
        let mut m = Encoded {
            msg: Reply::Push(vec![Reply::bulk("message"), Reply::bulk(channel), Reply::bulk(message)]),
            resp2: None,
            resp3: None,
        };
        for id in subs {
            receivers += deliver(st, &mut current, id, &mut m) as i64;
        }
    }
    for (pattern, ids) in st.pubsub.matching_patterns(channel) {
        let mut m = Encoded {
            msg: Reply::Push(vec![
                Reply::bulk("pmessage"),
                Reply::bulk(&pattern),
                Reply::bulk(channel),
                Reply::bulk(message),
            ]),
            resp2: None,
            resp3: None,
        };
        for id in ids {
            receivers += deliver(st, &mut current, id, &mut m) as i64;
        }
    }
    receivers
}

fn publish(cx: &mut Ctx, a: &[Vec<u8>]) -> CmdResult {
    Ok(Reply::Int(publish_message(cx.st, Some(&mut *cx.client), &a[1], &a[2])))
}

const HELP: &[&str] = &[
    "PUBSUB <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
    "CHANNELS [<pattern>]",
    "    Return the currently active channels matching a <pattern> (default: '*').",
    "NUMPAT",
    "    Return number of subscriptions to patterns.",
    "NUMSUB [<channel> ...]",
    "    Return the number of subscribers for the specified channels, excluding",
    "    pattern subscriptions(default: no channels).",
    "SHARDCHANNELS [<pattern>]",
    "    Return the currently active shard level channels matching a <pattern> (default: '*').",
    "SHARDNUMSUB [<shardchannel> ...]",
    "    Return the number of subscribers for the specified shard level channel(s)",
    "HELP",
    "    Prints this help.",
];

fn pubsub(cx: &mut Ctx, a: &[Vec<u8>]) -> CmdResult {
    let sub = &a[1];
    let n = a.len();
    if is(sub, "channels") && n <= 3 {
        let chans = cx.st.pubsub.channels(a.get(2).map(|p| p.as_slice()));
        Ok(Reply::bulks(chans))
    } else if is(sub, "numsub") {
        let mut out = Vec::with_capacity((n - 2) * 2);
        for ch in &a[2..] {
            out.push(Reply::bulk(ch));
            out.push(Reply::Int(cx.st.pubsub.subscribers(ch).len() as i64));
        }
        Ok(Reply::Array(out))
    } else if is(sub, "numpat") && n == 2 {
        Ok(Reply::Int(cx.st.pubsub.pattern_count() as i64))
    } else if is(sub, "shardchannels") && n <= 3 {
        Ok(Reply::bulks(cx.st.pubsub.shard_channels(a.get(2).map(|p| p.as_slice()))))
    } else if is(sub, "shardnumsub") {
        let mut out = Vec::with_capacity((n - 2) * 2);
        for ch in &a[2..] {
            out.push(Reply::bulk(ch));
            out.push(Reply::Int(cx.st.pubsub.shard_subscribers(ch).len() as i64));
        }
        Ok(Reply::Array(out))
    } else if is(sub, "help") && n == 2 {
        Ok(super::help(HELP))
    } else if ["channels", "numpat", "shardchannels", "help"].iter().any(|w| is(sub, w)) {
        Err(CmdError::err(format!(
            "wrong number of arguments for 'pubsub|{}' command",
            String::from_utf8_lossy(sub).to_ascii_lowercase()
        )))
    } else {
        Err(CmdError::err(format!("unknown subcommand '{}'. Try PUBSUB HELP.", String::from_utf8_lossy(sub))))
    }
}
