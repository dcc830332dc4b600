//! `cmsgpack`, the MessagePack library Redis gives scripts (lua-cmsgpack):
//! `pack(v, ...)`, `unpack(s)`, `unpack_one(s [, offset])` and
//! `unpack_limit(s, limit [, offset])`, written in Rust on the same Lua
//! values, byte for byte what Redis's produces — job-queue libraries such
//! as BullMQ keep their records in it.
//!
//! Packing follows lua-cmsgpack: a number that is an exact 64-bit integer
//! takes the smallest integer form, any other number a float32 if that
//! loses nothing and a float64 if it would; a string takes fixstr, str8,
//! str16 or str32; a table whose keys are exactly 1..n is an array, any
//! other a map (an empty table is an empty array); nesting deeper than 16
//! tables packs `nil`, so cyclic tables pack (as a bounded deep copy).
//! Unpacking reads every MessagePack type and fails with lua-cmsgpack's
//! words on truncated or malformed input.

use mlua::{Lua, MultiValue, Table, Value};

/// Tables nested deeper than this pack as `nil` (lua-cmsgpack's limit).
const MAX_NESTING: usize = 16;
/// Most top-level objects one unpack returns (Lua's C stack has room for
/// about 8,000 values; lua-cmsgpack fails past it too).
const MAX_RESULTS: usize = 4000;

fn err(msg: &str) -> mlua::Error {
    mlua::Error::RuntimeError(msg.into())
}

fn pack_int(out: &mut Vec<u8>, n: i64) {
    if n >= 0 {
        let u = n as u64;
        if u <= 0x7f {
            out.push(u as u8);
        } else if u <= 0xff {
            out.extend_from_slice(&[0xcc, u as u8]);
        } else if u <= 0xffff {
            out.push(0xcd);
            out.extend_from_slice(&(u as u16).to_be_bytes());
        } else if u <= 0xffff_ffff {
            out.push(0xce);
            out.extend_from_slice(&(u as u32).to_be_bytes());
        } else {
            out.push(0xcf);
            out.extend_from_slice(&u.to_be_bytes());
        }
    } else if n >= -32 {
        out.push(n as i8 as u8);
    } else if n >= -128 {
        out.extend_from_slice(&[0xd0, n as i8 as u8]);
    } else if n >= -32768 {
        out.push(0xd1);
        out.extend_from_slice(&(n as i16).to_be_bytes());
    } else if n >= -2_147_483_648 {
        out.push(0xd2);
        out.extend_from_slice(&(n as i32).to_be_bytes());
    } else {
        out.push(0xd3);
        out.extend_from_slice(&n.to_be_bytes());
    }
}

fn pack_number(out: &mut Vec<u8>, f: f64) {
    // An exact 64-bit integer (lua-cmsgpack's IS_INT64_EQUIVALENT).
    if f.fract() == 0.0 && (-9.223_372_036_854_776e18..9.223_372_036_854_776e18).contains(&f) {
        return pack_int(out, f as i64);
    }
    let single = f as f32;
    if single as f64 == f {
        out.push(0xca);
        out.extend_from_slice(&single.to_be_bytes());
    } else {
        out.push(0xcb);
        out.extend_from_slice(&f.to_be_bytes());
    }
}

fn pack_len(out: &mut Vec<u8>, len: usize, fix: (u8, usize), b8: Option<u8>, b16: u8, b32: u8) {
    if len < fix.1 {
        out.push(fix.0 | len as u8);
    } else if let Some(b8) = b8.filter(|_| len <= 0xff) {
        out.extend_from_slice(&[b8, len as u8]);
    } else if len <= 0xffff {
        out.push(b16);
        out.extend_from_slice(&(len as u16).to_be_bytes());
    } else {
        out.push(b32);
        out.extend_from_slice(&(len as u32).to_be_bytes());
    }
}

/// Whether `t`'s keys are exactly 1..n (then its length n).
fn array_len(t: &Table) -> mlua::Result<Option<usize>> {
    let (mut count, mut max) = (0usize, 0f64);
    for pair in t.clone().pairs::<Value, Value>() {
        let (k, _) = pair?;
        match k {
            Value::Integer(i) if i > 0 => max = max.max(i as f64),
            Value::Number(n) if n > 0.0 && n.fract() == 0.0 => max = max.max(n),
            _ => return Ok(None),
        }
        count += 1;
    }
    Ok((max == count as f64).then_some(count))
}

