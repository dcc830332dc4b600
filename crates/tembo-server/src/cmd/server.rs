//! Server commands: COMMAND INFO DBSIZE FLUSHDB FLUSHALL CONFIG TIME
//! SHUTDOWN SAVE BGSAVE LASTSAVE DEBUG MONITOR.

use std::ops::Bound;

use super::args::{glob, is};
use super::{table, CmdError, CmdResult, Spec};
use crate::encoding;
use crate::exec::Ctx;
use crate::resp::Reply;

pub const COMMANDS: &[Spec] = &[
    Spec {
        name: "command",
        arity: -1,
        flags: &["loading", "stale"],
        keys: (0, 0, 0),
        group: "server",
        summary: "COMMAND [COUNT | INFO name... | DOCS name... | LIST]: describes the commands.",
        run: command,
    },
    Spec {
        name: "info",
        arity: -1,
        flags: &["loading", "stale"],
        keys: (0, 0, 0),
        group: "server",
        summary: "Returns information and statistics about the server.",
        run: crate::info::info,
    },
    Spec {
        name: "dbsize",
        arity: 1,
        flags: &["readonly", "fast"],
        keys: (0, 0, 0),
        group: "server",
        summary: "Returns the number of keys in the database.",
        run: dbsize,
    },
    Spec {
        name: "flushdb",
        arity: -1,
        flags: &["write"],
        keys: (0, 0, 0),
        group: "server",
        summary: "Removes all keys from the current database.",
        run: flushdb,
    },
    Spec {
        name: "swapdb",
        arity: 3,
        flags: &["write", "fast"],
        keys: (0, 0, 0),
        group: "server",
        summary: "SWAPDB index1 index2: two databases exchange their keys, at once and durably.",
        run: swapdb,
    },
    Spec {
        name: "flushall",
        arity: -1,
        flags: &["write"],
        keys: (0, 0, 0),
        group: "server",
        summary: "Removes all keys from all databases.",
        run: flushall,
    },
    Spec {
        name: "config",
        arity: -2,
        flags: &["admin", "noscript", "loading", "stale"],
        keys: (0, 0, 0),
        group: "server",
        summary: "CONFIG GET pattern... | SET name value... | RESETSTAT.",
        run: config,
    },
    Spec {
        name: "time",
        arity: 1,
        flags: &["loading", "stale", "fast"],
        keys: (0, 0, 0),
        group: "server",
        summary: "Returns the server time.",
        run: time,
    },
    Spec {
        name: "shutdown",
        arity: -1,
        flags: &["admin", "noscript", "loading", "stale", "no_multi", "allow_busy"],
        keys: (0, 0, 0),
        group: "server",
        summary: "Closes the pool cleanly and stops the server.",
        run: shutdown,
    },
    Spec {
        name: "save",
        arity: 1,
        flags: &["admin", "noscript", "no_async_loading", "no_multi"],
        keys: (0, 0, 0),
        group: "server",
        summary: "Returns once every write is durable (they always are before their reply).",
        run: save,
    },
    Spec {
        name: "bgsave",
        arity: -1,
        flags: &["admin", "noscript", "no_async_loading"],
        keys: (0, 0, 0),
        group: "server",
        summary: "Writes a consistent backup of the whole database to the backup path, in the background.",
        run: bgsave,
    },
    Spec {
        name: "lastsave",
        arity: 1,
        flags: &["loading", "stale", "fast"],
        keys: (0, 0, 0),
        group: "server",
        summary: "Unix time of the last commit.",
        run: lastsave,
    },
    Spec {
        name: "monitor",
        arity: 1,
        flags: &["admin", "noscript", "loading", "stale"],
        keys: (0, 0, 0),
        group: "server",
        summary: "Streams every command the server runs.",
        run: monitor,
    },
];

