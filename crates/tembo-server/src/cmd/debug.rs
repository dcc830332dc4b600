//! DEBUG: the subcommands that tools and test suites use to probe a server.
//!
//! Each does what it says on Tembo's storage, or says plainly that it has
//! nothing to do: RELOAD has no snapshot to rewrite (every write is already
//! durable in the pool), so it only makes sure nothing is pending; the
//! list-packing thresholds shape no storage here, so setting one changes
//! nothing. DEBUG PANIC panics inside the command, which shows the
//! containment in [`super::run`]: the client gets an error, nothing of the
//! command is applied, and the server and its other clients carry on.
//! SEGFAULT and the like are refused.

use std::time::Duration;

use super::args::{int, is};
use super::{CmdError, CmdResult, Spec};
use crate::exec::Ctx;
use crate::resp::Reply;

pub const COMMANDS: &[Spec] = &[Spec {
    name: "debug",
    arity: -2,
    flags: &["admin", "noscript", "loading", "stale"],
    keys: (0, 0, 0),
    group: "server",
    summary:
        "DEBUG SLEEP | OBJECT | RELOAD | LOADAOF | PAUSE-CRON | POPULATE | DIGEST | SET-ACTIVE-EXPIRE | SET-SKIP-CHECKSUM-VALIDATION | CHECK-RANK-INDEXES | PROTOCOL | HELP.",
    run: debug,
}];

/// Collections up to this many elements are serialized for DEBUG OBJECT.
const SERIALIZE_MAX: u64 = 4096;

/// DEBUG OBJECT's `serializedlength`: as in Redis, the bytes the value
/// takes in an RDB file or a DUMP payload, strings LZF-compressed where
/// that pays, without the type byte ("bar" 4, "12345" as an integer 3).
/// Collections are measured in Tembo's RDB form (plain lists of elements,
/// where Redis writes small ones as a listpack blob). A string stored in
/// chunks, or a collection of over [`SERIALIZE_MAX`] elements, gives its
/// length or element count instead: a debugging command should not copy a
/// value of up to 512 MiB.
fn serialized_length(cx: &mut Ctx, key: &[u8], m: &crate::encoding::Meta) -> Result<u64, CmdError> {
    if m.is_chunked() || m.kind != crate::encoding::Kind::String && m.size > SERIALIZE_MAX {
        return Ok(m.size);
    }
    let value = super::dump::value_of(cx, key, m)?;
    Ok(crate::rdb_value::encode_compressed(&value).len() as u64 - 1)
}

