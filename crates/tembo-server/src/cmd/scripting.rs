//! EVAL EVALSHA EVAL_RO EVALSHA_RO and SCRIPT (LOAD EXISTS FLUSH KILL
//! HELP): Lua scripts, run by `crate::script`.
//!
//! A `#!lua flags=no-writes` first line makes a script read-only, as in
//! Redis 7. The cache lives in memory only (Redis's does too): after a
//! restart, clients reload scripts on NOSCRIPT, as they must for Redis.

use std::time::Duration;

use super::args::{int, is};
use super::{CmdError, CmdResult, Spec};
use crate::exec::Ctx;
use crate::resp::Reply;
use crate::script::Engine;

pub const COMMANDS: &[Spec] = &[
    Spec {
        name: "eval",
        arity: -3,
        flags: &["noscript", "stale", "skip_monitor", "no_mandatory_keys", "movablekeys"],
        keys: (0, 0, 0),
        group: "scripting",
        summary: "EVAL script numkeys [key ...] [arg ...]: runs a Lua script atomically.",
        run: eval,
    },
    Spec {
        name: "evalsha",
        arity: -3,
        flags: &["noscript", "stale", "skip_monitor", "no_mandatory_keys", "movablekeys"],
        keys: (0, 0, 0),
        group: "scripting",
        summary: "EVALSHA sha1 numkeys [key ...] [arg ...]: runs a cached script.",
        run: evalsha,
    },
    Spec {
        name: "eval_ro",
        arity: -3,
        flags: &["readonly", "noscript", "stale", "skip_monitor", "no_mandatory_keys", "movablekeys"],
        keys: (0, 0, 0),
        group: "scripting",
        summary: "EVAL_RO script numkeys [key ...] [arg ...]: a script that may not write.",
        run: eval_ro,
    },
    Spec {
        name: "evalsha_ro",
        arity: -3,
        flags: &["readonly", "noscript", "stale", "skip_monitor", "no_mandatory_keys", "movablekeys"],
        keys: (0, 0, 0),
        group: "scripting",
        summary: "EVALSHA_RO sha1 numkeys [key ...] [arg ...]: a cached script that may not write.",
        run: evalsha_ro,
    },
    Spec {
        name: "script",
        arity: -2,
        flags: &["noscript"],
        keys: (0, 0, 0),
        group: "scripting",
        summary: "SCRIPT LOAD script | EXISTS sha1 ... | FLUSH [ASYNC|SYNC] | KILL | HELP.",
        run: script,
    },
];

/// The interpreter, made on first use with the stored function libraries
/// loaded.
pub(super) fn engine(cx: &mut Ctx) -> Result<Engine, CmdError> {
    match cx.st.scripts.take() {
        Some(e) => Ok(e),
        None => {
            let mut e = Engine::new()?;
            super::functions::load_stored(cx.st, &mut e)?;
            Ok(e)
        }
    }
}

/// Runs `body` with the interpreter and the script time limit, then puts the
/// interpreter back (a fresh one if the body ran it out of memory). SELECT
/// inside a script lasts for the script only.
pub(super) fn with_engine(
    cx: &mut Ctx,
    command: &[Vec<u8>],
    body: impl FnOnce(&mut Engine, &mut Ctx, Duration) -> CmdResult,
) -> CmdResult {
    let limit_ms = super::inert_u64(&cx.st.inert, "busy-reply-threshold", 5000);
    let mut eng = engine(cx)?;
    let db = cx.client.db;
    cx.st.script_run = Some(crate::busy::ScriptRun::new(cx.client.id, command, cx.st.first_of_client));
    let result = body(&mut eng, cx, Duration::from_millis(limit_ms.max(1)));
    cx.st.script_run = None;
    cx.client.db = db;
    cx.st.script_keys = None;
    if matches!(&result, Err(e) if e.0.contains("not enough memory")) {
        log::warn!("a script ran the Lua interpreter out of memory; starting a fresh one");
        eng = eng.rebuilt()?;
    }
    cx.st.scripts = Some(eng);
    result
}

/// A script or function call's keys and its other arguments.
type KeysAndArgs<'a> = (&'a [Vec<u8>], &'a [Vec<u8>]);

/// The split of a script or function call's arguments after its first
/// (`numkeys key... arg...`) into keys and args.
pub(super) fn keys_and_args<'a>(a: &'a [Vec<u8>], bad_number: &str) -> Result<KeysAndArgs<'a>, CmdError> {
    let numkeys = int(&a[2]).map_err(|_| CmdError::err(bad_number))?;
    if numkeys > (a.len() - 3) as i64 {
        return Err(CmdError::err("Number of keys can't be greater than number of args"));
    }
    if numkeys < 0 {
        return Err(CmdError::err("Number of keys can't be negative"));
    }
    Ok(a[3..].split_at(numkeys as usize))
}

/// The flags a script's shebang line declares (Redis's `#!lua flags=…`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct ScriptFlags {
    /// `no-writes`: the script may only read.
    pub no_writes: bool,
    /// `allow-oom`: the script may write over `maxmemory`.
    pub allow_oom: bool,
}

impl ScriptFlags {
    /// Whether the script is refused over `maxmemory`: it may write and
    /// did not declare `allow-oom` (no-writes implies it, as in Redis).
    pub fn denies_oom(self) -> bool {
        !self.no_writes && !self.allow_oom
    }
}

