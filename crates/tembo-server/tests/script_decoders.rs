//! The `script_decoders` fuzz target's logic, and more. The decoders
//! scripts can feed any bytes to — `cmsgpack.unpack` (and its
//! `unpack_one` / `unpack_limit` with offsets and limits) and
//! `cjson.decode` — and the `bit` library's numeric edge cases, run on
//! random and damaged input through EVAL. A script's bad input is bad
//! input like any other: the reply is a value or an error reply, never the
//! "internal error" of a panicking command, and the session serves on.
//! Valid input round-trips: what `cmsgpack.pack` / `cjson.encode` wrote
//! decodes to the value it was written from.

use proptest::prelude::*;
use tembo_server::resp::Reply;
use tembo_server::Session;

mod logic {
    include!("../../../fuzz/fuzz_targets/script_decoders_logic.rs");
}
use logic::session;

/// Runs `script` with `args` as ARGV; fails on a panic's reply.
fn eval(s: &mut Session, script: &str, args: &[&[u8]]) -> Reply {
    logic::eval(s, script, args).unwrap_or_else(|e| panic!("{e}"))
}

/// Encodings of nested values to damage (written by the libraries
/// themselves, so that the damage starts from what a script would hold).
fn seeds(s: &mut Session, script: &str) -> Vec<Vec<u8>> {
    let values = [
        "{1, 2, 3}",
        "{a = 1, b = {c = 'x', d = {1.5, -7, true, false}}}",
        "'a string of some length, longer than thirty-one bytes'",
        "{[1] = 'x', [3] = 'y', name = {}}",
        "{1e300, -1e-300, 2^53, -2^63, 255, 256, 65535, 65536, 4294967296}",
        "string.rep('z', 70000)",
        "{{{{{{{{{{'deep'}}}}}}}}}}",
    ];
    values
        .iter()
        .map(|v| match eval(s, &format!("return {script}({v})"), &[]) {
            Reply::Bulk(b) => b,
            other => panic!("{script}({v}): {other:?}"),
        })
        .collect()
}

fn damaged(seed: &[u8], flips: &[(usize, u8)], cut: usize, extra: &[u8]) -> Vec<u8> {
    let mut d = seed.to_vec();
    let n = d.len().max(1);
    for &(at, byte) in flips {
        if let Some(b) = d.get_mut(at % n) {
            *b = byte;
        }
    }
    d.truncate(cut % (n + 1));
    d.extend_from_slice(extra);
    d
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 400, ..ProptestConfig::default() })]

    #[test]
    fn damaged_encodings_get_replies_not_panics(
        which in 0..7usize,
        json in any::<bool>(),
        flips in proptest::collection::vec((any::<usize>(), any::<u8>()), 0..5),
        cut in any::<usize>(),
        extra in proptest::collection::vec(any::<u8>(), 0..12),
        offset in prop_oneof![Just(-1i64), Just(0), 0..40i64, Just(i64::MAX), Just(i64::MIN)],
        limit in prop_oneof![Just(-1i64), Just(0), 1..5i64, Just(1 << 40)],
    ) {
        let mut s = session();
        let seed = &seeds(&mut s, if json { "cjson.encode" } else { "cmsgpack.pack" })[which];
        let data = damaged(seed, &flips, cut, &extra);
        let (offset, limit) = (offset.to_string(), limit.to_string());
        let failure = logic::decode_all(&mut s, &data, offset.as_bytes(), limit.as_bytes());
        prop_assert!(failure.is_none(), "{}", failure.unwrap_or_default());
    }

    #[test]
    fn random_bytes_get_replies_not_panics(data in proptest::collection::vec(any::<u8>(), 0..64)) {
        let failure = logic::script_decoders(&mut session(), &data);
        prop_assert!(failure.is_none(), "{}", failure.unwrap_or_default());
    }

    #[test]
    fn bit_operations_take_any_number(x in any::<f64>(), n in any::<f64>(), i in any::<i64>()) {
        let mut s = session();
        let (x, n, i) = (format!("{x:e}"), format!("{n:e}"), i.to_string());
        for f in ["tobit", "bnot", "bswap"] {
            eval(&mut s, &format!("return bit.{f}(tonumber(ARGV[1]))"), &[x.as_bytes()]);
        }
        for f in ["band", "bor", "bxor", "lshift", "rshift", "arshift", "rol", "ror", "tohex"] {
            for (a, b) in [(&x, &n), (&x, &i), (&i, &n)] {
                eval(&mut s, &format!("return bit.{f}(tonumber(ARGV[1]), tonumber(ARGV[2]))"), &[a.as_bytes(), b.as_bytes()]);
            }
        }
    }
}

