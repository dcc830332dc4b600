//! The embedded API on file pools and in memory: create / reopen, the lock,
//! files that are not databases, limits, ranges, batches, snapshots and
//! named snapshots, stats and check.

use std::path::Path;
use std::sync::Arc;

use tembo_store::{
    BatchOp, Db, DbError, Engine, Limits, Mode, Options, PmemError, Pool, WriteBatch, DB_ROOT, MAX_SNAPSHOT_NAME,
};

mod common;
use common::TempDir;

fn opts() -> Options {
    Options { size: 1 << 20, max_size: Some(64 << 20), ..Options::default() }
}

fn all(it: impl Iterator<Item = tembo_store::Result<(Vec<u8>, Vec<u8>)>>) -> Vec<(Vec<u8>, Vec<u8>)> {
    it.collect::<Result<_, _>>().unwrap()
}

fn keys(it: impl Iterator<Item = tembo_store::Result<(Vec<u8>, Vec<u8>)>>) -> Vec<Vec<u8>> {
    all(it).into_iter().map(|(k, _)| k).collect()
}

fn assert_checks(db: &Db) {
    let c = db.check().unwrap();
    assert!(c.is_ok(), "check: {:?}", c.violations());
}

fn key(i: u32) -> Vec<u8> {
    format!("key:{i:06}").into_bytes()
}

#[test]
fn db_is_send_and_sync() {
    fn assert_send_sync<T: Send + Sync>() {}
    assert_send_sync::<Db>();
}

#[test]
fn file_create_put_close_reopen_get() {
    let dir = TempDir::new("reopen");
    let path = dir.file("a.pool");
    let db = Db::create(&path, &opts()).unwrap();
    assert_eq!(db.engine(), Engine::Cdds);
    assert!(matches!(db.mode(), Mode::Msync | Mode::Emulated | Mode::Dax));
    for i in 0..500 {
        db.put(&key(i), format!("value {i}").as_bytes()).unwrap();
    }
    assert!(db.delete(&key(7)).unwrap());
    assert!(!db.delete(&key(7)).unwrap());
    let version = db.version().unwrap();
    assert!(!db.recovery_report().ran);
    db.close().unwrap();

    let db = Db::open(&path, &opts()).unwrap();
    assert!(!db.recovery_report().ran, "a clean close needs no recovery");
    assert_eq!(db.version().unwrap(), version);
    assert_eq!(db.get(&key(3)).unwrap().as_deref(), Some(&b"value 3"[..]));
    assert_eq!(db.get(&key(7)).unwrap(), None);
    assert_eq!(db.get(b"absent").unwrap(), None);
    assert_eq!(db.iter().count(), 499);
    let stats = db.stats().unwrap();
    assert_eq!(stats.tree.keys, 499);
    assert_eq!(stats.engine, Engine::Cdds);
    assert_eq!(stats.path, path);
    assert_checks(&db);
    drop(db); // Drop closes cleanly too.

    let db = Db::open_or_create(&path, &opts()).unwrap();
    assert!(!db.recovery_report().ran);
    assert_eq!(db.iter().count(), 499);
}

#[test]
fn open_or_create_creates_then_opens() {
    let dir = TempDir::new("ooc");
    let path = dir.file("b.pool");
    let db = Db::open_or_create(&path, &opts()).unwrap();
    db.put(b"k", b"v").unwrap();
    db.close().unwrap();
    let db = Db::open_or_create(&path, &opts()).unwrap();
    assert_eq!(db.get(b"k").unwrap().as_deref(), Some(&b"v"[..]));
}

#[test]
fn open_or_create_gives_an_empty_pool_its_database() {
    // A pool made by `tembo pool create`, or one whose creation was cut
    // short before its database was written: `open` says there is no
    // database; `open_or_create` (what `tembo serve` runs) makes one.
    let dir = TempDir::new("ooc-empty");
    let path = dir.file("e.pool");
    let pool = tembo_pmem::Pool::create(&path, &opts().pool_options()).unwrap();
    drop(pool);
    assert!(matches!(Db::open(&path, &opts()).unwrap_err(), DbError::NoDatabase { .. }));
    let db = Db::open_or_create(&path, &opts()).unwrap();
    db.put(b"k", b"v").unwrap();
    db.close().unwrap();
    let db = Db::open(&path, &opts()).unwrap();
    assert_eq!(db.get(b"k").unwrap().as_deref(), Some(&b"v"[..]));
    assert_checks(&db);
}

