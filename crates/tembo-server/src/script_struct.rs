//! The `struct` library Redis gives scripts (Roberto Ierusalimschy's
//! lua-struct, as Redis 7.0 bundles it): `struct.pack(fmt, ...)`,
//! `struct.unpack(fmt, data [, pos])` and `struct.size(fmt)` convert
//! between Lua values and C-style binary records.
//!
//! Formats: `>` big and `<` little endian (little by default, as on
//! x86-64), `!n` maximum alignment (8 when `n` is left out), `x` a padding
//! byte, `b/B` `h/H` `l/L` `T` `i/In` signed and unsigned integers of
//! 1, 2, 8, 8 and `n` (default 4, at most 32) bytes, `f` and `d` floats,
//! `cn` `n` characters (`c0`: as many as the string has, or as the
//! previous unpacked number says), `s` a zero-terminated string, and
//! spaces. What the C code does with numbers out of range (x86-64's
//! conversions) and its error messages are kept, so that scripts behave
//! as under Redis.
//!
//! `pack` is called through a Lua wrapper (`crate::script`'s prelude)
//! that passes its values in a table: mlua reads a number below 2^-52
//! handed straight to Rust as 0, a table's items exactly.

use mlua::{Lua, MultiValue, Table, Value};

use crate::script_libs::{arg_err, exact, lua_number, placed, placed_at};

/// The largest integer size, in bytes.
const MAX_INT_SIZE: usize = 32;
/// The alignment `!` sets with no number: C's for a double (x86-64).
const MAX_ALIGN: usize = 8;
/// Lua's C stack holds this many values, a function's arguments among them.
const MAX_C_STACK: usize = 8000;

fn err(msg: impl Into<String>) -> mlua::Error {
    mlua::Error::RuntimeError(msg.into())
}

/// The format: C reads it up to its first zero byte.
struct Format<'a> {
    text: &'a [u8],
    at: usize,
    big_endian: bool,
    align: usize,
}

impl<'a> Format<'a> {
    fn new(text: &'a [u8]) -> Self {
        let end = text.iter().position(|&b| b == 0).unwrap_or(text.len());
        Format { text: &text[..end], at: 0, big_endian: false, align: 1 }
    }

    fn next_option(&mut self) -> Option<u8> {
        let c = *self.text.get(self.at)?;
        self.at += 1;
        Some(c)
    }

    /// The number written after an option, or `default`.
    fn number(&mut self, default: usize) -> mlua::Result<usize> {
        if !self.text.get(self.at).is_some_and(u8::is_ascii_digit) {
            return Ok(default);
        }
        let mut a: i32 = 0;
        while let Some(&d) = self.text.get(self.at).filter(|d| d.is_ascii_digit()) {
            let d = i32::from(d - b'0');
            if a > i32::MAX / 10 || a * 10 > i32::MAX - d {
                return Err(err("integral size overflow"));
            }
            a = a * 10 + d;
            self.at += 1;
        }
        Ok(a as usize)
    }

    /// The size of option `opt`, reading its number; 0 for options that
    /// take no room.
    fn size_of(&mut self, opt: u8) -> mlua::Result<usize> {
        Ok(match opt {
            b'B' | b'b' | b'x' => 1,
            b'H' | b'h' => 2,
            b'L' | b'l' | b'T' | b'd' => 8,
            b'f' => 4,
            b'c' => self.number(1)?,
            b'i' | b'I' => {
                let n = self.number(4)?;
                if n > MAX_INT_SIZE {
                    return Err(err(format!("integral size {n} is larger than limit of {MAX_INT_SIZE}")));
                }
                n
            }
            _ => 0,
        })
    }

    /// Padding to put before an item of `size` bytes at offset `len`.
    fn padding(&self, len: usize, opt: u8, size: usize) -> usize {
        if size == 0 || opt == b'c' {
            return 0;
        }
        let size = size.min(self.align);
        (size - (len & (size - 1))) & (size - 1)
    }

    /// The options that are not items: spaces, endianness, alignment.
    fn control(&mut self, opt: u8, fname: &str) -> mlua::Result<()> {
        match opt {
            b' ' => {}
            b'>' => self.big_endian = true,
            b'<' => self.big_endian = false,
            b'!' => {
                let a = self.number(MAX_ALIGN)?;
                if !a.is_power_of_two() {
                    return Err(err(format!("alignment {a} is not a power of 2")));
                }
                self.align = a;
            }
            other => return Err(arg_err(1, fname, &format!("invalid format option '{}'", other as char))),
        }
        Ok(())
    }
}

/// `luaL_checklstring`: a string, or a number read as its text.
fn string_arg(lua: &Lua, v: &Value, n: usize, fname: &str, given: bool) -> mlua::Result<Vec<u8>> {
    match v {
        Value::String(s) => Ok(s.as_bytes().to_vec()),
        Value::Integer(_) | Value::Number(_) => match lua.coerce_string(v.clone())? {
            Some(s) => Ok(s.as_bytes().to_vec()),
            None => Err(arg_err(n, fname, "string expected, got number")),
        },
        other => {
            let got = if given { other.type_name() } else { "no value" };
            Err(arg_err(n, fname, &format!("string expected, got {got}")))
        }
    }
}

