//! The ACL command: SETUSER GETUSER DELUSER USERS LIST WHOAMI CAT GENPASS
//! LOG DRYRUN LOAD SAVE HELP.

use rand::RngCore;

use super::args::{int, is};
use super::{CmdError, CmdResult, Spec};
use crate::acl::{self, category, merge_selector_args, User};
use crate::exec::Ctx;
use crate::resp::Reply;

pub const COMMANDS: &[Spec] = &[Spec {
    name: "acl",
    arity: -2,
    flags: &["admin", "noscript", "loading", "stale"],
    keys: (0, 0, 0),
    group: "server",
    summary: "ACL SETUSER | GETUSER | DELUSER | USERS | LIST | WHOAMI | CAT | GENPASS | LOG | DRYRUN | LOAD | SAVE | HELP: users and their permissions.",
    run: acl_cmd,
}];

/// The subcommand and its arity were checked before the call (`SUB_ARITY`).
fn acl_cmd(cx: &mut Ctx, a: &[Vec<u8>]) -> CmdResult {
    let sub = String::from_utf8_lossy(&a[1]).to_ascii_lowercase();
    if matches!(sub.as_str(), "setuser" | "deluser" | "load" | "log") {
        cx.st.snapshot_acl();
    }
    match sub.as_str() {
        "setuser" => setuser(cx, a),
        "getuser" => getuser(cx, &a[2]),
        "deluser" => deluser(cx, &a[2..]),
        "users" => Ok(Reply::bulks(cx.st.acl.users().map(|u| u.name.clone()))),
        "list" => Ok(Reply::bulks(cx.st.acl.users().map(User::describe))),
        "whoami" => Ok(Reply::bulk(&*cx.client.user)),
        "cat" if a.len() == 2 => Ok(Reply::bulks(category::NAMES.iter())),
        "cat" if a.len() == 3 => {
            let name = String::from_utf8_lossy(&a[2]);
            let bit = category::bit(&name).ok_or_else(|| CmdError::err(format!("Unknown category '{name}'")))?;
            Ok(Reply::bulks(category::members(bit)))
        }
        "genpass" if a.len() <= 3 => genpass(a.get(2)),
        "log" if a.len() <= 3 => log(cx, a.get(2)),
        "dryrun" => dryrun(cx, a),
        "load" => load(cx),
        "save" => save(cx),
        "help" => Ok(super::help(&[
            "ACL <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
            "CAT [<category>]",
            "    List all commands that belong to <category>, or all command categories",
            "    when no category is specified.",
            "DELUSER <username> [<username> ...]",
            "    Delete a list of users.",
            "DRYRUN <username> <command> [<arg> ...]",
            "    Returns whether the user can execute the given command without executing the command.",
            "GETUSER <username>",
            "    Get the user's details.",
            "GENPASS [<bits>]",
            "    Generate a secure 256-bit user password. The optional `bits` argument can",
            "    be used to specify a different size.",
            "LIST",
            "    Show users details in config file format.",
            "LOAD",
            "    Reload users from the ACL file.",
            "LOG [<count> | RESET]",
            "    Show the ACL log entries.",
            "SAVE",
            "    Save the current config to the ACL file.",
            "SETUSER <username> <attribute> [<attribute> ...]",
            "    Create or modify a user with the specified attributes.",
            "USERS",
            "    List all the registered usernames.",
            "WHOAMI",
            "    Return the current connection username.",
            "HELP",
            "    Print this help.",
        ])),
        _ => Err(super::subcommand_error(a, "ACL")),
    }
}

