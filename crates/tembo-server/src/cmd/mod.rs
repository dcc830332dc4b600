//! The command table and dispatch: name lookup, arity, authentication,
//! MULTI queueing, MONITOR feed and per-command statistics, then the
//! handler of the command's family module.

use std::sync::OnceLock;
use std::time::Instant;

use rustc_hash::FxHashMap;
use tembo_store::DbError;

use crate::client::{Client, Out};
use crate::exec::{Ctx, State};
use crate::resp::Reply;
use crate::store::StoreError;

mod acl;
pub mod args;
pub use config_compat::OutputLimits;
pub use server::{inert_u64, inert_value, INERT};
mod bits;
pub mod blpop;
mod client_tracking;
pub(crate) mod config_compat;
mod conn;
mod debug;
mod dump;
pub(crate) use dump::value_of;
pub mod functions;
mod geo;
mod hash_order;
mod hashes;
mod hyperloglog;
mod key_spec;
mod key_specs;
mod keys;
mod keys_extra;
mod latency;
mod lcs;
mod lists;
mod lists_extra;
mod longdouble;
pub(crate) mod memory;
mod migrate;
pub mod pubsub;
mod random;
mod replication;
pub(crate) mod scripting;
mod server;
mod sets;
pub mod slowlog;
mod sort;
mod standalone;
pub mod stream_groups;
mod stream_info;
mod stream_pel;
mod streams;
mod strings;
pub(crate) mod strtod;
mod txn;
mod zparse;
mod zranks;
mod zsets;
mod zsets_multi;
mod zsets_pop;

/// An error reply; the text starts with its code ("ERR …", "WRONGTYPE …").
#[derive(Clone, Debug, PartialEq)]
pub struct CmdError(pub String);

/// What a handler returns.
pub type CmdResult = Result<Reply, CmdError>;

impl CmdError {
    /// `ERR <msg>`.
    pub fn err(msg: impl std::fmt::Display) -> CmdError {
        CmdError(format!("ERR {msg}"))
    }
    /// The WRONGTYPE error.
    pub fn wrongtype() -> CmdError {
        CmdError("WRONGTYPE Operation against a key holding the wrong kind of value".into())
    }
    /// `ERR syntax error`.
    pub fn syntax() -> CmdError {
        CmdError::err("syntax error")
    }
    /// Not an integer.
    pub fn not_int() -> CmdError {
        CmdError::err("value is not an integer or out of range")
    }
    /// Not a float.
    pub fn not_float() -> CmdError {
        CmdError::err("value is not a valid float")
    }
    /// Arity error for `name`.
    pub fn arity(name: &str) -> CmdError {
        CmdError::err(format!("wrong number of arguments for '{}' command", name.to_ascii_lowercase()))
    }
    /// A metadata record this server cannot read: a bug report, not a crash.
    pub fn corrupt(key: &[u8]) -> CmdError {
        CmdError::damaged(key, UNDECODABLE)
    }
    /// Whether this is [`CmdError::corrupt`]'s error.
    pub fn is_undecodable(&self) -> bool {
        self.0.starts_with(DAMAGE) && self.0.ends_with(&format!("{UNDECODABLE}{AFTER_DAMAGE}"))
    }
    /// The records of `key` contradict each other (`what` says how): the
    /// pool is damaged. The command applies nothing ([`CmdError::is_damage`]).
    pub fn damaged(key: &[u8], what: &str) -> CmdError {
        CmdError(format!("{DAMAGE}the metadata of key {:?} {what}{AFTER_DAMAGE}", String::from_utf8_lossy(key)))
    }
    /// `size - n`, for a collection at `key` found to hold `n` elements
    /// that it is losing; a `size` below `n` means its metadata is damaged.
    pub fn shrink(key: &[u8], size: u64, n: u64) -> Result<u64, CmdError> {
        size.checked_sub(n).ok_or_else(|| CmdError::undercount(key))
    }
    /// The metadata of `key` counts fewer elements than the key holds.
    pub fn undercount(key: &[u8]) -> CmdError {
        CmdError::damaged(key, "counts fewer elements than the key holds")
    }
    /// Whether this error reports damaged records or a storage failure found
    /// while the command ran: whatever the command staged before it is
    /// undone, so that a damaged pool is never made worse.
    pub fn is_damage(&self) -> bool {
        is_damage_text(&self.0)
    }
    /// A failed group commit, as the affected command's reply.
    pub fn from_commit(e: &DbError) -> CmdError {
        match e.pmem() {
            Some(tembo_store::PmemError::PoolFull { .. }) => CmdError(format!(
                "OOM command not allowed: the pool is full ({e}); grow it with `tembo pool grow` or delete keys"
            )),
            _ => CmdError::err(format!("write not stored: {e}")),
        }
    }
}

