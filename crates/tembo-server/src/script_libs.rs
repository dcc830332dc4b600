//! The libraries Redis gives scripts beyond Lua's own, written in Rust
//! (`cmsgpack` has a module of its own, `crate::script_msgpack`):
//! `cjson` (encode, null, and decode in `crate::script_json`), and `bit` (LuaBitOp's
//! 32-bit operations: tobit, tohex, bnot, band, bor, bxor, lshift, rshift,
//! arshift, rol, ror, bswap). `redis.*` helpers that need no command
//! state (sha1hex, error_reply, status_reply, log, constants) live here too.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::Relaxed};
use std::sync::Arc;

use mlua::{LightUserData, Lua, MultiValue, Table, Value, Variadic};

/// Lua 5.1 numbers are doubles; LuaBitOp maps them to signed 32 bits
/// modulo 2^32.
/// LuaBitOp's conversion of a number to 32 bits: adding 2^52 + 2^51 puts
/// the number, rounded to the nearest integer (ties to even), in the low
/// word of the double's bits, wrapped modulo 2^32.
fn tobit(v: f64) -> i32 {
    (v + 6_755_399_441_055_744.0).to_bits() as u32 as i32
}

/// Lua's `lua_tonumber`: numbers, and strings that read as one (decimal
/// or hexadecimal, spaces around).
pub(crate) fn lua_number(v: &Value) -> Option<f64> {
    match v {
        Value::Integer(i) => Some(*i as f64),
        Value::Number(f) => Some(*f),
        Value::String(s) => {
            let text = String::from_utf8_lossy(&s.as_bytes()).trim().to_string();
            let (neg, digits) = match text.strip_prefix('-') {
                Some(rest) => (true, rest),
                None => (false, text.as_str()),
            };
            let hex = digits.strip_prefix("0x").or_else(|| digits.strip_prefix("0X"));
            match hex {
                Some(h) => u64::from_str_radix(h, 16).ok().map(|n| if neg { -(n as f64) } else { n as f64 }),
                None if text.chars().all(|c| c.is_ascii_digit() || "+-.eE".contains(c)) => text.parse().ok(),
                None => None,
            }
        }
        _ => None,
    }
}

/// Lua's argument error: "bad argument #n to 'fname' (msg)".
pub(crate) fn arg_err(n: usize, fname: &str, msg: &str) -> mlua::Error {
    mlua::Error::RuntimeError(format!("bad argument #{n} to '{fname}' ({msg})"))
}

/// LuaBitOp's `barg`: argument `i` (from 1) of `name` as 32 bits; a value
/// that is not a number is an error only where it gives 0, as there.
fn barg(args: &[Value], i: usize, name: &str) -> mlua::Result<i32> {
    let v = args.get(i - 1).unwrap_or(&Value::Nil);
    let n = lua_number(v);
    let b = tobit(n.unwrap_or(0.0));
    if b == 0 && n.is_none() {
        let got = if i > args.len() { "no value" } else { v.type_name() };
        return Err(arg_err(i, name, &format!("number expected, got {got}")));
    }
    Ok(b)
}