/// COMMAND LIST [FILTERBY MODULE name | ACLCAT category | PATTERN glob]:
/// every command, and every subcommand as `container|sub`.
fn command_list(names: &[&&'static str], a: &[Vec<u8>]) -> CmdResult {
    let mut all: Vec<String> = Vec::new();
    for n in names {
        all.push(n.to_string());
        all.extend(super::subcommands_of(n).into_iter().map(|s| format!("{n}|{s}")));
    }
    match a.len() {
        2 => Ok(Reply::bulks(all)),
        5 if is(&a[2], "filterby") => {
            let value = &a[4];
            let kept: Vec<String> = if is(&a[3], "aclcat") {
                match crate::acl::category::bit(&String::from_utf8_lossy(value)) {
                    Some(bit) => {
                        let members = crate::acl::category::members(bit);
                        all.into_iter().filter(|n| members.contains(n)).collect()
                    }
                    None => Vec::new(),
                }
            } else if is(&a[3], "pattern") {
                all.into_iter().filter(|n| super::args::glob(value, n.as_bytes(), true)).collect()
            } else if is(&a[3], "module") {
                Vec::new()
            } else {
                return Err(CmdError::syntax());
            };
            Ok(Reply::bulks(kept))
        }
        _ => Err(CmdError::syntax()),
    }
}

fn command(cx: &mut Ctx, a: &[Vec<u8>]) -> CmdResult {
    let t = table();
    let mut names: Vec<&&'static str> = t.keys().collect();
    names.sort();
    let sub = a.get(1).map(|s| String::from_utf8_lossy(s).to_ascii_lowercase());
    match sub.as_deref() {
        None => Ok(Reply::Array(names.iter().map(|n| info_of(t[**n])).collect())),
        Some("count") => Ok(Reply::Int(t.len() as i64)),
        Some("list") => command_list(&names, a),
        Some("info") => Ok(Reply::Array(if a.len() == 2 {
            names.iter().map(|n| info_of(t[**n])).collect()
        } else {
            a[2..]
                .iter()
                .map(|n| {
                    t.get(String::from_utf8_lossy(n).to_ascii_lowercase().as_str()).map_or(Reply::Nil, |s| info_of(s))
                })
                .collect()
        })),
        Some("docs") => {
            let wanted: Vec<&Spec> = if a.len() == 2 {
                names.iter().map(|n| t[**n]).collect()
            } else {
                a[2..].iter().filter_map(|n| super::spec(n)).collect()
            };
            Ok(Reply::Map(wanted.into_iter().map(|s| (Reply::bulk(s.name), docs_of(s))).collect()))
        }
        Some("getkeys") => getkeys(a, false),
        Some("getkeysandflags") => getkeys(a, true),
        Some("help") if a.len() == 2 => Ok(super::help(&[
            "COMMAND <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
            "(no subcommand)",
            "    Return details about all Redis commands.",
            "COUNT",
            "    Return the total number of commands in this Redis server.",
            "LIST",
            "    Return a list of all commands in this Redis server.",
            "INFO [<command-name> ...]",
            "    Return details about multiple Redis commands.",
            "    If no command names are given, documentation details for all",
            "    commands are returned.",
            "DOCS [<command-name> ...]",
            "    Return documentation details about multiple Redis commands.",
            "    If no command names are given, documentation details for all",
            "    commands are returned.",
            "GETKEYS <full-command>",
            "    Return the keys from a full Redis command.",
            "GETKEYSANDFLAGS <full-command>",
            "    Return the keys and the access flags from a full Redis command.",
        ])),
        Some(_) => {
            let _ = cx;
            Err(super::subcommand_error(a, "COMMAND"))
        }
    }
}

/// COMMAND GETKEYS / GETKEYSANDFLAGS command [arg ...], with Redis 7.0's
/// checks in its order; with flags, each key comes with what the command
/// does to it (its key spec's flags).
fn getkeys(a: &[Vec<u8>], with_flags: bool) -> CmdResult {
    if a.len() < 4 {
        return Err(CmdError::arity(if with_flags { "command|getkeysandflags" } else { "command|getkeys" }));
    }
    let args = &a[2..];
    let spec = super::spec(&args[0]).ok_or_else(|| CmdError::err("Invalid command specified"))?;
    if spec.keys.0 <= 0 && !spec.flags.contains(&"movablekeys") {
        return Err(CmdError::err("The command has no key arguments"));
    }
    if !super::arity_ok(spec.arity, args.len()) {
        return Err(CmdError::err("Invalid number of arguments specified for command"));
    }
    let found = if with_flags {
        super::key_spec::keys_and_flags(spec, super::full_name(spec, args), args)
    } else {
        super::command_keys(spec, args).map(|keys| keys.into_iter().map(|k| (k, 0)).collect())
    };
    match found {
        Some(keys) if !keys.is_empty() => Ok(Reply::Array(
            keys.into_iter()
                .map(|(key, flags)| {
                    if with_flags {
                        Reply::Array(vec![Reply::bulk(key), super::key_spec::flags_reply(flags)])
                    } else {
                        Reply::bulk(key)
                    }
                })
                .collect(),
        )),
        // Scripts may be called without keys (a bad count finds none either).
        _ if spec.flags.contains(&"no_mandatory_keys") => Ok(Reply::Array(Vec::new())),
        _ => Err(CmdError::err("Invalid arguments specified for command")),
    }
}

/// COMMAND INFO's entry for a command. A container (CLIENT, XGROUP, ...)
/// is listed as redis-server lists it: no flags or keys of its own, and an
/// entry per subcommand with that subcommand's arity, flags, keys,
/// categories, tips and key specs.
fn info_of(s: &Spec) -> Reply {
    if super::is_container(s.name) {
        let subs = super::subcommands_of(s.name)
            .into_iter()
            .filter_map(|sub| {
                let full = format!("{}|{sub}", s.name);
                let (_, arity, flags) = super::key_spec::subcommand_info(&full)?;
                let (first, last, step) = super::key_spec::legacy_range(&full);
                Some(Reply::Array(vec![
                    Reply::bulk(&full),
                    Reply::Int(arity.into()),
                    Reply::Set(flags.iter().map(|f| Reply::Simple(f.to_string())).collect()),
                    Reply::Int(first),
                    Reply::Int(last),
                    Reply::Int(step),
                    Reply::Set(
                        crate::acl::category::names(crate::acl::category::of(s, Some(sub)))
                            .into_iter()
                            .map(Reply::Simple)
                            .collect(),
                    ),
                    super::key_spec::tips_reply(&full),
                    super::key_spec::specs_reply(&full),
                    Reply::Set(vec![]),
                ]))
            })
            .collect();
        // COMMAND runs without a subcommand too, so it keeps its own flags.
        if s.name != "command" {
            return Reply::Array(vec![
                Reply::bulk(s.name),
                Reply::Int(s.arity as i64),
                Reply::Set(vec![]),
                Reply::Int(0),
                Reply::Int(0),
                Reply::Int(0),
                Reply::Set(vec![Reply::Simple("@slow".into())]),
                super::key_spec::tips_reply(s.name),
                Reply::Set(vec![]),
                Reply::Set(subs),
            ]);
        }
        return own_info(s, subs);
    }
    own_info(s, Vec::new())
}

fn own_info(s: &Spec, subcommands: Vec<Reply>) -> Reply {
    Reply::Array(vec![
        Reply::bulk(s.name),
        Reply::Int(s.arity as i64),
        // `may_replicate` is internal (CLIENT PAUSE reads it); Redis does not list it.
        Reply::Set(s.flags.iter().filter(|f| **f != "may_replicate").map(|f| Reply::Simple(f.to_string())).collect()),
        Reply::Int(s.keys.0 as i64),
        Reply::Int(s.keys.1 as i64),
        Reply::Int(s.keys.2 as i64),
        Reply::Set(
            crate::acl::category::names(crate::acl::category::of(s, None)).into_iter().map(Reply::Simple).collect(),
        ),
        super::key_spec::tips_reply(s.name),
        super::key_spec::specs_reply(s.name),
        Reply::Set(subcommands),
    ])
}

fn docs_of(s: &Spec) -> Reply {
    Reply::Map(vec![
        (Reply::bulk("summary"), Reply::bulk(s.summary)),
        (Reply::bulk("since"), Reply::bulk("1.0.0")),
        (Reply::bulk("group"), Reply::bulk(s.group)),
    ])
}

fn dbsize(cx: &mut Ctx, _: &[Vec<u8>]) -> CmdResult {
    Ok(Reply::Int(cx.st.key_count(cx.db() as usize)))
}

/// Empties `db` (all databases if `None`) in O(1): each starts a new flush
/// generation, which hides every key of the old one at once; the
/// background sweep deletes the old keys (and hands collections' elements
/// to the reclaimer), a bounded amount per cron tick. Stale expiry-index
/// entries are dropped by the expire cycle when their time comes.
fn flush(cx: &mut Ctx, db: Option<u8>) -> CmdResult {
    // Databases as clients number them (watches and blocked clients know
    // them so); their keys are stored under `phys`.
    let dbs: Vec<u8> = match db {
        Some(d) => vec![d],
        None => (0..cx.st.gens.len()).map(|d| d as u8).collect(),
    };
    // As Redis (`touchAllWatchedKeysInDb`), a flush touches a watched key
    // only if it is stored (expired or not): that breaks the WATCH, but
    // for a client that watched it already expired (see `mark_watchers`).
    let watched: Vec<WatchedKey> = cx.st.watchers.keys().filter(|(d, _)| dbs.contains(d)).cloned().collect();
    let mut flushed_watched = Vec::new();
    for (d, key) in watched {
        if stored_in(cx, cx.st.phys(d), &key)?.is_some() {
            flushed_watched.push((d, key));
        }
    }
    for seen in dbs {
        let d = cx.st.phys(seen);
        let i = d as usize;
        if cx.st.key_count(i) == 0 && !cx.st.sweeping[i] {
            continue; // nothing to hide: keep the generation
        }
        let next = match cx.st.gen(d).checked_add(1) {
            Some(next) => next,
            None => {
                flush_all_generations(cx, d)?;
                0
            }
        };
        cx.st.store.put(encoding::flush_gen_key(d), next.to_be_bytes().to_vec())?;
        // The flushed sorted sets' rank indexes go now, not as the sweep
        // reclaims their elements (each step a change to apply).
        cx.st.store.forget_ranks_under(&[encoding::ZIDX, d]);
        cx.st.pending_gens[i] = Some(next);
        let (dk, de) = (cx.st.key_count(i), cx.st.expire_count(i));
        cx.st.pending_counts[i].0 -= dk;
        cx.st.pending_counts[i].1 -= de;
        cx.st.blocking.signal_db(seen);
    }
    for (d, key) in flushed_watched {
        cx.st.touch(d, &key, Some(&mut *cx.client));
    }
    crate::tracking::flushed(cx.st);
    Ok(Reply::ok())
}

/// The wrap-around of a database's 16-bit flush generation: deletes every
/// metadata key of every generation now (O(keys), once per 65,535
/// flushes), so generation 0 can start again empty.
fn flush_all_generations(cx: &mut Ctx, db: u8) -> crate::keyspace::Res<()> {
    let hi = encoding::prefix_end(&[encoding::META, db]).map_or(Bound::Unbounded, Bound::Excluded);
    crate::background::drop_metas(cx.st, db, vec![encoding::META, db], hi, usize::MAX)?;
    Ok(())
}

fn flush_mode(a: &[Vec<u8>]) -> Result<(), CmdError> {
    match a.len() {
        1 => Ok(()),
        2 if is(&a[1], "async") || is(&a[1], "sync") => Ok(()),
        _ => Err(CmdError::syntax()),
    }
}

/// Whether `key` is stored in physical database `db`, and if so whether
/// it is past its expiry (there, not yet removed).
fn stored_in(cx: &Ctx, db: u8, key: &[u8]) -> crate::keyspace::Res<Option<bool>> {
    let mk = encoding::meta_key(db, cx.st.gen(db), key);
    let Some((head, _)) = cx.st.store.get_range(&mk, 0, encoding::META_HEADER_MAX)? else { return Ok(None) };
    let m = encoding::Meta::decode_head(&head).ok_or_else(|| CmdError::corrupt(key))?;
    Ok(Some(m.expired(cx.now)))
}

/// A watched key: the database as clients number it, and the key.
type WatchedKey = (u8, Vec<u8>);

/// What SWAPDB does to a client's WATCH on a key of a swapped database,
/// as Redis 7.0's `touchAllWatchedKeysInDb` decides it from the key in the
/// database the watch names before (`emptied`) and after (`replacement`)
/// the swap (`Some(expired)` where stored).
#[derive(Debug, PartialEq)]
enum SwapWatch {
    Keep,
    Break,
    /// A key watched while expired is gone now: no logical change, and it
    /// is watched as a deleted key from here on.
    Unstale,
    /// A key that did not exist is replaced by an expired one: no logical
    /// change, and it is watched as an expired key from here on.
    Stale,
}

fn swap_watch(stale: bool, emptied: Option<bool>, replacement: Option<bool>) -> SwapWatch {
    if emptied.is_none() && replacement.is_none() {
        return SwapWatch::Keep;
    }
    match (stale, replacement) {
        (true, None) => SwapWatch::Unstale,
        (true, Some(true)) => SwapWatch::Keep,
        (false, Some(true)) if emptied.is_none() => SwapWatch::Stale,
        _ => SwapWatch::Break,
    }
}

fn flushdb(cx: &mut Ctx, a: &[Vec<u8>]) -> CmdResult {
    flush_mode(a)?;
    let db = cx.client.db;
    flush(cx, Some(db))
}

/// SWAPDB index1 index2: the two databases exchange their keys at once
/// (O(1): a map from the numbers clients select to where keys are stored,
/// persisted with the command's commit). A WATCH on a key of either is
/// broken or kept as Redis 7.0 decides it ([`swap_watch`]), and clients
/// blocked on keys of either are served if their keys now have elements.
fn swapdb(cx: &mut Ctx, a: &[Vec<u8>]) -> CmdResult {
    let index = |v: &[u8], which: &str| -> Result<u8, CmdError> {
        let n = super::args::int(v).map_err(|_| CmdError::err(format!("invalid {which} DB index")))?;
        if n < 0 || n as usize >= cx.st.cfg.databases {
            return Err(CmdError::err("DB index is out of range"));
        }
        Ok(n as u8)
    };
    let (x, y) = (index(&a[1], "first")?, index(&a[2], "second")?);
    if x == y {
        return Ok(Reply::ok());
    }
    let (px, py) = (cx.st.phys(x), cx.st.phys(y));
    let watched: Vec<(WatchedKey, Vec<u64>)> = cx
        .st
        .watchers
        .iter()
        .filter(|((d, _), _)| *d == x || *d == y)
        .map(|(k, ids)| (k.clone(), ids.clone()))
        .collect();
    let mut outcomes = Vec::new();
    for (entry, ids) in watched {
        let (before, after) = if entry.0 == x { (px, py) } else { (py, px) };
        let (emptied, replacement) = (stored_in(cx, before, &entry.1)?, stored_in(cx, after, &entry.1)?);
        for id in ids {
            let client = if id == cx.client.id { Some(&*cx.client) } else { cx.st.clients.get(&id) };
            let Some(c) = client else { continue };
            outcomes.push((id, entry.clone(), swap_watch(c.watch_stale.contains(&entry), emptied, replacement)));
        }
    }
    cx.st.swap_dbs(x, y)?;
    for (id, entry, outcome) in outcomes {
        let c = if id == cx.client.id { Some(&mut *cx.client) } else { cx.st.clients.get_mut(&id) };
        let Some(c) = c else { continue };
        match outcome {
            SwapWatch::Keep => {}
            SwapWatch::Break => c.watch_dirty = true,
            SwapWatch::Unstale => c.watch_stale.retain(|e| *e != entry),
            SwapWatch::Stale => c.watch_stale.push(entry),
        }
    }
    cx.st.blocking.signal_db(x);
    cx.st.blocking.signal_db(y);
    Ok(Reply::ok())
}

fn flushall(cx: &mut Ctx, a: &[Vec<u8>]) -> CmdResult {
    flush_mode(a)?;
    flush(cx, None)
}

/// Parameters CONFIG GET shows, with their current values.
fn params(cx: &Ctx) -> Vec<(String, String)> {
    let c = &cx.st.cfg;
    let mut v = vec![
        ("bind".to_string(), c.bind.clone()),
        ("port".into(), c.port.to_string()),
        ("requirepass".into(), c.requirepass.clone()),
        ("aclfile".into(), c.aclfile.clone()),
        ("acllog-max-len".into(), c.acllog_max_len.to_string()),
        ("acl-pubsub-default".into(), c.acl_pubsub_default.clone()),
        ("maxclients".into(), cx.st.shared.maxclients().to_string()),
        ("maxmemory".into(), cx.st.maxmemory.limit.to_string()),
        ("maxmemory-policy".into(), cx.st.maxmemory.policy.name().into()),
        ("maxmemory-samples".into(), cx.st.maxmemory.samples.to_string()),
        ("maxmemory-eviction-tenacity".into(), cx.st.maxmemory.tenacity.to_string()),
        ("lfu-log-factor".into(), cx.st.access.lfu_log_factor.to_string()),
        ("lfu-decay-time".into(), cx.st.access.lfu_decay_minutes.to_string()),
        ("databases".into(), c.databases.to_string()),
        ("loglevel".into(), c.loglevel.clone()),
        ("proto-max-bulk-len".into(), cx.st.shared.max_bulk().to_string()),
        ("client-query-buffer-limit".into(), cx.st.shared.query_limit().to_string()),
        ("protected-mode".into(), if c.allow_unprotected { "no" } else { "yes" }.into()),
        ("dir".into(), c.pool.parent().map(|p| p.display().to_string()).unwrap_or_default()),
        ("dbfilename".into(), c.pool.file_name().map(|p| p.to_string_lossy().into_owned()).unwrap_or_default()),
        ("backup-path".into(), c.backup_file().display().to_string()),
    ];
    v.push(("client-output-buffer-limit".into(), cx.st.output_limits.show()));
    v.extend(cx.st.inert.iter().map(|(k, val)| (k.clone(), val.clone())));
    v.extend(super::config_compat::IMMUTABLE.iter().map(|(k, val)| {
        let val = match *k {
            "unixsocket" => c.unixsocket.clone(),
            "unixsocketperm" => format!("{:o}", c.unixsocket_mode().unwrap_or(0)),
            _ => val.to_string(),
        };
        (k.to_string(), val)
    }));
    for (alias, canonical) in ALIASES {
        if let Some(val) = inert_value(&cx.st.inert, canonical) {
            v.push((alias.to_string(), val.to_string()));
        }
    }
    v
}

/// Settings accepted for compatibility that change nothing: Tembo makes
/// every write durable before its reply, whatever `save` or `appendonly` say.
pub const INERT: &[(&str, &str)] = &[
    ("save", ""),
    ("appendonly", "no"),
    ("appendfsync", "always"),
    ("timeout", "0"),
    ("tcp-keepalive", "300"),
    ("hz", "10"),
    ("lazyfree-lazy-user-del", "yes"),
    ("lazyfree-lazy-user-flush", "yes"),
    ("notify-keyspace-events", ""),
    ("slowlog-log-slower-than", "10000"),
    ("lazyfree-lazy-expire", "no"),
    ("lazyfree-lazy-server-del", "no"),
    ("lazyfree-lazy-eviction", "no"),
    ("activerehashing", "yes"),
    ("active-expire-effort", "1"),
    ("latency-tracking", "yes"),
    // Which percentiles INFO latencystats shows.
    ("latency-tracking-info-percentiles", "50 99 99.9"),
    // INFO replication shows it; there is no backlog without replicas.
    ("repl-backlog-size", "1048576"),
    ("maxmemory-clients", "0"),
    ("latency-monitor-threshold", "0"),
    ("busy-reply-threshold", "5000"),
    // Read by CLIENT TRACKING: the most read keys remembered (0: no limit).
    ("tracking-table-max-keys", "1000000"),
    ("slowlog-max-len", "128"),
    ("list-compress-depth", "0"),
    ("stream-node-max-bytes", "4096"),
    ("stream-node-max-entries", "100"),
    // Redis's compact-encoding thresholds. Tembo stores every element as
    // its own ordered key whatever they say; `OBJECT ENCODING` reports the
    // encoding Redis would use by the entry counts below.
    ("hash-max-listpack-entries", "512"),
    ("hash-max-listpack-value", "64"),
    ("zset-max-listpack-entries", "128"),
    ("zset-max-listpack-value", "64"),
    ("set-max-intset-entries", "512"),
    ("list-max-listpack-size", "-2"),
    // Read by PFADD and PFMERGE: the longest sparse HyperLogLog.
    ("hll-sparse-max-bytes", "3000"),
    // RESTORE checks every payload whole, whatever this says: a payload is
    // decoded into plain elements before anything is written, and one
    // that does not decode, or holds a duplicate field or member, is
    // refused with "Bad data format" (see `rdb_value`).
    ("sanitize-dump-payload", "no"),
    // What a crash report does; Tembo's is Rust's panic message, contained
    // per command (see `DEBUG PANIC`).
    ("crash-log-enabled", "yes"),
    ("crash-memcheck-enabled", "yes"),
    // Hidden in `CONFIG GET *` (see `HIDDEN_INERT`). The delays slow
    // Redis's RDB saving and loading down for tests; Tembo has neither.
    ("use-exit-on-panic", "no"),
    ("key-load-delay", "0"),
    ("rdb-key-save-delay", "0"),
    // A replica's credentials and timing; Tembo has no replicas.
    ("masterauth", ""),
    ("masteruser", ""),
    ("repl-ping-replica-period", "10"),
    ("repl-timeout", "60"),
    // The AOF's format; there is no AOF (every write is durable in the pool).
    ("aof-use-rdb-preamble", "yes"),
    ("aof-timestamp-enabled", "no"),
];

/// Inert settings that, as in Redis, `CONFIG GET` shows only when named,
/// not to a pattern.
const HIDDEN_INERT: &[&str] =
    &["use-exit-on-panic", "key-load-delay", "rdb-key-save-delay", "lua-enable-deprecated-api"];

/// Redis 7.0's old names for the listpack settings: setting either name
/// sets both, and `CONFIG GET` answers to both.
pub const ALIASES: &[(&str, &str)] = &[
    ("hash-max-ziplist-entries", "hash-max-listpack-entries"),
    ("hash-max-ziplist-value", "hash-max-listpack-value"),
    ("zset-max-ziplist-entries", "zset-max-listpack-entries"),
    ("zset-max-ziplist-value", "zset-max-listpack-value"),
    ("list-max-ziplist-size", "list-max-listpack-size"),
    ("lua-time-limit", "busy-reply-threshold"),
];

/// A setting's name, its alias resolved.
fn canonical(name: &str) -> &str {
    ALIASES.iter().find(|(alias, _)| *alias == name).map_or(name, |(_, c)| c)
}

/// The current value of an inert or encoding setting, by its name or alias.
pub fn inert_value<'a>(inert: &'a [(String, String)], name: &str) -> Option<&'a str> {
    let name = canonical(name);
    inert.iter().find(|(k, _)| k == name).map(|(_, v)| v.as_str())
}