/// Whether an error reply's text is [`CmdError::is_damage`]'s.
pub fn is_damage_text(text: &str) -> bool {
    text.starts_with(DAMAGE) || text.starts_with(STORAGE)
}

/// How an error about damaged records starts.
const DAMAGE: &str = "ERR internal: ";
/// What [`CmdError::corrupt`] says of the record.
const UNDECODABLE: &str = "does not decode";
/// How an error about damaged records ends.
const AFTER_DAMAGE: &str = "; run `tembo pool check` (DEL removes the key)";
/// How an error the engine returned to a read starts.
const STORAGE: &str = "ERR storage: ";

impl From<DbError> for CmdError {
    fn from(e: DbError) -> Self {
        CmdError(format!("{STORAGE}{e}"))
    }
}

impl From<StoreError> for CmdError {
    fn from(e: StoreError) -> Self {
        match e {
            StoreError::Db(e) => e.into(),
            other => CmdError::err(other),
        }
    }
}

/// A command handler.
pub type Handler = fn(&mut Ctx<'_>, &[Vec<u8>]) -> CmdResult;

/// One command's description (also what COMMAND INFO and COMMAND DOCS say).
#[derive(Debug)]
pub struct Spec {
    /// Lower-case name.
    pub name: &'static str,
    /// Redis arity: N exactly, -N at least N (the name counts).
    pub arity: i32,
    /// Flags as COMMAND INFO lists them (`write`, `readonly`, `fast`, …).
    pub flags: &'static [&'static str],
    /// First key, last key, step (COMMAND INFO).
    pub keys: (i32, i32, i32),
    /// Group for COMMAND DOCS (`string`, `hash`, …).
    pub group: &'static str,
    /// One-line summary for COMMAND DOCS.
    pub summary: &'static str,
    /// The handler.
    pub run: Handler,
}

/// Every command, by lower-case name.
pub fn table() -> &'static FxHashMap<&'static str, &'static Spec> {
    static TABLE: OnceLock<FxHashMap<&'static str, &'static Spec>> = OnceLock::new();
    TABLE.get_or_init(|| {
        let families: [&'static [Spec]; 35] = [
            acl::COMMANDS,
            latency::COMMANDS,
            conn::COMMANDS,
            server::COMMANDS,
            keys::COMMANDS,
            migrate::COMMANDS,
            strings::COMMANDS,
            hashes::COMMANDS,
            lists::COMMANDS,
            sets::COMMANDS,
            zsets::COMMANDS,
            zsets_multi::COMMANDS,
            zsets_pop::COMMANDS,
            txn::COMMANDS,
            pubsub::COMMANDS,
            blpop::COMMANDS,
            lists_extra::COMMANDS,
            keys_extra::COMMANDS,
            memory::COMMANDS,
            debug::COMMANDS,
            bits::COMMANDS,
            lcs::COMMANDS,
            sort::COMMANDS,
            scripting::COMMANDS,
            functions::COMMANDS,
            standalone::COMMANDS,
            replication::COMMANDS,
            dump::COMMANDS,
            slowlog::COMMANDS,
            streams::COMMANDS,
            stream_groups::COMMANDS,
            stream_pel::COMMANDS,
            stream_info::COMMANDS,
            hyperloglog::COMMANDS,
            geo::COMMANDS,
        ];
        families.iter().flat_map(|f| f.iter()).map(|s| (s.name, s)).collect()
    })
}

