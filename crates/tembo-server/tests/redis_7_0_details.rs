//! Details of Redis 7.0.15's behaviour: replies that depend on the order in
//! which it looks a key up and checks its arguments, on whether a write
//! changed anything, and the compression of DUMP payloads. Each case was
//! found by the differential test (`tests/server/differential.py`) with
//! redis-server 7.0.15 as the oracle; the expected replies here are
//! redis-server's.

use std::sync::Arc;

use tembo_server::resp::Reply;
use tembo_server::Session;
use tembo_store::{Db, Options};

fn session() -> Session {
    Session::new(Arc::new(Db::in_memory(&Options::with_size(16 << 20)).unwrap())).unwrap()
}

fn err(text: &str) -> Reply {
    Reply::Error(text.to_string())
}

/// WATCH `key`, run `write`, then EXEC a transaction of `queued`: EXEC's
/// reply (a nil array when the write broke the WATCH).
fn exec_after_watch(s: &mut Session, key: &str, write: &[&str], queued: &[&str]) -> Reply {
    assert_eq!(s.call(&["WATCH", key]), Reply::Simple("OK".into()));
    s.call(write);
    assert_eq!(s.call(&["MULTI"]), Reply::Simple("OK".into()));
    assert_eq!(s.call(queued), Reply::Simple("QUEUED".into()));
    s.call(&["EXEC"])
}

#[test]
fn bitcount_looks_the_key_up_before_reading_its_range() {
    let mut s = session();
    // A missing key counts 0 whatever follows it.
    assert_eq!(s.call(&["BITCOUNT", "nokey", "-3", "-6", "FOO"]), Reply::Int(0));
    assert_eq!(s.call(&["BITCOUNT", "nokey", "d"]), Reply::Int(0));
    assert_eq!(s.call(&["BITCOUNT", "nokey", "", "4"]), Reply::Int(0));
    // A key of another type is refused before the range is read.
    assert_eq!(s.call(&["SADD", "set", "a"]), Reply::Int(1));
    assert_eq!(
        s.call(&["BITCOUNT", "set", "x"]),
        err("WRONGTYPE Operation against a key holding the wrong kind of value")
    );
    // On a string: the range is checked, and an empty negative range
    // answers 0 before the unit is read.
    assert_eq!(s.call(&["SET", "s", "foobar"]), Reply::Simple("OK".into()));
    assert_eq!(s.call(&["BITCOUNT", "s", "d"]), err("ERR syntax error"));
    assert_eq!(s.call(&["BITCOUNT", "s", "-1", "-5", "FOO"]), Reply::Int(0));
    assert_eq!(s.call(&["BITCOUNT", "s", "0", "-1", "FOO"]), err("ERR syntax error"));
    assert_eq!(s.call(&["BITCOUNT", "s", "1", "1", "BYTE"]), Reply::Int(6));
}

#[test]
fn bitpos_reads_its_bit_as_an_integer_first() {
    let mut s = session();
    assert_eq!(s.call(&["BITPOS", "nokey", "abc"]), err("ERR value is not an integer or out of range"));
    assert_eq!(s.call(&["BITPOS", "nokey", "01"]), err("ERR value is not an integer or out of range"));
    assert_eq!(s.call(&["BITPOS", "nokey", "2"]), err("ERR The bit argument must be 1 or 0."));
    assert_eq!(s.call(&["BITPOS", "nokey", "1"]), Reply::Int(-1));
    assert_eq!(s.call(&["BITPOS", "nokey", "0"]), Reply::Int(0));
}