fn bit_lib(lua: &Lua) -> mlua::Result<Table> {
    let bit = lua.create_table()?;
    let unary = |name: &'static str, f: fn(i32) -> i32| {
        placed(lua, move |_, args: Variadic<Value>| Ok(f(barg(&args, 1, name)?)))
    };
    bit.set("tobit", unary("tobit", |x| x)?)?;
    bit.set("bnot", unary("bnot", |x| !x)?)?;
    bit.set("bswap", unary("bswap", |x| (x as u32).swap_bytes() as i32)?)?;
    let fold = |name: &'static str, f: fn(i32, i32) -> i32| {
        placed(lua, move |_, args: Variadic<Value>| {
            let mut b = barg(&args, 1, name)?;
            // From the last argument down, as LuaBitOp reads them.
            for i in (2..=args.len()).rev() {
                b = f(b, barg(&args, i, name)?);
            }
            Ok(b)
        })
    };
    bit.set("band", fold("band", |a, b| a & b)?)?;
    bit.set("bor", fold("bor", |a, b| a | b)?)?;
    bit.set("bxor", fold("bxor", |a, b| a ^ b)?)?;
    let shift = |name: &'static str, f: fn(i32, u32) -> i32| {
        placed(lua, move |_, args: Variadic<Value>| {
            let x = barg(&args, 1, name)?;
            Ok(f(x, (barg(&args, 2, name)? & 31) as u32))
        })
    };
    bit.set("lshift", shift("lshift", |x, n| ((x as u32) << n) as i32)?)?;
    bit.set("rshift", shift("rshift", |x, n| ((x as u32) >> n) as i32)?)?;
    bit.set("arshift", shift("arshift", |x, n| x >> n)?)?;
    bit.set("rol", shift("rol", |x, n| (x as u32).rotate_left(n) as i32)?)?;
    bit.set("ror", shift("ror", |x, n| (x as u32).rotate_right(n) as i32)?)?;
    bit.set(
        "tohex",
        placed(lua, |_, args: Variadic<Value>| {
            let x = barg(&args, 1, "tohex")? as u32;
            let n = if args.len() < 2 { 8 } else { barg(&args, 2, "tohex")? };
            let digits = n.unsigned_abs().min(8) as usize;
            let v = u64::from(x) & ((1u64 << (4 * digits)) - 1);
            Ok(match (digits, n < 0) {
                (0, _) => String::new(),
                (_, true) => format!("{v:0digits$X}"),
                (_, false) => format!("{v:0digits$x}"),
            })
        })?,
    )?;
    Ok(bit)
}

/// The deepest a script's JSON may nest, whatever `encode_max_depth` and
/// `decode_max_depth` say (their default): each level is a recursion on
/// the thread's stack holding an mlua reference. (lua-cjson stops where
/// Lua's stack runs out, near 2,700 levels when decoding.)
const MAX_JSON_NESTING: usize = 1000;

/// One of [`JsonSettings`]' on/off flags.
type FlagOf = fn(&JsonSettings) -> &AtomicBool;

/// cjson's settings that change what it does (the others are accepted
/// and kept, with no effect).
struct JsonSettings {
    encode_max_depth: AtomicUsize,
    decode_max_depth: AtomicUsize,
    encode_invalid_numbers: AtomicBool,
    /// `encode_sparse_array(convert, ratio, safe)`: a table whose integer
    /// keys reach past `ratio` times their count and past `safe` is an
    /// error, or (`convert`) an object.
    /// `decode_invalid_numbers`: numbers JSON does not allow (hex, inf,
    /// nan, a leading `+` or zero) are read as C's `strtod` reads them.
    decode_invalid_numbers: AtomicBool,
    sparse_convert: AtomicBool,
    sparse_ratio: AtomicUsize,
    sparse_safe: AtomicUsize,
}

impl JsonSettings {
    /// How lua-cjson encodes a table whose keys are `keys`: `Some(n)` as an
    /// array of `n` (its missing items null), `None` as an object (an empty
    /// table too). Keys all integers from 1 make an array, unless it is
    /// excessively sparse.
    fn array_len(&self, keys: impl Iterator<Item = mlua::Result<Value>>) -> mlua::Result<Option<usize>> {
        let (mut max, mut items) = (0f64, 0f64);
        for k in keys {
            let k = match k? {
                Value::Integer(i) => i as f64,
                Value::Number(f) => f,
                _ => return Ok(None),
            };
            if k < 1.0 || k.floor() != k {
                return Ok(None);
            }
            max = max.max(k);
            items += 1.0;
        }
        let ratio = self.sparse_ratio.load(Relaxed) as f64;
        if ratio > 0.0 && max > items * ratio && max > self.sparse_safe.load(Relaxed) as f64 {
            if !self.sparse_convert.load(Relaxed) {
                return Err(json_err("Cannot serialise table: excessively sparse array"));
            }
            return Ok(None);
        }
        Ok((max > 0.0).then_some(max as usize))
    }
}

