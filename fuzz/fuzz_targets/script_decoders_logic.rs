// The logic of the `script_decoders` fuzz target, shared with
// `crates/tembo-server/tests/script_decoders.rs` (both `include!` this
// file into a module of their own, so it holds items only and no inner
// attributes).
//
// The input is bytes a script hands to the decoders Redis gives scripts:
// `cmsgpack.unpack` (and `unpack_one` / `unpack_limit` with an offset and
// a limit), `cjson.decode`, and each decoded value encoded again, and
// `struct`'s pack, unpack and size with formats taken from the input. Every
// call must answer — a value or an error reply — and never with the
// "internal error" of a panicking command; and never overflow the stack
// (which would abort the process: the fuzzer or the test reports it).

use std::sync::Arc;

use tembo_server::resp::Reply;
use tembo_server::Session;
use tembo_store::{Db, Options};

/// The scripts each input goes through: ARGV[1] is the input, ARGV[2] an
/// offset, ARGV[3] a limit.
pub const UNPACKS: &[&str] = &[
    "return cmsgpack.unpack(ARGV[1])",
    "return {cmsgpack.unpack_one(ARGV[1], tonumber(ARGV[2]))}",
    "return {cmsgpack.unpack_limit(ARGV[1], tonumber(ARGV[3]), tonumber(ARGV[2]))}",
    "return cjson.decode(ARGV[1])",
    "return cjson.encode(cjson.decode(ARGV[1]))",
    "return cmsgpack.pack(cmsgpack.unpack(ARGV[1]))",
    // `struct` with a format taken from the input itself.
    "return {struct.unpack(string.sub(ARGV[1], 1, 6), ARGV[1], tonumber(ARGV[2]))}",
    "return {struct.unpack(ARGV[1], ARGV[3] .. ARGV[2] .. ARGV[1])}",
    "return struct.pack(string.sub(ARGV[1], 1, 6), tonumber(ARGV[2]) or 1, ARGV[3], ARGV[1], -1.5)",
    "return struct.size(ARGV[1])",
];

/// A session on a small in-memory pool.
pub fn session() -> Session {
    Session::new(Arc::new(Db::in_memory(&Options::with_size(16 << 20)).expect("db"))).expect("session")
}

/// Runs `script` with `args` as ARGV: the reply, or what is wrong with it
/// (a panic's "internal error" reply).
pub fn eval(s: &mut Session, script: &str, args: &[&[u8]]) -> Result<Reply, String> {
    let mut call: Vec<&[u8]> = vec![b"EVAL", script.as_bytes(), b"0"];
    call.extend_from_slice(args);
    match s.call(&call) {
        Reply::Error(e) if e.contains("internal error") => Err(format!("{script} on {args:02x?}: {e}")),
        r => Ok(r),
    }
}

/// Every script of [`UNPACKS`] on `data` with `offset` and `limit`, then a
/// PING; the first thing wrong, if any.
pub fn decode_all(s: &mut Session, data: &[u8], offset: &[u8], limit: &[u8]) -> Option<String> {
    for script in UNPACKS {
        if let Err(e) = eval(s, script, &[data, offset, limit]) {
            return Some(e);
        }
    }
    match s.call(&["PING"]) {
        Reply::Simple(p) if p == "PONG" => None,
        other => Some(format!("PING after the decoders: {other:?}")),
    }
}

/// The fuzz entry: the first byte picks the offset, the second the limit,
/// the rest is the input.
pub fn script_decoders(s: &mut Session, data: &[u8]) -> Option<String> {
    let offset = data.first().map_or(0, |&b| i64::from(b as i8)).to_string();
    let limit = data.get(1).map_or(0, |&b| i64::from(b as i8)).to_string();
    decode_all(s, data.get(2..).unwrap_or(&[]), offset.as_bytes(), limit.as_bytes())
}