fn setuser(cx: &mut Ctx, a: &[Vec<u8>]) -> CmdResult {
    let name = String::from_utf8_lossy(&a[2]).into_owned();
    if a[2].iter().any(|&c| c.is_ascii_whitespace() || c == 0) {
        return Err(CmdError::err("Usernames can't contain spaces or null characters"));
    }
    let ops = merge_selector_args(&a[3..]).map_err(CmdError::err)?;
    let all_channels = cx.st.acl.pubsub_all;
    let mut user = cx.st.acl.user(&name).cloned().unwrap_or_else(|| User::new(&name, all_channels));
    for op in &ops {
        user.apply(op, all_channels).map_err(|why| {
            CmdError::err(format!("Error in ACL SETUSER modifier '{}': {why}", String::from_utf8_lossy(op)))
        })?;
    }
    cx.st.acl.put(user);
    disconnect_revoked_subscribers(cx, &name);
    Ok(Reply::ok())
}

/// Closes the connections of `name` whose subscriptions its new
/// permissions no longer allow (Redis 7 does the same).
fn disconnect_revoked_subscribers(cx: &mut Ctx, name: &str) {
    let Some(user) = cx.st.acl.user(name).cloned() else { return };
    close_logins(cx, name, |c| {
        acl::may_keep_subscriptions(&user, c.channels.iter().chain(&c.shard_channels), c.patterns.iter())
    });
}

/// Closes every connection authenticated as `name`, the caller's after its reply.
pub fn disconnect_user(cx: &mut Ctx, name: &str) {
    close_logins(cx, name, |_| false);
}

/// Closes the connections logged in as `name` that `keep` does not keep:
/// the others at once, forgotten in the same step so that nothing (a
/// message, a blocked pop) reaches them in between; the caller's after
/// its reply.
fn close_logins(cx: &mut Ctx, name: &str, keep: impl Fn(&crate::client::Client) -> bool) {
    let ids: Vec<u64> = cx.st.clients.values().filter(|c| &*c.user == name && !keep(c)).map(|c| c.id).collect();
    for id in ids {
        if let Some(c) = cx.st.clients.get(&id) {
            let _ = c.out.send(crate::client::Out::closing());
        }
        cx.st.disconnect(id);
    }
    if &*cx.client.user == name && !keep(cx.client) {
        cx.client.close = true;
    }
}

fn getuser(cx: &mut Ctx, name: &[u8]) -> CmdResult {
    let Some(u) = cx.st.acl.user(&String::from_utf8_lossy(name)) else { return Ok(Reply::Nil) };
    let describe = |s: &acl::Selector| {
        vec![
            (Reply::bulk("commands"), Reply::bulk(s.describe_commands())),
            (Reply::bulk("keys"), Reply::bulk(s.describe_keys())),
            (Reply::bulk("channels"), Reply::bulk(s.describe_channels())),
        ]
    };
    let mut fields = vec![
        (Reply::bulk("flags"), Reply::bulks(u.flags())),
        (Reply::bulk("passwords"), Reply::bulks(u.passwords.iter())),
    ];
    fields.extend(describe(&u.root));
    fields
        .push((Reply::bulk("selectors"), Reply::Array(u.selectors.iter().map(|s| Reply::Map(describe(s))).collect())));
    Ok(Reply::Map(fields))
}

fn deluser(cx: &mut Ctx, names: &[Vec<u8>]) -> CmdResult {
    if names.iter().any(|n| n == b"default") {
        return Err(CmdError::err("The 'default' user cannot be removed"));
    }
    let mut removed = 0;
    for n in names {
        let name = String::from_utf8_lossy(n).into_owned();
        if cx.st.acl.remove(&name) {
            removed += 1;
            disconnect_user(cx, &name);
        }
    }
    Ok(Reply::Int(removed))
}

fn genpass(bits: Option<&Vec<u8>>) -> CmdResult {
    let bits = match bits {
        None => 256,
        Some(b) => match int(b) {
            Ok(n @ 1..=4096) => n as usize,
            _ => return Err(CmdError::err(
                "ACL GENPASS argument must be the number of bits for the output password, a positive number up to 4096",
            )),
        },
    };
    let chars = bits.div_ceil(4);
    let mut bytes = vec![0u8; chars.div_ceil(2)];
    rand::thread_rng().fill_bytes(&mut bytes);
    let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
    Ok(Reply::bulk(&hex[..chars]))
}