fn json_err(msg: impl Into<String>) -> mlua::Error {
    mlua::Error::RuntimeError(msg.into())
}

/// cjson's number text: `%.14g`, integers without a fraction.
fn json_number(f: f64, out: &mut Vec<u8>, settings: &JsonSettings) -> mlua::Result<()> {
    if !f.is_finite() {
        if !settings.encode_invalid_numbers.load(Relaxed) {
            return Err(json_err("Cannot serialise number: must not be NaN or Inf"));
        }
        out.extend_from_slice(if f.is_nan() {
            b"nan"
        } else if f > 0.0 {
            b"inf"
        } else {
            b"-inf"
        });
        return Ok(());
    }
    if f == 0.0 {
        out.extend_from_slice(if f.is_sign_negative() { b"-0" } else { b"0" });
    } else if f.fract() == 0.0 && f.abs() < 1e14 {
        out.extend_from_slice((f as i64).to_string().as_bytes());
    } else {
        out.extend_from_slice(crate::resp::format_g(f, 14).as_bytes());
    }
    Ok(())
}

/// lua-cjson's string escaping, byte by byte (a script's strings are
/// bytes, not text: they go out as they are).
fn json_string(b: &[u8], out: &mut Vec<u8>) {
    out.push(b'"');
    for &c in b {
        match c {
            b'"' => out.extend_from_slice(b"\\\""),
            b'\\' => out.extend_from_slice(b"\\\\"),
            b'/' => out.extend_from_slice(b"\\/"),
            b'\n' => out.extend_from_slice(b"\\n"),
            b'\r' => out.extend_from_slice(b"\\r"),
            b'\t' => out.extend_from_slice(b"\\t"),
            0x08 => out.extend_from_slice(b"\\b"),
            0x0c => out.extend_from_slice(b"\\f"),
            c if c < 0x20 || c == 0x7f => out.extend_from_slice(format!("\\u{:04x}", c).as_bytes()),
            c => out.push(c),
        }
    }
    out.push(b'"');
}

fn json_encode(v: &Value, depth: usize, settings: &JsonSettings, out: &mut Vec<u8>) -> mlua::Result<()> {
    match v {
        Value::Nil => out.extend_from_slice(b"null"),
        Value::LightUserData(p) if p.0.is_null() => out.extend_from_slice(b"null"),
        Value::Boolean(b) => out.extend_from_slice(if *b { b"true" } else { b"false" }),
        Value::Integer(n) => json_number(*n as f64, out, settings)?,
        Value::Number(f) => json_number(*f, out, settings)?,
        Value::String(s) => json_string(&s.as_bytes(), out),
        Value::Table(t) => {
            if depth >= settings.encode_max_depth.load(Relaxed).min(MAX_JSON_NESTING) {
                return Err(json_err(format!("Cannot serialise, excessive nesting ({})", depth + 1)));
            }
            // The pairs are walked, never held: each held value is an mlua
            // reference, and mlua has room for some thousands only.
            if let Some(len) = settings.array_len(t.clone().pairs::<Value, Value>().map(|p| p.map(|(k, _)| k)))? {
                // Sparse arrays allowed (ratio 0) may ask for far more nulls
                // than the script could hold: the text is built outside the
                // interpreter's memory limit, so it keeps to it here (a
                // missing item is five bytes, `null,`).
                if len.saturating_mul(5) > crate::script::SCRIPT_MEMORY_LIMIT {
                    return Err(json_err("not enough memory"));
                }
                out.push(b'[');
                for i in 1..=len {
                    if i > 1 {
                        out.push(b',');
                    }
                    json_encode(&exact(t, i, t.raw_get::<Value>(i)?), depth + 1, settings, out)?;
                    if out.len() > crate::script::SCRIPT_MEMORY_LIMIT {
                        return Err(json_err("not enough memory"));
                    }
                }
                out.push(b']');
            } else {
                out.push(b'{');
                for (i, pair) in t.clone().pairs::<Value, Value>().enumerate() {
                    let (k, val) = pair?;
                    let k = &k;
                    if i > 0 {
                        out.push(b',');
                    }
                    match k {
                        Value::String(s) => json_string(&s.as_bytes(), out),
                        Value::Integer(_) | Value::Number(_) => {
                            let f = lua_number(k).unwrap_or(0.0);
                            out.push(b'"');
                            json_number(f, out, settings)?;
                            out.push(b'"');
                        }
                        other => {
                            return Err(json_err(format!(
                                "Cannot serialise {}: table key must be a number or string",
                                other.type_name()
                            )))
                        }
                    }
                    out.push(b':');
                    json_encode(&exact(t, k.clone(), val), depth + 1, settings, out)?;
                }
                out.push(b'}');
            }
        }
        other => return Err(json_err(format!("Cannot serialise {}: type not supported", other.type_name()))),
    }
    Ok(())
}