#[test]
fn lpos_names_the_option_whose_number_is_bad() {
    let mut s = session();
    assert_eq!(s.call(&["RPUSH", "l", "a", "b", "a"]), Reply::Int(3));
    assert_eq!(s.call(&["LPOS", "l", "a", "COUNT", "abc"]), err("ERR COUNT can't be negative"));
    assert_eq!(s.call(&["LPOS", "l", "a", "COUNT", "-1"]), err("ERR COUNT can't be negative"));
    assert_eq!(s.call(&["LPOS", "l", "a", "MAXLEN", "abc"]), err("ERR MAXLEN can't be negative"));
    assert_eq!(s.call(&["LPOS", "l", "a", "MAXLEN", "-1"]), err("ERR MAXLEN can't be negative"));
    assert_eq!(s.call(&["LPOS", "l", "a", "RANK", "abc"]), err("ERR value is not an integer or out of range"));
    assert_eq!(s.call(&["LPOS", "l", "a", "COUNT", "0"]), Reply::Array(vec![Reply::Int(0), Reply::Int(2)]));
}

#[test]
fn geosearch_box_parses_both_sides_before_judging_signs() {
    let mut s = session();
    assert_eq!(s.call(&["GEOADD", "g", "1", "1", "a"]), Reply::Int(1));
    let search =
        |s: &mut Session, w: &str, h: &str| s.call(&["GEOSEARCH", "g", "FROMMEMBER", "a", "BYBOX", w, h, "km"]);
    assert_eq!(search(&mut s, "-1", "x"), err("ERR need numeric height"));
    assert_eq!(search(&mut s, "x", "-1"), err("ERR need numeric width"));
    assert_eq!(search(&mut s, "-1", "1"), err("ERR height or width cannot be negative"));
    assert_eq!(search(&mut s, "1", "-1"), err("ERR height or width cannot be negative"));
    assert_eq!(search(&mut s, "1", "1"), Reply::Array(vec![Reply::Bulk(b"a".to_vec())]));
}

/// SETBIT of a bit that already holds the value changes nothing, so a
/// WATCH on the key stays whole (Redis 7.0); one that flips a bit, or
/// grows the string, breaks it.
#[test]
fn setbit_that_changes_nothing_breaks_no_watch() {
    let mut s = session();
    // "0.25": byte 2 is '2' (0x32), whose bit 18 (third from the top) is set.
    assert_eq!(s.call(&["SET", "k", "0.25"]), Reply::Simple("OK".into()));
    let exec_after = |s: &mut Session, write: &[&str]| exec_after_watch(s, "k", write, &["GET", "k"]);
    assert_eq!(s.call(&["GETBIT", "k", "18"]), Reply::Int(1));
    assert!(matches!(exec_after(&mut s, &["SETBIT", "k", "18", "1"]), Reply::Array(_)));
    assert_eq!(s.call(&["GETBIT", "k", "17"]), Reply::Int(0));
    assert!(matches!(exec_after(&mut s, &["SETBIT", "k", "17", "0"]), Reply::Array(_)));
    assert_eq!(exec_after(&mut s, &["SETBIT", "k", "17", "1"]), Reply::NilArray);
    // A clear bit past the end grows the string: a change.
    assert_eq!(exec_after(&mut s, &["SETBIT", "k", "100", "0"]), Reply::NilArray);
    assert_eq!(s.call(&["STRLEN", "k"]), Reply::Int(13));
}

/// DUMP compresses strings as Redis does (`rdbcompression yes`): the
/// payload of a long run of zeros is small, and restores to the same value.
#[test]
fn dump_compresses_strings() {
    let mut s = session();
    assert_eq!(s.call(&["SETBIT", "k", "8388607", "1"]), Reply::Int(0));
    let Reply::Bulk(payload) = s.call(&["DUMP", "k"]) else { panic!("DUMP gave no payload") };
    assert!(payload.len() < 20_000, "a 1 MiB string of zeros dumped to {} bytes", payload.len());
    let mut args: Vec<Vec<u8>> = ["RESTORE", "k2", "0"].iter().map(|a| a.as_bytes().to_vec()).collect();
    args.push(payload);
    assert_eq!(s.call(&args), Reply::Simple("OK".into()));
    assert_eq!(s.call(&["STRLEN", "k2"]), Reply::Int(1 << 20));
    assert_eq!(s.call(&["GETBIT", "k2", "8388607"]), Reply::Int(1));
    assert_eq!(s.call(&["BITCOUNT", "k2"]), Reply::Int(1));
}