#[test]
fn create_refuses_an_existing_file_and_leaves_it_alone() {
    let dir = TempDir::new("exists");
    let path = dir.file("c.pool");
    std::fs::write(&path, b"precious").unwrap();
    let err = Db::create(&path, &opts()).unwrap_err();
    assert!(matches!(err, DbError::Pool { .. }), "{err:?}");
    assert_eq!(std::fs::read(&path).unwrap(), b"precious");
}

#[test]
fn reopen_after_unclean_shutdown_of_a_file_pool() {
    let dir = TempDir::new("unclean");
    let path = dir.file("d.pool");
    let copy = dir.file("d-crashed.pool");
    // No background GC thread while the file is copied: a copy is not one
    // instant, so GC running during it would leave an image no crash can.
    let db = Db::create(&path, &Options { gc: None, ..opts() }).unwrap();
    for i in 0..300 {
        db.put(&key(i), &i.to_le_bytes()).unwrap();
    }
    let mut b = WriteBatch::new();
    for i in 0..100 {
        b.delete(key(i));
    }
    db.write(&b).unwrap();
    // The file as a process killed now would leave it: shared mapping,
    // clean-shutdown flag not set.
    std::fs::copy(&path, &copy).unwrap();
    db.close().unwrap();

    let db = Db::open(&copy, &opts()).unwrap();
    assert!(db.recovery_report().ran, "the copy was taken while open: recovery must run");
    assert_eq!(db.iter().count(), 200);
    assert_eq!(db.get(&key(150)).unwrap(), Some(150u32.to_le_bytes().to_vec()));
    assert_eq!(db.get(&key(50)).unwrap(), None);
    assert_checks(&db);
    db.put(b"after", b"recovery").unwrap();
    db.close().unwrap();
    let db = Db::open(&copy, &opts()).unwrap();
    assert!(!db.recovery_report().ran);
    assert_eq!(db.get(b"after").unwrap().as_deref(), Some(&b"recovery"[..]));
    assert_checks(&db);
}

#[test]
fn second_open_of_the_same_path_is_locked() {
    let dir = TempDir::new("lock");
    let path = dir.file("e.pool");
    let db = Db::create(&path, &opts()).unwrap();
    let err = Db::open(&path, &opts()).unwrap_err();
    assert!(matches!(err, DbError::Pool { source: PmemError::Locked { .. }, .. }), "{err:?}");
    assert!(matches!(err.pmem(), Some(PmemError::Locked { .. })));
    assert_eq!(err.to_string().matches(path.to_str().unwrap()).count(), 1, "{err}");
    let err = Db::open_or_create(&path, &opts()).unwrap_err();
    assert!(matches!(err.pmem(), Some(PmemError::Locked { .. })), "{err:?}");
    db.close().unwrap();
    Db::open(&path, &opts()).unwrap();
}

#[test]
fn files_that_are_not_databases_are_rejected() {
    let dir = TempDir::new("notapool");
    let text = dir.file("notes.txt");
    std::fs::write(&text, vec![b'x'; 100_000]).unwrap();
    let err = Db::open(&text, &opts()).unwrap_err();
    assert!(matches!(err, DbError::Pool { source: PmemError::NotAPool { .. }, .. }), "{err:?}");

    let empty = dir.file("empty");
    std::fs::write(&empty, b"").unwrap();
    let err = Db::open(&empty, &opts()).unwrap_err();
    assert!(matches!(err, DbError::Pool { .. }), "{err:?}");

    let missing = dir.file("missing.pool");
    assert!(matches!(Db::open(&missing, &opts()).unwrap_err(), DbError::Pool { source: PmemError::Io { .. }, .. }));

    // A pool, but no database in it.
    let bare = dir.file("bare.pool");
    Pool::create(&bare, &opts().pool_options()).unwrap().close().unwrap();
    let err = Db::open(&bare, &opts()).unwrap_err();
    assert!(matches!(err, DbError::NoDatabase { .. }), "{err:?}");
    assert!(err.to_string().contains("Db::create"), "{err}");
}

fn corrupt_record(path: &Path, word: u64, value: u64) {
    let pool = Pool::open(path, &opts().pool_options()).unwrap();
    let off = pool.root(DB_ROOT).unwrap();
    pool.store_u64(off + 8 * word, value).unwrap();
    pool.persist(off + 8 * word, 8);
    pool.close().unwrap();
}