fn cjson_lib(lua: &Lua) -> mlua::Result<Table> {
    let cjson = lua.create_table()?;
    let settings = Arc::new(JsonSettings {
        encode_max_depth: AtomicUsize::new(1000),
        decode_max_depth: AtomicUsize::new(1000),
        encode_invalid_numbers: AtomicBool::new(false),
        // lua-cjson's defaults.
        decode_invalid_numbers: AtomicBool::new(true),
        sparse_convert: AtomicBool::new(false),
        sparse_ratio: AtomicUsize::new(2),
        sparse_safe: AtomicUsize::new(10),
    });
    let st = settings.clone();
    cjson.set(
        "encode",
        placed(lua, move |lua, args: MultiValue| {
            let [v] = <[Value; 1]>::try_from(args.into_vec())
                .map_err(|_| json_err("bad argument #1 to 'encode' (expected 1 argument)"))?;
            let mut out = Vec::new();
            json_encode(&v, 0, &st, &mut out)?;
            lua.create_string(&out)
        })?,
    )?;
    let st = settings.clone();
    cjson.set(
        "decode",
        placed(lua, move |lua, args: MultiValue| {
            let [s] = <[Value; 1]>::try_from(args.into_vec())
                .map_err(|_| json_err("bad argument #1 to 'decode' (expected 1 argument)"))?;
            let s = match s {
                Value::String(s) => s,
                Value::Integer(_) | Value::Number(_) => lua.coerce_string(s)?.unwrap_or(lua.create_string("")?),
                other => {
                    return Err(json_err(format!(
                        "bad argument #1 to 'decode' (string expected, got {})",
                        other.type_name()
                    )))
                }
            };
            let depth = st.decode_max_depth.load(Relaxed).min(MAX_JSON_NESTING);
            let invalid = st.decode_invalid_numbers.load(Relaxed);
            crate::script_json::decode(lua, &s.as_bytes(), depth, invalid)
        })?,
    )?;
    let st = settings.clone();
    cjson.set(
        "encode_max_depth",
        placed(lua, move |_, n: Option<usize>| {
            if let Some(n) = n {
                st.encode_max_depth.store(n.max(1), Relaxed);
            }
            Ok(st.encode_max_depth.load(Relaxed))
        })?,
    )?;
    let st = settings.clone();
    cjson.set(
        "decode_max_depth",
        placed(lua, move |_, n: Option<usize>| {
            if let Some(n) = n {
                st.decode_max_depth.store(n.max(1), Relaxed);
            }
            Ok(st.decode_max_depth.load(Relaxed))
        })?,
    )?;
    let st = settings.clone();
    cjson.set(
        "encode_sparse_array",
        placed(lua, move |_, (convert, ratio, safe): (Option<Value>, Option<f64>, Option<f64>)| {
            if let Some(v) = convert {
                // lua-cjson numbers every bad argument #1.
                let on = match &v {
                    Value::Boolean(b) => *b,
                    Value::String(s) if s.as_bytes().as_ref() == b"on" => true,
                    Value::String(s) if s.as_bytes().as_ref() == b"off" => false,
                    other => {
                        let text = match other {
                            Value::String(s) => String::from_utf8_lossy(&s.as_bytes()).into_owned(),
                            Value::Integer(n) => n.to_string(),
                            Value::Number(f) => f.to_string(),
                            other => other.type_name().to_string(),
                        };
                        return Err(json_err(format!(
                            "bad argument #1 to 'encode_sparse_array' (invalid option '{text}')"
                        )));
                    }
                };
                st.sparse_convert.store(on, Relaxed);
            }
            for (n, slot) in [(ratio, &st.sparse_ratio), (safe, &st.sparse_safe)] {
                if let Some(n) = n {
                    if !(0.0..=i32::MAX as f64).contains(&n) {
                        return Err(json_err(format!(
                            "bad argument #1 to 'encode_sparse_array' (expected integer between 0 and {})",
                            i32::MAX
                        )));
                    }
                    slot.store(n as usize, Relaxed);
                }
            }
            Ok((st.sparse_convert.load(Relaxed), st.sparse_ratio.load(Relaxed), st.sparse_safe.load(Relaxed)))
        })?,
    )?;
    // On/off settings: `true` or "on" sets, anything else clears; each
    // answers the setting.
    let flags: [(&str, FlagOf); 2] = [
        ("decode_invalid_numbers", |s| &s.decode_invalid_numbers),
        ("encode_invalid_numbers", |s| &s.encode_invalid_numbers),
    ];
    for (name, flag) in flags {
        let st = settings.clone();
        cjson.set(
            name,
            placed(lua, move |_, v: Option<Value>| {
                if let Some(v) = v {
                    let on = matches!(v, Value::Boolean(true))
                        || matches!(&v, Value::String(s) if s.as_bytes().as_ref() == b"on");
                    flag(&st).store(on, Relaxed);
                }
                Ok(flag(&st).load(Relaxed))
            })?,
        )?;
    }
    // Settings that only tune cjson's C buffers or number text: kept, no effect.
    for name in ["encode_keep_buffer", "encode_number_precision"] {
        cjson.set(name, placed(lua, |_, v: Variadic<Value>| Ok(v))?)?;
    }
    cjson.set("null", Value::LightUserData(LightUserData(std::ptr::null_mut())))?;
    Ok(cjson)
}

