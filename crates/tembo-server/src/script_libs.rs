//! The libraries Redis gives scripts beyond Lua's own, written in Rust
//! (`cmsgpack` has a module of its own, `crate::script_msgpack`):
//! `cjson` (encode, decode, null) on serde_json, and `bit` (LuaBitOp's
//! 32-bit operations: tobit, tohex, bnot, band, bor, bxor, lshift, rshift,
//! arshift, rol, ror, bswap). `redis.*` helpers that need no command
//! state (sha1hex, error_reply, status_reply, log, constants) live here too.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::Relaxed};
use std::sync::Arc;

use mlua::{LightUserData, Lua, Table, Value, Variadic};

/// Lua 5.1 numbers are doubles; LuaBitOp maps them to signed 32 bits
/// modulo 2^32.
fn tobit(v: f64) -> i32 {
    (v.rem_euclid(4_294_967_296.0) as u64 as u32) as i32
}

fn bit_lib(lua: &Lua) -> mlua::Result<Table> {
    let bit = lua.create_table()?;
    bit.set("tobit", lua.create_function(|_, x: f64| Ok(tobit(x)))?)?;
    bit.set("bnot", lua.create_function(|_, x: f64| Ok(!tobit(x)))?)?;
    let fold = |lua: &Lua, f: fn(i32, i32) -> i32| {
        lua.create_function(move |_, xs: Variadic<f64>| {
            let mut it = xs.iter().map(|&x| tobit(x));
            let first =
                it.next().ok_or_else(|| mlua::Error::RuntimeError("bad argument #1 (number expected)".into()))?;
            Ok(it.fold(first, f))
        })
    };
    bit.set("band", fold(lua, |a, b| a & b)?)?;
    bit.set("bor", fold(lua, |a, b| a | b)?)?;
    bit.set("bxor", fold(lua, |a, b| a ^ b)?)?;
    let shift = |lua: &Lua, f: fn(i32, u32) -> i32| {
        lua.create_function(move |_, (x, n): (f64, f64)| Ok(f(tobit(x), (tobit(n) & 31) as u32)))
    };
    bit.set("lshift", shift(lua, |x, n| ((x as u32) << n) as i32)?)?;
    bit.set("rshift", shift(lua, |x, n| ((x as u32) >> n) as i32)?)?;
    bit.set("arshift", shift(lua, |x, n| x >> n)?)?;
    bit.set("rol", shift(lua, |x, n| (x as u32).rotate_left(n) as i32)?)?;
    bit.set("ror", shift(lua, |x, n| (x as u32).rotate_right(n) as i32)?)?;
    bit.set("bswap", lua.create_function(|_, x: f64| Ok((tobit(x) as u32).swap_bytes() as i32))?)?;
    bit.set(
        "tohex",
        lua.create_function(|_, (x, n): (f64, Option<f64>)| {
            let n = n.map_or(8, |n| n as i32);
            let (upper, digits) = (n < 0, n.unsigned_abs().clamp(1, 8) as usize);
            let v = tobit(x) as u32 as u64 & ((1u64 << (4 * digits)) - 1);
            Ok(if upper { format!("{v:0digits$X}") } else { format!("{v:0digits$x}") })
        })?,
    )?;
    Ok(bit)
}

/// cjson's settings that change what it does (the others are accepted
/// and kept, with no effect).
struct JsonSettings {
    encode_max_depth: AtomicUsize,
    decode_max_depth: AtomicUsize,
    encode_invalid_numbers: AtomicBool,
    /// `encode_sparse_array(convert, ratio, safe)`: a table whose integer
    /// keys reach past `ratio` times their count and past `safe` is an
    /// error, or (`convert`) an object.
    sparse_convert: AtomicBool,
    sparse_ratio: AtomicUsize,
    sparse_safe: AtomicUsize,
}