fn log(cx: &mut Ctx, arg: Option<&Vec<u8>>) -> CmdResult {
    let count = match arg {
        None => usize::MAX,
        Some(a) if is(a, "reset") => {
            cx.st.acl.log.reset();
            return Ok(Reply::ok());
        }
        Some(a) => match int(a) {
            Ok(n) if n >= 0 => n as usize,
            _ => return Err(CmdError::err("value is out of range, must be positive")),
        },
    };
    let entries = cx.st.acl.log.newest(count).map(|e| {
        Reply::Map(vec![
            (Reply::bulk("count"), Reply::Int(e.count as i64)),
            (Reply::bulk("reason"), Reply::bulk(e.reason)),
            (Reply::bulk("context"), Reply::bulk(e.context)),
            (Reply::bulk("object"), Reply::bulk(&e.object)),
            (Reply::bulk("username"), Reply::bulk(&e.username)),
            (Reply::bulk("age-seconds"), Reply::Double(e.when.elapsed().as_millis() as f64 / 1000.0)),
            (Reply::bulk("client-info"), Reply::bulk(&e.client_info)),
        ])
    });
    Ok(Reply::Array(entries.collect()))
}

fn dryrun(cx: &mut Ctx, a: &[Vec<u8>]) -> CmdResult {
    let name = String::from_utf8_lossy(&a[2]);
    let Some(user) = cx.st.acl.user(&name) else {
        return Err(CmdError::err(format!("User '{name}' not found")));
    };
    let call = &a[3..];
    let Some(spec) = super::spec(&call[0]) else {
        return Err(CmdError::err(format!("Command '{}' not found", String::from_utf8_lossy(&call[0]))));
    };
    if !super::arity_ok(spec.arity, call.len()) {
        return Err(CmdError::arity(spec.name));
    }
    match acl::check_user(user, spec, call) {
        Ok(()) => Ok(Reply::ok()),
        Err(d) => Ok(Reply::bulk(d.verbose())),
    }
}

const NO_FILE: &str = "This Redis instance is not configured to use an ACL file. You may want to specify users via the ACL SETUSER command and then issue a CONFIG REWRITE (assuming you have a Redis configuration file set) in order to store users in the Redis configuration.";

fn load(cx: &mut Ctx) -> CmdResult {
    if cx.st.cfg.aclfile.is_empty() {
        return Err(CmdError::err(NO_FILE));
    }
    let users = acl::file::load(&cx.st.cfg.aclfile, cx.st.acl.pubsub_all).map_err(CmdError::err)?;
    cx.st.acl.replace_all(users);
    // As Redis 7.0 does, every connection logged in as a user other than
    // `default` is closed (the caller's after this reply): its user was
    // replaced. Default-user connections stay, unless their
    // subscriptions are no longer allowed.
    let mut names: Vec<String> = cx.st.clients.values().map(|c| c.user.to_string()).collect();
    names.push(cx.client.user.to_string());
    names.sort();
    names.dedup();
    for name in names {
        if name == "default" {
            disconnect_revoked_subscribers(cx, &name);
        } else {
            disconnect_user(cx, &name);
        }
    }
    Ok(Reply::ok())
}

fn save(cx: &mut Ctx) -> CmdResult {
    if cx.st.cfg.aclfile.is_empty() {
        return Err(CmdError::err(NO_FILE));
    }
    acl::file::save(&cx.st.cfg.aclfile, cx.st.acl.users()).map_err(|e| {
        log::warn!("ACL SAVE to {}: {e}", cx.st.cfg.aclfile);
        CmdError::err("There was an error trying to save the ACLs. Please check the server logs for more information")
    })?;
    Ok(Reply::ok())
}