fn redis_lib(lua: &Lua) -> mlua::Result<Table> {
    let redis = lua.create_table()?;
    redis.set(
        "sha1hex",
        lua.create_function(|_, args: Variadic<Value>| match (args.len(), args.first()) {
            (1, Some(Value::String(s))) => Ok(crate::script::sha1hex(&s.as_bytes())),
            (1, Some(Value::Integer(n))) => Ok(crate::script::sha1hex(n.to_string().as_bytes())),
            _ => Err(mlua::Error::RuntimeError("wrong number of arguments".into())),
        })?,
    )?;
    // One string argument (not a number: Redis checks the type itself);
    // anything else gives, not raises, an error table.
    let reply_table = |lua: &Lua, key: &'static str| {
        lua.create_function(move |lua, args: Variadic<Value>| {
            let t = lua.create_table()?;
            match args.as_slice() {
                [Value::String(s)] if key == "err" => {
                    t.raw_set(key, lua.create_string(error_table_text(&s.as_bytes()))?)?
                }
                [Value::String(s)] => t.raw_set(key, s)?,
                _ => t.raw_set("err", "ERR wrong number or type of arguments")?,
            }
            Ok(t)
        })
    };
    redis.set("error_reply", reply_table(lua, "err")?)?;
    redis.set("status_reply", reply_table(lua, "ok")?)?;
    redis.set("log", lua.create_function(script_log)?)?;
    for (name, v) in [("LOG_DEBUG", 0), ("LOG_VERBOSE", 1), ("LOG_NOTICE", 2), ("LOG_WARNING", 3)] {
        redis.set(name, v)?;
    }
    for (name, v) in [("REPL_NONE", 0), ("REPL_AOF", 1), ("REPL_SLAVE", 2), ("REPL_REPLICA", 2), ("REPL_ALL", 3)] {
        redis.set(name, v)?;
    }
    // Effects replication is the only kind since Redis 7; nothing to switch.
    redis.set("set_repl", lua.create_function(|_, _: Value| Ok(()))?)?;
    redis.set("replicate_commands", lua.create_function(|_, ()| Ok(true))?)?;
    redis.set("breakpoint", lua.create_function(|_, ()| Ok(false))?)?;
    redis.set("debug", lua.create_function(|_, _: Variadic<Value>| Ok(()))?)?;
    redis.set("REDIS_VERSION", crate::REDIS_VERSION)?;
    let num = crate::REDIS_VERSION.split('.').fold(0i64, |acc, p| acc * 256 + p.parse::<i64>().unwrap_or(0));
    redis.set("REDIS_VERSION_NUM", num)?;
    Ok(redis)
}

