//! Access control lists: users, their passwords, and which commands, keys
//! and pub/sub channels each may use (Redis 6/7's ACL, selectors included).
//!
//! Every connection is authenticated as a user — `default` until AUTH or
//! HELLO … AUTH names another — and before a command runs or is queued
//! (and again when EXEC or a script runs it) the user's permissions are
//! checked: the command (or subcommand, or first argument), each key with
//! what the command does to it ([`keys`]), each channel. A refusal is a
//! `-NOPERM` reply and an entry in ACL LOG. The default user starts with
//! every permission and `requirepass` as its password, so a server that
//! never mentions ACL behaves as before, and its check costs one
//! comparison per command.
//!
//! Users live in the executor's memory, as in Redis: they come from the
//! `user` lines of the config, or from `aclfile` (ACL LOAD / ACL SAVE).

pub mod category;
pub mod file;
pub mod keys;
mod log;
mod selector;
mod user;

use std::collections::BTreeMap;

pub use log::AclLog;
pub use selector::Selector;
pub use user::{merge_selector_args, User};

use crate::cmd::{self, Spec};

/// Why a call was refused.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Denied {
    /// The command (its full name: `get`, `client|kill`).
    Command(String),
    /// A key.
    Key(Vec<u8>),
    /// A channel.
    Channel(Vec<u8>),
}

impl Denied {
    /// ACL LOG's `reason`.
    pub fn reason(&self) -> &'static str {
        match self {
            Denied::Command(_) => "command",
            Denied::Key(_) => "key",
            Denied::Channel(_) => "channel",
        }
    }

    /// ACL LOG's `object`.
    pub fn object(&self) -> Vec<u8> {
        match self {
            Denied::Command(c) => c.as_bytes().to_vec(),
            Denied::Key(k) | Denied::Channel(k) => k.clone(),
        }
    }

    /// The error reply (without the leading `-`).
    pub fn error(&self) -> String {
        format!("NOPERM {}", self.message())
    }

    /// The message without a code, as Redis words it.
    pub fn message(&self) -> String {
        match self {
            Denied::Command(c) => format!("this user has no permissions to run the '{c}' command"),
            Denied::Key(_) => "this user has no permissions to access one of the keys used as arguments".into(),
            Denied::Channel(_) => "this user has no permissions to access one of the channels used as arguments".into(),
        }
    }

    /// ACL DRYRUN's wording, which names the key or channel.
    pub fn verbose(&self) -> String {
        match self {
            Denied::Command(c) => format!("This user has no permissions to run the '{c}' command"),
            Denied::Key(k) => {
                format!("This user has no permissions to access the '{}' key", String::from_utf8_lossy(k))
            }
            Denied::Channel(c) => {
                format!("This user has no permissions to access the '{}' channel", String::from_utf8_lossy(c))
            }
        }
    }
}

/// The users and the log of refusals.
#[derive(Clone, Debug)]
pub struct Acl {
    users: BTreeMap<String, User>,
    /// ACL LOG.
    pub log: AclLog,
    /// `acl-pubsub-default`: whether new users get every channel.
    pub pubsub_all: bool,
    /// Whether the default user may run anything with any password: the
    /// common case, checked without looking the user up.
    open_default: bool,
    /// `requirepass`: the default user's password when no ACL file or
    /// `user` line defines that user.
    requirepass: String,
}

impl Acl {
    /// Only the default user, with `requirepass` as its password.
    pub fn new(requirepass: &str) -> Acl {
        let mut acl = Acl {
            users: BTreeMap::new(),
            log: AclLog::new(128),
            pubsub_all: false,
            open_default: true,
            requirepass: requirepass.to_string(),
        };
        acl.users.insert("default".into(), User::default_user(requirepass));
        acl.refresh();
        acl
    }

    /// The users a server starts with: the default user with `requirepass`,
    /// then the config's `users` or the `aclfile`'s (which may redefine
    /// `default`).
    pub fn from_config(cfg: &crate::Config) -> Result<Acl, String> {
        let mut acl = Acl::new(&cfg.requirepass);
        acl.pubsub_all = cfg.acl_pubsub_default == "allchannels";
        acl.log.max_len = cfg.acllog_max_len;
        let users = if !cfg.aclfile.is_empty() {
            file::load(&cfg.aclfile, acl.pubsub_all)?
        } else {
            let lines: Vec<String> = cfg.users.iter().map(|u| format!("user {u}")).collect();
            file::parse_users(lines.iter().map(String::as_str), acl.pubsub_all).map_err(|e| format!("users: {e}"))?
        };
        for u in users {
            acl.put(u);
        }
        Ok(acl)
    }

    fn refresh(&mut self) {
        self.open_default = self.users.get("default").is_some_and(|u| u.root.is_everything());
    }

    /// The user named `name`.
    pub fn user(&self, name: &str) -> Option<&User> {
        self.users.get(name)
    }

    /// Every user, by name.
    pub fn users(&self) -> impl Iterator<Item = &User> {
        self.users.values()
    }