/// The key arguments of a call of `spec` (`args[0]` is the command's
/// name): by the spec's positions, or for commands that count their keys
/// or name them after a keyword, by reading the arguments. `None` when the
/// arguments cannot be read so (a bad key count).
pub fn command_keys<'a>(spec: &Spec, args: &'a [Vec<u8>]) -> Option<Vec<&'a [u8]>> {
    let counted = |at: usize| -> Option<Vec<&'a [u8]>> {
        let n = usize::try_from(args::int(args.get(at)?).ok()?).ok()?;
        Some(args.get(at + 1..at + 1 + n)?.iter().map(Vec::as_slice).collect())
    };
    match spec.name {
        "sort" | "sort_ro" => Some(sort::keys_of(args)),
        "migrate" => migrate::keys_of(args),
        "eval" | "evalsha" | "eval_ro" | "evalsha_ro" | "fcall" | "fcall_ro" => counted(2),
        "sintercard" | "zintercard" | "zunion" | "zinter" | "zdiff" | "lmpop" | "zmpop" => counted(1),
        "blmpop" | "bzmpop" => counted(2),
        "zunionstore" | "zinterstore" | "zdiffstore" => {
            let mut keys = vec![args.get(1)?.as_slice()];
            keys.extend(counted(2)?);
            Some(keys)
        }
        "xread" | "xreadgroup" => {
            // Walk the options as XREAD's parser does: a group or consumer
            // named "streams" is not the STREAMS keyword.
            let mut i = 1;
            while i < args.len() && !args::is(&args[i], "streams") {
                i += if args::is(&args[i], "group") {
                    3
                } else if args::is(&args[i], "count") || args::is(&args[i], "block") {
                    2
                } else {
                    1
                };
            }
            let rest = args.get(i + 1..)?;
            Some(rest[..rest.len() / 2].iter().map(Vec::as_slice).collect())
        }
        "georadius" | "georadiusbymember" => {
            // The source, then a STORE or STOREDIST destination (the last one named wins).
            let mut keys = vec![args.get(1)?.as_slice()];
            // Options start after the position and radius (argument 5, as Redis reads them).
            let dest = (5..args.len().saturating_sub(1))
                .rev()
                .find(|&i| args::is(&args[i], "store") || args::is(&args[i], "storedist"));
            keys.extend(dest.map(|i| args[i + 1].as_slice()));
            Some(keys)
        }
        _ => {
            let (first, last, step) = spec.keys;
            if first <= 0 {
                return Some(Vec::new());
            }
            let last = if last < 0 { args.len() as i32 + last } else { last };
            Some(
                (first..=last)
                    .step_by(step.max(1) as usize)
                    .filter_map(|i| args.get(i as usize))
                    .map(Vec::as_slice)
                    .collect(),
            )
        }
    }
}

/// The command named `name`, in any letter case. Names are short, so the
/// lower-casing happens in a stack buffer, not a new string per command.
pub fn spec(name: &[u8]) -> Option<&'static Spec> {
    let mut buf = [0u8; 32];
    let lower = buf.get_mut(..name.len())?;
    lower.copy_from_slice(name);
    lower.make_ascii_lowercase();
    table().get(std::str::from_utf8(lower).ok()?).copied()
}

/// Commands allowed before AUTH.
const NO_AUTH: &[&str] = &["auth", "hello", "quit", "reset"];
/// Commands that must run in a commit of their own: BGSAVE (its backup
/// holds everything the commands before it wrote, and nothing after) and
/// DEBUG POPULATE (durable every few thousand keys), and an EXEC whose
/// transaction holds one. Met in the first run of a commit group, they
/// make the executor drop that run and rerun the group one command per
/// commit (`exec::State::process`). (Committed in the middle of a group,
/// the group's rerun after a later refusal or panic applied the writes
/// before them a second time.)
pub fn runs_alone(client: &Client, args: &[Vec<u8>]) -> bool {
    let Some(name) = args.first() else { return false };
    match client.multi.as_ref() {
        None => alone_command(args),
        Some(queued) => name.eq_ignore_ascii_case(b"exec") && queued.iter().any(|q| alone_command(q)),
    }
}

fn alone_command(args: &[Vec<u8>]) -> bool {
    let Some(name) = args.first() else { return false };
    name.eq_ignore_ascii_case(b"bgsave")
        || (name.eq_ignore_ascii_case(b"debug") && args.get(1).is_some_and(|a| a.eq_ignore_ascii_case(b"populate")))
}

/// Commands refused inside MULTI (Redis's `no-multi` flag); the
/// transaction then fails at EXEC.
const NO_MULTI: &[&str] = &["save", "shutdown", "monitor", "sync", "psync", "replconf", "failover"];
/// Commands that run at once inside MULTI instead of being queued.
const NOT_QUEUED: &[&str] = &["exec", "discard", "multi", "watch", "quit", "reset"];

