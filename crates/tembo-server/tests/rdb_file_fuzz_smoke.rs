//! The `rdb_file` fuzz target's logic (fuzz/fuzz_targets/rdb_file_logic.rs),
//! run by the ordinary test suite over an RDB file redis-server 7.0.15
//! saved and files Tembo writes, and thousands of random mutations of
//! them; and a property test of the writer and the reader against a model:
//! random data sets, written through the server's commands, saved as an RDB
//! file (`rdb_save`) and read back (`rdb_load`), give back every key with
//! its value, database and expiry.

use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use proptest::prelude::*;
use tembo_server::rdb::{open_checked, version_of};
use tembo_server::rdb_load::index;
use tembo_server::rdb_save::{save, Filter};
use tembo_server::rdb_value::{decode_versioned, Value};
use tembo_server::resp::Reply;
use tembo_server::Session;
use tembo_store::{Db, ModeRequest, Options};

mod mutate;

mod logic {
    include!("../../../fuzz/fuzz_targets/rdb_file_logic.rs");
}

/// `SAVE` of redis-server 7.0.15 (hex): a listpack hash, an intset, a
/// hashtable set, a quicklist, a listpack zset, an LZF string, an integer,
/// a key with an expiry, a stream with a consumer group and a pending
/// entry, a key in database 2, a function library.
const REDIS_SAVED: &str = "\
     524544495330303130fa0972656469732d76657206372e302e3135fa0a72656469732d62697473c040fa056374696d65\
     c289df146bfa08757365642d6d656dc2b0d11100fa08616f662d62617365c000f5404923216c7561206e616d653d7365\
     65646c69620a72656469732e72656769737465725f66756e6374696f6e28277366272c2066756e6374696f6e28292072\
     657475726e203120656e6429fe00fb0901fc0f180092b9010000000165017800016ec139300201730301630161016212\
     016c0102141400000004008161020701df3802f270110104ff100168121200000004008161020101816202dff902ff11\
     017a17170000000400826d3203dffd02826d310383312e3504ff13027374011000000000000000010000000000000001\
     1c1c0000000a00010100010101816102000102010001000101010401ff01010101010000010101670101010100000000\
     0000000100000000000000011b308949a2010000010105616c6963651b308949a2010000010000000000000001000000\
     00000000010003737472c30b40780361626361e069020162630b02697318040000000400000001000000050000002c01\
     000070110100fe02fb010000056f74686572c002ff70abfa19c407cb61";

fn now_ms() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_millis() as u64)
}

fn hex(s: &str) -> Vec<u8> {
    let s: String = s.chars().filter(|c| c.is_ascii_hexdigit()).collect();
    (0..s.len()).step_by(2).map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap()).collect()
}

thread_local! {
    /// One session (and pool) for every case of this thread.
    static SESSION: RefCell<Session> = RefCell::new({
        static NEXT: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let shm = std::path::Path::new("/dev/shm");
        let dir = if shm.is_dir() { shm.to_path_buf() } else { std::env::temp_dir() };
        let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let path = dir.join(format!("tembo-rdb-model-{}-{n}.pool", std::process::id()));
        let _ = std::fs::remove_file(&path);
        let opts = Options { size: 32 << 20, mode: ModeRequest::Emulated, ..Options::default() };
        let db = Db::create(&path, &opts).unwrap();
        // The file's name goes at once; the mapping lives on until the process ends.
        let _ = std::fs::remove_file(&path);
        Session::new(Arc::new(db)).unwrap()
    });
}

fn call(s: &mut Session, args: &[&[u8]]) -> Reply {
    let r = s.call(args);
    assert!(
        !matches!(r, Reply::Error(_)),
        "{:?}: {r:?}",
        args.iter().map(|a| String::from_utf8_lossy(a)).collect::<Vec<_>>()
    );
    r
}

/// The RDB file of a session's data, as SYNC and `tembo rdb export` write it.
fn saved(s: &Session) -> Vec<u8> {
    let mut out = Vec::new();
    save(s.db(), 16, Filter::ALL, now_ms(), &mut out, &mut |_| true).unwrap();
    out
}

fn seeds() -> &'static [Vec<u8>] {
    static SEEDS: std::sync::OnceLock<Vec<Vec<u8>>> = std::sync::OnceLock::new();
    SEEDS.get_or_init(make_seeds)
}

fn make_seeds() -> Vec<Vec<u8>> {
    let file = SESSION.with(|s| {
        let s = &mut *s.borrow_mut();
        call(s, &[b"FLUSHALL"]);
        call(s, &[b"FUNCTION", b"FLUSH"]);
        call(s, &[b"HSET", b"h", b"a", b"1", b"b", b"2"]);
        call(s, &[b"RPUSH", b"l", b"x", b"7"]);
        call(s, &[b"SADD", b"s", b"1", b"2"]);
        call(s, &[b"ZADD", b"z", b"1.5", b"m"]);
        call(s, &[b"SET", b"e", b"v", b"EX", b"1000"]);
        call(s, &[b"XADD", b"st", b"1-1", b"f", b"v"]);
        call(s, &[b"XGROUP", b"CREATE", b"st", b"g", b"0"]);
        call(s, &[b"SELECT", b"3"]);
        call(s, &[b"SET", b"k3", b"three"]);
        call(s, &[b"SELECT", b"0"]);
        saved(s)
    });
    vec![hex(REDIS_SAVED), file]
}