    /// Replaces (or adds) a user.
    pub fn put(&mut self, user: User) {
        self.users.insert(user.name.clone(), user);
        self.refresh();
    }

    /// Removes a user; false if there was none.
    pub fn remove(&mut self, name: &str) -> bool {
        let had = self.users.remove(name).is_some();
        self.refresh();
        had
    }

    /// Replaces every user (ACL LOAD); a missing default user is made as
    /// at start, with `requirepass`.
    pub fn replace_all(&mut self, users: Vec<User>) {
        self.users = users.into_iter().map(|u| (u.name.clone(), u)).collect();
        let pass = self.requirepass.clone();
        self.users.entry("default".into()).or_insert_with(|| User::default_user(&pass));
        self.refresh();
    }

    /// CONFIG SET requirepass.
    pub fn set_requirepass(&mut self, pass: &str) {
        self.requirepass = pass.to_string();
        if let Some(u) = self.users.get_mut("default") {
            u.set_requirepass(pass);
        }
        self.refresh();
    }

    /// Whether a new connection starts authenticated (as `default`).
    pub fn default_authenticates(&self) -> bool {
        self.users.get("default").is_some_and(|u| u.enabled && u.nopass)
    }

    /// Whether `name` with `pass` authenticates.
    pub fn authenticate(&self, name: &str, pass: &[u8]) -> bool {
        self.users.get(name).is_some_and(|u| u.password_ok(pass))
    }

    /// Checks a call by `user` (a missing user may run nothing). On a
    /// refusal, the reason and the argument position it concerns.
    pub fn check(&self, user: &str, spec: &Spec, args: &[Vec<u8>]) -> Result<(), Denied> {
        if user == "default" && self.open_default {
            return Ok(());
        }
        let Some(u) = self.users.get(user) else {
            return Err(Denied::Command(cmd::full_name(spec, args).to_string()));
        };
        check_user(u, spec, args)
    }

    /// Whether `user` has a selector that allows this call and may read
    /// every key (what SORT's BY and GET options need).
    pub fn reads_all_keys(&self, user: &str, spec: &Spec, args: &[Vec<u8>]) -> bool {
        if user == "default" && self.open_default {
            return true;
        }
        self.users.get(user).is_some_and(|u| {
            std::iter::once(&u.root)
                .chain(&u.selectors)
                .any(|s| s.reads_all_keys() && s.allows_command(spec, None, args.get(1).map(Vec::as_slice)))
        })
    }
}

/// Checks a call against every selector of `u`: allowed if one allows
/// all of it; otherwise the refusal that concerns the latest argument, as
/// Redis reports it.
pub fn check_user(u: &User, spec: &Spec, args: &[Vec<u8>]) -> Result<(), Denied> {
    let mut worst: Option<(usize, Denied)> = None;
    for sel in std::iter::once(&u.root).chain(&u.selectors) {
        match check_selector(sel, spec, args) {
            Ok(()) => return Ok(()),
            Err((pos, d)) => {
                if worst.as_ref().map_or(true, |(p, _)| pos > *p) {
                    worst = Some((pos, d));
                }
            }
        }
    }
    Err(worst.map(|(_, d)| d).unwrap_or_else(|| Denied::Command(cmd::full_name(spec, args).to_string())))
}

fn check_selector(sel: &Selector, spec: &Spec, args: &[Vec<u8>]) -> Result<(), (usize, Denied)> {
    let sub = cmd::subcommand(spec, args);
    let first = if cmd::is_container(spec.name) { None } else { args.get(1).map(Vec::as_slice) };
    if !sel.allows_command(spec, sub, first) {
        return Err((0, Denied::Command(cmd::full_name(spec, args).to_string())));
    }
    for (pos, key, need) in keys::needs(spec, args) {
        if !sel.allows_key(key, need) {
            return Err((pos, Denied::Key(key.to_vec())));
        }
    }
    let (channels, is_pattern): (&[Vec<u8>], bool) = match spec.name {
        "publish" | "spublish" => (args.get(1..2).unwrap_or_default(), false),
        "subscribe" | "ssubscribe" => (args.get(1..).unwrap_or_default(), false),
        "psubscribe" => (args.get(1..).unwrap_or_default(), true),
        _ => (&[], false),
    };
    for (i, ch) in channels.iter().enumerate() {
        if !sel.allows_channel(ch, is_pattern) {
            return Err((i + 1, Denied::Channel(ch.clone())));
        }
    }
    Ok(())
}

/// Whether a subscriber of these channels and patterns may keep them
/// under `u`'s current permissions (ACL SETUSER disconnects one that may not).
pub fn may_keep_subscriptions<'a>(
    u: &User,
    channels: impl Iterator<Item = &'a Vec<u8>> + Clone,
    patterns: impl Iterator<Item = &'a Vec<u8>> + Clone,
) -> bool {
    std::iter::once(&u.root).chain(&u.selectors).any(|s| {
        channels.clone().all(|c| s.allows_channel(c, false)) && patterns.clone().all(|p| s.allows_channel(p, true))
    })
}