/// Runs one request for `client` and returns its reply.
pub fn dispatch(st: &mut State, client: &mut Client, args: &[Vec<u8>]) -> Reply {
    let Some(spec) = spec(&args[0]) else {
        if client.multi.is_some() {
            client.multi_error = true;
        }
        let e = unknown_command(args);
        st.stats.error_reply(&e.0);
        return Reply::Error(e.0);
    };
    if !arity_ok(spec.arity, args.len()) {
        let e = CmdError::arity(spec.name);
        st.stats.rejected(full_name(spec, args), &e.0);
        if spec.name == "exec" {
            return exec_abort(st, client, &e.0);
        }
        if client.multi.is_some() {
            client.multi_error = true;
        }
        return Reply::Error(e.0);
    }
    if let Some(e) = subcommand_check(spec.name, args) {
        st.stats.rejected(full_name(spec, args), &e.0);
        if client.multi.is_some() {
            client.multi_error = true;
        }
        return Reply::Error(e.0);
    }
    if !client.authed && !NO_AUTH.contains(&spec.name) {
        let msg = "NOAUTH Authentication required.";
        st.stats.rejected(full_name(spec, args), msg);
        return Reply::Error(msg.into());
    }
    if let Err(e) = acl_check(st, client, spec, args, if client.multi.is_some() { "multi" } else { "toplevel" }) {
        st.stats.rejected(full_name(spec, args), &e.0);
        if client.multi.is_some() {
            client.multi_error = true;
        }
        return Reply::Error(e.0);
    }
    // Over `maxmemory`: evict, or refuse what could add data (as Redis's
    // processCommand, not while a script is busy).
    if st.maxmemory.limit != 0 && crate::busy::refusal(st).is_none() {
        let now = st.wall.ms_at(std::time::Instant::now());
        let oom = crate::maxmemory::perform(st, Some(&mut *client), now) == crate::maxmemory::Outcome::Fail;
        let queued = client.multi.is_some() && !matches!(spec.name, "exec" | "discard" | "quit" | "reset");
        if oom && (queued || crate::maxmemory::denies_on_oom(st, client, spec, args)) {
            return reject(st, client, spec, args, crate::maxmemory::OOM_ERROR);
        }
        if matches!(spec.name, "eval" | "evalsha" | "eval_ro" | "evalsha_ro" | "fcall" | "fcall_ro" | "exec") {
            st.oom_at_start = oom;
        }
    } else if st.maxmemory.limit == 0 {
        // (While a script is busy its own state at start stays.)
        st.oom_at_start = false;
    }
    if client.proto == 2 && client.subscribed() && !pubsub::ALLOWED_SUBSCRIBED.contains(&spec.name) {
        if client.multi.is_some() {
            client.multi_error = true;
        }
        let msg = format!(
            "ERR Can't execute '{}': only (P|S)SUBSCRIBE / (P|S)UNSUBSCRIBE / PING / QUIT / RESET are allowed in this context",
            spec.name
        );
        st.stats.rejected(full_name(spec, args), &msg);
        return Reply::Error(msg);
    }
    // While a script is busy, only what Redis allows then runs.
    if let Some(busy) = crate::busy::refusal(st).filter(|_| !allows_busy(spec, args)) {
        return reject(st, client, spec, args, busy);
    }
    // Redis marks a MONITOR client a replica, and a replica's connection
    // may not touch the keyspace.
    if client.monitor && (has_flag(spec, args, "readonly") || st.may_write(spec, args)) {
        return reject(st, client, spec, args, "ERR Replica can't interact with the keyspace");
    }
    // CLIENT PAUSE holds the call (before MULTI would queue it, as in
    // Redis); the executor keeps the client waiting (`pause`).
    if st.pause.is_some() && st.pause_holds(client, spec, args) {
        client.postpone_now = true;
        // CLIENT LIST shows the held command, as Redis does.
        client.last_cmd = full_name(spec, args);
        return Reply::Nil;
    }
    if let Some(queue) = client.multi.as_mut() {
        if NO_MULTI.contains(&spec.name) {
            client.multi_error = true;
            let msg = "ERR Command not allowed inside a transaction";
            st.stats.rejected(full_name(spec, args), msg);
            return Reply::Error(msg.into());
        }
        if !NOT_QUEUED.contains(&spec.name) {
            queue.push(args.to_vec());
            return Reply::Simple("QUEUED".into());
        }
    }
    let reply = run(st, client, spec, args);
    // The call's own duration, measured by `run` (one clock read fewer).
    // EXEC is not logged, the commands it ran are (as in Redis).
    if spec.name != "exec" {
        st.slowlog.record(client, args, st.last_call.as_micros() as i64);
    }
    // CLIENT CACHING applies to the next command (a whole transaction).
    if spec.name != "client" && client.multi.is_none() {
        client.tracking.caching = None;
    }
    reply
}

/// Refuses a call for the server's state (`msg`), as Redis's
/// `rejectCommand`: counted as rejected; an EXEC discards its transaction,
/// a call inside MULTI makes the EXEC to come fail.
fn reject(st: &mut State, client: &mut Client, spec: &Spec, args: &[Vec<u8>], msg: &str) -> Reply {
    st.stats.rejected(full_name(spec, args), msg);
    if spec.name == "exec" {
        return exec_abort(st, client, msg);
    }
    if client.multi.is_some() {
        client.multi_error = true;
    }
    Reply::Error(msg.into())
}

/// Redis rejects EXEC by discarding the transaction, whether or not one
/// was open (`execCommandAbort`).
fn exec_abort(st: &mut State, client: &mut Client, error: &str) -> Reply {
    client.multi = None;
    client.multi_error = false;
    st.unwatch(client);
    let msg = error.strip_prefix("ERR ").unwrap_or(error);
    Reply::Error(format!("EXECABORT Transaction discarded because of: {msg}"))
}