fn debug(cx: &mut Ctx, a: &[Vec<u8>]) -> CmdResult {
    let sub = String::from_utf8_lossy(&a[1]).to_ascii_lowercase();
    match (sub.as_str(), a.len()) {
        ("sleep", 3) => {
            // Redis reads the time with a bare strtod: what is not a number
            // sleeps 0 (hiredis's tests probe with "0\r\n"), and a time past
            // i64 microseconds wraps negative, so it does not sleep.
            let micros = super::zparse::strtod(&a[2]).0 * 1e6;
            if micros >= 1.0 && micros < i64::MAX as f64 {
                std::thread::sleep(Duration::from_micros(micros as u64));
            }
            Ok(Reply::ok())
        }
        ("object", 3) => {
            // As Redis's dictionary holds the key: one past its expiry but
            // not yet removed is shown, and stays.
            let Some(m) = cx.peek_meta(&a[2])? else { return Err(CmdError::err("no such key")) };
            let enc = if m.is_chunked() { "raw" } else { super::keys::encoding_of(cx, &a[2], &m)? };
            let len = serialized_length(cx, &a[2], &m)?;
            Ok(Reply::Simple(format!(
                "Value at:0x0 refcount:1 encoding:{enc} serializedlength:{len} lru:0 lru_seconds_idle:0"
            )))
        }
        // Redis reloads its dataset from the RDB or AOF file; the pool is
        // the only copy here, and what is pending commits with the group
        // before the reply, as for every command.
        ("reload", _) => reload(cx, &a[2..]),
        ("loadaof", 2) => Ok(Reply::ok()),
        // Redis's words for a value not kept in a hash table; no value is
        // here (each element is its own ordered key in the tree).
        ("htstats-key", 3) => match cx.lookup_head(&a[2])? {
            Some(_) => Err(CmdError::err("The value stored at the specified key is not represented using an hash table")),
            None => Err(CmdError::err("no such key")),
        },
        // The argument as the error reply, whole (its first word is the
        // error's code): client libraries test their error mapping with it.
        ("error", 3) => {
            let text = String::from_utf8_lossy(&a[2]).replace(['\r', '\n'], " ");
            Err(CmdError(text))
        }
        ("pause-cron", 3) => {
            cx.st.cron_paused = int(&a[2])? != 0;
            Ok(Reply::ok())
        }
        ("set-active-expire", 3) => {
            cx.st.active_expire = int(&a[2])? != 0;
            Ok(Reply::ok())
        }
        ("quicklist-packed-threshold", 3) => {
            // A memory value, as Redis reads it (`1b`, `100mb`); it shapes
            // no storage here.
            match crate::size::parse(&String::from_utf8_lossy(&a[2])) {
                Some(n) if n <= (1 << 32) - (1 << 20) => Ok(Reply::ok()),
                _ => Err(CmdError::err("argument must be a memory value bigger than 1 and smaller than 4gb")),
            }
        }
        ("populate", 3..=5) => populate(cx, a),
        ("digest", 2) => dataset_digest(cx),
        ("digest-value", _) => {
            let mut out = Vec::new();
            for key in &a[2..] {
                let mut d = [0u8; 20];
                if let Some(m) = cx.lookup(key)? {
                    value_digest(cx, key, &m, &mut d)?;
                }
                out.push(Reply::Simple(digest::hex(&d)));
            }
            Ok(Reply::Array(out))
        }
        ("set-disable-deny-scripts", 3) => {
            cx.st.scripts_allow_denied = int(&a[2])? != 0;
            Ok(Reply::ok())
        }
        ("set-skip-checksum-validation", 3) => {
            cx.st.skip_checksum = int(&a[2])? != 0;
            Ok(Reply::ok())
        }
        ("change-repl-id", 2) => Ok(Reply::ok()),
        ("check-rank-indexes", 2) => match cx.st.store.check_ranks() {
            Ok(()) => Ok(Reply::ok()),
            Err(e) => Err(CmdError::err(&e)),
        },
        ("panic", 2) => panic!("DEBUG PANIC"),
        ("protocol", 3) => protocol(&a[2], cx.client.proto),
        ("help", 2) => Ok(super::help(&[
                "DEBUG <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
                "SLEEP <seconds>",
                "    Stop the server for <seconds>. Decimals are allowed.",
                "OBJECT <key>",
                "    Show low level info about the key and its value.",
                "RELOAD [MERGE] [NOFLUSH] [NOSAVE]",
                "    Make sure every write is durable (the pool is the only copy; there is nothing to reload).",
                "    NOFLUSH without MERGE fails if there is any key or function library (each would be loaded twice).",
                "ERROR <string>",
                "    Return a Redis protocol error with <string> as message. Useful for clients unit tests to simulate Redis errors.",
                "HTSTATS-KEY <key>",
                "    Hash table statistics of a key's value: none here (each element is its own key in the tree).",
                "PAUSE-CRON <0|1>",
                "    Stop or start the server's periodic work (active expiry, statistics, BGSAVE checks).",
                "LOADAOF",
                "    The same as RELOAD (there is no AOF: every write is durable in the pool at its commit).",
                "SET-ACTIVE-EXPIRE <0|1>",
                "    Stop or start the active expire cycle.",
                "DIGEST",
                "    Output a hex signature of the whole dataset (Redis's: the same keys give the same digest).",
                "DIGEST-VALUE <key> [<key> ...]",
                "    Output a hex signature of the values of the given keys.",
                "POPULATE <count> [<prefix>] [<size>]",
                "    Create <count> string keys named key:<num> (or <prefix>:<num>), each with the value value:<num>",
                "    (cut or padded with zero bytes to <size> when given); keys that exist are left alone.",
                "SET-DISABLE-DENY-SCRIPTS <0|1>",
                "    Let scripts call the commands they may not (for tests).",
                "SET-SKIP-CHECKSUM-VALIDATION <0|1>",
                "    Let RESTORE take payloads whose checksum is wrong (their contents are still checked).",
                "PANIC",
                "    Panic inside this command: the command fails and is not applied; the server carries on.",
                "CHECK-RANK-INDEXES",
                "    Check the sorted sets' rank indexes (a cache in memory) against the pool; an error names what disagrees.",
                "PROTOCOL <type>",
                "    Reply with a test value of the given type: string, integer, double, bignum, null, array, set, map, attrib, push, verbatim, true, false.",
            ])),
        _ => Err(super::subcommand_error(a, "DEBUG")),
    }
}