/// PFDEBUG GETREG and TODENSE make a sparse HyperLogLog dense without
/// changing its registers: in Redis 7.0 that breaks no WATCH. PFADD that
/// changes a register does.
#[test]
fn pfdebug_densifying_breaks_no_watch() {
    let mut s = session();
    let watched_exec = |s: &mut Session, write: &[&str]| exec_after_watch(s, "h", write, &["PFCOUNT", "h"]);
    assert_eq!(s.call(&["PFADD", "h", "a", "b", "c"]), Reply::Int(1));
    assert_eq!(s.call(&["PFDEBUG", "ENCODING", "h"]), Reply::Simple("sparse".into()));
    assert_eq!(watched_exec(&mut s, &["PFDEBUG", "GETREG", "h"]), Reply::Array(vec![Reply::Int(3)]));
    assert_eq!(s.call(&["PFDEBUG", "ENCODING", "h"]), Reply::Simple("dense".into()));
    assert_eq!(s.call(&["DEL", "h"]), Reply::Int(1));
    assert_eq!(s.call(&["PFADD", "h", "a"]), Reply::Int(1));
    assert_eq!(watched_exec(&mut s, &["PFDEBUG", "TODENSE", "h"]), Reply::Array(vec![Reply::Int(1)]));
    assert_eq!(watched_exec(&mut s, &["PFADD", "h", "z"]), Reply::NilArray);
}

/// RPOPLPUSH / LMOVE of a one-element list onto itself leaves the list as
/// it was: Redis keeps the key and its TTL (Tembo dropped the key when the
/// pop emptied it and made a new one without the TTL), and a WATCH on it
/// breaks as for any write.
#[test]
fn rotating_a_one_element_list_keeps_its_ttl() {
    let mut s = session();
    assert_eq!(s.call(&["RPUSH", "l", "A"]), Reply::Int(1));
    assert_eq!(s.call(&["PEXPIRE", "l", "25979416"]), Reply::Int(1));
    assert_eq!(s.call(&["RPOPLPUSH", "l", "l"]), Reply::Bulk(b"A".to_vec()));
    assert_eq!(s.call(&["LMOVE", "l", "l", "LEFT", "RIGHT"]), Reply::Bulk(b"A".to_vec()));
    assert!(matches!(s.call(&["PTTL", "l"]), Reply::Int(t) if t > 25_000_000), "the TTL was lost");
    assert_eq!(s.call(&["LRANGE", "l", "0", "-1"]), Reply::Array(vec![Reply::Bulk(b"A".to_vec())]));
    assert_eq!(exec_after_watch(&mut s, "l", &["RPOPLPUSH", "l", "l"], &["LLEN", "l"]), Reply::NilArray);
    // Two elements rotate, and the TTL stays too.
    assert_eq!(s.call(&["RPUSH", "l", "B"]), Reply::Int(2));
    assert_eq!(s.call(&["RPOPLPUSH", "l", "l"]), Reply::Bulk(b"B".to_vec()));
    assert_eq!(
        s.call(&["LRANGE", "l", "0", "-1"]),
        Reply::Array(vec![Reply::Bulk(b"B".to_vec()), Reply::Bulk(b"A".to_vec())])
    );
    assert!(matches!(s.call(&["PTTL", "l"]), Reply::Int(t) if t > 25_000_000), "the TTL was lost");
}