/// [`inert_value`] of a count setting, `default` when it does not read as one.
pub fn inert_u64(inert: &[(String, String)], name: &str, default: u64) -> u64 {
    inert_value(inert, name).and_then(|v| v.parse::<u64>().ok()).unwrap_or(default)
}

fn config(cx: &mut Ctx, a: &[Vec<u8>]) -> CmdResult {
    let sub = String::from_utf8_lossy(&a[1]).to_ascii_lowercase();
    match sub.as_str() {
        "get" if a.len() >= 3 => {
            let all = params(cx);
            let mut out = Vec::new();
            for (k, v) in &all {
                let hidden = HIDDEN_INERT.contains(&k.as_str());
                if a[2..].iter().any(|p| {
                    if hidden {
                        p.eq_ignore_ascii_case(k.as_bytes())
                    } else {
                        glob(p, k.as_bytes(), true)
                    }
                }) {
                    out.push((Reply::bulk(k), Reply::bulk(v)));
                }
            }
            Ok(Reply::Map(out))
        }
        "set" if a.len() >= 4 && a.len() % 2 == 0 => {
            // Errors name a setting as the client wrote it.
            let written: Vec<String> = a[2..].chunks(2).map(|p| String::from_utf8_lossy(&p[0]).into_owned()).collect();
            let names: Vec<String> = written.iter().map(|n| n.to_ascii_lowercase()).collect();
            if let Some(dup) =
                (0..names.len()).find(|&i| names[..i].iter().any(|m| canonical(m) == canonical(&names[i])))
            {
                return Err(CmdError::err(format!(
                    "CONFIG SET failed (possibly related to argument '{}') - duplicate parameter",
                    written[dup]
                )));
            }
            cx.st.snapshot_acl();
            // All or nothing, as in Redis 7: a failed setting undoes the
            // ones before it.
            let before = ConfigSnapshot::take(cx);
            for ((name, written), pair) in names.iter().zip(&written).zip(a[2..].chunks(2)) {
                if let Err(e) = config_set(cx, name, written, &String::from_utf8_lossy(&pair[1])) {
                    before.restore(cx);
                    return Err(e);
                }
            }
            if names.iter().any(|n| n.starts_with("maxmemory")) {
                // A lower limit, or a policy that may evict, applies at once
                // (Redis starts evicting as the setting changes).
                crate::maxmemory::perform(cx.st, Some(&mut *cx.client), cx.now);
            }
            Ok(Reply::ok())
        }
        "resetstat" if a.len() == 2 => {
            cx.st.stats.reset();
            cx.st.shared.reset_net();
            cx.st.acl.log.denied = [0; 4];
            Ok(Reply::ok())
        }
        // Redis's words without a config file (rueidis's own tests match
        // them); with one, what to do instead.
        "rewrite" if a.len() == 2 && cx.st.config_file.is_empty() => {
            Err(CmdError::err("The server is running without a config file"))
        }
        "rewrite" if a.len() == 2 => Err(CmdError::err("CONFIG REWRITE is not supported: edit the TOML config file")),
        _ => Err(super::subcommand_error(a, "CONFIG")),
    }
}