/// Whether a call may run while a script is busy (Redis's `allow-busy`
/// flag, on the command or on its subcommand).
fn allows_busy(spec: &Spec, args: &[Vec<u8>]) -> bool {
    has_flag(spec, args, "allow_busy")
}

/// Whether the call has Redis's command flag `flag`, on the command or on
/// its subcommand.
pub fn has_flag(spec: &Spec, args: &[Vec<u8>], flag: &str) -> bool {
    spec.flags.contains(&flag)
        || key_spec::subcommand_info(full_name(spec, args)).is_some_and(|(_, _, flags)| flags.contains(&flag))
}

/// Checks `client`'s ACL permissions for a call (AUTH, HELLO and the
/// other commands allowed before authentication always pass); a refusal
/// is logged with `context` (`toplevel`, `multi`, `lua`).
pub fn acl_denied(
    st: &mut State,
    client: &Client,
    spec: &Spec,
    args: &[Vec<u8>],
    context: &'static str,
) -> Option<crate::acl::Denied> {
    match st.acl.check(&client.user, spec, args) {
        Ok(()) => None,
        Err(_) if NO_AUTH.contains(&spec.name) => None,
        Err(denied) => {
            st.snapshot_acl();
            st.acl.log.add(denied.reason(), context, denied.object(), &client.user, client.info_line());
            Some(denied)
        }
    }
}

/// [`acl_denied`] as the NOPERM error reply.
pub fn acl_check(
    st: &mut State,
    client: &Client,
    spec: &Spec,
    args: &[Vec<u8>],
    context: &'static str,
) -> Result<(), CmdError> {
    match acl_denied(st, client, spec, args, context) {
        None => Ok(()),
        Some(denied) => Err(CmdError(denied.error())),
    }
}

/// Arities of the two Redis 7.2 subcommands clients send at connect
/// (`CLIENT SETINFO`, `CLIENT NO-TOUCH`), which Redis 7.0's table, and so
/// `SUBCOMMAND_INFO`, lacks.
const LATER_SUB_ARITY: &[(&str, i32)] = &[("client|no-touch", 3), ("client|setinfo", 4)];

/// The arity of `container|subcommand`, as Redis's command table has it.
fn subcommand_arity(full: &str) -> Option<i32> {
    key_spec::subcommand_info(full)
        .map(|(_, arity, _)| arity)
        .or_else(|| LATER_SUB_ARITY.iter().find(|(n, _)| *n == full).map(|&(_, arity)| arity))
}

/// A container command's HELP reply, one status line per line.
pub(super) fn help(lines: &[&str]) -> Reply {
    Reply::Array(lines.iter().map(|l| Reply::Simple(l.to_string())).collect())
}

/// Redis's reply to an unknown subcommand of `cmd` (or one with the wrong
/// number of arguments); the name is cut at 128 bytes, as Redis does.
pub(super) fn subcommand_error(a: &[Vec<u8>], cmd: &str) -> CmdError {
    CmdError::err(format!(
        "unknown subcommand or wrong number of arguments for '{}'. Try {cmd} HELP.",
        String::from_utf8_lossy(&a[1][..a[1].len().min(128)])
    ))
}

/// Whether `n` arguments (the name included) fit Redis arity `arity`:
/// exactly N when positive, at least -N when negative.
pub fn arity_ok(arity: i32, n: usize) -> bool {
    let n = n as i32;
    if arity >= 0 {
        n == arity
    } else {
        n >= -arity
    }
}

/// An unknown subcommand of any container command, or a subcommand's
/// wrong arity (`wrong number of arguments for 'config|get' command`, as
/// Redis 7 words it: each subcommand is a command of its own there). Redis's
/// command table refuses both before authentication and ACL checks, so an
/// unknown subcommand (redis-py 8 sends `CLIENT MAINT_NOTIFICATIONS` at
/// connect) is never logged as an ACL denial.
fn subcommand_check(name: &str, args: &[Vec<u8>]) -> Option<CmdError> {
    if !is_container(name) {
        return None;
    }
    let sub = args.get(1)?;
    let known = SUBCOMMANDS
        .iter()
        .find(|full| full.strip_prefix(name).and_then(|rest| rest.strip_prefix('|')).is_some_and(|s| args::is(sub, s)));
    let Some(full) = known else {
        return Some(CmdError::err(format!(
            "unknown subcommand '{}'. Try {} HELP.",
            String::from_utf8_lossy(&sub[..sub.len().min(128)]),
            name.to_ascii_uppercase()
        )));
    };
    match subcommand_arity(full) {
        Some(arity) if !arity_ok(arity, args.len()) => Some(CmdError::arity(full)),
        _ => None,
    }
}