/// C's `(unsigned long)(long)n` for a negative `n`, `(unsigned long)n`
/// otherwise, as x86-64 code built by GCC converts them.
fn c_unsigned(n: f64) -> u64 {
    const TWO_63: f64 = 9_223_372_036_854_775_808.0;
    if n < 0.0 {
        // Out of range gives INT64_MIN, as `n as i64` saturates to it.
        (n as i64) as u64
    } else if n.is_nan() {
        1 << 63
    } else if n < TWO_63 {
        n as u64
    } else if n - TWO_63 < TWO_63 {
        ((n - TWO_63) as u64) ^ (1 << 63)
    } else {
        0
    }
}

fn pack(lua: &Lua, (nargs, args): (usize, Table)) -> mlua::Result<mlua::String> {
    // Argument `i` (1-based, the format first). C pushes a nil just past
    // the arguments, so one missing reads as nil, more as no value.
    let arg = |i: usize| -> mlua::Result<(Value, bool)> {
        let v = if i <= nargs { exact(&args, i, args.raw_get::<Value>(i)?) } else { Value::Nil };
        Ok((v, i <= nargs + 1))
    };
    // (The nil is pushed after the format is read.)
    let text = string_arg(lua, &arg(1)?.0, 1, "pack", nargs >= 1)?;
    let mut fmt = Format::new(&text);
    let mut out: Vec<u8> = Vec::new();
    let mut next = 2;
    while let Some(opt) = fmt.next_option() {
        let mut size = fmt.size_of(opt)?;
        let pad = fmt.padding(out.len(), opt, size);
        out.resize(out.len() + pad, 0);
        match opt {
            b'b' | b'B' | b'h' | b'H' | b'l' | b'L' | b'T' | b'i' | b'I' => {
                let n = number_arg(&arg(next)?, next, "pack")?;
                next += 1;
                let mut value = c_unsigned(n);
                let mut bytes = [0u8; MAX_INT_SIZE];
                for b in bytes.iter_mut().take(size) {
                    *b = value as u8;
                    value >>= 8;
                }
                if fmt.big_endian {
                    bytes[..size].reverse();
                }
                out.extend_from_slice(&bytes[..size]);
            }
            b'x' => out.push(0),
            b'f' | b'd' => {
                let n = number_arg(&arg(next)?, next, "pack")?;
                next += 1;
                match (opt, fmt.big_endian) {
                    (b'f', false) => out.extend_from_slice(&(n as f32).to_le_bytes()),
                    (b'f', true) => out.extend_from_slice(&(n as f32).to_be_bytes()),
                    (_, false) => out.extend_from_slice(&n.to_le_bytes()),
                    (_, true) => out.extend_from_slice(&n.to_be_bytes()),
                }
            }
            b'c' | b's' => {
                let (v, given) = arg(next)?;
                let s = string_arg(lua, &v, next, "pack", given)?;
                next += 1;
                if size == 0 {
                    size = s.len();
                }
                if s.len() < size {
                    // lua-struct names the argument after the string.
                    return Err(arg_err(next, "pack", "string too short"));
                }
                out.extend_from_slice(&s[..size]);
                if opt == b's' {
                    out.push(0);
                }
            }
            other => fmt.control(other, "pack")?,
        }
        if out.len() > crate::script::SCRIPT_MEMORY_LIMIT {
            return Err(err("not enough memory"));
        }
    }
    lua.create_string(&out)
}

/// `luaL_checknumber`: a number, or a string that reads as one.
fn number_arg((v, given): &(Value, bool), n: usize, fname: &str) -> mlua::Result<f64> {
    lua_number(v).ok_or_else(|| {
        let got = if *given { v.type_name() } else { "no value" };
        arg_err(n, fname, &format!("number expected, got {got}"))
    })
}

/// The integer of `size` bytes at the start of `b`, as lua-struct reads
/// it into an unsigned long (bytes past eight shift out; the sign bit's
/// shift wraps at 64, as x86-64's does).
fn read_integer(b: &[u8], big_endian: bool, signed: bool, size: usize) -> f64 {
    let mut l: u64 = 0;
    let mut push = |byte: u8| l = (l << 8) | u64::from(byte);
    if big_endian {
        b[..size].iter().for_each(|&x| push(x));
    } else {
        b[..size].iter().rev().for_each(|&x| push(x));
    }
    if !signed {
        return l as f64;
    }
    let mask = u64::MAX << ((size * 8).wrapping_sub(1) % 64);
    if l & mask != 0 {
        l |= mask;
    }
    l as i64 as f64
}

