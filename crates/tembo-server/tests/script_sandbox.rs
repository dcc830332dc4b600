//! What scripts may do to the server, as Redis 7.0.15 with Debian's
//! security fixes allows it — and what they may not: Lua 5.1's `unpack`
//! with a count that overflows (it pushed values until the server died),
//! `load` of a reader (a use after free in 5.1's parser) or of bytecode
//! (5.1 loads it unchecked), the deprecated functions that reach other
//! scripts' environments. Also the `struct` library and the error tables
//! scripts build, pinned to redis-server 7.0.15's replies.

use std::sync::Arc;

use tembo_server::resp::Reply;
use tembo_server::Session;
use tembo_store::{Db, Options};

fn session() -> Session {
    Session::new(Arc::new(Db::in_memory(&Options::with_size(16 << 20)).expect("db"))).expect("session")
}

fn eval(s: &mut Session, script: &str) -> Reply {
    let reply = s.call(&["EVAL", script, "0"]);
    if let Reply::Error(e) = &reply {
        assert!(!e.contains("internal error"), "{script}: {e}");
    }
    reply
}

fn error_of(s: &mut Session, script: &str) -> String {
    match eval(s, script) {
        Reply::Error(e) => e,
        other => panic!("{script}: expected an error, got {other:?}"),
    }
}

fn bulk(b: &[u8]) -> Reply {
    Reply::Bulk(b.to_vec())
}

fn ints(v: &[i64]) -> Reply {
    Reply::Array(v.iter().map(|&n| Reply::Int(n)).collect())
}

#[test]
fn unpack_counts_that_overflow_are_errors_and_the_server_serves_on() {
    let mut s = session();
    for (i, j) in [("-2", "2147483647"), ("0", "2147483647"), ("-2147483648", "-2"), ("1", "7999")] {
        let e = error_of(&mut s, &format!("return {{unpack({{1,2,3}}, {i}, {j})}}"));
        assert!(e.contains("too many results to unpack"), "unpack({i}, {j}): {e}");
    }
    assert_eq!(eval(&mut s, "return {unpack({1,2,3}, -1, -2)}"), Reply::Array(vec![]));
    assert_eq!(eval(&mut s, "return {unpack({1,2,3}, 1, -1)}"), Reply::Array(vec![]));
    // Positions outside the table are nils (an array reply stops at the first).
    let count = "local n = select('#', unpack({1,2,3}, -1, 5)); return n";
    assert_eq!(eval(&mut s, count), Reply::Int(7));
    let far = "return select('#', unpack({1,2,3}, -2147483648, -2147483646))";
    assert_eq!(eval(&mut s, far), Reply::Int(3));
    // The most a call may return (8,000 stack slots, the arguments among them).
    assert_eq!(eval(&mut s, "return select('#', unpack({}, 1, 7997))"), Reply::Int(7997));
    assert!(error_of(&mut s, "return select('#', unpack({}, 1, 7998))").contains("too many results to unpack"));
    // Arguments as C reads them: numeric strings, truncation, 32-bit wrap.
    assert_eq!(eval(&mut s, "return {unpack({1,2,3}, '2', '3')}"), ints(&[2, 3]));
    assert_eq!(eval(&mut s, "return {unpack({1,2,3}, 1, 2^32 + 2)}"), ints(&[1, 2]));
    assert_eq!(eval(&mut s, "return {unpack({1,2,3}, 2.9)}"), ints(&[2, 3]));
    let e = error_of(&mut s, "return unpack(5)");
    assert!(e.contains("bad argument #1 to 'unpack' (table expected, got number)"), "{e}");
    let e = error_of(&mut s, "local t = unpack({}, 1, {}) return t");
    assert!(e.starts_with("ERR user_script:1: bad argument #3 to 'unpack' (number expected, got table)"), "{e}");
    assert_eq!(s.call(&["PING"]), Reply::Simple("PONG".into()));
}