/// What CONFIG SET can change, to put back when one of several settings fails.
struct ConfigSnapshot {
    cfg: crate::Config,
    inert: Vec<(String, String)>,
    limits: (usize, usize, usize),
    slowlog: (i64, usize),
    notify_flags: u32,
    acl: (bool, usize),
    latency_ms: u64,
    output_limits: super::OutputLimits,
    maxmemory: (u64, crate::maxmemory::Policy, usize, u32),
    lfu: (u32, u32),
}

impl ConfigSnapshot {
    fn take(cx: &Ctx) -> ConfigSnapshot {
        let st = &cx.st;
        ConfigSnapshot {
            cfg: st.cfg.clone(),
            inert: st.inert.clone(),
            limits: (st.shared.maxclients(), st.shared.max_bulk(), st.shared.query_limit()),
            slowlog: (st.slowlog.threshold_us, st.slowlog.max_len),
            notify_flags: st.notify_flags,
            acl: (st.acl.pubsub_all, st.acl.log.max_len),
            latency_ms: st.latency.threshold_ms,
            output_limits: st.output_limits,
            maxmemory: (st.maxmemory.limit, st.maxmemory.policy, st.maxmemory.samples, st.maxmemory.tenacity),
            lfu: (st.access.lfu_log_factor, st.access.lfu_decay_minutes),
        }
    }

