//! FUNCTION (LOAD DELETE FLUSH LIST STATS DUMP RESTORE KILL HELP), FCALL and
//! FCALL_RO: Redis 7's function libraries, run by `crate::script`.
//!
//! Unlike the EVAL script cache, libraries are data: each library's code is
//! stored in the `Db` under its own key (`encoding::LIBRARY`), written in the
//! same group commit as the command that loads, replaces or deletes it, so a
//! library is durable before FUNCTION LOAD answers and survives restarts and
//! crashes like any key. FLUSHALL and FLUSHDB leave libraries alone, as in
//! Redis. The interpreter holds the compiled functions; it reads the stored
//! code when it is made, and again if a group with a library change is
//! discarded instead of committed (so the two never disagree).
//!
//! FUNCTION DUMP and RESTORE exchange Redis's payload format (RDB version
//! 10, CRC-64), so payloads move between Tembo and Redis 7.

use super::args::is;
use super::scripting::{engine, keys_and_args, with_engine};
use super::{CmdError, CmdResult, Spec};
use crate::encoding::{library_key, LIBRARY};
use crate::exec::{Ctx, State};
use crate::rdb;
use crate::resp::Reply;
use crate::script::{Engine, LoadPolicy};

pub const COMMANDS: &[Spec] = &[
    Spec {
        name: "function",
        arity: -2,
        flags: &["noscript"],
        keys: (0, 0, 0),
        group: "scripting",
        summary: "FUNCTION LOAD [REPLACE] code | DELETE lib | FLUSH | LIST [WITHCODE] [LIBRARYNAME pattern] | STATS | DUMP | RESTORE payload [FLUSH|APPEND|REPLACE] | KILL | HELP.",
        run: function,
    },
    Spec {
        name: "fcall",
        arity: -3,
        flags: &["noscript", "stale", "skip_monitor", "no_mandatory_keys", "movablekeys"],
        keys: (0, 0, 0),
        group: "scripting",
        summary: "FCALL function numkeys [key ...] [arg ...]: runs a library function atomically.",
        run: fcall,
    },
    Spec {
        name: "fcall_ro",
        arity: -3,
        flags: &["readonly", "noscript", "stale", "skip_monitor", "no_mandatory_keys", "movablekeys"],
        keys: (0, 0, 0),
        group: "scripting",
        summary: "FCALL_RO function numkeys [key ...] [arg ...]: runs a no-writes library function.",
        run: fcall_ro,
    },
];

/// Loads the stored libraries into a fresh interpreter. A stored library
/// that no longer loads (none should: each loaded when it was stored) is
/// skipped with a logged error rather than keeping the others out.
pub(super) fn load_stored(st: &mut State, eng: &mut Engine) -> Result<(), CmdError> {
    let mut codes = Vec::new();
    for kv in st.store.scan_prefix(&[LIBRARY], false) {
        codes.push(kv?.1);
    }
    if codes.is_empty() || eng.load_libraries(&codes, LoadPolicy::Append).is_ok() {
        return Ok(());
    }
    for code in &codes {
        if let Err(e) = eng.load_libraries(std::slice::from_ref(code), LoadPolicy::Append) {
            log::error!("a stored function library did not load and is not callable: {}", e.0);
        }
    }
    Ok(())
}

/// After a group's writes were discarded: the interpreter's libraries go
/// back to what the store holds.
pub fn reload_after_discard(st: &mut State) {
    if let Some(mut eng) = st.scripts.take() {
        eng.flush_libraries();
        if let Err(e) = load_stored(st, &mut eng) {
            log::error!("reloading function libraries: {}", e.0);
        }
        st.scripts = Some(eng);
    }
}

fn fcall(cx: &mut Ctx, a: &[Vec<u8>]) -> CmdResult {
    call(cx, a, false)
}

fn fcall_ro(cx: &mut Ctx, a: &[Vec<u8>]) -> CmdResult {
    call(cx, a, true)
}

fn call(cx: &mut Ctx, a: &[Vec<u8>], ro_command: bool) -> CmdResult {
    let (keys, args) = keys_and_args(a, "Bad number of keys provided")?;
    cx.st.script_keys = Some(keys.to_vec());
    with_engine(cx, a, |eng, cx, limit| eng.call_function(cx, &a[1], keys, args, ro_command, limit))
}