/// A deep comparison of two Lua values (tables by contents).
const SAME: &str = "local function same(a, b) \
  if type(a) ~= type(b) then return false end \
  if type(a) ~= 'table' then return a == b end \
  for k, v in pairs(a) do if not same(v, b[k]) then return false end end \
  for k in pairs(b) do if a[k] == nil then return false end end \
  return true end ";

#[test]
fn valid_encodings_round_trip() {
    let mut s = session();
    for (pack, unpack) in [("cmsgpack.pack", "cmsgpack.unpack"), ("cjson.encode", "cjson.decode")] {
        for seed in seeds(&mut s, pack) {
            // A table's keys come in no set order: the bytes may differ, the values may not.
            let script = format!("{SAME} local v = {unpack}(ARGV[1]) return same(v, {unpack}({pack}(v))) and 1 or 0");
            assert_eq!(eval(&mut s, &script, &[&seed]), Reply::Int(1), "{pack} of {unpack}");
        }
    }
}

/// Nesting deeper than the decoders allow is an error reply, not a stack
/// overflow: msgpack arrays and maps of one element each, JSON brackets,
/// and a script's own deep table returned as its reply.
#[test]
fn deep_nesting_is_an_error_not_a_crash() {
    let mut s = session();
    for (depth, fits) in [(999usize, true), (1_001, false), (100_000, false)] {
        for (open, key) in [(0x91u8, &[][..]), (0x81, &[0x01][..])] {
            let mut msgpack = Vec::new();
            for _ in 0..depth {
                msgpack.push(open);
                msgpack.extend_from_slice(key);
            }
            msgpack.push(0x01);
            let script = "local ok, v = pcall(cmsgpack.unpack, ARGV[1]) if ok then return 'unpacked' end return v";
            let r = eval(&mut s, script, &[&msgpack]);
            if fits {
                assert_eq!(r, Reply::Bulk(b"unpacked".to_vec()), "{depth} deep");
            } else {
                assert!(matches!(&r, Reply::Bulk(e) if e.starts_with(b"stack overflow")), "{depth} deep: {r:?}");
            }
        }
        // cjson's default depth limit is 1,000 too.
        let json = format!("{}1{}", "[".repeat(depth), "]".repeat(depth));
        let script = "local ok, v = pcall(cjson.decode, ARGV[1]) if ok then return 'decoded' end return v";
        let r = eval(&mut s, script, &[json.as_bytes()]);
        if fits {
            assert_eq!(r, Reply::Bulk(b"decoded".to_vec()), "{depth} deep JSON");
        } else {
            let want = b"Found too many nested data structures (1001) at character 1001";
            assert_eq!(r, Reply::Bulk(want.to_vec()), "{depth} deep JSON");
        }
    }
    let r = eval(&mut s, "local t = 1 for i = 1, 100000 do t = {t} end return t", &[]);
    // As in Redis: the levels that fit, the error where they stop.
    assert!(format!("{r:?}").ends_with(&format!("Error(\"ERR reached lua stack limit\"){}", "])".repeat(1001))));
    assert_eq!(s.call(&["PING"]), Reply::Simple("PONG".into()));
}