    fn restore(self, cx: &mut Ctx) {
        let st = &mut *cx.st;
        if st.cfg.requirepass != self.cfg.requirepass {
            st.acl.set_requirepass(&self.cfg.requirepass);
        }
        log::set_max_level(self.cfg.level());
        st.cfg = self.cfg;
        st.inert = self.inert;
        st.shared.set_maxclients(self.limits.0);
        st.shared.set_max_bulk(self.limits.1);
        st.shared.set_query_limit(self.limits.2);
        (st.slowlog.threshold_us, st.slowlog.max_len) = self.slowlog;
        st.notify_flags = self.notify_flags;
        (st.acl.pubsub_all, st.acl.log.max_len) = self.acl;
        st.latency.threshold_ms = self.latency_ms;
        st.output_limits = self.output_limits;
        let (limit, policy, samples, tenacity) = self.maxmemory;
        (st.maxmemory.limit, st.maxmemory.samples, st.maxmemory.tenacity) = (limit, samples, tenacity);
        st.set_maxmemory_policy(policy);
        (st.access.lfu_log_factor, st.access.lfu_decay_minutes) = self.lfu;
        st.latency.tracking_off =
            inert_value(&st.inert, "latency-tracking").is_some_and(|v| v.eq_ignore_ascii_case("no"));
    }
}