/// SORT's numeric mode reads weights with C's `strtod`, as Redis 7.0
/// does: an empty string weighs 0, leading blanks and hex floats are
/// numbers; a trailing blank, or a value that overflows, is an error.
#[test]
fn sort_reads_weights_as_strtod_does() {
    let mut s = session();
    assert_eq!(s.call(&["RPUSH", "l", "1.5", "", " 2", "0x10", "-1"]), Reply::Int(5));
    let bulks = |xs: &[&str]| Reply::Array(xs.iter().map(|x| Reply::Bulk(x.as_bytes().to_vec())).collect());
    assert_eq!(s.call(&["SORT", "l"]), bulks(&["-1", "", "1.5", " 2", "0x10"]));
    assert_eq!(s.call(&["RPUSH", "l", "1 "]), Reply::Int(6));
    let refused = err("ERR One or more scores can't be converted into double");
    assert_eq!(s.call(&["SORT", "l"]), refused);
    assert_eq!(s.call(&["DEL", "l"]), Reply::Int(1));
    assert_eq!(s.call(&["RPUSH", "l", "1e400"]), Reply::Int(1));
    assert_eq!(s.call(&["SORT", "l"]), refused);
    // A missing BY weight is 0, and ties fall back to the elements.
    assert_eq!(s.call(&["RPUSH", "m", "b", "a"]), Reply::Int(2));
    assert_eq!(s.call(&["SORT", "m", "BY", "w_*"]), bulks(&["a", "b"]));
}

/// Redis 7.0 arithmetic that overflows, reproduced: LPOS with RANK
/// LONG_MIN returns every match whatever COUNT says; RESTORE with a TTL
/// that overflows once the time is added counts the key as expired.
#[test]
fn overflowing_arithmetic_as_redis_does() {
    let mut s = session();
    assert_eq!(s.call(&["LPUSH", "l", "2", "a", "10", "a", ""]), Reply::Int(5));
    let min = "-9223372036854775808";
    assert_eq!(
        s.call(&["LPOS", "l", "a", "COUNT", "1", "RANK", min]),
        Reply::Array(vec![Reply::Int(3), Reply::Int(1)])
    );
    assert_eq!(s.call(&["LPOS", "l", "a", "RANK", min]), Reply::Int(3));
    assert_eq!(s.call(&["SET", "k", "v"]), Reply::Simple("OK".into()));
    let Reply::Bulk(payload) = s.call(&["DUMP", "k"]) else { panic!("DUMP gave no payload") };
    let restore = |s: &mut Session, ttl: &str| {
        let mut args: Vec<Vec<u8>> = ["RESTORE", "r", ttl].iter().map(|a| a.as_bytes().to_vec()).collect();
        args.push(payload.clone());
        args.push(b"REPLACE".to_vec());
        s.call(&args)
    };
    assert_eq!(restore(&mut s, "9223372036854775000"), Reply::Simple("OK".into()));
    assert_eq!(s.call(&["EXISTS", "r"]), Reply::Int(0));
    assert_eq!(restore(&mut s, "100000"), Reply::Simple("OK".into()));
    assert_eq!(s.call(&["EXISTS", "r"]), Reply::Int(1));
}

/// An expiry at `i64::MAX` ms (PEXPIREAT takes it) in seconds: Redis's
/// build rounds it unsigned, so EXPIRETIME is i64::MAX / 1000 rounded up,
/// not a wrapped negative (and no overflow panic in a debug build).
#[test]
fn expiretime_of_the_largest_expiry_rounds_without_overflow() {
    let mut s = session();
    assert_eq!(s.call(&["SET", "k", "v"]), Reply::Simple("OK".into()));
    assert_eq!(s.call(&["PEXPIREAT", "k", "9223372036854775807"]), Reply::Int(1));
    assert_eq!(s.call(&["EXPIRETIME", "k"]), Reply::Int(9_223_372_036_854_776));
    assert_eq!(s.call(&["PEXPIRETIME", "k"]), Reply::Int(i64::MAX));
    assert!(matches!(s.call(&["TTL", "k"]), Reply::Int(t) if t > 9_000_000_000_000_000));
}