fn unpack(lua: &Lua, args: MultiValue) -> mlua::Result<MultiValue> {
    let nargs = args.len();
    let args = args.into_vec();
    let get = |i: usize| args.get(i - 1).cloned().unwrap_or(Value::Nil);
    let text = string_arg(lua, &get(1), 1, "unpack", nargs >= 1)?;
    let data = string_arg(lua, &get(2), 2, "unpack", nargs >= 2)?;
    let ld = data.len();
    let start = match get(3) {
        Value::Nil => 1i64,
        v => {
            // `luaL_optinteger`: C's conversion of the number to a long.
            let n = number_arg(&(v, true), 3, "unpack")?;
            // NaN and out of range give INT64_MIN on x86-64.
            if n.is_nan() || !(-9.223_372_036_854_776e18..9.223_372_036_854_776e18).contains(&n) {
                i64::MIN
            } else {
                n as i64
            }
        }
    };
    if start == 0 {
        return Err(arg_err(3, "unpack", "offset must be 1 or greater"));
    }
    // As a size_t: a negative offset is far past the end.
    let mut pos = (start as u64 as usize).wrapping_sub(1);
    let mut fmt = Format::new(&text);
    let mut out: Vec<Value> = Vec::new();
    let too_short = || arg_err(2, "unpack", "data string too short");
    while let Some(opt) = fmt.next_option() {
        let mut size = fmt.size_of(opt)?;
        pos = pos.wrapping_add(fmt.padding(pos, opt, size));
        if size > ld || pos > ld - size {
            return Err(too_short());
        }
        // C checks room for two more values on its stack; mlua hands back
        // one value fewer than C's stack holds, so one more is kept free
        // here (the 7,998th result of a two-argument call is an error).
        if nargs + out.len() + 3 > MAX_C_STACK {
            return Err(err("stack overflow (too many results)"));
        }
        match opt {
            b'b' | b'B' | b'h' | b'H' | b'l' | b'L' | b'T' | b'i' | b'I' => {
                let signed = opt.is_ascii_lowercase();
                out.push(Value::Number(read_integer(&data[pos..], fmt.big_endian, signed, size)));
            }
            b'x' => {}
            b'f' => {
                let b: [u8; 4] = data[pos..pos + 4].try_into().expect("four bytes");
                let f = if fmt.big_endian { f32::from_be_bytes(b) } else { f32::from_le_bytes(b) };
                out.push(Value::Number(f64::from(f)));
            }
            b'd' => {
                let b: [u8; 8] = data[pos..pos + 8].try_into().expect("eight bytes");
                let f = if fmt.big_endian { f64::from_be_bytes(b) } else { f64::from_le_bytes(b) };
                out.push(Value::Number(f));
            }
            b'c' => {
                if size == 0 {
                    // The length is the number unpacked just before.
                    let prev = out.last().and_then(lua_number);
                    let Some(n) = prev else {
                        return Err(err("format 'c0' needs a previous size"));
                    };
                    out.pop();
                    size = c_unsigned(n) as usize;
                    if size > ld || pos > ld - size {
                        return Err(too_short());
                    }
                }
                out.push(Value::String(lua.create_string(&data[pos..pos + size])?));
            }
            b's' => {
                let Some(len) = data[pos..].iter().position(|&b| b == 0) else {
                    return Err(err("unfinished string in data"));
                };
                out.push(Value::String(lua.create_string(&data[pos..pos + len])?));
                size = len + 1;
            }
            other => fmt.control(other, "unpack")?,
        }
        pos = pos.wrapping_add(size);
    }
    out.push(Value::Number(pos.wrapping_add(1) as i64 as f64));
    Ok(MultiValue::from_vec(out))
}

fn size(lua: &Lua, args: MultiValue) -> mlua::Result<f64> {
    let given = !args.is_empty();
    let f = args.into_iter().next().unwrap_or(Value::Nil);
    let text = string_arg(lua, &f, 1, "size", given)?;
    let mut fmt = Format::new(&text);
    let mut pos: usize = 0;
    while let Some(opt) = fmt.next_option() {
        let size = fmt.size_of(opt)?;
        pos = pos.wrapping_add(fmt.padding(pos, opt, size));
        if opt == b's' {
            return Err(arg_err(1, "size", "option 's' has no fixed size"));
        } else if opt == b'c' && size == 0 {
            return Err(arg_err(1, "size", "option 'c0' has no fixed size"));
        }
        // Letters it does not know take no room here (they are errors to
        // pack and unpack).
        if !opt.is_ascii_alphanumeric() {
            fmt.control(opt, "size")?;
        }
        pos = pos.wrapping_add(size);
    }
    Ok(pos as i64 as f64)
}

/// The `struct` table; `pack` takes `(count, {values})` (see the module
/// docs) and names the script's line two levels up.
pub fn lib(lua: &Lua) -> mlua::Result<Table> {
    let t = lua.create_table()?;
    t.set("pack", placed_at(lua, 2, pack)?)?;
    t.set("unpack", placed(lua, unpack)?)?;
    t.set("size", placed(lua, size)?)?;
    Ok(t)
}