/// Sets `name` (lower case; `written` as the client wrote it) to `value`.
fn config_set(cx: &mut Ctx, name: &str, written: &str, value: &str) -> Result<(), CmdError> {
    let bad = |why: &str| CmdError::err(format!("CONFIG SET failed (possibly related to argument '{name}') - {why}"));
    let num = |v: &str| crate::size::parse(v).ok_or_else(|| bad(super::config_compat::not_a_number(name)));
    match name {
        "requirepass" => {
            cx.st.cfg.requirepass = value.to_string();
            cx.st.acl.set_requirepass(value);
        }
        "acllog-max-len" => {
            let n: i64 = value.parse().map_err(|_| bad("argument couldn't be parsed into an integer"))?;
            cx.st.cfg.acllog_max_len = n.max(0) as usize;
            cx.st.acl.log.max_len = cx.st.cfg.acllog_max_len;
            cx.st.acl.log.trim();
        }
        "acl-pubsub-default" => {
            let all = match value.to_ascii_lowercase().as_str() {
                "allchannels" => true,
                "resetchannels" => false,
                _ => return Err(bad("argument(s) must be one of the following: allchannels, resetchannels")),
            };
            cx.st.cfg.acl_pubsub_default = if all { "allchannels" } else { "resetchannels" }.into();
            cx.st.acl.pubsub_all = all;
        }
        "maxclients" => cx.st.shared.set_maxclients(num(value)?.max(1) as usize),
        "proto-max-bulk-len" => cx.st.shared.set_max_bulk(num(value)?.max(1024 * 1024) as usize),
        "client-query-buffer-limit" => cx.st.shared.set_query_limit(num(value)?.max(1024 * 1024) as usize),
        "slowlog-log-slower-than" | "slowlog-max-len" => {
            let n: i64 = value.parse().map_err(|_| bad("argument couldn't be parsed into an integer"))?;
            if name == "slowlog-max-len" {
                cx.st.slowlog.set_max_len(n.max(0) as usize);
            } else {
                cx.st.slowlog.threshold_us = n;
            }
            if let Some((_, v)) = cx.st.inert.iter_mut().find(|(k, _)| k == name) {
                *v = n.to_string();
            }
        }
        "latency-monitor-threshold" => {
            let n: i64 = value.parse().map_err(|_| bad("argument couldn't be parsed into an integer"))?;
            if n < 0 {
                return Err(bad("argument must be between 0 and 9223372036854775807 inclusive"));
            }
            cx.st.latency.threshold_ms = n as u64;
            if let Some((_, v)) = cx.st.inert.iter_mut().find(|(k, _)| k == name) {
                *v = n.to_string();
            }
        }
        "latency-tracking-info-percentiles" => {
            let list = crate::info::parse_percentiles(value).map_err(&bad)?;
            let shown: Vec<String> = list.iter().map(|p| crate::info::fmt_percentile(*p)).collect();
            if let Some((_, v)) = cx.st.inert.iter_mut().find(|(k, _)| k == name) {
                *v = shown.join(" ");
            }
        }
        "notify-keyspace-events" => {
            let flags = crate::notify::parse_flags(value)
                .ok_or_else(|| bad("Invalid event class character. Use 'Ag$lshzxeKEtmdn'."))?;
            cx.st.notify_flags = flags;
            if let Some((_, v)) = cx.st.inert.iter_mut().find(|(k, _)| k == "notify-keyspace-events") {
                *v = crate::notify::format_flags(flags);
            }
        }
        "loglevel" => {
            let mut c = cx.st.cfg.clone();
            c.loglevel = value.to_string();
            c.validate().map_err(|e| bad(&e.to_string()))?;
            log::set_max_level(c.level());
            cx.st.cfg.loglevel = c.loglevel;
        }
        "client-output-buffer-limit" => cx.st.output_limits.set(value).map_err(&bad)?,
        "sanitize-dump-payload" => {
            let value = value.to_ascii_lowercase();
            if !["no", "yes", "clients"].contains(&value.as_str()) {
                return Err(bad("argument(s) must be one of the following: no, yes, clients"));
            }
            if let Some((_, v)) = cx.st.inert.iter_mut().find(|(k, _)| k == name) {
                *v = value;
            }
        }
        "maxmemory" => {
            cx.st.maxmemory.limit = num(value)?;
            if cx.st.maxmemory.limit != 0 {
                let used = cx.st.store.db().pool().used_bytes();
                if used > cx.st.maxmemory.limit {
                    log::warn!(
                        "maxmemory set to {} bytes, below the {used} bytes the pool holds: {}",
                        cx.st.maxmemory.limit,
                        if cx.st.maxmemory.policy == crate::maxmemory::Policy::NoEviction {
                            "commands that may add data are refused (maxmemory-policy noeviction)"
                        } else {
                            "keys are evicted"
                        }
                    );
                }
            }
        }
        "maxmemory-policy" => {
            let policy =
                crate::maxmemory::Policy::parse(value).ok_or_else(|| bad(&crate::maxmemory::Policy::choices()))?;
            if policy.lfu() && !cx.st.maxmemory.policy.lfu() {
                cx.st.access.restart_lfu(cx.now);
            }
            cx.st.set_maxmemory_policy(policy);
        }
        "maxmemory-samples" | "maxmemory-eviction-tenacity" | "lfu-log-factor" | "lfu-decay-time" => {
            let (lo, hi) = match name {
                "maxmemory-samples" => (1, 64),
                "maxmemory-eviction-tenacity" => (0, 100),
                _ => (0, i64::from(i32::MAX)),
            };
            let n: i64 = value.parse().map_err(|_| bad("argument couldn't be parsed into an integer"))?;
            if !(lo..=hi).contains(&n) {
                return Err(bad(&format!("argument must be between {lo} and {hi} inclusive")));
            }
            match name {
                "maxmemory-samples" => cx.st.maxmemory.samples = n as usize,
                "maxmemory-eviction-tenacity" => cx.st.maxmemory.tenacity = n as u32,
                "lfu-log-factor" => cx.st.access.lfu_log_factor = n as u32,
                _ => cx.st.access.lfu_decay_minutes = n as u32,
            }
        }
        "maxmemory-clients" => {
            super::config_compat::check_memory_or_percent(value).map_err(&bad)?;
            if let Some((_, v)) = cx.st.inert.iter_mut().find(|(k, _)| k == name) {
                *v = value.to_string();
            }
        }
        // Fixed when the server starts, as in Redis.
        _ if super::config_compat::is_immutable(name) || name == "databases" || name == "aclfile" => {
            return Err(bad(super::config_compat::IMMUTABLE_ERROR));
        }
        "port" if value != cx.st.cfg.port.to_string() => {
            // Redis moves to a new port at once; Tembo keeps its listener,
            // but says first why the new port would not do.
            let host = cx.st.cfg.bind.split_whitespace().next().unwrap_or("127.0.0.1").to_string();
            let port: u16 = value.parse().map_err(|_| bad("argument couldn't be parsed into an integer"))?;
            if let Err(e) = std::net::TcpListener::bind((host.as_str(), port)) {
                return Err(bad(&format!("Unable to listen on this port: {e}")));
            }
            return Err(bad("'port' cannot be changed while the server runs; restart tembo serve with the new value"));
        }
        // The next BGSAVE's destination (one running keeps its own).
        "backup-path" => {
            if value.is_empty() {
                return Err(bad("'backup-path' must name a file"));
            }
            cx.st.cfg.backup_path = std::path::PathBuf::from(value);
        }
        // Fixed for the life of the process: setting the value they have
        // is accepted (clients and tools write back what CONFIG GET gave).
        "bind" | "port" | "protected-mode" | "dir" | "dbfilename" => {
            let current = params(cx).into_iter().find(|(k, _)| k == name).map(|(_, v)| v).unwrap_or_default();
            if value != current {
                return Err(bad(&format!(
                    "'{name}' cannot be changed while the server runs; restart tembo serve with the new value"
                )));
            }
        }
        _ => match cx.st.inert.iter_mut().find(|(k, _)| k == canonical(name)) {
            Some((_, v)) => {
                // A setting keeps the kind of value its default has.
                let default = INERT.iter().find(|(k, _)| *k == canonical(name)).map_or("", |(_, d)| *d);
                if default.parse::<i64>().is_ok() && value.parse::<i64>().is_err() {
                    num(value)?;
                }
                if (default == "yes" || default == "no")
                    && !value.eq_ignore_ascii_case("yes")
                    && !value.eq_ignore_ascii_case("no")
                {
                    return Err(bad("argument must be 'yes' or 'no'"));
                }
                *v = value.to_string()
            }
            None => {
                return Err(CmdError::err(format!(
                    "Unknown option or number of arguments for CONFIG SET - '{written}'"
                )))
            }
        },
    }
    if name == "latency-tracking" {
        cx.st.latency.tracking_off = value.eq_ignore_ascii_case("no");
    }
    Ok(())
}