/// DEBUG RELOAD [MERGE] [NOFLUSH] [NOSAVE]. Redis saves its dataset, empties
/// it and loads the file back; here the saved data is the dataset (every
/// write is durable at its commit), so a reload changes nothing (what is
/// pending commits with the group, before the reply). NOSAVE (load the last save instead) is
/// therefore the same. NOFLUSH without MERGE loads the saved data over a
/// dataset that still holds it: Redis refuses a key or function library
/// that is already there, so this fails unless there is none.
fn reload(cx: &mut Ctx, opts: &[Vec<u8>]) -> CmdResult {
    let (mut merge, mut flush) = (false, true);
    for o in opts {
        if is(o, "merge") {
            merge = true;
        } else if is(o, "noflush") {
            flush = false;
        } else if !is(o, "nosave") {
            return Err(CmdError::err("DEBUG RELOAD only supports the MERGE, NOFLUSH and NOSAVE options."));
        }
    }
    if !flush && !merge {
        let keys = (0..cx.st.keys.len()).any(|db| cx.st.key_count(db) > 0);
        let eng = super::scripting::engine(cx)?;
        let libraries = eng.libraries().next().is_some();
        cx.st.scripts = Some(eng);
        if keys || libraries {
            return Err(CmdError::err("Error trying to load the RDB dump, check server logs."));
        }
    }
    Ok(Reply::ok())
}

/// Keys DEBUG POPULATE writes between commits: a populate of millions of
/// keys is durable in steps rather than held as one batch of pending
/// writes in memory.
const POPULATE_STEP: u64 = 10_000;

/// DEBUG POPULATE count [prefix] [size], as Redis 7.0 does it: `prefix:j`
/// (the name cut at 127 bytes, as Redis's 128-byte buffer cuts it) gets
/// `value:j`, or that cut or padded with zero bytes to `size`, unless the
/// key exists. Committed every [`POPULATE_STEP`] keys (but inside EXEC):
/// a full pool stops it with an error, and the keys written until then
/// stay.
fn populate(cx: &mut Ctx, a: &[Vec<u8>]) -> CmdResult {
    let count = super::lists::positive(&a[2])?;
    let size = if a.len() == 5 { Some(super::lists::positive(&a[4])? as usize) } else { None };
    let prefix: &[u8] = a.get(3).map_or(b"key", |p| p.as_slice());
    for j in 0..count {
        let mut key = prefix.to_vec();
        key.push(b':');
        key.extend_from_slice(j.to_string().as_bytes());
        key.truncate(127);
        if cx.lookup_head(&key)?.is_some() {
            continue;
        }
        let mut value = format!("value:{j}").into_bytes();
        if let Some(size) = size.filter(|s| *s > 0) {
            value.resize(size, 0);
        }
        super::strings::put_string_from(cx, &key, None, &value, 0)?;
        // Run in a commit of its own (`cmd::runs_alone`), so a commit here
        // takes nothing of other commands; not inside EXEC, which commits
        // whole.
        if (j + 1) % POPULATE_STEP == 0 && !cx.client.no_block {
            cx.st.commit().map_err(|e| CmdError::from_commit(&e))?;
        }
    }
    Ok(Reply::ok())
}

/// DEBUG DIGEST: every database's keys, each key's digest xored into the
/// database's (so their order does not count), the databases mixed in
/// order, as Redis's `computeDatasetDigest` does. Expired keys not yet
/// removed are left out (Redis counts them until its expiry removes them).
fn dataset_digest(cx: &mut Ctx) -> CmdResult {
    let selected = cx.client.db;
    let mut total = [0u8; 20];
    let mut result = Ok(());
    for db in 0..cx.st.cfg.databases {
        cx.client.db = db as u8;
        result = database_digest(cx, db as u32, &mut total);
        if result.is_err() {
            break;
        }
    }
    cx.client.db = selected;
    result?;
    Ok(Reply::Simple(digest::hex(&total)))
}

/// Mixes database `db` (selected) into `total`, if it has keys.
fn database_digest(cx: &mut Ctx, db: u32, total: &mut digest::Digest) -> Result<(), CmdError> {
    let mut keys = Vec::new();
    super::keys::walk_keys(cx, None, |k, _| {
        keys.push(k.to_vec());
        true
    })?;
    if keys.is_empty() {
        return Ok(());
    }
    digest::mix(total, &db.to_be_bytes());
    for key in keys {
        let Some(m) = cx.lookup(&key)? else { continue };
        let mut d = [0u8; 20];
        digest::mix(&mut d, &key);
        value_digest(cx, &key, &m, &mut d)?;
        digest::xor(total, &d);
    }
    Ok(())
}

/// Mixes the value of `key` (`m` as a lookup gave it) into `d`.
fn value_digest(cx: &mut Ctx, key: &[u8], m: &crate::encoding::Meta, d: &mut digest::Digest) -> Result<(), CmdError> {
    let value = super::dump::value_of(cx, key, m)?;
    digest::object(d, m.kind, &value, m.expire_at != 0);
    Ok(())
}

/// DEBUG DIGEST and DIGEST-VALUE: Redis's dataset digest (`debug.c`),
/// computed the same way over the same logical contents, so a Tembo
/// server and a Redis server holding the same keys give the same digest.
mod digest {
    use crate::encoding::Kind;
    use crate::rdb_value::Value;