fn pack_value(out: &mut Vec<u8>, v: &Value, depth: usize) -> mlua::Result<()> {
    match v {
        Value::Nil => out.push(0xc0),
        Value::Boolean(b) => out.push(if *b { 0xc3 } else { 0xc2 }),
        Value::Integer(i) => pack_int(out, *i),
        Value::Number(n) => pack_number(out, *n),
        Value::String(s) => {
            let bytes = s.as_bytes();
            pack_len(out, bytes.len(), (0xa0, 32), Some(0xd9), 0xda, 0xdb);
            out.extend_from_slice(&bytes);
        }
        Value::Table(t) if depth < MAX_NESTING => match array_len(t)? {
            Some(n) => {
                pack_len(out, n, (0x90, 16), None, 0xdc, 0xdd);
                for i in 1..=n {
                    pack_value(out, &crate::script_libs::exact(t, i, t.raw_get::<Value>(i)?), depth + 1)?;
                }
            }
            None => {
                // Counted first, then packed pair by pair: holding every
                // pair at once would hold a Lua reference per key and value
                // (mlua has room for some thousands only).
                let mut n = 0usize;
                for pair in t.clone().pairs::<Value, Value>() {
                    pair?;
                    n += 1;
                }
                pack_len(out, n, (0x80, 16), None, 0xde, 0xdf);
                for pair in t.clone().pairs::<Value, Value>() {
                    let (k, v) = pair?;
                    pack_value(out, &k, depth + 1)?;
                    pack_value(out, &crate::script_libs::exact(t, k, v), depth + 1)?;
                }
            }
        },
        // Too deep, or a function, userdata or thread: lua-cmsgpack packs nil.
        _ => out.push(0xc0),
    }
    Ok(())
}

/// Arrays and maps nested deeper than this are refused: each level is a
/// recursion on the thread's stack, and damaged or hostile input may nest
/// as deep as it is long. (lua-cmsgpack stops where Lua's stack runs out,
/// near 4,000 levels; 1,000 is also the deepest reply a script may return
/// and cjson's default decoding depth.)
const MAX_UNPACK_NESTING: usize = 1000;

/// A reader over packed bytes.
struct Reader<'a> {
    buf: &'a [u8],
    at: usize,
    /// Arrays and maps open around the value being read.
    depth: usize,
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> mlua::Result<&'a [u8]> {
        let end =
            self.at.checked_add(n).filter(|&e| e <= self.buf.len()).ok_or_else(|| err("Missing bytes in input."))?;
        let s = &self.buf[self.at..end];
        self.at = end;
        Ok(s)
    }

    fn uint(&mut self, n: usize) -> mlua::Result<u64> {
        Ok(self.take(n)?.iter().fold(0u64, |acc, &b| (acc << 8) | b as u64))
    }

    fn value(&mut self, lua: &Lua) -> mlua::Result<Value> {
        let tag = self.take(1)?[0];
        let int = |i: i64| Value::Number(i as f64);
        Ok(match tag {
            0x00..=0x7f => int(tag as i64),
            0x80..=0x8f => self.map(lua, (tag & 0x0f) as usize)?,
            0x90..=0x9f => self.array(lua, (tag & 0x0f) as usize)?,
            0xa0..=0xbf => self.string(lua, (tag & 0x1f) as usize)?,
            0xc0 => Value::Nil,
            0xc2 => Value::Boolean(false),
            0xc3 => Value::Boolean(true),
            // str8/16/32 and bin8/16/32: a 1-, 2- or 4-byte length.
            0xc4..=0xc6 | 0xd9..=0xdb => {
                let width = [1, 2, 4][usize::from((tag & 0x0f) - if tag < 0xd0 { 4 } else { 9 })];
                let n = self.uint(width)? as usize;
                self.string(lua, n)?
            }
            0xca => Value::Number(f32::from_bits(self.uint(4)? as u32) as f64),
            0xcb => Value::Number(f64::from_bits(self.uint(8)?)),
            0xcc => int(self.uint(1)? as i64),
            0xcd => int(self.uint(2)? as i64),
            0xce => int(self.uint(4)? as i64),
            // As lua-cmsgpack: a uint64 goes through int64 (past 2^63, negative).
            0xcf => int(self.uint(8)? as i64),
            0xd0 => int(self.uint(1)? as u8 as i8 as i64),
            0xd1 => int(self.uint(2)? as u16 as i16 as i64),
            0xd2 => int(self.uint(4)? as u32 as i32 as i64),
            0xd3 => int(self.uint(8)? as i64),
            // array16/32 and map16/32: a 2- or 4-byte count.
            0xdc..=0xdf => {
                let n = self.uint(if tag & 1 == 0 { 2 } else { 4 })? as usize;
                if tag < 0xde {
                    self.array(lua, n)?
                } else {
                    self.map(lua, n)?
                }
            }
            0xe0..=0xff => int(tag as i8 as i64),
            _ => return Err(err("Bad data format in input.")),
        })
    }

    fn string(&mut self, lua: &Lua, n: usize) -> mlua::Result<Value> {
        Ok(Value::String(lua.create_string(self.take(n)?)?))
    }

    /// Enters an array or a map (`what`, for the error).
    fn nest(&mut self, what: &str) -> mlua::Result<()> {
        if self.depth >= MAX_UNPACK_NESTING {
            return Err(err(&format!("stack overflow (in function {what})")));
        }
        self.depth += 1;
        Ok(())
    }

    fn array(&mut self, lua: &Lua, n: usize) -> mlua::Result<Value> {
        self.nest("mp_decode_to_lua_array")?;
        // A count past the input's size is damage, not a reason to allocate.
        let t = lua.create_table_with_capacity(n.min(self.buf.len() - self.at), 0)?;
        for i in 1..=n {
            t.raw_set(i, self.value(lua)?)?;
        }
        self.depth -= 1;
        Ok(Value::Table(t))
    }

    fn map(&mut self, lua: &Lua, n: usize) -> mlua::Result<Value> {
        self.nest("mp_decode_to_lua_hash")?;
        let t = lua.create_table_with_capacity(0, n.min(self.buf.len() - self.at))?;
        for _ in 0..n {
            let k = self.value(lua)?;
            let v = self.value(lua)?;
            if k != Value::Nil {
                t.raw_set(k, v)?;
            }
        }
        self.depth -= 1;
        Ok(Value::Table(t))
    }
}