#[test]
fn the_seeds_are_accepted_whole() {
    for (i, seed) in seeds().iter().enumerate() {
        let idx = index(seed).unwrap_or_else(|e| panic!("seed {i}: {e}"));
        assert!(idx.checksummed, "seed {i}");
        assert!(idx.entries.len() >= 7 && !idx.functions.is_empty() || i == 1, "seed {i}: {idx:?}");
        logic::rdb_file(seed);
    }
}

/// A value as the model keeps it (sets and hashes unordered, so sorted).
#[derive(Clone, Debug, PartialEq)]
enum Model {
    String(Vec<u8>),
    List(Vec<Vec<u8>>),
    Set(BTreeSet<Vec<u8>>),
    Hash(BTreeMap<Vec<u8>, Vec<u8>>),
    ZSet(BTreeMap<Vec<u8>, i64>),
}

fn of_value(v: Value) -> Model {
    match v {
        Value::String(s) => Model::String(s),
        Value::List(l) => Model::List(l),
        Value::Set(s) => Model::Set(s.into_iter().collect()),
        Value::Hash(h) => Model::Hash(h.into_iter().collect()),
        Value::ZSet(z) => Model::ZSet(z.into_iter().map(|(m, s)| (m, s as i64)).collect()),
        Value::Stream(_) => panic!("no streams in the model"),
    }
}

fn bytes() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        proptest::collection::vec(any::<u8>(), 0..12),
        (0i64..100_000).prop_map(|n| n.to_string().into_bytes()),
        proptest::collection::vec(any::<u8>(), 60..400),
    ]
}

fn nonempty<T: Strategy>(t: T) -> proptest::collection::VecStrategy<T> {
    proptest::collection::vec(t, 1..20)
}

fn model_value() -> impl Strategy<Value = Model> {
    prop_oneof![
        bytes().prop_map(Model::String),
        nonempty(bytes()).prop_map(Model::List),
        nonempty(bytes()).prop_map(|v| Model::Set(v.into_iter().collect())),
        nonempty((bytes(), bytes())).prop_map(|v| Model::Hash(v.into_iter().collect())),
        nonempty((bytes(), -1000i64..1000)).prop_map(|v| Model::ZSet(v.into_iter().collect())),
    ]
}

fn write(s: &mut Session, key: &[u8], v: &Model) {
    let mut args: Vec<Vec<u8>> = Vec::new();
    match v {
        Model::String(x) => args.extend([b"SET".to_vec(), key.to_vec(), x.clone()]),
        Model::List(x) => {
            args.extend([b"RPUSH".to_vec(), key.to_vec()]);
            args.extend(x.iter().cloned());
        }
        Model::Set(x) => {
            args.extend([b"SADD".to_vec(), key.to_vec()]);
            args.extend(x.iter().cloned());
        }
        Model::Hash(x) => {
            args.extend([b"HSET".to_vec(), key.to_vec()]);
            for (f, v) in x {
                args.extend([f.clone(), v.clone()]);
            }
        }
        Model::ZSet(x) => {
            args.extend([b"ZADD".to_vec(), key.to_vec()]);
            for (m, sc) in x {
                args.extend([sc.to_string().into_bytes(), m.clone()]);
            }
        }
    }
    let refs: Vec<&[u8]> = args.iter().map(Vec::as_slice).collect();
    call(s, &refs);
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    /// Every key comes back from the file with its value, database and expiry.
    #[test]
    fn a_saved_data_set_reads_back_as_written(
        keys in proptest::collection::btree_map(
            (0u8..3, proptest::collection::vec(any::<u8>(), 1..10)),
            (model_value(), proptest::option::of(1u64..1_000_000)),
            0..24,
        ),
    ) {
        let file = SESSION.with(|s| {
            let s = &mut *s.borrow_mut();
            call(s, &[b"FLUSHALL"]);
            for ((db, key), (v, ttl)) in &keys {
                call(s, &[b"SELECT", db.to_string().as_bytes()]);
                write(s, key, v);
                if let Some(t) = ttl {
                    call(s, &[b"PEXPIRE", key, t.to_string().as_bytes()]);
                }
            }
            call(s, &[b"SELECT", b"0"]);
            saved(s)
        });
        let idx = index(&file).unwrap();
        let mut got = BTreeMap::new();
        let now = now_ms();
        for e in &idx.entries {
            let payload = e.payload(&file, idx.version).unwrap();
            let v = decode_versioned(open_checked(&payload, true).unwrap(), version_of(&payload)).unwrap();
            let ttl = e.expire_ms.map(|at| at.saturating_sub(now));
            got.insert((e.db as u8, e.key.clone()), (of_value(v), ttl));
        }
        prop_assert_eq!(got.len(), keys.len());
        for (k, (v, ttl)) in &keys {
            let (gv, gttl) = &got[k];
            prop_assert_eq!(gv, v);
            match (ttl, gttl) {
                (None, None) => {}
                (Some(want), Some(left)) => prop_assert!(*left <= *want && *left + 60_000 >= *want),
                other => prop_assert!(false, "expiry {:?}", other),
            }
        }
        logic::rdb_file(&file);
    }

}

proptest! {
    #![proptest_config(ProptestConfig { cases: 3000, ..ProptestConfig::default() })]

    /// What a damaged file looks like: bytes replaced, a cut, an insertion.
    #[test]
    fn reader_properties_hold_on_mutated_files(
        seed in 0usize..2,
        damage in mutate::damage(),
    ) {
        let mut data = mutate::apply(seeds()[seed].clone(), damage);
        logic::rdb_file(&data);
        // With the checksum disabled (a stored 0), damage must be found by
        // the walk itself.
        if data.len() >= 8 {
            let n = data.len();
            data[n - 8..].fill(0);
            logic::rdb_file(&data);
        }
    }
}