/// Redis's reply to an unknown command: the name (at most 128 bytes), then
/// each argument quoted and followed by a space, while the list is shorter
/// than 128 bytes (`processCommand` in Redis 7).
fn unknown_command(args: &[Vec<u8>]) -> CmdError {
    let name = &args[0][..args[0].len().min(128)];
    let mut shown: Vec<u8> = Vec::new();
    for a in &args[1..] {
        if shown.len() >= 128 {
            break;
        }
        let room = 128 - shown.len();
        shown.push(b'\'');
        shown.extend_from_slice(&a[..a.len().min(room)]);
        shown.extend_from_slice(b"' ");
    }
    CmdError::err(format!(
        "unknown command '{}', with args beginning with: {}",
        String::from_utf8_lossy(name),
        String::from_utf8_lossy(&shown)
    ))
}

/// Container commands' subcommands, as CLIENT LIST's `cmd=` and the ACL
/// rules (`+client|id`) name them.
const SUBCOMMANDS: &[&str] = &[
    "acl|cat",
    "acl|deluser",
    "acl|dryrun",
    "acl|genpass",
    "acl|getuser",
    "acl|help",
    "acl|list",
    "acl|load",
    "acl|log",
    "acl|save",
    "acl|setuser",
    "acl|users",
    "acl|whoami",
    "latency|doctor",
    "latency|graph",
    "latency|help",
    "latency|histogram",
    "latency|history",
    "latency|latest",
    "latency|reset",
    "script|load",
    "script|exists",
    "script|flush",
    "script|kill",
    "script|help",
    "slowlog|get",
    "slowlog|len",
    "slowlog|reset",
    "slowlog|help",
    "client|id",
    "client|info",
    "client|list",
    "client|kill",
    "client|getname",
    "client|setname",
    "client|setinfo",
    "client|unblock",
    "client|pause",
    "client|unpause",
    "client|help",
    "client|no-evict",
    "client|no-touch",
    "client|reply",
    "client|tracking",
    "client|caching",
    "client|getredir",
    "client|trackinginfo",
    "cluster|addslots",
    "cluster|addslotsrange",
    "cluster|bumpepoch",
    "cluster|count-failure-reports",
    "cluster|countkeysinslot",
    "cluster|delslots",
    "cluster|delslotsrange",
    "cluster|failover",
    "cluster|flushslots",
    "cluster|forget",
    "cluster|getkeysinslot",
    "cluster|help",
    "cluster|info",
    "cluster|keyslot",
    "cluster|links",
    "cluster|meet",
    "cluster|myid",
    "cluster|nodes",
    "cluster|replicas",
    "cluster|replicate",
    "cluster|reset",
    "cluster|saveconfig",
    "cluster|set-config-epoch",
    "cluster|setslot",
    "cluster|shards",
    "cluster|slaves",
    "cluster|slots",
    "config|get",
    "config|set",
    "config|resetstat",
    "config|rewrite",
    "config|help",
    "command|count",
    "command|info",
    "command|docs",
    "command|list",
    "command|getkeys",
    "command|getkeysandflags",
    "command|help",
    "object|encoding",
    "object|refcount",
    "object|idletime",
    "object|freq",
    "object|help",
    "module|help",
    "module|list",
    "module|load",
    "module|loadex",
    "module|unload",
    "memory|usage",
    "memory|doctor",
    "memory|stats",
    "memory|purge",
    "memory|malloc-stats",
    "memory|help",
    "function|load",
    "function|delete",
    "function|flush",
    "function|list",
    "function|stats",
    "function|dump",
    "function|restore",
    "function|kill",
    "function|help",
    "pubsub|channels",
    "pubsub|numsub",
    "pubsub|numpat",
    "pubsub|shardchannels",
    "pubsub|shardnumsub",
    "pubsub|help",
    "xgroup|create",
    "xgroup|setid",
    "xgroup|destroy",
    "xgroup|createconsumer",
    "xgroup|delconsumer",
    "xgroup|help",
    "xinfo|stream",
    "xinfo|groups",
    "xinfo|consumers",
    "xinfo|help",
];

/// Commands whose first argument names a subcommand.
const CONTAINERS: &[&str] = &[
    "acl", "client", "cluster", "config", "module", "command", "latency", "object", "memory", "function", "pubsub",
    "script", "slowlog", "xgroup", "xinfo",
];

/// Whether `name` is a container command (its first argument a subcommand).
pub fn is_container(name: &str) -> bool {
    CONTAINERS.contains(&name)
}

/// The known subcommands of container `name` (empty for other commands).
pub fn subcommands_of(name: &str) -> Vec<&'static str> {
    SUBCOMMANDS.iter().filter_map(|full| full.strip_prefix(name).and_then(|rest| rest.strip_prefix('|'))).collect()
}