/// `redis.log(level, ...)`: Redis's argument checks and words; the parts
/// that are strings or numbers, joined by spaces, go to the server's log.
fn script_log(lua: &Lua, args: Variadic<Value>) -> mlua::Result<()> {
    let fail = |m: &str| Err(mlua::Error::RuntimeError(m.into()));
    if args.len() < 2 {
        return fail("redis.log() requires two arguments or more.");
    }
    let number = match &args[0] {
        Value::Integer(_) | Value::Number(_) | Value::String(_) => lua.coerce_number(args[0].clone())?,
        _ => None,
    };
    let Some(level) = number else { return fail("First argument must be a number (log level).") };
    // C converts the number to an int: toward zero (NaN out of range).
    if level.is_nan() || !(0.0..4.0).contains(&level.trunc()) {
        return fail("Invalid debug level.");
    }
    let mut parts = Vec::new();
    for v in &args[1..] {
        if !matches!(v, Value::String(_) | Value::Integer(_) | Value::Number(_)) {
            continue;
        }
        if let Some(s) = lua.coerce_string(v.clone())? {
            parts.push(String::from_utf8_lossy(&s.as_bytes()).into_owned());
        }
    }
    let text = parts.join(" ");
    match level.trunc() as i64 {
        0 => log::debug!("script: {text}"),
        1 | 2 => log::info!("script: {text}"),
        _ => log::warn!("script: {text}"),
    }
    Ok(())
}

/// The `err` text of the table Redis gives a script for an error (from
/// `redis.error_reply`, or a command's error reply to `redis.pcall`): the
/// first word, after a leading `-`, is the error code, and a message of
/// one word gets the code `ERR`; line breaks at either end are dropped.
pub(crate) fn error_table_text(raw: &[u8]) -> Vec<u8> {
    let body = raw.strip_prefix(b"-").unwrap_or(raw);
    let (code, msg) = match body.iter().position(|&b| b == b' ') {
        Some(at) => (&body[..at], &body[at + 1..]),
        None => (&b"ERR"[..], body),
    };
    let is_break = |b: &u8| *b == b'\r' || *b == b'\n';
    let start = msg.iter().position(|b| !is_break(b)).unwrap_or(msg.len());
    let end = msg.iter().rposition(|b| !is_break(b)).map_or(start, |e| e + 1);
    let mut text = code.to_vec();
    text.push(b' ');
    text.extend_from_slice(&msg[start..end.max(start)]);
    text
}