/// Bytecode handed to EVAL, SCRIPT LOAD or FUNCTION LOAD is refused as
/// Redis's parser refuses it (5.1 would run it unchecked).
#[test]
fn scripts_are_source_text_never_bytecode() {
    let mut s = session();
    let Reply::Bulk(code) = eval(&mut s, "return string.dump(function() return 42 end)") else { panic!("string.dump") };
    assert_eq!(code[0], 0x1b);
    let want = "ERR Error compiling script (new function): user_script:1: unexpected symbol near 'char(27)'";
    assert_eq!(s.call(&[&b"EVAL"[..], &code, b"0"]), Reply::Error(want.into()));
    assert_eq!(s.call(&[&b"SCRIPT"[..], b"LOAD", &code]), Reply::Error(want.into()));
    let with_shebang = [&b"#!lua\n"[..], &code].concat();
    let want = "ERR Error compiling script (new function): user_script:2: unexpected symbol near 'char(27)'";
    assert_eq!(s.call(&[&b"EVAL"[..], &with_shebang, b"0"]), Reply::Error(want.into()));
    let library = [&b"#!lua name=x\n"[..], &code].concat();
    let want = "ERR Error compiling function: user_function:2: unexpected symbol near 'char(27)'";
    assert_eq!(s.call(&[&b"FUNCTION"[..], b"LOAD", &library]), Reply::Error(want.into()));
    // A shebang needs its line's end.
    assert_eq!(s.call(&["EVAL", "#!lua", "0"]), Reply::Error("ERR Invalid script shebang".into()));
    let e = s.call(&["EVAL", "#!python\nreturn 1", "0"]);
    assert_eq!(e, Reply::Error("ERR Unexpected engine in script shebang: #!python".into()));
    assert_eq!(s.call(&["EVAL", "#!\"lua\" flags=no-writes\nreturn 1", "0"]), Reply::Int(1));
}

#[test]
fn deprecated_environment_functions_are_not_there() {
    let mut s = session();
    for f in ["getfenv", "setfenv", "newproxy"] {
        let e = error_of(&mut s, &format!("local f = {f} return 0"));
        assert!(e.contains(&format!("Script attempted to access nonexistent global variable '{f}'")), "{e}");
    }
    // The basic types' metatables: none to change, or a read-only one.
    for v in ["nil", "123.222", "true", "function() end", "coroutine.create(function() end)"] {
        let e = error_of(&mut s, &format!("getmetatable({v}).__index = function() return 1 end"));
        assert!(e.contains("attempt to index a nil value"), "{v}: {e}");
    }
    let e = error_of(&mut s, "getmetatable('').__index = function() return 1 end");
    assert!(e.contains("Attempt to modify a readonly table"), "{e}");
}

#[test]
fn load_compiles_text_only_and_in_the_scripts_environment() {
    let mut s = session();
    // Bytecode is refused with what Redis's parser says of its first byte.
    let dump = "local s = string.dump(function() return 1 end)";
    let binary = format!("{dump} local done = false local f, e = load(function() if done then return nil end done = true return s end) return e");
    assert_eq!(eval(&mut s, &binary), bulk(b"(load):1: unexpected symbol near 'char(27)'"));
    let named = format!("{dump} local f, e = loadstring(s, '=mine') return e");
    assert_eq!(eval(&mut s, &named), bulk(b"mine:1: unexpected symbol near 'char(27)'"));
    // Pieces are joined; numbers are text; the empty string ends the chunk.
    let pieces = "local p = {'return ', 4, '2', '', 'garbage'} local n = 0 \
                  local f = load(function() n = n + 1 return p[n] end) return f()";
    assert_eq!(eval(&mut s, pieces), Reply::Int(42));
    // What the reader raises, or gives that is not text, is load's error.
    let raises = "local f, e = load(function() error('boom') end) return e.err";
    assert_eq!(eval(&mut s, raises), bulk(b"ERR user_script:1: boom"));
    let table = "local f, e = load(function() return {} end) return e.err";
    assert_eq!(eval(&mut s, table), bulk(b"ERR user_script:1: reader function must return a string"));
    let e = error_of(&mut s, "return load(3)");
    assert!(e.contains("bad argument #1 to 'load' (function expected, got number)"), "{e}");
    // A loaded chunk writes no global any other script would see.
    let write = "local n = 0 local f = load(function() n = n + 1 if n == 1 then return 'leak = 1' end end) return f()";
    let e = error_of(&mut s, write);
    assert!(e.contains("Attempt to modify a readonly table"), "{e}");
    let e = error_of(&mut s, "return leak");
    assert!(e.contains("nonexistent global variable 'leak'"), "{e}");
}

