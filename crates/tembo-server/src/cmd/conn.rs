//! Connection commands: PING ECHO HELLO AUTH SELECT QUIT RESET CLIENT.

use super::args::{int, is};
use super::{CmdError, CmdResult, Spec};
use crate::exec::Ctx;
use crate::pause::{Pause, PauseKind};
use crate::resp::Reply;

pub const COMMANDS: &[Spec] = &[
    Spec {
        name: "ping",
        arity: -1,
        flags: &["fast"],
        keys: (0, 0, 0),
        group: "connection",
        summary: "Returns the server's liveliness response.",
        run: ping,
    },
    Spec {
        name: "echo",
        arity: 2,
        flags: &["fast", "loading", "stale"],
        keys: (0, 0, 0),
        group: "connection",
        summary: "Returns the given string.",
        run: echo,
    },
    Spec {
        name: "hello",
        arity: -1,
        flags: &["noscript", "loading", "stale", "fast", "no_auth", "allow_busy"],
        keys: (0, 0, 0),
        group: "connection",
        summary: "Handshakes with the server: protocol version, authentication, client name.",
        run: hello,
    },
    Spec {
        name: "auth",
        arity: -2,
        flags: &["noscript", "loading", "stale", "fast", "no_auth", "allow_busy"],
        keys: (0, 0, 0),
        group: "connection",
        summary: "Authenticates the connection.",
        run: auth,
    },
    Spec {
        name: "select",
        arity: 2,
        flags: &["loading", "stale", "fast"],
        keys: (0, 0, 0),
        group: "connection",
        summary: "Changes the selected database.",
        run: select,
    },
    Spec {
        name: "quit",
        arity: -1,
        flags: &["noscript", "loading", "stale", "fast", "no_auth", "allow_busy"],
        keys: (0, 0, 0),
        group: "connection",
        summary: "Closes the connection.",
        run: quit,
    },
    Spec {
        name: "reset",
        arity: 1,
        flags: &["noscript", "loading", "stale", "fast", "no_auth", "allow_busy"],
        keys: (0, 0, 0),
        group: "connection",
        summary:
            "Resets the connection: database 0, RESP2, no MULTI, no WATCH, not authenticated if a password is set.",
        run: reset,
    },
    Spec {
        name: "client",
        arity: -2,
        flags: &["noscript", "loading", "stale"],
        keys: (0, 0, 0),
        group: "connection",
        summary: "CLIENT ID | INFO | LIST | SETNAME | GETNAME | SETINFO | KILL | NO-EVICT | NO-TOUCH | REPLY.",
        run: client,
    },
];

fn ping(cx: &mut Ctx, a: &[Vec<u8>]) -> CmdResult {
    if a.len() <= 2 && cx.client.proto == 2 && cx.client.subscribed() {
        // A subscribed RESP2 client gets a message-shaped pong.
        return Ok(Reply::Array(vec![Reply::bulk("pong"), Reply::bulk(a.get(1).map_or(&[][..], |m| m))]));
    }
    match a.len() {
        1 => Ok(Reply::Simple("PONG".into())),
        2 => Ok(Reply::bulk(&a[1])),
        _ => Err(CmdError::arity("ping")),
    }
}

fn echo(_: &mut Ctx, a: &[Vec<u8>]) -> CmdResult {
    Ok(Reply::bulk(&a[1]))
}

/// Authenticates the client as `user` (the default user when `None`,
/// AUTH's one-argument form); a failure is logged in ACL LOG.
fn check_password(cx: &mut Ctx, user: Option<&[u8]>, pass: &[u8]) -> Result<(), CmdError> {
    if user.is_none() && cx.st.acl.user("default").is_some_and(|u| u.nopass) {
        return Err(CmdError::err(
            "AUTH <password> called without any password configured for the default user. Are you sure your configuration is correct?",
        ));
    }
    let name = user.map_or_else(|| "default".to_string(), |u| String::from_utf8_lossy(u).into_owned());
    if cx.st.acl.authenticate(&name, pass) {
        cx.client.authed = true;
        cx.client.user = name.into();
        return Ok(());
    }
    let context = if cx.client.multi.is_some() { "multi" } else { "toplevel" };
    let info = cx.client.info_line();
    cx.st.snapshot_acl();
    cx.st.acl.log.add("auth", context, b"AUTH".to_vec(), &name, info);
    Err(CmdError("WRONGPASS invalid username-password pair or user is disabled.".into()))
}

fn auth(cx: &mut Ctx, a: &[Vec<u8>]) -> CmdResult {
    match a.len() {
        2 => check_password(cx, None, &a[1])?,
        3 => check_password(cx, Some(&a[1]), &a[2])?,
        _ => return Err(CmdError::syntax()),
    }
    Ok(Reply::ok())
}