/// The flags of a script's shebang line (`None`: it has none, and runs as
/// a Redis 6 script); errors name a bad one.
pub(crate) fn shebang_flags(source: &[u8]) -> Result<Option<ScriptFlags>, CmdError> {
    if !source.starts_with(b"#!") {
        return Ok(None);
    }
    // Redis finds the line's end with C's strchr: a zero byte first ends
    // the text, and a shebang with no newline after it is no shebang.
    let end = source.iter().position(|&b| b == b'\n' || b == 0).filter(|&i| source[i] == b'\n');
    let Some(end) = end else { return Err(CmdError::err("Invalid script shebang")) };
    // Split as Redis splits it (quotes allowed), the `#!` kept.
    let parts = crate::resp::split_args(&source[..end])
        .filter(|p| !p.is_empty())
        .ok_or_else(|| CmdError::err("Invalid engine in script shebang"))?;
    let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
    if parts[0] != b"#!lua" {
        return Err(CmdError::err(format!("Unexpected engine in script shebang: {}", text(&parts[0]))));
    }
    let mut flags = ScriptFlags::default();
    for w in &parts[1..] {
        let Some(list) = w.strip_prefix(b"flags=") else {
            return Err(CmdError::err(format!("Unknown lua shebang option: {}", text(w))));
        };
        if list.is_empty() {
            continue;
        }
        for f in list.split(|&b| b == b',') {
            match f {
                b"no-writes" => flags.no_writes = true,
                b"allow-oom" => flags.allow_oom = true,
                b"allow-stale" | b"no-cluster" | b"allow-cross-slot-keys" => {}
                other => {
                    return Err(CmdError::err(format!("Unexpected flag in script shebang: {}", text(other))));
                }
            }
        }
    }
    Ok(Some(flags))
}

/// Whether a script's shebang line asks for no writes; errors name a bad one.
pub(crate) fn shebang_read_only(source: &[u8]) -> Result<bool, CmdError> {
    Ok(shebang_flags(source)?.is_some_and(|f| f.no_writes))
}

/// Runs `sha` (or compiles `source` first) with the command's keys and args.
fn run(cx: &mut Ctx, a: &[Vec<u8>], by_sha: bool, read_only: bool) -> CmdResult {
    let (keys, argv) = keys_and_args(a, "value is not an integer or out of range")?;
    cx.st.script_keys = Some(keys.to_vec());
    with_engine(cx, a, |eng, cx, limit| {
        let sha = if by_sha { String::from_utf8_lossy(&a[1]).to_ascii_lowercase() } else { eng.load(&a[1])? };
        let flags = match eng.source(&sha) {
            Some(src) => shebang_flags(src)?,
            None => None,
        };
        if let Some(f) = flags {
            if let Some(refused) = crate::maxmemory::script_start_refused(cx.st, f) {
                return Err(refused);
            }
        }
        let source_read_only = flags.is_some_and(|f| f.no_writes);
        // No-writes implies allow-oom, as in Redis.
        cx.st.script_allow_oom = flags.is_some_and(|f| !f.denies_oom());
        eng.run(cx, &sha, keys, argv, read_only || source_read_only, limit)
    })
}

fn eval(cx: &mut Ctx, a: &[Vec<u8>]) -> CmdResult {
    if !a[1].starts_with(b"#!") {
        return run(cx, a, false, false);
    }
    shebang_read_only(&a[1])?;
    run(cx, a, false, false)
}

fn evalsha(cx: &mut Ctx, a: &[Vec<u8>]) -> CmdResult {
    run(cx, a, true, false)
}

fn eval_ro(cx: &mut Ctx, a: &[Vec<u8>]) -> CmdResult {
    run(cx, a, false, true)
}

fn evalsha_ro(cx: &mut Ctx, a: &[Vec<u8>]) -> CmdResult {
    run(cx, a, true, true)
}

fn script(cx: &mut Ctx, a: &[Vec<u8>]) -> CmdResult {
    let sub = String::from_utf8_lossy(&a[1]).to_ascii_lowercase();
    match (sub.as_str(), a.len()) {
        ("load", 3) => {
            shebang_read_only(&a[2])?;
            let mut eng = engine(cx)?;
            let sha = eng.load(&a[2]);
            cx.st.scripts = Some(eng);
            Ok(Reply::bulk(sha?))
        }
        ("exists", n) if n >= 3 => Ok(Reply::Array(
            a[2..]
                .iter()
                .map(|sha| {
                    let sha = String::from_utf8_lossy(sha);
                    Reply::Int(cx.st.scripts.as_ref().is_some_and(|e| e.exists(&sha)) as i64)
                })
                .collect(),
        )),
        ("flush", 2 | 3) => {
            if let Some(mode) = a.get(2) {
                if !is(mode, "async") && !is(mode, "sync") {
                    return Err(CmdError::err("SCRIPT FLUSH only support SYNC|ASYNC option"));
                }
            }
            if let Some(e) = cx.st.scripts.as_ref() {
                cx.st.scripts = Some(e.flushed()?);
            }
            Ok(Reply::ok())
        }
        ("kill", 2) => crate::busy::kill(cx.st, true).map(|()| Reply::ok()),
        ("help", 2) => Ok(super::help(&[
            "SCRIPT <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
            "EXISTS <sha1> [<sha1> ...]",
            "    Return information about the existence of the scripts in the script cache.",
            "FLUSH [ASYNC|SYNC]",
            "    Flush the Lua scripts cache.",
            "KILL",
            "    Kill the currently executing Lua script.",
            "LOAD <script>",
            "    Load a script into the scripts cache without executing it.",
        ])),
        _ => Err(super::subcommand_error(a, "SCRIPT")),
    }
}
