//! The `damaged_record` fuzz target's logic (see
//! `fuzz/fuzz_targets/damaged_record_logic.rs`), run over seeded damage
//! without cargo-fuzz. A key whose records are damaged (a flipped bit, a
//! word set to an extreme, a record cut short or lengthened) is bad input
//! like any other: every command on it must answer — a value, nil or an
//! error reply — and never panic, loop for ever or allocate without bound.
//!
//! For each type, the key's metadata record, or (every other time) another
//! of its records (an element, a score, a string chunk, a stream node or
//! group, an expiry entry, a deleted collection's reclaim entry, a
//! library), is replaced in the pool itself by a damaged copy (or, one
//! time in four, moved to a damaged key), and a fresh session runs the
//! battery and its background work. `TEMBO_SEED` picks
//! the damage; CI fixes it. Debug builds check arithmetic overflow, so a
//! length or index that overflows shows here as a panic too.

use std::sync::mpsc;
use std::time::Duration;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

#[allow(dead_code)]
mod logic {
    include!("../../../fuzz/fuzz_targets/damaged_record_logic.rs");
}

/// Damaged copies tried per type.
const DAMAGES: usize = 60;

/// A damaged copy of `rec`.
fn damage(rec: &[u8], rng: &mut StdRng) -> Vec<u8> {
    if rec.is_empty() {
        return vec![rng.gen()];
    }
    let mut d = rec.to_vec();
    match rng.gen_range(0..5) {
        0 => {
            let bit = rng.gen_range(0..d.len() * 8);
            d[bit / 8] ^= 1 << (bit % 8);
        }
        1 => {
            for _ in 0..rng.gen_range(1..4) {
                let at = rng.gen_range(0..d.len());
                d[at] = rng.gen();
            }
        }
        2 => d.truncate(rng.gen_range(0..d.len())),
        3 => d.extend((0..rng.gen_range(1..24)).map(|_| rng.gen::<u8>())),
        _ => {
            // An 8-byte word at any offset set to an extreme.
            let extremes = [0u64, 1, u64::MAX, u64::MAX - 1, 1 << 63, 1 << 32, u32::MAX as u64];
            let w = extremes[rng.gen_range(0..extremes.len())].to_be_bytes();
            if d.len() >= 8 {
                let at = rng.gen_range(0..=d.len() - 8);
                d[at..at + 8].copy_from_slice(&w);
            }
        }
    }
    d
}