fn function(cx: &mut Ctx, a: &[Vec<u8>]) -> CmdResult {
    let sub = String::from_utf8_lossy(&a[1]).to_ascii_lowercase();
    match (sub.as_str(), a.len()) {
        ("load", n) if n >= 3 => load(cx, a),
        ("delete", 3) => {
            let mut eng = engine(cx)?;
            let deleted = eng.delete_library(&String::from_utf8_lossy(&a[2]));
            cx.st.scripts = Some(eng);
            let lib = deleted.ok_or_else(|| CmdError::err("Library not found"))?;
            cx.st.store.delete(library_key(&lib.name));
            cx.st.functions_changed = true;
            Ok(Reply::ok())
        }
        ("flush", 2 | 3) => {
            if let Some(mode) = a.get(2) {
                if !is(mode, "async") && !is(mode, "sync") {
                    return Err(CmdError::err("FUNCTION FLUSH only supports SYNC|ASYNC option"));
                }
            }
            let mut eng = engine(cx)?;
            eng.flush_libraries();
            cx.st.scripts = Some(eng);
            delete_stored(cx.st)?;
            Ok(Reply::ok())
        }
        ("list", _) => list(cx, a),
        ("stats", 2) => {
            // While a script is busy the interpreter is in use: its counts
            // were taken when the script started (no library changes
            // while it runs).
            let (counts, running) = match cx.st.script_run.as_ref() {
                Some(run) => (
                    run.libraries,
                    Reply::Map(vec![
                        (Reply::bulk("name"), Reply::bulk(&run.name)),
                        (Reply::bulk("command"), Reply::Array(run.command.iter().map(Reply::bulk).collect())),
                        (Reply::bulk("duration_ms"), Reply::Int(run.started.elapsed().as_millis() as i64)),
                    ]),
                ),
                None => {
                    let eng = engine(cx)?;
                    let counts = (eng.libraries().count(), eng.function_count());
                    cx.st.scripts = Some(eng);
                    (counts, Reply::Nil)
                }
            };
            Ok(Reply::Map(vec![
                (Reply::bulk("running_script"), running),
                (
                    Reply::bulk("engines"),
                    Reply::Map(vec![(
                        Reply::bulk("LUA"),
                        Reply::Map(vec![
                            (Reply::bulk("libraries_count"), Reply::Int(counts.0 as i64)),
                            (Reply::bulk("functions_count"), Reply::Int(counts.1 as i64)),
                        ]),
                    )]),
                ),
            ]))
        }
        ("dump", 2) => {
            let eng = engine(cx)?;
            let mut body = Vec::new();
            for lib in eng.libraries() {
                body.push(rdb::OPCODE_FUNCTION2);
                rdb::put_string(&mut body, &lib.code);
            }
            cx.st.scripts = Some(eng);
            Ok(Reply::Bulk(rdb::seal(body)))
        }
        ("restore", 3 | 4) => restore(cx, a),
        ("kill", 2) => crate::busy::kill(cx.st, false).map(|()| Reply::ok()),
        ("help", 2) => Ok(super::help(&[
            "FUNCTION <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
            "LOAD [REPLACE] <FUNCTION CODE>",
            "    Create a new library with the given library name and code.",
            "DELETE <LIBRARY NAME>",
            "    Delete the given library.",
            "LIST [LIBRARYNAME PATTERN] [WITHCODE]",
            "    Return general information on all the libraries:",
            "    * Library name",
            "    * The engine used to run the Library",
            "    * Library description",
            "    * Functions list",
            "    * Library code (if WITHCODE is given)",
            "    It also possible to get only function that matches a pattern using LIBRARYNAME argument.",
            "STATS",
            "    Return information about the current function running.",
            "KILL",
            "    Kill the current running function.",
            "FLUSH [ASYNC|SYNC]",
            "    Delete all the libraries.",
            "DUMP",
            "    Return a serialized payload representing the current libraries.",
            "RESTORE <PAYLOAD> [FLUSH|APPEND|REPLACE]",
            "    Restore the libraries represented by the given payload (APPEND is the default).",
        ])),
        _ => Err(super::subcommand_error(a, "FUNCTION")),
    }
}