fn time(cx: &mut Ctx, _: &[Vec<u8>]) -> CmdResult {
    let micros = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_micros());
    let _ = cx;
    Ok(Reply::bulks([(micros / 1_000_000).to_string(), (micros % 1_000_000).to_string()]))
}

fn shutdown(cx: &mut Ctx, a: &[Vec<u8>]) -> CmdResult {
    for opt in &a[1..] {
        if !["nosave", "save", "now", "force", "abort"].iter().any(|o| is(opt, o)) {
            return Err(CmdError::syntax());
        }
        if is(opt, "abort") {
            return Err(CmdError::err("No shutdown in progress."));
        }
    }
    if let Some(run) = cx.st.script_run.as_mut().filter(|r| r.busy) {
        // A busy script: only SHUTDOWN NOSAVE stops it (and its writes,
        // never committed, are discarded), as in Redis.
        if !a[1..].iter().any(|o| is(o, "nosave")) {
            return Err(CmdError(run.busy_error().into()));
        }
        run.kill = Some(crate::busy::Kill::Shutdown);
    }
    log::info!("SHUTDOWN requested by client {} ({})", cx.client.id, cx.client.addr);
    cx.st.shutdown = true;
    cx.client.close = true;
    Ok(Reply::ok())
}

/// SAVE: every write is durable at its commit, and the reply waits for
/// the group's commit like every other, so there is nothing to do but
/// note the time. (It committed the group so far itself once: a rerun of
/// the group, after a later command was refused, then applied the writes
/// before it twice.)
fn save(cx: &mut Ctx, _: &[Vec<u8>]) -> CmdResult {
    cx.st.bgsave.note_save();
    Ok(Reply::ok())
}