/// lua-cmsgpack's `mp_unpack_full`: at most `limit` objects from
/// `offset`. With both 0 (`unpack`, and `unpack_limit(s, 0)`) the objects
/// alone; otherwise the offset after them (-1 at the end of the input)
/// first. A negative offset or limit is refused in its words (which name
/// the input's length as the limit).
fn unpack_full(lua: &Lua, s: &[u8], limit: i64, offset: i64) -> mlua::Result<MultiValue> {
    let all = limit == 0 && offset == 0;
    if offset < 0 || limit < 0 {
        let msg = format!("Invalid request to unpack with offset of {offset} and limit of {}.", s.len());
        return Err(err(&msg));
    }
    let start = usize::try_from(offset)
        .ok()
        .filter(|&o| o <= s.len())
        .ok_or_else(|| err(&format!("Start offset {offset} greater than input length {}.", s.len())))?;
    let limit = if all { usize::MAX } else { usize::try_from(limit).unwrap_or(usize::MAX) };
    let mut r = Reader { buf: s, at: start, depth: 0 };
    let mut out = Vec::new();
    while r.at < s.len() && out.len() < limit {
        if out.len() >= MAX_RESULTS {
            return Err(err("too many return values at once; use unpack_one or unpack_limit instead."));
        }
        out.push(r.value(lua)?);
    }
    if !all {
        let next = if r.at >= s.len() { -1 } else { r.at as i64 };
        out.insert(0, Value::Integer(next));
    }
    Ok(MultiValue::from_vec(out))
}