fn hello(cx: &mut Ctx, a: &[Vec<u8>]) -> CmdResult {
    let mut proto = cx.client.proto;
    let mut i = 1;
    if a.len() > 1 {
        proto = match int(&a[1]) {
            Ok(v @ 2..=3) => v as u8,
            Ok(_) => return Err(CmdError("NOPROTO unsupported protocol version".into())),
            Err(_) => return Err(CmdError::err("Protocol version is not an integer or out of range")),
        };
        i = 2;
    }
    let mut name = None;
    while i < a.len() {
        if is(&a[i], "AUTH") && i + 2 < a.len() {
            check_password(cx, Some(&a[i + 1]), &a[i + 2])?;
            i += 3;
        } else if is(&a[i], "SETNAME") && i + 1 < a.len() {
            name = Some(valid_name(&a[i + 1])?);
            i += 2;
        } else {
            return Err(CmdError::err(format!("Syntax error in HELLO option '{}'", String::from_utf8_lossy(&a[i]))));
        }
    }
    if !cx.client.authed {
        return Err(CmdError("NOAUTH HELLO must be called with the client already authenticated, otherwise the HELLO <proto> AUTH <user> <pass> option can be used to authenticate the client and select the RESP protocol version at the same time".into()));
    }
    if let Some(n) = name {
        cx.client.name = Some(n);
    }
    cx.client.proto = proto;
    Ok(Reply::Map(vec![
        (Reply::bulk("server"), Reply::bulk("redis")),
        (Reply::bulk("version"), Reply::bulk(crate::REDIS_VERSION)),
        (Reply::bulk("proto"), Reply::Int(proto as i64)),
        (Reply::bulk("id"), Reply::Int(cx.client.id as i64)),
        (Reply::bulk("mode"), Reply::bulk("standalone")),
        (Reply::bulk("role"), Reply::bulk("master")),
        (Reply::bulk("modules"), Reply::Array(vec![])),
    ]))
}

fn valid_name(n: &[u8]) -> Result<String, CmdError> {
    if n.iter().any(|&b| !(b'!'..=b'~').contains(&b)) {
        return Err(CmdError::err("Client names cannot contain spaces, newlines or special characters."));
    }
    Ok(String::from_utf8_lossy(n).into_owned())
}

fn select(cx: &mut Ctx, a: &[Vec<u8>]) -> CmdResult {
    let n = int(&a[1]).map_err(|_| CmdError::not_int())?;
    if n < 0 || n as usize >= cx.st.cfg.databases {
        return Err(CmdError::err("DB index is out of range"));
    }
    cx.client.db = n as u8;
    Ok(Reply::ok())
}

fn quit(cx: &mut Ctx, _: &[Vec<u8>]) -> CmdResult {
    cx.client.close = true;
    Ok(Reply::ok())
}

fn reset(cx: &mut Ctx, _: &[Vec<u8>]) -> CmdResult {
    cx.client.multi = None;
    cx.client.multi_error = false;
    cx.st.unwatch(cx.client);
    super::pubsub::unsubscribe_all(cx);
    cx.client.db = 0;
    cx.client.proto = 2;
    cx.client.monitor = false;
    let id = cx.client.id;
    cx.st.monitors.retain(|&m| m != id);
    cx.client.name = None;
    cx.client.authed = cx.st.acl.default_authenticates();
    cx.client.user = "default".into();
    super::client_tracking::disable(cx);
    Ok(Reply::Simple("RESET".into()))
}