#[test]
fn damaged_records_get_replies_not_panics() {
    let seed = std::env::var("TEMBO_SEED").ok().and_then(|s| s.parse().ok()).unwrap_or(0x6d65_7461u64);
    let mut rng = StdRng::seed_from_u64(seed);
    let mut failures = Vec::new();
    for (t, (name, _)) in logic::setups().into_iter().enumerate() {
        for i in 0..DAMAGES {
            let db = logic::prepared(t);
            let recs = logic::records(&db);
            if name == "garbage" {
                let reclaim = recs.iter().filter(|(k, _)| k.first() == Some(&tembo_server::encoding::GARBAGE));
                assert_eq!(reclaim.count(), 1, "the deleted hash waits for the reclaimer");
            }
            let which = if i % 2 == 0 { 0 } else { rng.gen_range(0..recs.len()) };
            let (key, rec) = &recs[which];
            let damaged = damage(rec, &mut rng);
            if i % 4 == 3 {
                // The damage moves the record: its key is damaged instead.
                let mut moved = damage(key, &mut rng);
                if moved.is_empty() {
                    moved.push(rng.gen()); // the store takes no empty key
                }
                db.delete(key).expect("delete the record");
                db.put(&moved, rec).expect("put the moved record");
            } else {
                db.put(key, &damaged).expect("put the damaged record");
            }
            // A watchdog: a command that loops for ever fails the test.
            let (tx, rx) = mpsc::channel();
            let worker = db.clone();
            std::thread::spawn(move || {
                let _ = tx.send(logic::run_battery(worker));
            });
            match rx.recv_timeout(Duration::from_secs(60)) {
                Ok(None) => {}
                Ok(Some(f)) => failures.push(format!("{name} #{i} (record {key:02x?} = {damaged:02x?}): {f}")),
                Err(mpsc::RecvTimeoutError::Disconnected) => failures
                    .push(format!("{name} #{i} (record {key:02x?} = {damaged:02x?}): the background work panicked")),
                Err(mpsc::RecvTimeoutError::Timeout) => panic!(
                    "{name} #{i}: the battery did not finish in 60 s (record {key:02x?} = {damaged:02x?}, seed {seed})"
                ),
            }
        }
    }
    assert!(
        failures.is_empty(),
        "seed {seed}: {} damaged records made commands panic:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

/// The fuzz entry point itself, over a few inputs of every shape.
#[test]
fn fuzz_entry_takes_any_input() {
    for input in [&b""[..], b"\x00", b"\x03\x00", b"\x03\x00\x03", b"\x09\x05\xff\xff\xff\xff"] {
        assert_eq!(logic::damaged_record(input), None, "{input:?}");
    }
}

/// The decoder's checks must not refuse what commands legitimately leave:
/// an exact trim can leave a stream node with no live entry, and an XADD
/// after XSETID lowered the empty stream's top ID appends to it below its
/// first ID (a node whose first ID is past its last).
#[test]
fn a_stream_node_below_a_lowered_top_id_still_reads() {
    use std::sync::Arc;
    use tembo_server::resp::Reply;
    let db = Arc::new(tembo_store::Db::in_memory(&tembo_store::Options::with_size(16 << 20)).expect("db"));
    let mut s = tembo_server::Session::new(db.clone()).expect("session");
    for cmd in [
        &["XADD", "k", "1-0", "f", "v"][..],
        &["XADD", "k", "2-0", "f", "v"],
        &["XADD", "k", "3-0", "f", "v"],
        &["XDEL", "k", "3-0"],
        &["XTRIM", "k", "MINID", "3-0"],
        &["XSETID", "k", "0-5"],
        &["XADD", "k", "0-6", "f", "v"],
        &["XADD", "k", "0-7", "g", "w"],
        &["XTRIM", "k", "MAXLEN", "5"],
    ] {
        let r = s.call(cmd);
        assert!(!matches!(r, Reply::Error(_)), "{cmd:?}: {r:?}");
    }
    drop(s);
    // As a restarted server reads it.
    let mut s = tembo_server::Session::new(db).expect("session");
    assert_eq!(s.call(&["XLEN", "k"]), Reply::Int(2));
    let r = s.call(&["XINFO", "STREAM", "k", "FULL"]);
    assert!(!matches!(r, Reply::Error(_)), "XINFO STREAM FULL: {r:?}");
    let r = s.call(&["XRANGE", "k", "-", "+"]);
    assert!(matches!(&r, Reply::Array(a) if a.len() == 2), "XRANGE: {r:?}");
}

/// Sets the element count in the metadata record of `key` (database 0).
fn set_count(db: &tembo_store::Db, key: &[u8], size: u64) {
    use tembo_server::encoding::{meta_user_key, Meta, META};
    let recs = logic::records(db);
    let (k, v) = recs
        .iter()
        .find(|(k, _)| k.first() == Some(&META) && meta_user_key(k) == Some(key))
        .expect("the key's metadata record");
    let mut m = Meta::decode(v).expect("a metadata record that decodes");
    m.size = size;
    db.put(k, &m.encode()).expect("put the damaged record");
}

/// A metadata record counting fewer elements than the key holds: a command
/// removing more than the count, or as many (the count reaches zero with
/// elements left), answers that the key is damaged and applies nothing,
/// on its own and inside MULTI (where the commands around it stand).
#[test]
fn a_count_below_the_elements_refuses_removals_and_applies_nothing() {
    use std::sync::Arc;
    use tembo_server::resp::Reply;
    let hash: &[&str] = &["HSET", "k", "a", "1", "b", "2", "c", "3"];
    let set: &[&str] = &["SADD", "k", "a", "b", "c"];
    let zset: &[&str] = &["ZADD", "k", "1", "a", "2", "b", "3", "c"];
    let list: &[&str] = &["RPUSH", "k", "a", "b", "c"];
    let stream: &[&str] = &["XADD", "k", "1-0", "f", "v"];
    let zall: &[&str] = &["ZRANGEBYSCORE", "k", "-inf", "+inf"];
    // (fill, the damaged count, the removal, a read of every element)
    type Case<'a> = (&'a [&'a str], u64, &'a [&'a str], &'a [&'a str]);
    let cases: [Case; 14] = [
        (hash, 1, &["HDEL", "k", "a", "b", "c"], &["HGETALL", "k"]),
        (hash, 1, &["HDEL", "k", "a"], &["HGETALL", "k"]),
        (set, 1, &["SREM", "k", "a", "b", "c"], &["SMEMBERS", "k"]),
        (set, 1, &["SPOP", "k"], &["SMEMBERS", "k"]),
        (set, 1, &["SMOVE", "k", "dst", "a"], &["SMEMBERS", "k"]),
        (zset, 1, &["ZREM", "k", "a", "b"], zall),
        (zset, 1, &["ZREM", "k", "a"], zall),
        (zset, 1, &["ZREMRANGEBYSCORE", "k", "-inf", "+inf"], zall),
        (zset, 1, &["ZPOPMIN", "k"], zall),
        (zset, 2, &["ZPOPMAX", "k", "5"], zall),
        (list, 1, &["LPOP", "k"], &["LRANGE", "k", "0", "10"]),
        (list, 2, &["RPOP", "k", "2"], &["LRANGE", "k", "0", "10"]),
        (stream, 0, &["XDEL", "k", "1-0"], &["XRANGE", "k", "-", "+"]),
        (stream, 0, &["XTRIM", "k", "MINID", "5"], &["XRANGE", "k", "-", "+"]),
    ];
    for (fill, count, remove, read) in cases {
        let db = Arc::new(tembo_store::Db::in_memory(&tembo_store::Options::with_size(16 << 20)).expect("db"));
        let mut s = tembo_server::Session::new(db.clone()).expect("session");
        assert!(!matches!(s.call(fill), Reply::Error(_)), "{fill:?}");
        if fill[0] == "XADD" {
            assert!(!matches!(s.call(&["XADD", "k", "2-0", "f", "v"]), Reply::Error(_)));
        }
        let whole = s.call(read);
        let true_count = match s.call(&["TYPE", "k"]) {
            Reply::Simple(t) if t == "stream" => 2,
            _ => 3,
        };
        drop(s);
        set_count(&db, b"k", count);
        let mut s = tembo_server::Session::new(db.clone()).expect("session");
        // Lists and streams read only what the count covers.
        let before = s.call(read);
        let r = s.call(remove);
        assert!(matches!(&r, Reply::Error(e) if e.contains("counts fewer elements")), "{remove:?}: {r:?}");
        assert_eq!(s.call(read), before, "{remove:?} removed some elements");
        // Inside MULTI: the refused command alone applies nothing.
        assert_eq!(s.call(&["MULTI"]), Reply::Simple("OK".into()));
        for cmd in [&["SET", "other", "1"][..], remove, &["SET", "after", "2"]] {
            assert_eq!(s.call(cmd), Reply::Simple("QUEUED".into()), "{cmd:?}");
        }
        let r = s.call(&["EXEC"]);
        let Reply::Array(replies) = &r else { panic!("EXEC: {r:?}") };
        assert!(matches!(&replies[1], Reply::Error(e) if e.contains("counts fewer")), "{remove:?} in EXEC: {r:?}");
        assert_eq!(s.call(read), before, "{remove:?} in EXEC removed some elements");
        assert_eq!(
            s.call(&["MGET", "other", "after"]),
            Reply::Array(vec![Reply::Bulk(b"1".to_vec()), Reply::Bulk(b"2".to_vec())])
        );
        assert_eq!(s.call(&["EXISTS", "dst"]), Reply::Int(0), "{remove:?}");
        // With the count mended, every element is there.
        drop(s);
        set_count(&db, b"k", true_count);
        let mut s = tembo_server::Session::new(db).expect("session");
        assert_eq!(s.call(read), whole, "{remove:?} lost elements");
    }
}

/// A key whose metadata does not decode can still be deleted (by DEL,
/// UNLINK or a flush): the user's way out of damage that `tembo pool
/// check` reported. Where the record's version word survived, the key's
/// elements are reclaimed too.
#[test]
fn a_key_whose_metadata_does_not_decode_can_be_deleted() {
    use std::sync::Arc;
    use tembo_server::encoding::{be64, meta_user_key, split_sub, EXPIRES, META, SUB, ZIDX};
    use tembo_server::resp::Reply;
    let cases: [(&[&str], &[&str], &[&str]); 4] = [
        (&["HSET", "k", "a", "1", "b", "2"], &["DEL", "k", "other"], &["HGETALL", "k"]),
        (&["RPUSH", "k", "a", "b"], &["UNLINK", "k"], &["LRANGE", "k", "0", "-1"]),
        (&["SET", "k", "v"], &["DEL", "k"], &["GET", "k"]),
        (&["ZADD", "k", "1", "a"], &["FLUSHDB"], &["ZRANGE", "k", "0", "-1", "WITHSCORES"]),
    ];
    for (fill, remove, read) in cases {
        let db = Arc::new(tembo_store::Db::in_memory(&tembo_store::Options::with_size(16 << 20)).expect("db"));
        let mut s = tembo_server::Session::new(db.clone()).expect("session");
        assert!(!matches!(s.call(fill), Reply::Error(_)), "{fill:?}");
        assert!(!matches!(s.call(&["PEXPIRE", "k", "100000000"]), Reply::Error(_)));
        let whole = s.call(read);
        drop(s);
        let recs = logic::records(&db);
        let (k, v) =
            recs.iter().find(|(k, _)| k.first() == Some(&META) && meta_user_key(k) == Some(b"k")).expect("meta");
        let old_version = v.get(9..17).map_or(0, be64);
        // The type byte damaged; the expiry and version words intact.
        let mut damaged = v.clone();
        damaged[0] = 0xee;
        db.put(k, &damaged).expect("put the damaged record");
        let mut s = tembo_server::Session::new(db.clone()).expect("session");
        let r = s.call(&["TYPE", "k"]);
        assert!(matches!(&r, Reply::Error(e) if e.contains("does not decode") && e.contains("DEL")), "TYPE: {r:?}");
        let r = s.call(&["SET", "k", "w"]);
        assert!(matches!(&r, Reply::Error(e) if e.contains("does not decode")), "SET over it: {r:?}");
        let r = s.call(remove);
        assert!(!matches!(r, Reply::Error(_)), "{remove:?}: {r:?}");
        if remove[0] != "FLUSHDB" {
            assert_eq!(r, Reply::Int(1), "{remove:?}");
        }
        assert_eq!(s.call(&["EXISTS", "k"]), Reply::Int(0), "{remove:?}");
        assert_eq!(s.call(&["DBSIZE"]), Reply::Int(0), "{remove:?}");
        // The key made again (a new version) keeps its elements through the
        // reclaimer's sweep of the old ones.
        assert!(!matches!(s.call(fill), Reply::Error(_)), "{fill:?} again");
        for _ in 0..10 {
            s.background();
        }
        assert_eq!(s.call(read), whole, "{remove:?}: the key made again");
        assert_eq!(s.call(&["DBSIZE"]), Reply::Int(1), "{remove:?}");
        drop(s);
        let left: Vec<_> = logic::records(&db)
            .into_iter()
            .filter(|(k, _)| match k.first() {
                Some(&SUB) | Some(&ZIDX) => split_sub(k).is_some_and(|(_, key, v, _)| key == b"k" && v == old_version),
                // A flush leaves expiry entries for the expire cycle to drop when due.
                Some(&EXPIRES) => remove[0] != "FLUSHDB" && k.len() == 11 && k.ends_with(b"k"),
                _ => false,
            })
            .collect();
        assert!(left.is_empty(), "{remove:?} left records of the key: {left:02x?}");
    }
}

/// A key whose metadata does not decode but still holds its expiry time
/// expires when due, its elements reclaimed.
#[test]
fn a_key_whose_metadata_does_not_decode_still_expires() {
    use std::sync::Arc;
    use tembo_server::encoding::{meta_user_key, split_sub, META, SUB};
    use tembo_server::resp::Reply;
    let db = Arc::new(tembo_store::Db::in_memory(&tembo_store::Options::with_size(16 << 20)).expect("db"));
    let mut s = tembo_server::Session::new(db.clone()).expect("session");
    assert_eq!(s.call(&["HSET", "k", "a", "1", "b", "2"]), Reply::Int(2));
    assert_eq!(s.call(&["PEXPIRE", "k", "50"]), Reply::Int(1));
    drop(s);
    let recs = logic::records(&db);
    let (k, v) = recs.iter().find(|(k, _)| k.first() == Some(&META) && meta_user_key(k) == Some(b"k")).expect("meta");
    let mut damaged = v.clone();
    damaged[0] = 0xee;
    db.put(k, &damaged).expect("put the damaged record");
    let mut s = tembo_server::Session::new(db.clone()).expect("session");
    std::thread::sleep(Duration::from_millis(120));
    for _ in 0..10 {
        s.background();
    }
    assert_eq!(s.call(&["DBSIZE"]), Reply::Int(0));
    drop(s);
    let left: Vec<_> = logic::records(&db)
        .into_iter()
        .filter(|(k, _)| k.first() == Some(&META) || (k.first() == Some(&SUB) && split_sub(k).is_some()))
        .filter(|(k, _)| meta_user_key(k) == Some(b"k") || split_sub(k).is_some_and(|(_, key, _, _)| key == b"k"))
        .collect();
    assert!(left.is_empty(), "the expired key left records: {left:02x?}");
}

/// A chunked string whose length is damaged to hundreds of GiB (found by
/// the `damaged_record` fuzz target): a read of the whole string answers
/// an error instead of zero-filling memory until the server is killed;
/// parts of it still read, and DEL removes it.
#[test]
fn a_chunked_string_with_a_huge_length_is_an_error_not_an_allocation() {
    use std::sync::Arc;
    use tembo_server::encoding::{meta_user_key, Meta, META};
    use tembo_server::resp::Reply;
    let db = Arc::new(tembo_store::Db::in_memory(&tembo_store::Options::with_size(16 << 20)).expect("db"));
    let mut s = tembo_server::Session::new(db.clone()).expect("session");
    // A string that grows past `CHUNKED_MIN` by an edit moves into chunks.
    let value = vec![b'x'; 300 * 1024];
    assert_eq!(s.call(&["SET", "big", "xxxx"]), Reply::Simple("OK".into()));
    assert_eq!(s.call(&[&b"APPEND"[..], b"big", &value]), Reply::Int(300 * 1024 + 4));
    drop(s);
    let recs = logic::records(&db);
    let (k, v) =
        recs.iter().find(|(k, _)| k.first() == Some(&META) && meta_user_key(k) == Some(&b"big"[..])).expect("meta");
    let m = Meta::decode(v).expect("decodes");
    assert!(m.is_chunked(), "a string grown to 300 KiB is chunked");
    let huge = 0x5c_0000_0000u64;
    db.put(k, &Meta::encode_chunked(m.expire_at, m.version, huge)).expect("put");
    let mut s = tembo_server::Session::new(db).expect("session");
    for cmd in [&["GET", "big"][..], &["GETDEL", "big"], &["DUMP", "big"]] {
        let r = s.call(cmd);
        assert!(matches!(&r, Reply::Error(e) if e.contains("proto-max-bulk-len")), "{cmd:?}: {r:?}");
    }
    assert_eq!(s.call(&["STRLEN", "big"]), Reply::Int(huge as i64));
    assert_eq!(s.call(&["GETRANGE", "big", "0", "3"]), Reply::Bulk(b"xxxx".to_vec()));
    assert_eq!(s.call(&["DEL", "big"]), Reply::Int(1));
    assert_eq!(s.call(&["EXISTS", "big"]), Reply::Int(0));
}

/// A metadata record too short to name a key (damage no command can name
/// or delete) is passed over by SCAN, KEYS and the key count; it used to
/// stop every SCAN there with an error.
#[test]
fn a_metadata_record_too_short_to_name_a_key_is_passed_over() {
    use std::sync::Arc;
    use tembo_server::encoding::meta_prefix;
    use tembo_server::resp::Reply;
    let db = Arc::new(tembo_store::Db::in_memory(&tembo_store::Options::with_size(16 << 20)).expect("db"));
    let mut s = tembo_server::Session::new(db.clone()).expect("session");
    for i in 0..30 {
        assert_eq!(s.call(&["SET", &format!("k{i:02}"), "v"]), Reply::ok());
    }
    drop(s);
    for tail in [&[][..], &[0x00][..], &[0x7f, 0xff, 0xff][..]] {
        let mut short = meta_prefix(0, 0);
        short.extend_from_slice(tail);
        db.put(&short, b"\x01garbage").expect("put the damaged record");
    }
    let mut s = tembo_server::Session::new(db.clone()).expect("session");
    assert_eq!(s.call(&["DBSIZE"]), Reply::Int(30));
    let mut seen = Vec::new();
    let mut cursor = "0".to_string();
    loop {
        let Reply::Array(parts) = s.call(&["SCAN", &cursor, "COUNT", "7"]) else { panic!("SCAN failed") };
        let [Reply::Bulk(next), Reply::Array(keys)] = &parts[..] else { panic!("SCAN reply {parts:?}") };
        seen.extend(keys.iter().cloned());
        cursor = String::from_utf8(next.clone()).unwrap();
        if cursor == "0" {
            break;
        }
    }
    let want: Vec<Reply> = (0..30).map(|i| Reply::Bulk(format!("k{i:02}").into_bytes())).collect();
    seen.sort_by_key(|r| format!("{r:?}"));
    assert_eq!(seen, want);
    let Reply::Array(mut keys) = s.call(&["KEYS", "*"]) else { panic!("KEYS failed") };
    keys.sort_by_key(|r| format!("{r:?}"));
    assert_eq!(keys, want);
    assert!(matches!(s.call(&["RANDOMKEY"]), Reply::Bulk(_)));
}
