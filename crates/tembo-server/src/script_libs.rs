//! The libraries Redis gives scripts beyond Lua's own, written in Rust:
//! `cjson` (encode, decode, null) on serde_json, and `bit` (LuaBitOp's
//! 32-bit operations: tobit, tohex, bnot, band, bor, bxor, lshift, rshift,
//! arshift, rol, ror, bswap). `redis.*` helpers that need no command
//! state (sha1hex, error_reply, status_reply, log, constants) live here too.

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

fn json_of(v: &Value, depth: usize) -> mlua::Result<serde_json::Value> {
    use serde_json::Value as J;
    if depth > 1000 {
        return Err(mlua::Error::RuntimeError("Cannot serialise, excessive nesting (1001)".into()));
    }
    Ok(match v {
        Value::Nil => J::Null,
        Value::LightUserData(p) if p.0.is_null() => J::Null,
        Value::Boolean(b) => J::Bool(*b),
        Value::Integer(n) => J::from(*n),
        Value::Number(f) if f.is_finite() => {
            if f.fract() == 0.0 && f.abs() < 1e15 {
                J::from(*f as i64)
            } else {
                serde_json::Number::from_f64(*f).map_or(J::Null, J::Number)
            }
        }
        Value::Number(_) => {
            return Err(mlua::Error::RuntimeError("Cannot serialise number: must not be NaN or Inf".into()))
        }
        Value::String(s) => J::String(String::from_utf8_lossy(&s.as_bytes()).into_owned()),
        Value::Table(t) => {
            let len = t.raw_len();
            let pairs: Vec<(Value, Value)> = t.clone().pairs::<Value, Value>().collect::<mlua::Result<_>>()?;
            if len > 0 && pairs.len() == len {
                let mut items = Vec::with_capacity(len);
                for i in 1..=len {
                    items.push(json_of(&t.raw_get::<Value>(i)?, depth + 1)?);
                }
                J::Array(items)
            } else {
                let mut map = serde_json::Map::new();
                for (k, val) in pairs {
                    let key = match k {
                        Value::String(s) => String::from_utf8_lossy(&s.as_bytes()).into_owned(),
                        Value::Integer(n) => n.to_string(),
                        Value::Number(f) => f.to_string(),
                        _ => {
                            return Err(mlua::Error::RuntimeError(
                                "Cannot serialise table: table key must be a number or string".into(),
                            ))
                        }
                    };
                    map.insert(key, json_of(&val, depth + 1)?);
                }
                J::Object(map)
            }
        }
        other => {
            return Err(mlua::Error::RuntimeError(format!(
                "Cannot serialise {}: type not supported",
                other.type_name()
            )))
        }
    })
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
    cjson.set(
        "encode",
        lua.create_function(|_, v: Value| {
            let j = json_of(&v, 0)?;
            serde_json::to_string(&j).map_err(|e| mlua::Error::RuntimeError(e.to_string()))
        })?,
    )?;
    cjson.set(
        "decode",
        lua.create_function(|lua, s: mlua::String| {
            let j: serde_json::Value = serde_json::from_slice(&s.as_bytes())
                .map_err(|e| mlua::Error::RuntimeError(format!("Expected value but found invalid token: {e}")))?;
            lua_of(lua, &j)
        })?,
    )?;
    cjson.set("null", Value::LightUserData(LightUserData(std::ptr::null_mut())))?;
    Ok(cjson)
}

fn redis_lib(lua: &Lua) -> mlua::Result<Table> {
    let redis = lua.create_table()?;
    redis.set("sha1hex", lua.create_function(|_, s: mlua::String| Ok(crate::script::sha1hex(&s.as_bytes())))?)?;
    let reply_table = |lua: &Lua, key: &'static str| {
        lua.create_function(move |lua, s: mlua::String| {
            let t = lua.create_table()?;
            let b = s.as_bytes();
            let text = if key == "err" { b.strip_prefix(b"-").unwrap_or(&b) } else { &b[..] };
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