#[test]
fn unknown_engine_and_bad_engine_record_are_typed_errors() {
    let dir = TempDir::new("engine");
    let path = dir.file("f.pool");
    let db = Db::create(&path, &opts()).unwrap();
    db.put(b"k", b"v").unwrap();
    db.close().unwrap();

    corrupt_record(&path, 2, 99);
    let err = Db::open(&path, &opts()).unwrap_err();
    assert!(matches!(err, DbError::UnknownEngine { id: 99, .. }), "{err:?}");
    corrupt_record(&path, 2, Engine::Cdds.id());
    Db::open(&path, &opts()).unwrap().close().unwrap();

    corrupt_record(&path, 0, 0x1234);
    let err = Db::open(&path, &opts()).unwrap_err();
    assert!(matches!(err, DbError::BadEngineRecord { .. }), "{err:?}");
}

#[test]
fn limits_and_the_empty_key_are_checked_before_writing() {
    let o = Options { limits: Limits { max_key_bytes: 8, max_value_bytes: 16 }, ..opts() };
    let db = Db::in_memory(&o).unwrap();
    assert_eq!(db.mode(), Mode::Volatile);
    db.put(b"12345678", &[1; 16]).unwrap();
    let v = db.version().unwrap();
    assert!(matches!(db.put(b"123456789", b"v").unwrap_err(), DbError::KeyTooLarge { len: 9, max: 8 }));
    assert!(matches!(db.put(b"k", &[0; 17]).unwrap_err(), DbError::ValueTooLarge { len: 17, max: 16 }));
    assert!(matches!(db.put(b"", b"v").unwrap_err(), DbError::EmptyKey));
    assert!(matches!(db.delete(b"").unwrap_err(), DbError::EmptyKey));
    assert!(matches!(db.delete(&[0; 9]).unwrap_err(), DbError::KeyTooLarge { .. }));
    // A batch with one bad operation applies none.
    let mut b = WriteBatch::new();
    b.put("ok", "fine").delete("12345678").put("k", vec![0u8; 17]);
    assert!(matches!(db.write(&b).unwrap_err(), DbError::ValueTooLarge { .. }));
    assert_eq!(db.version().unwrap(), v);
    assert_eq!(db.get(b"ok").unwrap(), None);
    assert!(db.get(b"12345678").unwrap().is_some());
    // Reads of over-long keys are just misses.
    assert_eq!(db.get(&[7; 1000]).unwrap(), None);
    assert_checks(&db);
}

#[test]
fn a_full_pool_is_an_error_and_loses_nothing() {
    let o = Options { size: 1 << 20, max_size: Some(1 << 20), ..opts() };
    let db = Db::in_memory(&o).unwrap();
    let value = vec![0xAB; 2000];
    let mut written = 0;
    let err = loop {
        match db.put(&key(written), &value) {
            Ok(()) => written += 1,
            Err(e) => break e,
        }
        assert!(written < 10_000, "a 1 MiB pool cannot hold 20 MB");
    };
    assert!(matches!(err, DbError::Pool { source: PmemError::PoolFull { .. }, .. }), "{err:?}");
    assert!(written > 10, "only {written} values fitted");
    assert!(err.to_string().starts_with("<memory>: pool full"), "{err}");
    assert_eq!(db.iter().count(), written as usize);
    assert_checks(&db);
    assert_eq!(db.get(&key(0)).unwrap(), Some(value));
}

#[test]
fn ranges_prefixes_and_reverse_scans() {
    let db = Db::in_memory(&opts()).unwrap();
    let ks: [&[u8]; 8] = [b"a", b"ab", b"abc", b"ab\xff", b"ab\xff\x00", b"ac", b"b", b"\xff\xff"];
    for k in ks {
        db.put(k, k).unwrap();
    }
    let v = |s: &[&[u8]]| s.iter().map(|k| k.to_vec()).collect::<Vec<_>>();
    assert_eq!(keys(db.scan_prefix(b"ab")), v(&[b"ab", b"abc", b"ab\xff", b"ab\xff\x00"]));
    assert_eq!(keys(db.scan_prefix(b"ab\xff")), v(&[b"ab\xff", b"ab\xff\x00"]));
    assert_eq!(keys(db.scan_prefix(b"\xff")), v(&[b"\xff\xff"]));
    assert_eq!(keys(db.scan_prefix(b"zz")), Vec::<Vec<u8>>::new());
    assert_eq!(keys(db.scan_prefix(b"")).len(), ks.len());
    assert_eq!(keys(db.scan("ab".."ac")), v(&[b"ab", b"abc", b"ab\xff", b"ab\xff\x00"]));
    assert_eq!(keys(db.scan(b"ab".to_vec()..=b"ac".to_vec())).len(), 5);
    assert_eq!(keys(db.scan(&b"ac"[..]..)), v(&[b"ac", b"b", b"\xff\xff"]));
    assert_eq!(keys(db.scan(..&b"ab"[..])), v(&[b"a"]));
    assert_eq!(keys(db.scan_rev("a"..="ab")), v(&[b"ab", b"a"]));
    assert_eq!(keys(db.scan_rev(&b"b"[..]..)), v(&[b"\xff\xff", b"b"]));
    assert_eq!(keys(db.scan("b".."a")), Vec::<Vec<u8>>::new(), "an inverted range is empty");
    let mut fwd = keys(db.iter());
    let mut sorted = fwd.clone();
    sorted.sort();
    assert_eq!(fwd, sorted);
    fwd.reverse();
    assert_eq!(keys(db.scan_rev::<&[u8], _>(..)), fwd);
    // Many keys: scans cross leaves.
    for i in 0..2000 {
        db.put(&key(i), b"").unwrap();
    }
    assert_eq!(db.scan_prefix(b"key:00012").count(), 10);
    assert_eq!(db.scan_prefix(b"key:").count(), 2000);
    assert_eq!(keys(db.scan_rev(key(10)..key(13))), vec![key(12), key(11), key(10)]);
}