#[test]
fn struct_packs_and_unpacks_as_redis_does() {
    let mut s = session();
    let cases: &[(&str, &[u8])] = &[
        ("struct.pack('>i2', 300)", b"\x01,"),
        ("struct.pack('i', -1)", b"\xff\xff\xff\xff"),
        ("struct.pack('L', 2^64)", &[0; 8]),
        ("struct.pack('L', 2^63 + 2048)", b"\x00\x08\x00\x00\x00\x00\x00\x80"),
        ("struct.pack('l', 0/0)", b"\x00\x00\x00\x00\x00\x00\x00\x80"),
        ("struct.pack('>i16', -1)", b"\x00\x00\x00\x00\x00\x00\x00\x00\xff\xff\xff\xff\xff\xff\xff\xff"),
        ("struct.pack('d', 1e-300)", b"Y\xf3\xf8\xc2\x1fn\xa5\x01"),
        ("struct.pack('>f', 1.5)", b"?\xc0\x00\x00"),
        ("struct.pack('s', 'a\\0bc')", b"a\x00bc\x00"),
        ("struct.pack('c3', 12345)", b"123"),
        (
            "struct.pack('! b h b i b l b c3', 1, 2, 3, 4, 5, 6, 7, 'xyz')",
            b"\x01\x00\x02\x00\x03\x00\x00\x00\x04\x00\x00\x00\x05\x00\x00\x00\x06\x00\x00\x00\x00\x00\x00\x00\x07xyz",
        ),
        ("struct.pack('>!4bi<i', 1, 2, 3)", b"\x01\x00\x00\x00\x00\x00\x00\x02\x03\x00\x00\x00"),
        ("struct.pack('i\\0i', 1, 2)", b"\x01\x00\x00\x00"),
        ("tostring(struct.unpack('d', struct.pack('d', 1e-300)))", b"1e-300"),
    ];
    for (expr, want) in cases {
        assert_eq!(eval(&mut s, &format!("return {expr}")), bulk(want), "{expr}");
    }
    assert_eq!(eval(&mut s, "return {struct.unpack('>hH', '\\255\\254\\255\\254')}"), ints(&[-2, 65534, 5]));
    assert_eq!(eval(&mut s, "return {struct.unpack('i16', string.rep('\\255', 16))}"), ints(&[-1, 17]));
    assert_eq!(
        eval(&mut s, "return {struct.unpack('>i10', '\\255\\2\\3\\4\\5\\6\\7\\8\\9\\10')}"),
        ints(&[-30454, 11])
    );
    assert_eq!(
        eval(&mut s, "return {struct.unpack('b c0', '\\3abcdef')}"),
        Reply::Array(vec![bulk(b"abc"), Reply::Int(5)])
    );
    assert_eq!(eval(&mut s, "return {struct.unpack('s', 'ab\\0cd')}"), Reply::Array(vec![bulk(b"ab"), Reply::Int(4)]));
    assert_eq!(eval(&mut s, "return {struct.unpack('b', 'ab', 2)}"), ints(&[98, 3]));
    assert_eq!(eval(&mut s, "return struct.size('!bhilTfdc5xi3')"), Reply::Int(49));
    assert_eq!(eval(&mut s, "return struct.size('zb')"), Reply::Int(1));
    let errors = [
        ("local r = struct.pack('c5', 'ab') return r", "user_script:1: bad argument #3 to 'pack' (string too short)"),
        ("local r = struct.pack('c5') return r", "user_script:1: bad argument #2 to 'pack' (string expected, got nil)"),
        ("local r = struct.pack('z') return r", "user_script:1: bad argument #1 to 'pack' (invalid format option 'z')"),
        ("local r = struct.pack('i40') return r", "user_script:1: integral size 40 is larger than limit of 32"),
        ("local r = struct.pack('i99999999999') return r", "user_script:1: integral size overflow"),
        ("local r = struct.pack('!3') return r", "user_script:1: alignment 3 is not a power of 2"),
        ("return {struct.unpack('i', 'ab')}", "user_script:1: bad argument #2 to 'unpack' (data string too short)"),
        ("return {struct.unpack('c0', 'ab')}", "user_script:1: format 'c0' needs a previous size"),
        ("return {struct.unpack('s', 'ab')}", "user_script:1: unfinished string in data"),
        (
            "return {struct.unpack('b', 'ab', 0)}",
            "user_script:1: bad argument #3 to 'unpack' (offset must be 1 or greater)",
        ),
        ("return struct.size('s')", "user_script:1: bad argument #1 to 'size' (option 's' has no fixed size)"),
        ("return {pcall(struct.pack, 'z')}", ""),
    ];
    for (script, want) in errors {
        if want.is_empty() {
            let reply = eval(&mut s, script);
            assert_eq!(
                reply,
                Reply::Array(vec![Reply::Nil, bulk(b"bad argument #1 to '?' (invalid format option 'z')")]),
                "{script}"
            );
            continue;
        }
        let e = error_of(&mut s, script);
        assert!(e.starts_with(&format!("ERR {want} script: ")), "{script}: {e}");
    }
    // Struct is read-only, like the other libraries.
    assert!(error_of(&mut s, "struct.x = 1").contains("Attempt to modify a readonly table"));
    // Thousands of results, up to what Lua's stack holds, then an error.
    let many = "return select('#', struct.unpack(string.rep('b', 7990), string.rep('a', 7990)))";
    assert_eq!(eval(&mut s, many), Reply::Int(7991));
    let e = error_of(&mut s, "return select('#', struct.unpack(string.rep('b', 9000), string.rep('a', 9000)))");
    assert!(e.contains("stack overflow (too many results)"), "{e}");
}