/// Whether subcommand `sub` of `container` writes though the container is
/// not flagged `write` (FUNCTION LOAD, DELETE, FLUSH and RESTORE store
/// libraries in the pool): ACL categories and CLIENT PAUSE both ask.
pub fn writing_subcommand(container: &str, sub: &str) -> bool {
    container == "function" && matches!(sub, "load" | "delete" | "flush" | "restore")
}

/// The subcommand of a call of container `spec`, when it is a known one.
pub fn subcommand(spec: &Spec, args: &[Vec<u8>]) -> Option<&'static str> {
    full_name(spec, args).split_once('|').map(|(_, sub)| sub)
}

/// `name` or, for a container command with a known subcommand, `name|sub`.
pub fn full_name(spec: &Spec, args: &[Vec<u8>]) -> &'static str {
    let Some(sub) = args.get(1).filter(|_| is_container(spec.name)) else { return spec.name };
    let n = spec.name.len();
    SUBCOMMANDS
        .iter()
        .find(|full| {
            full.len() == n + 1 + sub.len()
                && full.starts_with(spec.name)
                && full.as_bytes()[n] == b'|'
                && full.as_bytes()[n + 1..].eq_ignore_ascii_case(sub)
        })
        .copied()
        .unwrap_or(spec.name)
}

/// Runs a command already checked (EXEC calls this for queued commands).
/// A tracking client's read: the keys it read are remembered for it — the
/// command's, or inside a script the keys the script declared (Redis 7's
/// rule; the read-only script commands themselves track nothing).
fn remember_read(st: &mut State, client: &Client, spec: &Spec, args: &[Vec<u8>]) {
    if matches!(spec.name, "eval_ro" | "evalsha_ro" | "fcall_ro") {
        return;
    }
    if let Some(declared) = st.script_keys.take() {
        let keys: Vec<&[u8]> = declared.iter().map(Vec::as_slice).collect();
        crate::tracking::remember(st, client, &keys);
        st.script_keys = Some(declared);
    } else if let Some(keys) = command_keys(spec, args) {
        crate::tracking::remember(st, client, &keys);
    }
}

pub fn run(st: &mut State, client: &mut Client, spec: &Spec, args: &[Vec<u8>]) -> Reply {
    // EXEC shows after the commands it ran, as in Redis.
    if spec.name != "exec" {
        feed_monitors(st, client, spec, args);
    }
    let name = full_name(spec, args);
    client.last_cmd = name;
    // Keys touched outside a command (background work) notify nothing.
    st.notes.clear();
    if !client.in_script {
        st.stats.script_errors.clear();
    }
    let started = Instant::now();
    let now = st.frozen_now.unwrap_or_else(|| st.wall.ms_at(started));
    let savepoint = st.store.begin_command();
    let counts_before = st.store.nested(&savepoint).then(|| st.pending_counts.clone());
    let reply = {
        let mut ctx = Ctx { st, client, now };
        // A bug in one command must not take the server (and every other
        // client) down: the panic becomes an error reply, and the executor
        // drops the writes of the group it happened in and re-runs the
        // group one command per commit, leaving this command out.
        match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| (spec.run)(&mut ctx, args))) {
            Ok(r) => r,
            Err(payload) => {
                let what = payload
                    .downcast_ref::<&str>()
                    .map(|s| s.to_string())
                    .or_else(|| payload.downcast_ref::<String>().cloned())
                    .unwrap_or_default();
                log::error!(
                    "command '{}' panicked: {what}; it was not applied (this is a bug: please report it)",
                    spec.name
                );
                ctx.st.torn = true;
                Err(CmdError::err(format!(
                    "internal error in '{}': the command was not applied (this is a Tembo bug: please report it)",
                    spec.name
                )))
            }
        }
    };
    // A script's error is its own text (`{err=...}`), and its commands
    // that met damage were undone one by one: a script is never undone
    // whole, as Redis keeps what a failed script wrote.
    let damaged = matches!(&reply, Err(e) if e.is_damage())
        && st.store.staged_since(&savepoint)
        && !matches!(spec.name, "eval" | "evalsha" | "eval_ro" | "evalsha_ro" | "fcall" | "fcall_ro");
    if st.store.refused() || damaged {
        // A key or value over the engine's limits, or a damaged record,
        // found after some of the command's writes were staged: it applies
        // nothing (its error says why). A read that met damage is left
        // alone: rerunning its group would repeat what it did outside the
        // store (a SCAN takes its cursor).
        match counts_before {
            Some(counts) => {
                // Run by EXEC or a script: only this command is undone.
                st.store.undo_command(&savepoint);
                st.pending_counts = counts;
                st.notes.clear();
            }
            // The group is rerun one command per commit, without this one's writes.
            None => st.torn = true,
        }
    }
    st.store.end_command(savepoint);
    if st.notify_flags != 0 && !st.notes.is_empty() {
        let mut ctx = Ctx { st, client, now };
        crate::notify::after_command(&mut ctx, args);
    }
    if spec.name == "exec" {
        feed_monitors(st, client, spec, args);
    }
    if client.tracking.on && !client.tracking.bcast && spec.flags.contains(&"readonly") {
        remember_read(st, client, spec, args);
    }
    let reply = reply.unwrap_or_else(|e| Reply::Error(e.0));
    let elapsed = started.elapsed();
    st.last_call = elapsed;
    // Counted under the full name (`config|get`), as Redis 7 does; EXEC
    // and scripts ran other commands meanwhile, so the name is put back.
    client.last_cmd = name;
    let nanos = elapsed.as_nanos().min(u64::MAX as u128) as u64;
    st.stats.count_call(name, nanos, !st.latency.tracking_off);
    if st.latency.threshold_ms > 0 {
        let event = if spec.flags.contains(&"fast") { "fast-command" } else { "command" };
        st.latency.add(event, elapsed.as_millis() as u64, now / 1000);
    }
    if let Reply::Error(msg) = &reply {
        st.stats.count_failed(name);
        count_error(st, client, msg);
    }
    reply
}