/// FUNCTION LOAD [REPLACE] code.
fn load(cx: &mut Ctx, a: &[Vec<u8>]) -> CmdResult {
    let (code, options) = a[2..].split_last().expect("arity checked");
    let mut replace = false;
    for o in options {
        if is(o, "replace") {
            replace = true;
        } else {
            return Err(CmdError::err(format!("Unknown option given: {}", String::from_utf8_lossy(o))));
        }
    }
    let mut eng = engine(cx)?;
    let loaded = eng.load_library(code, replace);
    cx.st.scripts = Some(eng);
    let name = loaded?;
    cx.st.store.put(library_key(&name), code.clone())?;
    cx.st.functions_changed = true;
    Ok(Reply::bulk(name))
}

/// FUNCTION RESTORE payload [FLUSH|APPEND|REPLACE].
fn restore(cx: &mut Ctx, a: &[Vec<u8>]) -> CmdResult {
    let policy = match a.get(3) {
        None => LoadPolicy::Append,
        Some(p) if is(p, "append") => LoadPolicy::Append,
        Some(p) if is(p, "replace") => LoadPolicy::Replace,
        Some(p) if is(p, "flush") => LoadPolicy::Flush,
        Some(_) => {
            return Err(CmdError::err("Wrong restore policy given, value should be either FLUSH, APPEND or REPLACE."))
        }
    };
    let body = rdb::open(&a[2]).map_err(|_| CmdError::err("payload version or checksum are wrong"))?;
    let mut reader = rdb::Reader::new(body);
    let mut codes = Vec::new();
    while !reader.at_end() {
        let malformed = |_| CmdError::err("given payload is malformed");
        match reader.byte().map_err(malformed)? {
            rdb::OPCODE_FUNCTION2 => codes.push(reader.string().map_err(malformed)?),
            _ => return Err(CmdError::err("given type is not a function")),
        }
    }
    let mut eng = engine(cx)?;
    let loaded = eng.load_libraries(&codes, policy);
    cx.st.scripts = Some(eng);
    let names = loaded?;
    if policy == LoadPolicy::Flush {
        delete_stored(cx.st)?;
    }
    for (name, code) in names.iter().zip(codes) {
        cx.st.store.put(library_key(name), code)?;
    }
    cx.st.functions_changed = true;
    Ok(Reply::ok())
}

/// Deletes every stored library.
fn delete_stored(st: &mut State) -> Result<(), CmdError> {
    let mut keys = Vec::new();
    for kv in st.store.scan_prefix(&[LIBRARY], false) {
        keys.push(kv?.0);
    }
    for k in keys {
        st.store.delete(k);
    }
    st.functions_changed = true;
    Ok(())
}

/// FUNCTION LIST [WITHCODE] [LIBRARYNAME pattern].
fn list(cx: &mut Ctx, a: &[Vec<u8>]) -> CmdResult {
    let (mut with_code, mut pattern) = (false, None::<&[u8]>);
    let mut i = 2;
    while i < a.len() {
        if is(&a[i], "withcode") && !with_code {
            with_code = true;
        } else if is(&a[i], "libraryname") && pattern.is_none() {
            i += 1;
            let p = a.get(i).ok_or_else(|| CmdError::err("library name argument was not given"))?;
            pattern = Some(p);
        } else {
            return Err(CmdError::err(format!("Unknown argument {}", String::from_utf8_lossy(&a[i]))));
        }
        i += 1;
    }
    let eng = engine(cx)?;
    let libs: Vec<Reply> = eng
        .libraries()
        .filter(|lib| pattern.map_or(true, |p| super::args::glob(p, lib.name.as_bytes(), true)))
        .map(|lib| {
            let functions = lib
                .functions
                .iter()
                .map(|f| {
                    Reply::Map(vec![
                        (Reply::bulk("name"), Reply::bulk(f.name.clone())),
                        (Reply::bulk("description"), f.description.clone().map_or(Reply::Nil, Reply::Bulk)),
                        (Reply::bulk("flags"), Reply::Set(f.flags.iter().map(|fl| Reply::bulk(fl.clone())).collect())),
                    ])
                })
                .collect();
            let mut fields = vec![
                (Reply::bulk("library_name"), Reply::bulk(lib.name.clone())),
                (Reply::bulk("engine"), Reply::bulk("LUA")),
                (Reply::bulk("functions"), Reply::Array(functions)),
            ];
            if with_code {
                fields.push((Reply::bulk("library_code"), Reply::Bulk(lib.code.clone())));
            }
            Reply::Map(fields)
        })
        .collect();
    cx.st.scripts = Some(eng);
    Ok(Reply::Array(libs))
}