/// Sets the globals `redis`, `cjson`, `cmsgpack`, `bit` and `struct`.
pub fn install(lua: &Lua) -> mlua::Result<()> {
    let g = lua.globals();
    g.raw_set("redis", redis_lib(lua)?)?;
    g.raw_set("cjson", cjson_lib(lua)?)?;
    g.raw_set("cmsgpack", crate::script_msgpack::lib(lua)?)?;
    g.raw_set("bit", bit_lib(lua)?)?;
    g.raw_set("struct", crate::script_struct::lib(lua)?)?;
    Ok(())
}

/// `v`, read as `t[k]`, with its exact number: mlua reads a number within
/// 2^-52 of an integer as that integer, so 1e-20 comes back as 0 (and
/// -0.0 as 0); read again as a float, it is itself.
pub(crate) fn exact(t: &Table, k: impl mlua::IntoLua, v: Value) -> Value {
    match v {
        Value::Integer(0) => t.raw_get::<f64>(k).map_or(v, Value::Number),
        v => v,
    }
}

/// `lua.create_function(f)`, with `f`'s errors prefixed with where the
/// script called it (`user_script:3: `), as the C libraries' `luaL_error`
/// prefixes theirs; nothing when a C function such as `pcall` called it.
/// (Values pass straight through: a wrapper calling `f` from Rust would
/// read its results back through mlua, which turns numbers within 2^-52
/// of an integer into that integer.)
pub(crate) fn placed<A, R>(lua: &Lua, f: impl Fn(&Lua, A) -> mlua::Result<R> + 'static) -> mlua::Result<mlua::Function>
where
    A: mlua::FromLuaMulti,
    R: mlua::IntoLuaMulti,
{
    placed_at(lua, 1, f)
}

/// [`placed`] for a function called through a Lua wrapper: its errors
/// name the place `level` calls up (2: the wrapper's caller).
pub(crate) fn placed_at<A, R>(
    lua: &Lua,
    level: usize,
    f: impl Fn(&Lua, A) -> mlua::Result<R> + 'static,
) -> mlua::Result<mlua::Function>
where
    A: mlua::FromLuaMulti,
    R: mlua::IntoLuaMulti,
{
    lua.create_function(move |lua, args: A| {
        f(lua, args).map_err(|e| {
            let text = match &e {
                mlua::Error::RuntimeError(m) => m.clone(),
                other => other.to_string(),
            };
            let caller = lua.inspect_stack(level);
            let at = caller
                .as_ref()
                .and_then(|d| {
                    let line = d.curr_line();
                    let src = d.source().short_src.map(|s| s.into_owned());
                    src.filter(|_| line > 0).map(|s| format!("{s}:{line}: "))
                })
                .unwrap_or_default();
            // Called from C (`pcall(bit.tohex, ...)`), a function has no
            // name for Lua's argument errors to give: they say '?'.
            let text = match caller.map(|d| d.source().what) {
                Some("C") => unnamed_argument_error(&text).unwrap_or(text),
                _ => text,
            };
            mlua::Error::RuntimeError(format!("{at}{text}"))
        })
    })
}

/// "bad argument #1 to 'tohex' (...)" as "bad argument #1 to '?' (...)".
fn unnamed_argument_error(text: &str) -> Option<String> {
    let rest = text.strip_prefix("bad argument #")?;
    let (n, rest) = rest.split_once(" to '")?;
    let (_, rest) = rest.split_once('\'')?;
    Some(format!("bad argument #{n} to '?'{rest}"))
}

#[cfg(test)]
mod tests {
    use super::tobit;

    #[test]
    fn tobit_wraps_to_signed_32_bits() {
        assert_eq!(tobit(1.0), 1);
        assert_eq!(tobit(4_294_967_295.0), -1);
        assert_eq!(tobit(-1.0), -1);
        assert_eq!(tobit(2_147_483_648.0), i32::MIN);
        // Rounded to the nearest, ties to even, as LuaBitOp does.
        assert_eq!((tobit(1.5), tobit(2.5), tobit(-1.5), tobit(1.4)), (2, 2, -2, 1));
    }
}