    pub type Digest = [u8; 20];

    fn sha1(data: &[u8]) -> Digest {
        sha1_smol::Sha1::from(data).digest().bytes()
    }

    /// `xorDigest`: digest ^= SHA1(data).
    pub fn xor(digest: &mut Digest, data: &[u8]) {
        for (d, h) in digest.iter_mut().zip(sha1(data)) {
            *d ^= h;
        }
    }

    /// `mixDigest`: digest = SHA1(digest ^ SHA1(data)), so order counts.
    pub fn mix(digest: &mut Digest, data: &[u8]) {
        xor(digest, data);
        *digest = sha1(digest);
    }

    /// Redis's object type numbers (`OBJ_STRING` ...).
    fn type_number(kind: Kind) -> u32 {
        match kind {
            Kind::String => 0,
            Kind::List => 1,
            Kind::Set => 2,
            Kind::ZSet => 3,
            Kind::Hash => 4,
            Kind::Stream => 6,
        }
    }

    /// `xorObjectDigest`: mixes a value (and whether it expires) into `digest`.
    pub fn object(digest: &mut Digest, kind: Kind, value: &Value, expires: bool) {
        mix(digest, &type_number(kind).to_be_bytes());
        match value {
            Value::String(s) => mix(digest, s),
            Value::List(items) => items.iter().for_each(|i| mix(digest, i)),
            Value::Set(members) => members.iter().for_each(|m| xor(digest, m)),
            Value::ZSet(pairs) => {
                for (m, score) in pairs {
                    let mut e = [0u8; 20];
                    mix(&mut e, m);
                    mix(&mut e, crate::resp::format_g(*score, 17).as_bytes());
                    xor(digest, &e);
                }
            }
            Value::Hash(pairs) => {
                for (f, v) in pairs {
                    let mut e = [0u8; 20];
                    mix(&mut e, f);
                    mix(&mut e, v);
                    xor(digest, &e);
                }
            }
            Value::Stream(s) => {
                for (id, fv) in &s.entries {
                    mix(digest, format!("{}.{}", id.ms, id.seq).as_bytes());
                    fv.iter().for_each(|x| mix(digest, x));
                }
            }
        }
        if expires {
            xor(digest, b"!!expire!!");
        }
    }

    pub fn hex(d: &Digest) -> String {
        d.iter().map(|b| format!("{b:02x}")).collect()
    }
}

/// DEBUG PROTOCOL: a reply of each RESP3 type (RESP2 clients get each
/// type's RESP2 form).
fn protocol(kind: &[u8], proto: u8) -> CmdResult {
    let ints = || (0..3).map(Reply::Int).collect::<Vec<_>>();
    Ok(if is(kind, "string") {
        Reply::bulk("Hello World")
    } else if is(kind, "integer") {
        Reply::Int(12345)
    } else if is(kind, "double") {
        // Redis's literal reply, not an approximation of pi.
        #[allow(clippy::approx_constant)]
        Reply::Double(3.141)
    } else if is(kind, "bignum") {
        Reply::BigNumber(b"1234567999999999999999999999999999999".to_vec())
    } else if is(kind, "attrib") {
        let attribute = Reply::Attribute(vec![(
            Reply::bulk("key-popularity"),
            Reply::Array(vec![Reply::bulk("key:123"), Reply::Int(90)]),
        )]);
        Reply::Many(vec![attribute, Reply::bulk("Some real reply following the attribute")])
    } else if is(kind, "push") {
        if proto < 3 {
            return Err(CmdError::err("RESP2 is not supported by this command"));
        }
        // A push is out of band: a normal reply follows, for the client
        // that waits for one.
        let push = Reply::Push(vec![Reply::bulk("server-cpu-usage"), Reply::Int(42)]);
        Reply::Many(vec![push, Reply::bulk("Some real reply following the push reply")])
    } else if is(kind, "null") {
        Reply::Nil
    } else if is(kind, "array") {
        Reply::Array(ints())
    } else if is(kind, "set") {
        Reply::Set(ints())
    } else if is(kind, "map") {
        Reply::Map((0..3).map(|i| (Reply::Int(i), Reply::Bool(i == 1))).collect())
    } else if is(kind, "true") {
        Reply::Bool(true)
    } else if is(kind, "false") {
        Reply::Bool(false)
    } else if is(kind, "verbatim") {
        Reply::Verbatim("This is a verbatim\nstring".into())
    } else {
        return Err(CmdError::err(
            "Wrong protocol type name. Please use one of the following: string|integer|double|bignum|null|array|set|map|attrib|push|verbatim|true|false",
        ));
    })
}