/// BGSAVE [SCHEDULE]: a backup of the whole database into the backup
/// path, on a thread of its own (see `bgsave`), from the last commit.
fn bgsave(cx: &mut Ctx, a: &[Vec<u8>]) -> CmdResult {
    if a.len() > 2 || (a.len() == 2 && !is(&a[1], "schedule")) {
        return Err(CmdError::syntax());
    }
    let db = std::sync::Arc::clone(cx.st.store.db());
    if db.engine() != tembo_store::Engine::Cdds {
        return Err(CmdError::err(format!(
            "BGSAVE needs a snapshot, which the {} engine does not keep; every write is durable at its commit \
             already (copy the pool file while the server is stopped to back it up)",
            db.engine()
        )));
    }
    // What the commands before it wrote is committed already: the executor
    // runs BGSAVE (and an EXEC holding it) in a commit of its own
    // (`cmd::runs_alone`). Inside EXEC the backup holds the state before
    // the transaction, which commits whole.
    let path = cx.st.cfg.backup_file();
    match cx.st.bgsave.start(&db, path, a.len() == 2) {
        Ok(crate::bgsave::Started::Now) => Ok(Reply::Simple("Background saving started".into())),
        Ok(crate::bgsave::Started::Scheduled) => Ok(Reply::Simple("Background saving scheduled".into())),
        Err(why) => Err(CmdError::err(why)),
    }
}

fn lastsave(cx: &mut Ctx, _: &[Vec<u8>]) -> CmdResult {
    Ok(Reply::Int(cx.st.bgsave.last_save() as i64))
}

fn monitor(cx: &mut Ctx, _: &[Vec<u8>]) -> CmdResult {
    cx.client.monitor = true;
    if !cx.st.monitors.contains(&cx.client.id) {
        cx.st.monitors.push(cx.client.id);
    }
    Ok(Reply::ok())
}

#[cfg(test)]
mod tests {
    use super::{swap_watch, SwapWatch};

    /// Every case of Redis 7.0's `touchAllWatchedKeysInDb`: (watched while
    /// expired, key in the named database before, after; `Some(expired)`).
    #[test]
    fn swapdb_breaks_a_watch_as_redis_does() {
        use SwapWatch::*;
        let cases = [
            (false, None, None, Keep),
            (false, Some(false), None, Break),
            (false, Some(true), None, Break),
            (false, None, Some(false), Break),
            (false, None, Some(true), Stale),
            (false, Some(false), Some(true), Break),
            (false, Some(true), Some(true), Break),
            (true, Some(true), None, Unstale),
            (true, Some(true), Some(true), Keep),
            (true, Some(true), Some(false), Break),
            (true, None, None, Keep),
        ];
        for (stale, before, after, want) in cases {
            assert_eq!(swap_watch(stale, before, after), want, "stale {stale}, before {before:?}, after {after:?}");
        }
    }
}