#[test]
fn batches_apply_in_order_and_report_what_existed() {
    let db = Db::in_memory(&opts()).unwrap();
    db.put(b"x", b"1").unwrap();
    let mut b = WriteBatch::with_capacity(4);
    assert!(b.is_empty());
    b.put("y", "2").delete("x").put("x", "3").delete("nope");
    assert_eq!(b.len(), 4);
    assert_eq!(b.ops()[1], BatchOp::Delete { key: b"x".to_vec() });
    let v = db.version().unwrap();
    let out = db.write(&b).unwrap();
    assert_eq!(out.existed, vec![false, true, false, false]);
    assert_eq!(out.version, v + 1, "one batch, one commit");
    assert_eq!(db.get(b"x").unwrap().as_deref(), Some(&b"3"[..]));
    b.clear();
    assert!(b.is_empty());
    assert_eq!(db.write(&b).unwrap().version, v + 1, "an empty batch commits nothing");
    let b: WriteBatch = (0..3).map(|i| BatchOp::Delete { key: vec![b'x' + i] }).collect();
    db.write(&b).unwrap();
    assert_eq!(db.iter().count(), 0);
}

#[test]
fn readers_never_see_half_a_batch() {
    // Transfers between accounts keep the total fixed; concurrent scans
    // must always add up to it.
    let db = Arc::new(Db::in_memory(&opts()).unwrap());
    const ACCOUNTS: u64 = 50;
    let mut b = WriteBatch::new();
    for a in 0..ACCOUNTS {
        b.put(key(a as u32), 100u64.to_le_bytes());
    }
    db.write(&b).unwrap();
    let total = |db: &Db| -> u64 {
        all(db.scan_prefix(b"key:")).iter().map(|(_, v)| u64::from_le_bytes(v[..8].try_into().unwrap())).sum()
    };
    let readers: Vec<_> = (0..2)
        .map(|_| {
            let db = Arc::clone(&db);
            std::thread::spawn(move || {
                for _ in 0..200 {
                    assert_eq!(total(&db), 100 * ACCOUNTS);
                    let s = db.snapshot().unwrap();
                    let first: u64 = (0..ACCOUNTS)
                        .map(|a| u64::from_le_bytes(s.get(&key(a as u32)).unwrap().unwrap()[..8].try_into().unwrap()))
                        .sum();
                    assert_eq!(first, 100 * ACCOUNTS);
                }
            })
        })
        .collect();
    for i in 0..300u64 {
        let (from, to) = (i % ACCOUNTS, (i * 7 + 3) % ACCOUNTS);
        if from == to {
            continue;
        }
        let get = |a: u64| u64::from_le_bytes(db.get(&key(a as u32)).unwrap().unwrap()[..8].try_into().unwrap());
        let (f, t) = (get(from), get(to));
        let amount = f.min(7);
        let mut b = WriteBatch::new();
        b.put(key(from as u32), (f - amount).to_le_bytes()).put(key(to as u32), (t + amount).to_le_bytes());
        db.write(&b).unwrap();
    }
    for r in readers {
        r.join().unwrap();
    }
    assert_eq!(total(&db), 100 * ACCOUNTS);
    assert_checks(&db);
}

