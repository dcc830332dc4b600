//! `cjson.decode` as lua-cjson 2.1 (Redis's copy) decodes: its tokenizer,
//! so that scripts get the same values and the same errors. It is more
//! lenient than JSON: with `decode_invalid_numbers` on (its default)
//! numbers are read by C's `strtod` (`0x10`, `inf`, `NaN`, `+1`, `1e400`
//! are numbers), strings may hold raw control bytes and any bytes at all,
//! and a NUL byte ends the input. Errors say what was expected and what
//! was found where ("Expected value but found T_ARR_END at character 6").
//! (serde_json, used before, accepted less and said it otherwise.)

use mlua::{LightUserData, Lua, Table, Value};

/// A token, as lua-cjson names them in its errors.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Token {
    ObjBegin,
    ObjEnd,
    ArrBegin,
    ArrEnd,
    Str,
    Number(f64),
    Boolean(bool),
    Null,
    Colon,
    Comma,
    End,
    /// What went wrong reading a token.
    Error(&'static str),
}

impl Token {
    fn name(&self) -> &'static str {
        match self {
            Token::ObjBegin => "T_OBJ_BEGIN",
            Token::ObjEnd => "T_OBJ_END",
            Token::ArrBegin => "T_ARR_BEGIN",
            Token::ArrEnd => "T_ARR_END",
            Token::Str => "T_STRING",
            Token::Number(_) => "T_NUMBER",
            Token::Boolean(_) => "T_BOOLEAN",
            Token::Null => "T_NULL",
            Token::Colon => "T_COLON",
            Token::Comma => "T_COMMA",
            Token::End => "T_END",
            Token::Error(why) => why,
        }
    }
}

fn error(msg: String) -> mlua::Error {
    mlua::Error::RuntimeError(msg)
}

/// The decoder's state: the input, where it is, the last string read.
struct Parser<'a> {
    s: &'a [u8],
    at: usize,
    /// Where the last token started.
    token_at: usize,
    string: Vec<u8>,
    depth: usize,
    max_depth: usize,
    invalid_numbers: bool,
}

/// Decodes `s` into a Lua value (`null` as `cjson.null`), nesting at most
/// `max_depth` arrays and objects.
pub fn decode(lua: &Lua, s: &[u8], max_depth: usize, invalid_numbers: bool) -> mlua::Result<Value> {
    if s.len() >= 2 && (s[0] == 0 || s[1] == 0) {
        return Err(error("JSON parser does not support UTF-16 or UTF-32".into()));
    }
    let mut p = Parser { s, at: 0, token_at: 0, string: Vec::new(), depth: 0, max_depth, invalid_numbers };
    let t = p.next();
    let v = p.value(lua, t)?;
    let t = p.next();
    if t != Token::End {
        return Err(p.expected("the end", t));
    }
    Ok(v)
}