/// The `cmsgpack` table.
pub fn lib(lua: &Lua) -> mlua::Result<Table> {
    let t = lua.create_table()?;
    t.set(
        "pack",
        crate::script_libs::placed(lua, |lua, args: MultiValue| {
            if args.is_empty() {
                return Err(err("bad argument #0 to 'pack' (MessagePack pack needs input.)"));
            }
            let mut out = Vec::new();
            for v in args.iter() {
                pack_value(&mut out, v, 0)?;
            }
            lua.create_string(&out)
        })?,
    )?;
    t.set("unpack", crate::script_libs::placed(lua, |lua, s: mlua::String| unpack_full(lua, &s.as_bytes(), 0, 0))?)?;
    t.set(
        "unpack_one",
        crate::script_libs::placed(lua, |lua, (s, offset): (mlua::String, Option<i64>)| {
            unpack_full(lua, &s.as_bytes(), 1, offset.unwrap_or(0))
        })?,
    )?;
    t.set(
        "unpack_limit",
        crate::script_libs::placed(lua, |lua, (s, limit, offset): (mlua::String, i64, Option<i64>)| {
            unpack_full(lua, &s.as_bytes(), limit, offset.unwrap_or(0))
        })?,
    )?;
    Ok(t)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hex(lua: &Lua, code: &str) -> String {
        let packed: mlua::String = lua.load(code).eval().unwrap();
        packed.as_bytes().iter().map(|b| format!("{b:02x}")).collect()
    }

    fn lua() -> Lua {
        let lua = Lua::new();
        lua.globals().set("cmsgpack", lib(&lua).unwrap()).unwrap();
        lua
    }

    #[test]
    fn packs_as_lua_cmsgpack_does() {
        let lua = lua();
        assert_eq!(hex(&lua, "return cmsgpack.pack(0.1)"), "cb3fb999999999999a");
        assert_eq!(hex(&lua, "return cmsgpack.pack(-1099511627776)"), "d3ffffff0000000000");
        assert_eq!(hex(&lua, "return cmsgpack.pack(0.5)"), "ca3f000000");
        assert_eq!(hex(&lua, "return cmsgpack.pack(1, -1, 200, -200)"), "01ffccc8d1ff38");
        assert_eq!(hex(&lua, "return cmsgpack.pack('ab', true, false, nil)"), "a26162c3c2c0");
        assert_eq!(hex(&lua, "return cmsgpack.pack({1, 2})"), "920102");
        assert_eq!(hex(&lua, "return cmsgpack.pack({})"), "90");
        assert_eq!(hex(&lua, "return cmsgpack.pack({a = 1})"), "81a16101");
        assert_eq!(hex(&lua, "return cmsgpack.pack(string.rep('x', 40))")[..4], *"d928");
    }

    #[test]
    fn round_trips_and_reads_offsets() {
        let lua = lua();
        let ok: bool = lua
            .load(
                r#"
                local t = {s = string.rep("x", 70000), s1 = string.rep("y", 250), s2 = string.rep("z", 65530),
                           n = -3147483648, f = 0.25, a = {1, 2, {3}}, m = {k = "v"}, b = true}
                local u = cmsgpack.unpack(cmsgpack.pack(t))
                assert(u.s == t.s and u.s1 == t.s1 and u.s2 == t.s2 and u.n == t.n and u.f == t.f and u.b == true)
                assert(u.a[3][1] == 3 and u.m.k == "v")
                local packed = cmsgpack.pack("one", "two", "three")
                local off, v = cmsgpack.unpack_one(packed)
                assert(v == "one" and off == 4)
                off, v = cmsgpack.unpack_limit(packed, 1, off)
                assert(v == "two")
                off, v = cmsgpack.unpack_limit(packed, 1, off)
                assert(v == "three" and off == -1)
                local a, b, c = cmsgpack.unpack(packed)
                return a == "one" and b == "two" and c == "three"
            "#,
            )
            .eval()
            .unwrap();
        assert!(ok);
    }

    #[test]
    fn cycles_pack_to_the_nesting_limit_and_bad_input_is_an_error() {
        let lua = lua();
        let ok: bool = lua
            .load(
                r#"
                local a = {y = 5}
                local b = {x = a}
                a.x = b
                local re = cmsgpack.unpack(cmsgpack.pack(a))
                return re.x.x.x.x.x.x.x.x.x.x.x.x.x.x.y == 5 and re.x.x.x.x.x.x.x.x.x.x.x.x.x.x.x.x == nil
            "#,
            )
            .eval()
            .unwrap();
        assert!(ok);
        // Big tables pack and unpack; too many top-level results is an error, not a crash.
        let ok: bool = lua
            .load(
                r#"
                local m, a = {}, {}
                for i = 1, 100000 do m[tostring(i)] = tostring(i); a[i] = tostring(i) end
                local u = cmsgpack.unpack(cmsgpack.pack(m))
                local v = cmsgpack.unpack(cmsgpack.pack(a))
                local ok = pcall(cmsgpack.unpack, string.rep(cmsgpack.pack("s"), 10000))
                return u["99999"] == "99999" and v[100000] == "100000" and not ok
            "#,
            )
            .eval()
            .unwrap();
        assert!(ok);
        for bad in [
            r#"cmsgpack.unpack("\218\255")"#,
            r#"cmsgpack.unpack("\193")"#,
            r#"cmsgpack.unpack("\221\255\255\255\255")"#,
        ] {
            assert!(lua.load(bad).exec().is_err(), "{bad}");
        }
    }
}