#[test]
fn snapshots_see_one_version() {
    let db = Db::in_memory(&opts()).unwrap();
    for i in 0..100 {
        db.put(&key(i), b"old").unwrap();
    }
    let snap = db.snapshot().unwrap();
    let v = snap.version();
    for i in 0..100 {
        if i % 2 == 0 {
            db.delete(&key(i)).unwrap();
        } else {
            db.put(&key(i), b"new").unwrap();
        }
    }
    db.put(b"key:fresh", b"new").unwrap();
    assert_eq!(snap.version(), v);
    assert_eq!(snap.get(&key(0)).unwrap().as_deref(), Some(&b"old"[..]));
    assert_eq!(snap.get(&key(1)).unwrap().as_deref(), Some(&b"old"[..]));
    assert_eq!(snap.get(b"key:fresh").unwrap(), None);
    let seen = all(snap.scan_prefix(b"key:"));
    assert_eq!(seen.len(), 100);
    assert!(seen.iter().all(|(_, v)| v == b"old"));
    assert_eq!(snap.iter().count(), 100);
    assert_eq!(keys(snap.scan(key(10)..key(12))), vec![key(10), key(11)]);
    assert_eq!(keys(snap.scan_rev(key(10)..=key(11))), vec![key(11), key(10)]);
    assert_eq!(db.get(&key(0)).unwrap(), None);
    assert_eq!(db.get(&key(1)).unwrap().as_deref(), Some(&b"new"[..]));
    assert_eq!(db.iter().count(), 51);
    // An iterator is a snapshot too.
    let mut it = db.scan_prefix(b"key:");
    let first = it.next().unwrap().unwrap();
    db.delete(&key(99)).unwrap();
    assert_eq!(1 + it.count(), 51, "the iterator keeps the version it started at");
    assert_eq!(first.0, key(1));
    drop(snap);
    assert_checks(&db);
}

#[test]
fn named_snapshots_survive_reopen_and_roll_back() {
    let dir = TempDir::new("named");
    let path = dir.file("g.pool");
    let db = Db::create(&path, &opts()).unwrap();
    for i in 0..200 {
        db.put(&key(i), b"v1").unwrap();
    }
    let named = db.create_named_snapshot("before").unwrap();
    assert_eq!(named.name, "before");
    assert!(matches!(db.create_named_snapshot("before").unwrap_err(), DbError::SnapshotName(_)));
    assert!(matches!(db.create_named_snapshot("").unwrap_err(), DbError::SnapshotName(_)));
    let long = "n".repeat(MAX_SNAPSHOT_NAME + 1);
    assert!(matches!(db.create_named_snapshot(&long).unwrap_err(), DbError::SnapshotName(_)));
    for i in 0..200 {
        if i % 3 == 0 {
            db.delete(&key(i)).unwrap();
        } else {
            db.put(&key(i), b"v2").unwrap();
        }
    }
    db.put(b"later", b"v2").unwrap();
    db.close().unwrap();

    let db = Db::open(&path, &opts()).unwrap();
    let list = db.named_snapshots().unwrap();
    assert_eq!(list, vec![named.clone()]);
    assert!(matches!(db.rollback_to("nope").unwrap_err(), DbError::NoSuchSnapshot(n) if n == "nope"));
    db.rollback_to("before").unwrap();
    let now = all(db.iter());
    assert_eq!(now.len(), 200);
    assert!(now.iter().all(|(_, v)| v == b"v1"));
    assert_eq!(db.get(b"later").unwrap(), None);
    assert_checks(&db);
    db.drop_named_snapshot("before").unwrap();
    assert!(matches!(db.drop_named_snapshot("before").unwrap_err(), DbError::NoSuchSnapshot(_)));
    assert!(db.named_snapshots().unwrap().is_empty());
    db.close().unwrap();
    let db = Db::open(&path, &opts()).unwrap();
    assert!(db.named_snapshots().unwrap().is_empty());
    assert_eq!(db.iter().count(), 200);
    assert_checks(&db);
}

#[test]
fn blocks_retired_under_a_reader_are_not_leaked_by_close() {
    let dir = TempDir::new("limbo");
    let path = dir.file("h.pool");
    let db = Db::create(&path, &opts()).unwrap();
    for i in 0..400 {
        db.put(&key(i), b"first").unwrap();
    }
    {
        // A running scan pins its version; the batch's retired blocks wait.
        let mut it = db.iter();
        it.next().unwrap().unwrap();
        let mut b = WriteBatch::new();
        for i in 0..400 {
            b.put(key(i), "second");
        }
        db.write(&b).unwrap();
    }
    db.close().unwrap();
    let db = Db::open(&path, &opts()).unwrap();
    assert!(!db.recovery_report().ran);
    assert_checks(&db);
}