/// The arguments MONITOR and SLOWLOG must not show: AUTH's, HELLO's
/// AUTH user and password, ACL SETUSER's rules (they carry passwords and
/// digests), and the value of CONFIG SET requirepass, as in Redis 7.
pub(crate) fn secret_args(args: &[Vec<u8>]) -> Vec<usize> {
    let name = &args[0];
    let sub = |s: &str| args.get(1).is_some_and(|a| args::is(a, s));
    if args::is(name, "auth") {
        (1..args.len()).collect()
    } else if args::is(name, "hello") {
        // HELLO [protover [AUTH user pass] [SETNAME name]], read in order.
        let mut i = 2;
        while i < args.len() {
            if args::is(&args[i], "auth") {
                return (i + 1..(i + 3).min(args.len())).collect();
            }
            i += 2;
        }
        Vec::new()
    } else if args::is(name, "acl") && sub("setuser") {
        (3..args.len()).collect()
    } else if args::is(name, "config") && sub("set") {
        (2..args.len()).step_by(2).filter(|&i| args::is(&args[i], "requirepass")).map(|i| i + 1).collect()
    } else if args::is(name, "migrate") {
        migrate::secret_args(args)
    } else {
        Vec::new()
    }
}

/// Counts a command's error reply once: an error of a command a script
/// called is counted when it happens, and not again when the script
/// passes it on as its own reply (Redis's rule).
fn count_error(st: &mut State, client: &Client, msg: &str) {
    if client.in_script {
        st.stats.script_errors.push(msg.to_string());
        st.stats.error_reply(msg);
    } else if !st.stats.script_errors.iter().any(|e| msg.starts_with(e.as_str())) {
        st.stats.error_reply(msg);
    }
}

/// Shows a call to the clients in MONITOR mode. The lines go through the
/// group's outbox, after the replies queued before them: a client whose
/// MONITOR ran earlier in the group gets its `+OK` before any line, and a
/// group that is rolled back and rerun shows its calls once. A monitor's
/// own calls show after their replies, as Redis 7.0 feeds monitors after
/// the call (and not at all after its QUIT). Administrative calls (CONFIG,
/// DEBUG, ACL SETUSER…) are not shown, as in Redis.
fn feed_monitors(st: &mut State, client: &mut Client, spec: &Spec, args: &[Vec<u8>]) {
    if st.monitors.is_empty() || has_flag(spec, args, "admin") {
        return;
    }
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
    let mut line = format!("+{}.{:06} [{} {}]", now.as_secs(), now.subsec_micros(), client.db, client.addr);
    let secret = secret_args(args);
    for (i, a) in args.iter().enumerate() {
        if secret.contains(&i) {
            line.push_str(" \"(redacted)\"");
            continue;
        }
        line.push_str(" \"");
        for &b in a {
            match b {
                b'"' => line.push_str("\\\""),
                b'\\' => line.push_str("\\\\"),
                b'\n' => line.push_str("\\n"),
                b'\r' => line.push_str("\\r"),
                0x20..=0x7e => line.push(b as char),
                _ => line.push_str(&format!("\\x{b:02x}")),
            }
        }
        line.push('"');
    }
    line.push_str("\r\n");
    for &id in &st.monitors {
        if id == client.id {
            client.monitor_echo.extend_from_slice(line.as_bytes());
        } else if st.clients.contains_key(&id) {
            st.outbox.push((id, Out::Push(line.clone().into_bytes())));
        }
    }
}