impl Parser<'_> {
    /// The byte at `i`; the input ends in an implicit NUL, as a C string.
    fn byte(&self, i: usize) -> u8 {
        self.s.get(i).copied().unwrap_or(0)
    }

    fn expected(&self, what: &str, found: Token) -> mlua::Error {
        error(format!("Expected {what} but found {} at character {}", found.name(), self.token_at + 1))
    }

    fn next(&mut self) -> Token {
        while matches!(self.byte(self.at), b' ' | b'\t' | b'\n' | b'\r') {
            self.at += 1;
        }
        self.token_at = self.at;
        let single = match self.byte(self.at) {
            b'{' => Token::ObjBegin,
            b'}' => Token::ObjEnd,
            b'[' => Token::ArrBegin,
            b']' => Token::ArrEnd,
            b',' => Token::Comma,
            b':' => Token::Colon,
            0 => return Token::End,
            b'"' => return self.string(),
            b'-' | b'0'..=b'9' => {
                if !self.invalid_numbers && self.invalid_number() {
                    return Token::Error("invalid number");
                }
                return self.number();
            }
            b'f' | b'i' | b'I' | b'n' | b'N' | b't' | b'+' => return self.word(),
            _ => return Token::Error("invalid token"),
        };
        self.at += 1;
        single
    }

    fn word(&mut self) -> Token {
        let rest = &self.s[self.at.min(self.s.len())..];
        for (word, token) in
            [(&b"true"[..], Token::Boolean(true)), (b"false", Token::Boolean(false)), (b"null", Token::Null)]
        {
            if rest.starts_with(word) {
                self.at += word.len();
                return token;
            }
        }
        if self.invalid_numbers && self.invalid_number() {
            return self.number();
        }
        Token::Error("invalid token")
    }

    /// lua-cjson's `json_is_invalid_number`: not JSON, but a number to
    /// `strtod` (a sign `+`, hex, leading zeros, inf, nan).
    fn invalid_number(&self) -> bool {
        let mut i = self.at;
        if self.byte(i) == b'+' {
            return true;
        }
        if self.byte(i) == b'-' {
            i += 1;
        }
        let c = self.byte(i);
        if c == b'0' {
            let c2 = self.byte(i + 1);
            return c2 | 0x20 == b'x' || c2.is_ascii_digit();
        }
        if c <= b'9' {
            return false;
        }
        let word = |w: &[u8]| (0..3).all(|k| self.byte(i + k).to_ascii_lowercase() == w[k]);
        word(b"inf") || word(b"nan")
    }

    /// A number as C's `strtod` reads it (`-nan` keeps its sign bit).
    fn number(&mut self) -> Token {
        let rest = &self.s[self.at.min(self.s.len())..];
        match crate::cmd::strtod::number(rest) {
            Some((n, used, _)) => {
                self.at += used;
                Token::Number(if n.is_nan() && rest.first() == Some(&b'-') { -n } else { n })
            }
            None => Token::Error("invalid number"),
        }
    }

    fn string(&mut self) -> Token {
        self.string.clear();
        self.at += 1;
        loop {
            let c = self.byte(self.at);
            match c {
                b'"' => break,
                // A NUL ends a C string, inside a JSON string too.
                0 => {
                    self.token_at = self.at;
                    return Token::Error("unexpected end of string");
                }
                b'\\' => {
                    let decoded = match self.byte(self.at + 1) {
                        b'"' => b'"',
                        b'\\' => b'\\',
                        b'/' => b'/',
                        b'b' => 0x08,
                        b't' => b'\t',
                        b'n' => b'\n',
                        b'f' => 0x0c,
                        b'r' => b'\r',
                        b'u' => {
                            if self.unicode_escape() {
                                continue;
                            }
                            self.token_at = self.at;
                            return Token::Error("invalid unicode escape code");
                        }
                        _ => {
                            self.token_at = self.at;
                            return Token::Error("invalid escape code");
                        }
                    };
                    self.string.push(decoded);
                    self.at += 2;
                }
                c => {
                    self.string.push(c);
                    self.at += 1;
                }
            }
        }
        self.at += 1;
        Token::Str
    }

    fn hex4(&self, i: usize) -> Option<u32> {
        (0..4).try_fold(0u32, |acc, k| (self.byte(i + k) as char).to_digit(16).map(|d| acc << 4 | d))
    }

    /// A `\uXXXX` escape (a UTF-16 surrogate pair takes two) at `at`,
    /// appended as UTF-8; false if it is not a valid one.
    fn unicode_escape(&mut self) -> bool {
        let Some(mut code) = self.hex4(self.at + 2) else { return false };
        let mut len = 6;
        if code & 0xf800 == 0xd800 {
            if code & 0x400 != 0 || self.byte(self.at + 6) != b'\\' || self.byte(self.at + 7) != b'u' {
                return false;
            }
            let Some(low) = self.hex4(self.at + 8).filter(|l| l & 0xfc00 == 0xdc00) else { return false };
            code = (((code & 0x3ff) << 10) | (low & 0x3ff)) + 0x10000;
            len = 12;
        }
        // lua-cjson's own UTF-8 writer (no check for surrogates left alone).
        let c = code;
        match c {
            0..=0x7f => self.string.push(c as u8),
            0x80..=0x7ff => self.string.extend([0xc0 | (c >> 6) as u8, 0x80 | (c & 0x3f) as u8]),
            0x800..=0xffff => {
                self.string.extend([0xe0 | (c >> 12) as u8, 0x80 | ((c >> 6) & 0x3f) as u8, 0x80 | (c & 0x3f) as u8])
            }
            _ => self.string.extend([
                0xf0 | (c >> 18) as u8,
                0x80 | ((c >> 12) & 0x3f) as u8,
                0x80 | ((c >> 6) & 0x3f) as u8,
                0x80 | (c & 0x3f) as u8,
            ]),
        }
        self.at += len;
        true
    }

    fn descend(&mut self) -> mlua::Result<()> {
        self.depth += 1;
        if self.depth > self.max_depth {
            return Err(error(format!(
                "Found too many nested data structures ({}) at character {}",
                self.depth, self.at
            )));
        }
        Ok(())
    }

    fn value(&mut self, lua: &Lua, t: Token) -> mlua::Result<Value> {
        Ok(match t {
            Token::Str => Value::String(lua.create_string(&self.string)?),
            Token::Number(n) => Value::Number(n),
            Token::Boolean(b) => Value::Boolean(b),
            Token::Null => Value::LightUserData(LightUserData(std::ptr::null_mut())),
            Token::ObjBegin => Value::Table(self.object(lua)?),
            Token::ArrBegin => Value::Table(self.array(lua)?),
            other => return Err(self.expected("value", other)),
        })
    }

    fn object(&mut self, lua: &Lua) -> mlua::Result<Table> {
        self.descend()?;
        let t = lua.create_table()?;
        let mut tok = self.next();
        if tok == Token::ObjEnd {
            self.depth -= 1;
            return Ok(t);
        }
        loop {
            if tok != Token::Str {
                return Err(self.expected("object key string", tok));
            }
            let key = lua.create_string(&self.string)?;
            let colon = self.next();
            if colon != Token::Colon {
                return Err(self.expected("colon", colon));
            }
            let v = self.next();
            let v = self.value(lua, v)?;
            t.raw_set(key, v)?;
            tok = self.next();
            if tok == Token::ObjEnd {
                self.depth -= 1;
                return Ok(t);
            }
            if tok != Token::Comma {
                return Err(self.expected("comma or object end", tok));
            }
            tok = self.next();
        }
    }

    fn array(&mut self, lua: &Lua) -> mlua::Result<Table> {
        self.descend()?;
        let t = lua.create_table()?;
        let mut tok = self.next();
        if tok == Token::ArrEnd {
            self.depth -= 1;
            return Ok(t);
        }
        for i in 1.. {
            let v = self.value(lua, tok)?;
            t.raw_set(i, v)?;
            tok = self.next();
            if tok == Token::ArrEnd {
                break;
            }
            if tok != Token::Comma {
                return Err(self.expected("comma or array end", tok));
            }
            tok = self.next();
        }
        self.depth -= 1;
        Ok(t)
    }
}