impl JsonSettings {
    /// How lua-cjson encodes a table whose keys are `keys`: `Some(n)` as an
    /// array of `n` (its missing items null), `None` as an object (an empty
    /// table too). Keys all integers from 1 make an array, unless it is
    /// excessively sparse.
    fn array_len(&self, keys: impl Iterator<Item = Value>) -> mlua::Result<Option<usize>> {
        let (mut max, mut items) = (0f64, 0f64);
        for k in keys {
            let k = match k {
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
fn json_number(f: f64, out: &mut String, settings: &JsonSettings) -> mlua::Result<()> {
    if !f.is_finite() {
        if !settings.encode_invalid_numbers.load(Relaxed) {
            return Err(json_err("Cannot serialise number: must not be NaN or Inf"));
        }
        out.push_str(if f.is_nan() {
            "nan"
        } else if f > 0.0 {
            "inf"
        } else {
            "-inf"
        });
        return Ok(());
    }
    if f.fract() == 0.0 && f.abs() < 1e14 {
        out.push_str(&(f as i64).to_string());
    } else {
        out.push_str(&crate::resp::format_g(f, 14));
    }
    Ok(())
}

fn json_string(b: &[u8], out: &mut String) {
    out.push('"');
    for ch in String::from_utf8_lossy(b).chars() {
        match ch {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '/' => out.push_str("\\/"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
}

fn json_encode(v: &Value, depth: usize, settings: &JsonSettings, out: &mut String) -> mlua::Result<()> {
    match v {
        Value::Nil => out.push_str("null"),
        Value::LightUserData(p) if p.0.is_null() => out.push_str("null"),
        Value::Boolean(b) => out.push_str(if *b { "true" } else { "false" }),
        Value::Integer(n) => out.push_str(&n.to_string()),
        Value::Number(f) => json_number(*f, out, settings)?,
        Value::String(s) => json_string(&s.as_bytes(), out),
        Value::Table(t) => {
            if depth >= settings.encode_max_depth.load(Relaxed) {
                return Err(json_err(format!("Cannot serialise, excessive nesting ({})", depth + 1)));
            }
            let pairs: Vec<(Value, Value)> = t.clone().pairs::<Value, Value>().collect::<mlua::Result<_>>()?;
            if let Some(len) = settings.array_len(pairs.iter().map(|(k, _)| k.clone()))? {
                // Sparse arrays allowed (ratio 0) may ask for far more nulls
                // than the script could hold: the text is built outside the
                // interpreter's memory limit, so it keeps to it here (an
                // item takes two bytes at least).
                if len.saturating_mul(2) > crate::script::SCRIPT_MEMORY_LIMIT {
                    return Err(json_err("not enough memory"));
                }
                out.push('[');
                for i in 1..=len {
                    if i > 1 {
                        out.push(',');
                    }
                    json_encode(&t.raw_get::<Value>(i)?, depth + 1, settings, out)?;
                    if out.len() > crate::script::SCRIPT_MEMORY_LIMIT {
                        return Err(json_err("not enough memory"));
                    }
                }
                out.push(']');
            } else {
                out.push('{');
                for (i, (k, val)) in pairs.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    match k {
                        Value::String(s) => json_string(&s.as_bytes(), out),
                        Value::Integer(n) => json_string(n.to_string().as_bytes(), out),
                        Value::Number(f) => {
                            let mut text = String::new();
                            json_number(*f, &mut text, settings)?;
                            json_string(text.as_bytes(), out);
                        }
                        _ => return Err(json_err("Cannot serialise table: table key must be a number or string")),
                    }
                    out.push(':');
                    json_encode(val, depth + 1, settings, out)?;
                }
                out.push('}');
            }
        }
        other => return Err(json_err(format!("Cannot serialise {}: type not supported", other.type_name()))),
    }
    Ok(())
}

fn json_depth(j: &serde_json::Value) -> usize {
    match j {
        serde_json::Value::Array(items) => 1 + items.iter().map(json_depth).max().unwrap_or(0),
        serde_json::Value::Object(map) => 1 + map.values().map(json_depth).max().unwrap_or(0),
        _ => 0,
    }
}

fn lua_of(lua: &Lua, j: &serde_json::Value) -> mlua::Result<Value> {
    use serde_json::Value as J;
    Ok(match j {
        J::Null => Value::LightUserData(LightUserData(std::ptr::null_mut())),
        J::Bool(b) => Value::Boolean(*b),
        J::Number(n) => match n.as_i64() {
            Some(i) if i.unsigned_abs() < 1 << 53 => Value::Integer(i),
            _ => Value::Number(n.as_f64().unwrap_or(0.0)),
        },
        J::String(s) => Value::String(lua.create_string(s)?),
        J::Array(items) => {
            let t = lua.create_table_with_capacity(items.len(), 0)?;
            for (i, item) in items.iter().enumerate() {
                t.raw_set(i + 1, lua_of(lua, item)?)?;
            }
            Value::Table(t)
        }
        J::Object(map) => {
            let t = lua.create_table_with_capacity(0, map.len())?;
            for (k, v) in map {
                t.raw_set(k.as_str(), lua_of(lua, v)?)?;
            }
            Value::Table(t)
        }
    })
}

fn cjson_lib(lua: &Lua) -> mlua::Result<Table> {
    let cjson = lua.create_table()?;
    let settings = Arc::new(JsonSettings {
        encode_max_depth: AtomicUsize::new(1000),
        decode_max_depth: AtomicUsize::new(1000),
        encode_invalid_numbers: AtomicBool::new(false),
        // lua-cjson's defaults.
        sparse_convert: AtomicBool::new(false),
        sparse_ratio: AtomicUsize::new(2),
        sparse_safe: AtomicUsize::new(10),
    });
    let st = settings.clone();
    cjson.set(
        "encode",
        lua.create_function(move |_, v: Value| {
            let mut out = String::new();
            json_encode(&v, 0, &st, &mut out)?;
            Ok(out)
        })?,
    )?;
    let st = settings.clone();
    cjson.set(
        "decode",
        lua.create_function(move |lua, s: mlua::String| {
            let j: serde_json::Value = serde_json::from_slice(&s.as_bytes())
                .map_err(|e| json_err(format!("Expected value but found invalid token: {e}")))?;
            let depth = json_depth(&j);
            if depth > st.decode_max_depth.load(Relaxed) {
                return Err(json_err(format!("Found too many nested data structures ({depth})")));
            }
            lua_of(lua, &j)
        })?,
    )?;
    let st = settings.clone();
    cjson.set(
        "encode_max_depth",
        lua.create_function(move |_, n: Option<usize>| {
            if let Some(n) = n {
                st.encode_max_depth.store(n.max(1), Relaxed);
            }
            Ok(st.encode_max_depth.load(Relaxed))
        })?,
    )?;
    let st = settings.clone();
    cjson.set(
        "decode_max_depth",
        lua.create_function(move |_, n: Option<usize>| {
            if let Some(n) = n {
                st.decode_max_depth.store(n.max(1), Relaxed);
            }
            Ok(st.decode_max_depth.load(Relaxed))
        })?,
    )?;
    let st = settings.clone();
    cjson.set(
        "encode_sparse_array",
        lua.create_function(move |_, (convert, ratio, safe): (Option<Value>, Option<f64>, Option<f64>)| {
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
    let st = settings;
    cjson.set(
        "encode_invalid_numbers",
        lua.create_function(move |_, v: Option<Value>| {
            if let Some(v) = v {
                st.encode_invalid_numbers.store(
                    matches!(v, Value::Boolean(true))
                        || matches!(&v, Value::String(s) if s.as_bytes().as_ref() == b"on"),
                    Relaxed,
                );
            }
            Ok(st.encode_invalid_numbers.load(Relaxed))
        })?,
    )?;
    // Settings that only tune cjson's C buffers or number text: kept, no effect.
    for name in ["encode_keep_buffer", "encode_number_precision", "decode_invalid_numbers"] {
        cjson.set(name, lua.create_function(|_, v: Variadic<Value>| Ok(v))?)?;
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
    let reply_table = |lua: &Lua, key: &'static str| {
        lua.create_function(move |lua, s: mlua::String| {
            let t = lua.create_table()?;
            let b = s.as_bytes();
            let text = if key == "err" { b.strip_prefix(b"-").unwrap_or(&b) } else { &b[..] };
            // An empty error still needs a code for the client to read.
            let text = if key == "err" && text.is_empty() { b"ERR" } else { text };
            t.raw_set(key, lua.create_string(text)?)?;
            Ok(t)
        })
    };
    redis.set("error_reply", reply_table(lua, "err")?)?;
    redis.set("status_reply", reply_table(lua, "ok")?)?;
    redis.set(
        "log",
        lua.create_function(|_, (level, parts): (i64, Variadic<mlua::String>)| {
            let text: Vec<String> = parts.iter().map(|p| String::from_utf8_lossy(&p.as_bytes()).into_owned()).collect();
            let text = text.join(" ");
            match level {
                0 => log::debug!("script: {text}"),
                1 | 2 => log::info!("script: {text}"),
                _ => log::warn!("script: {text}"),
            }
            Ok(())
        })?,
    )?;
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

/// Sets the globals `redis`, `cjson` and `bit`.
pub fn install(lua: &Lua) -> mlua::Result<()> {
    let g = lua.globals();
    g.raw_set("redis", redis_lib(lua)?)?;
    g.raw_set("cjson", cjson_lib(lua)?)?;
    g.raw_set("cmsgpack", crate::script_msgpack::lib(lua)?)?;
    g.raw_set("bit", bit_lib(lua)?)?;
    Ok(())
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
    }
}