#[test]
fn error_tables_shape_their_text_as_redis_does() {
    let mut s = session();
    let field = |s: &mut Session, arg: &str| eval(s, &format!("return redis.error_reply({arg}).err"));
    assert_eq!(field(&mut s, "'Oops'"), bulk(b"ERR Oops"));
    assert_eq!(field(&mut s, "'My Error\\r\\n'"), bulk(b"My Error"));
    assert_eq!(field(&mut s, "'-My Error'"), bulk(b"My Error"));
    assert_eq!(field(&mut s, "' Oops'"), bulk(b" Oops"));
    assert_eq!(field(&mut s, "''"), bulk(b"ERR "));
    // (Line breaks inside become spaces as the reply is written.)
    assert_eq!(eval(&mut s, "return redis.error_reply('X\\r\\n+INJECTED')"), Reply::Error("ERR X\r\n+INJECTED".into()));
    let raised = error_of(&mut s, "error(redis.error_reply('X\\r\\n+INJECTED'))");
    assert!(raised.starts_with("ERR X\r\n+INJECTED script: "), "{raised}");
    assert_eq!(eval(&mut s, "return {err='a\\r\\nb\\n'}"), Reply::Error("a\r\nb".into()));
    // A command's error reply, through redis.pcall.
    let e = "return redis.pcall('nosuchcommand').err";
    assert_eq!(eval(&mut s, e), bulk(b"ERR Unknown Redis command called from script"));
}

mod round_trips {
    use super::*;
    use proptest::prelude::*;

    /// An integer option, its size in bytes and whether it is signed.
    fn option() -> impl Strategy<Value = (String, u32, bool)> {
        prop_oneof![
            Just(("b".to_string(), 1, true)),
            Just(("B".to_string(), 1, false)),
            Just(("h".to_string(), 2, true)),
            Just(("H".to_string(), 2, false)),
            Just(("i".to_string(), 4, true)),
            Just(("I".to_string(), 4, false)),
            (1u32..=6).prop_map(|n| (format!("i{n}"), n, true)),
            (1u32..=6).prop_map(|n| (format!("I{n}"), n, false)),
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

        /// Integers in range come back from `unpack` as `pack` took them,
        /// at any endianness and alignment, and the next position is one
        /// past `size`.
        #[test]
        fn integers_round_trip(
            items in proptest::collection::vec((option(), any::<u64>()), 1..8),
            prefix in prop_oneof![Just(""), Just(">"), Just("<"), Just("!"), Just("!2"), Just(">!4")],
        ) {
            let mut s = session();
            let fmt: String = std::iter::once(prefix.to_string()).chain(items.iter().map(|((o, _, _), _)| o.clone())).collect();
            let values: Vec<i64> = items
                .iter()
                .map(|((_, size, signed), raw)| {
                    let bits = size * 8;
                    let v = raw & ((1u64 << bits) - 1);
                    if *signed && v >> (bits - 1) == 1 { (v as i64) - (1i64 << bits) } else { v as i64 }
                })
                .collect();
            let list = values.iter().map(|v| v.to_string()).collect::<Vec<_>>().join(", ");
            let script = format!(
                "local p = struct.pack('{fmt}', {list}) local r = {{struct.unpack('{fmt}', p)}} \
                 r[#r + 1] = struct.size('{fmt}') r[#r + 1] = #p return r"
            );
            let mut want: Vec<Reply> = values.iter().map(|&v| Reply::Int(v)).collect();
            let Reply::Array(got) = eval(&mut s, &script) else { panic!("{script}") };
            let n = got.len();
            prop_assert!(n == want.len() + 3, "{script}: {got:?}");
            // next position = size + 1 = packed length + 1
            let (next, size, len) = (&got[n - 3], &got[n - 2], &got[n - 1]);
            prop_assert_eq!(size, len);
            if let (Reply::Int(next), Reply::Int(size)) = (next, size) {
                prop_assert_eq!(*next, size + 1);
            }
            want.truncate(n - 3);
            prop_assert_eq!(&got[..n - 3], &want[..]);
        }

        /// Any format, any values: a reply or an error reply, never a panic.
        #[test]
        fn any_format_answers(fmt in "[bBhHlLTiIfdcsx<>! 0-9z=]{0,12}", data in proptest::collection::vec(any::<u8>(), 0..40)) {
            let mut s = session();
            let lua_data: String = data.iter().map(|b| format!("\\{b}")).collect();
            for script in [
                format!("return {{struct.unpack('{fmt}', '{lua_data}')}}"),
                format!("return struct.pack('{fmt}', 1, -2.5, '{lua_data}', 2^70, 'x')"),
                format!("return struct.size('{fmt}')"),
            ] {
                eval(&mut s, &script);
            }
            prop_assert_eq!(s.call(&["PING"]), Reply::Simple("PONG".into()));
        }
    }
}