/// `cjson.encode` decides array or object as lua-cjson does: integer keys
/// from 1 make an array with nulls in its gaps, unless it is excessively
/// sparse (keys past twice their count and past 10), which is an error —
/// or an object once `encode_sparse_array(true)` says so.
#[test]
fn cjson_encodes_sparse_arrays_as_lua_cjson_does() {
    let mut s = session();
    let cases: [(&str, Reply); 7] = [
        ("{[3] = 1}", Reply::Bulk(b"[null,null,1]".to_vec())),
        ("{1, 2, nil, 4}", Reply::Bulk(b"[1,2,null,4]".to_vec())),
        ("{[10] = 'x'}", Reply::Bulk(b"[null,null,null,null,null,null,null,null,null,\"x\"]".to_vec())),
        ("{}", Reply::Bulk(b"{}".to_vec())),
        ("{[1.5] = 1}", Reply::Bulk(b"{\"1.5\":1}".to_vec())),
        ("{[11] = 1}", Reply::Error("x".into())),
        ("{[1000000000] = 1}", Reply::Error("x".into())),
    ];
    for (table, want) in cases {
        let r = eval(&mut s, &format!("return cjson.encode({table})"), &[]);
        match want {
            Reply::Error(_) => {
                assert!(matches!(&r, Reply::Error(e) if e.contains("excessively sparse array")), "{table}: {r:?}")
            }
            want => assert_eq!(r, want, "{table}"),
        }
    }
    // Converted to objects instead; the settings read back.
    let r = eval(&mut s, "return {cjson.encode_sparse_array(true)}", &[]);
    assert_eq!(r, Reply::Array(vec![Reply::Int(1), Reply::Int(2), Reply::Int(10)]));
    assert_eq!(
        eval(&mut s, "return cjson.encode({[1000000000] = 1})", &[]),
        Reply::Bulk(b"{\"1000000000\":1}".to_vec())
    );
    // Ratio 0 allows any sparseness: an array past the memory limit is an
    // error, not the server's memory.
    eval(&mut s, "cjson.encode_sparse_array(false, 0)", &[]);
    let r = eval(&mut s, "return #cjson.encode({[1000000000] = 1})", &[]);
    assert!(matches!(&r, Reply::Error(e) if e.contains("not enough memory")), "{r:?}");
    // Bad settings, in lua-cjson's words (which number every argument #1).
    let r = eval(&mut s, "return cjson.encode_sparse_array(false, 1, -1)", &[]);
    assert!(
        matches!(&r, Reply::Error(e) if e.contains("bad argument #1 to 'encode_sparse_array' (expected integer between 0 and 2147483647)")),
        "{r:?}"
    );
    let r = eval(&mut s, "return cjson.encode_sparse_array('maybe')", &[]);
    assert!(matches!(&r, Reply::Error(e) if e.contains("(invalid option 'maybe')")), "{r:?}");
    // Settings last: they are the interpreter's, as in Redis, and a bad
    // safe limit still set the ratio before it (false reads back as nil).
    let r = eval(&mut s, "return {cjson.encode_sparse_array()}", &[]);
    assert_eq!(r, Reply::Array(vec![Reply::Nil, Reply::Int(1), Reply::Int(10)]));
}