fn client(cx: &mut Ctx, a: &[Vec<u8>]) -> CmdResult {
    let sub = String::from_utf8_lossy(&a[1]).to_ascii_lowercase();
    match (sub.as_str(), a.len()) {
        ("id", 2) => Ok(Reply::Int(cx.client.id as i64)),
        ("getname", 2) => Ok(cx.client.name.as_ref().map_or(Reply::Nil, Reply::bulk)),
        ("setname", 3) => {
            let n = valid_name(&a[2])?;
            cx.client.name = if n.is_empty() { None } else { Some(n) };
            Ok(Reply::ok())
        }
        ("setinfo", 4) => {
            let v = valid_name(&a[3]).map_err(|_| {
                CmdError::err("lib-name and lib-ver cannot contain spaces, newlines or special characters.")
            })?;
            if is(&a[2], "lib-name") {
                cx.client.lib.0 = Some(v);
            } else if is(&a[2], "lib-ver") {
                cx.client.lib.1 = Some(v);
            } else {
                return Err(CmdError::err(format!("Unrecognized option '{}'", String::from_utf8_lossy(&a[2]))));
            }
            Ok(Reply::ok())
        }
        ("info", 2) => Ok(Reply::Verbatim(format!("{}\n", cx.client.info_line()))),
        ("list", _) => client_list(cx, a),
        ("no-evict" | "no-touch", 3) if is(&a[2], "on") || is(&a[2], "off") => Ok(Reply::ok()),
        ("no-evict" | "no-touch", 3) => Err(CmdError::syntax()),
        ("kill", _) => client_kill(cx, a),
        ("reply", 3) => {
            let mode = String::from_utf8_lossy(&a[2]).to_ascii_lowercase();
            match mode.as_str() {
                "on" => {
                    cx.client.reply_off = false;
                    cx.client.reply_skip = false;
                    cx.client.reply_skip_next = false;
                    Ok(Reply::ok())
                }
                // OFF and SKIP answer nothing themselves.
                "off" => {
                    cx.client.reply_off = true;
                    Ok(Reply::Many(Vec::new()))
                }
                "skip" => {
                    cx.client.reply_skip_next = true;
                    Ok(Reply::Many(Vec::new()))
                }
                _ => Err(CmdError::syntax()),
            }
        }
        ("unblock", 3 | 4) => super::blpop::client_unblock(cx, a),
        ("pause", 3 | 4) => client_pause(cx, a),
        ("unpause", 2) => {
            cx.st.unpause();
            Ok(Reply::ok())
        }
        ("tracking", n) if n >= 3 => super::client_tracking::tracking(cx, a),
        ("caching", 3) => super::client_tracking::caching(cx, a),
        ("getredir", 2) => super::client_tracking::getredir(cx),
        ("trackinginfo", 2) => super::client_tracking::info(cx),
        ("help", 2) => Ok(super::help(&[
                "CLIENT <subcommand>",
                "ID",
                "INFO",
                "LIST",
                "SETNAME <name>",
                "GETNAME",
                "SETINFO <option> <value>",
                "REPLY ON|OFF|SKIP",
                "KILL <ip:port> | [ID id] [ADDR ip:port] [LADDR ip:port] [TYPE normal|pubsub] [USER default] [SKIPME yes|no] [MAXAGE secs]",
                "TRACKING (ON|OFF) [REDIRECT <id>] [BCAST] [PREFIX <prefix> [...]] [OPTIN] [OPTOUT] [NOLOOP]",
                "    Invalidation messages for keys this connection read (or, BCAST, under prefixes).",
                "CACHING (YES|NO)",
                "    With OPTIN / OPTOUT: whether the next command's keys are tracked.",
                "GETREDIR",
                "    The connection invalidations are redirected to (-1: not tracking, 0: none).",
                "TRACKINGINFO",
                "    This connection's tracking flags, redirect and prefixes.",
                "PAUSE <timeout> [WRITE|ALL]",
                "    Hold every command (ALL, the default) or every command that may write",
                "    (WRITE) for <timeout> milliseconds.",
                "UNPAUSE",
                "    End a CLIENT PAUSE: held clients run again.",
            ])),
        _ => Err(super::subcommand_error(a, "CLIENT")),
    }
}

/// CLIENT PAUSE timeout [WRITE|ALL] (Redis's words for bad arguments).
fn client_pause(cx: &mut Ctx, a: &[Vec<u8>]) -> CmdResult {
    let kind = match a.get(3) {
        None => PauseKind::All,
        Some(m) if is(m, "write") => PauseKind::Write,
        Some(m) if is(m, "all") => PauseKind::All,
        Some(_) => return Err(CmdError::err("CLIENT PAUSE mode must be WRITE or ALL")),
    };
    let ms = int(&a[2]).map_err(|_| CmdError::err("timeout is not an integer or out of range"))?;
    let ms = u64::try_from(ms).map_err(|_| CmdError::err("timeout is negative"))?;
    cx.st.pause(Pause { kind, until: crate::pause::until(std::time::Instant::now(), ms) });
    Ok(Reply::ok())
}