/// Library corners where Tembo answered unlike redis-server 7.0.15, each
/// reply as that server gives it (an error by the text it contains).
#[test]
fn library_corners_answer_as_redis_7_0() {
    let mut s = session();
    let bulk = |b: &[u8]| Reply::Bulk(b.to_vec());
    let err = |e: &str| Reply::Error(e.to_string());
    let cases: Vec<(&str, Reply)> = vec![
        // %.14g numbers; a script's strings are bytes, DEL escaped.
        ("cjson.encode(2^53)", bulk(b"9.007199254741e+15")),
        ("cjson.encode({[2^53] = 1, [1.5] = 2}) == '{\"1.5\":2,\"9.007199254741e+15\":1}' or cjson.encode({[2^53] = 1, [1.5] = 2}) == '{\"9.007199254741e+15\":1,\"1.5\":2}'", Reply::Int(1)),
        ("cjson.encode('\\127\\128\\255\\8\\12')", bulk(b"\"\\u007f\x80\xff\\b\\f\"")),
        // Errors with the script's position, in lua-cjson's words.
        ("cjson.encode({[true] = 1})", err("user_script:1: Cannot serialise boolean: table key must be a number or string")),
        ("cjson.encode()", err("user_script:1: bad argument #1 to 'encode' (expected 1 argument)")),
        ("cjson.encode(1/0)", err("user_script:1: Cannot serialise number: must not be NaN or Inf")),
        // lua-cmsgpack: a uint64 through int64; unpack_full's offsets and messages.
        ("cmsgpack.unpack('\\207\\255\\255\\255\\255\\255\\255\\255\\255')", Reply::Int(-1)),
        ("{cmsgpack.unpack_one('\\1\\2\\3', 4)}", err("user_script:1: Start offset 4 greater than input length 3.")),
        ("{cmsgpack.unpack_limit('\\1\\2\\3', 0)}", Reply::Array(vec![Reply::Int(1), Reply::Int(2), Reply::Int(3)])),
        ("{cmsgpack.unpack_limit('\\1\\2\\3', 2)}", Reply::Array(vec![Reply::Int(2), Reply::Int(1), Reply::Int(2)])),
        ("{cmsgpack.unpack_limit('\\1\\2\\3', -1)}", err("user_script:1: Invalid request to unpack with offset of 0 and limit of 3.")),
        ("cmsgpack.pack()", err("user_script:1: bad argument #0 to 'pack' (MessagePack pack needs input.)")),
        // LuaBitOp: round to nearest, 0 hex digits, its argument errors.
        ("bit.bxor(1.5, 2)", Reply::Int(0)),
        ("bit.tobit(2.5)", Reply::Int(2)),
        ("bit.tohex(1, 0)", bulk(b"")),
        ("bit.tohex(-1, -4)", bulk(b"FFFF")),
        ("bit.band()", err("user_script:1: bad argument #1 to 'band' (number expected, got no value)")),
        // Numbers past the integers reply as C's cast gives them.
        ("math.huge", Reply::Int(i64::MIN)),
        ("cmsgpack.unpack(cmsgpack.pack(2^63))", Reply::Int(i64::MIN)),
        ("{coroutine.resume(1)}", err("user_script:1: bad argument #1 to 'resume' (coroutine expected)")),
        // lua-cjson's decoder: its leniency (strtod numbers) and its errors.
        ("cjson.decode('0x10')", Reply::Int(16)),
        ("cjson.decode(' +7 ')", Reply::Int(7)),
        ("cjson.decode('Infinity')", Reply::Int(i64::MIN)),
        ("cjson.decode('[1,2,]')", err("user_script:1: Expected value but found T_ARR_END at character 6")),
        ("cjson.decode('{\"a\":1,}')", err("Expected object key string but found T_OBJ_END at character 8")),
        (r#"cjson.decode('"\\ud800"')"#, err("Expected value but found invalid unicode escape code at character 2")),
        ("cjson.decode('')", err("Expected value but found T_END at character 1")),
        ("cjson.decode('[1] x')", err("Expected the end but found invalid token at character 5")),
        (r#"cjson.decode('"\\u00e9\\ud83d\\ude00"')"#, bulk("\u{e9}\u{1f600}".as_bytes())),
        // Numbers too small for mlua's integer test keep their value.
        ("cjson.encode({1e-20, -0.0})", bulk(b"[1e-20,-0]")),
        ("tostring(cjson.decode('1e-20'))", bulk(b"1e-20")),
        ("tostring(cmsgpack.unpack(cmsgpack.pack({1e-20}))[1])", bulk(b"1e-20")),
        // redis.status_reply / error_reply take one string (no number):
        // else they give an error table; redis.log's argument checks.
        ("redis.status_reply(123)", err("ERR wrong number or type of arguments")),
        ("redis.error_reply({})", err("ERR wrong number or type of arguments")),
        ("redis.status_reply('a', 'b')", err("ERR wrong number or type of arguments")),
        ("redis.status_reply('12')", Reply::Simple("12".into())),
        ("redis.log(redis.LOG_DEBUG)", err("redis.log() requires two arguments or more.")),
        ("redis.log(10, 'x')", err("Invalid debug level.")),
        ("redis.log(0/0, 'x')", err("Invalid debug level.")),
        ("redis.log('x', 'y')", err("First argument must be a number (log level).")),
        ("redis.log('1', 'y', {}, 2, nil)", Reply::Nil),
        ("redis.log(-0.5, 'y')", Reply::Nil),
    ];
    for (expr, want) in cases {
        let got = eval(&mut s, &format!("return {expr}"), &[]);
        match (&got, &want) {
            (Reply::Error(g), Reply::Error(w)) => assert!(g.contains(w.as_str()), "{expr}: {g}"),
            _ => assert_eq!(got, want, "{expr}"),
        }
    }
}

/// Tables too big to hold as mlua references (some thousands) encode, and
/// a depth setting past 1,000 does not lift the nesting limit (each level
/// is a recursion holding a reference).
#[test]
fn big_tables_encode_and_depth_settings_keep_the_limit() {
    let mut s = session();
    let script = "local t = {} for i = 1, 20000 do t['k' .. i] = i end \
                  local a = {} for i = 1, 20000 do a[i] = 'v' .. i end \
                  local n = 0 for _ in pairs(cjson.decode(cjson.encode(t))) do n = n + 1 end \
                  return {n, #cjson.decode(cjson.encode(a)), #cmsgpack.unpack(cmsgpack.pack(a))}";
    let want = Reply::Array(vec![Reply::Int(20000), Reply::Int(20000), Reply::Int(20000)]);
    assert_eq!(eval(&mut s, script, &[]), want);
    let deep = format!("{}1{}", "[".repeat(9000), "]".repeat(9000));
    let script = "cjson.decode_max_depth(1e9) cjson.encode_max_depth(1e9) \
                  local ok, e = pcall(cjson.decode, ARGV[1]) \
                  local t = {} t[1] = t local ok2, e2 = pcall(cjson.encode, t) return {e, e2}";
    let r = eval(&mut s, script, &[deep.as_bytes()]);
    let Reply::Array(errs) = &r else { panic!("{r:?}") };
    assert!(
        matches!(&errs[0], Reply::Bulk(e) if e.starts_with(b"Found too many nested data structures (1001)")),
        "{r:?}"
    );
    assert!(
        matches!(&errs[1], Reply::Bulk(e) if e.starts_with(b"Cannot serialise, excessive nesting (1001)")),
        "{r:?}"
    );
}