/// CLIENT KILL: the old form (`ip:port`, one client, +OK) or Redis 7's
/// filters (ID, ADDR, LADDR, TYPE, USER, SKIPME, MAXAGE; all must match;
/// replies with the number of clients killed; SKIPME defaults to yes).
/// CLIENT LIST [TYPE normal|master|replica|pubsub] [ID id [id ...]]: every
/// client in connection order, those of one type, or the named ones in
/// the order named (unknown ids skipped), as Redis 7.0 does.
fn client_list(cx: &mut Ctx, a: &[Vec<u8>]) -> CmdResult {
    let me = cx.client.id;
    let info = |cx: &Ctx, id: u64| {
        if id == me {
            Some(cx.client.info_line())
        } else {
            cx.st.clients.get(&id).map(|c| c.info_line())
        }
    };
    let mut ids: Vec<u64> = cx.st.clients.keys().copied().chain(std::iter::once(me)).collect();
    ids.sort_unstable();
    ids.dedup();
    let lines: Vec<String> = if a.len() == 4 && is(&a[2], "type") {
        let pubsub = match String::from_utf8_lossy(&a[3]).to_ascii_lowercase().as_str() {
            "normal" => Some(false),
            "pubsub" => Some(true),
            "master" | "replica" | "slave" => None,
            _ => return Err(CmdError::err(format!("Unknown client type '{}'", String::from_utf8_lossy(&a[3])))),
        };
        let Some(pubsub) = pubsub else { return Ok(Reply::Verbatim(String::new())) };
        let subscribed = |id: u64| if id == me { cx.client.subscribed() } else { cx.st.clients[&id].subscribed() };
        ids.iter().filter(|&&id| subscribed(id) == pubsub).filter_map(|&id| info(cx, id)).collect()
    } else if a.len() > 3 && is(&a[2], "id") {
        let mut wanted = Vec::with_capacity(a.len() - 3);
        for arg in &a[3..] {
            let id = int(arg).map_err(|_| CmdError::err("Invalid client ID"))?;
            wanted.push(id);
        }
        wanted.into_iter().filter_map(|id| u64::try_from(id).ok().and_then(|id| info(cx, id))).collect()
    } else if a.len() != 2 {
        return Err(CmdError::syntax());
    } else {
        ids.iter().filter_map(|&id| info(cx, id)).collect()
    };
    Ok(Reply::Verbatim(lines.iter().map(|l| format!("{l}\n")).collect()))
}

fn client_kill(cx: &mut Ctx, a: &[Vec<u8>]) -> CmdResult {
    if a.len() < 3 {
        return Err(CmdError::err("wrong number of arguments for 'client|kill' command"));
    }
    type Filter = Box<dyn Fn(&crate::client::Client) -> bool>;
    let mut filters: Vec<Filter> = Vec::new();
    let mut skip_me = true;
    if a.len() == 3 {
        let addr = String::from_utf8_lossy(&a[2]).into_owned();
        filters.push(Box::new(move |c| c.addr == addr));
        skip_me = false;
    } else if a.len() % 2 == 1 {
        return Err(CmdError::syntax());
    } else {
        for pair in a[2..].chunks(2) {
            let (opt, val) = (&pair[0], String::from_utf8_lossy(&pair[1]).into_owned());
            if is(opt, "id") {
                let id = int(&pair[1])
                    .ok()
                    .filter(|&n| n > 0)
                    .ok_or_else(|| CmdError::err("client-id should be greater than 0"))?;
                filters.push(Box::new(move |c| c.id as i64 == id));
            } else if is(opt, "addr") {
                filters.push(Box::new(move |c| c.addr == val));
            } else if is(opt, "laddr") {
                filters.push(Box::new(move |c| c.laddr == val));
            } else if is(opt, "user") {
                if cx.st.acl.user(&val).is_none() {
                    return Err(CmdError::err(format!("No such user '{val}'")));
                }
                filters.push(Box::new(move |c| *c.user == *val));
            } else if is(opt, "type") {
                let pubsub = match val.to_ascii_lowercase().as_str() {
                    "normal" => false,
                    "pubsub" => true,
                    "master" | "replica" | "slave" => {
                        filters.push(Box::new(|_| false));
                        continue;
                    }
                    _ => return Err(CmdError::err(format!("Unknown client type '{val}'"))),
                };
                filters.push(Box::new(move |c| c.subscribed() == pubsub));
            } else if is(opt, "skipme") {
                skip_me = match val.to_ascii_lowercase().as_str() {
                    "yes" => true,
                    "no" => false,
                    _ => return Err(CmdError::syntax()),
                };
            } else if is(opt, "maxage") {
                let secs = int(&pair[1])?;
                filters.push(Box::new(move |c| c.since.elapsed().as_secs() as i64 >= secs));
            } else {
                return Err(CmdError::syntax());
            }
        }
    }
    let target = |c: &crate::client::Client| filters.iter().all(|f| f(c));
    let mut killed = 0;
    for c in cx.st.clients.values_mut().filter(|c| target(c)) {
        let _ = c.out.send(crate::client::Out::closing());
        killed += 1;
    }
    if !skip_me && target(cx.client) {
        cx.client.close = true;
        killed += 1;
    }
    if a.len() == 3 {
        return if killed > 0 { Ok(Reply::ok()) } else { Err(CmdError::err("No such client")) };
    }
    Ok(Reply::Int(killed))
}
