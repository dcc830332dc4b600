//! `Db::backup`: a consistent copy taken while writers run, the
//! destination replaced only by a complete copy, and clear errors.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use rand::{Rng, SeedableRng};
use tembo_store::{BackupControl, Db, DbError, Engine, Options, WriteBatch};

mod common;
use common::TempDir;

fn opts() -> Options {
    Options { size: 4 << 20, max_size: Some(256 << 20), ..Options::default() }
}

fn contents(db: &Db) -> Vec<(Vec<u8>, Vec<u8>)> {
    db.iter().collect::<Result<_, _>>().unwrap()
}

#[test]
fn a_backup_holds_exactly_the_source_and_replaces_the_old_one() {
    let dir = TempDir::new("exact");
    let db = Db::create(dir.file("src.pool"), &opts()).unwrap();
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(7);
    // More pairs than one batch of the copy, values up to 3 KiB, deletes.
    for i in 0..5_000u32 {
        let key = format!("key{:06}", rng.gen_range(0..4_000u32)).into_bytes();
        if i % 7 == 0 {
            db.delete(&key).unwrap();
        } else {
            let len = rng.gen_range(0..3_000usize);
            db.put(&key, &vec![(i % 251) as u8; len]).unwrap();
        }
    }
    let dst = dir.file("backup.pool");
    let first = db.backup(&dst).unwrap();
    let want = contents(&db);
    assert_eq!(first.keys, want.len() as u64);
    assert_eq!(first.bytes, want.iter().map(|(k, v)| (k.len() + v.len()) as u64).sum::<u64>());
    {
        let copy = Db::open(&dst, &opts()).unwrap();
        assert_eq!(contents(&copy), want);
        assert!(copy.check().unwrap().is_ok(), "the copy passes its invariant check");
        copy.close().unwrap();
    }
    // A second backup replaces the first with the new contents.
    db.put(b"added-later", b"x").unwrap();
    db.delete(&want[0].0).unwrap();
    let second = db.backup(&dst).unwrap();
    assert!(second.version > first.version);
    let copy = Db::open(&dst, &opts()).unwrap();
    assert_eq!(contents(&copy), contents(&db));
    assert!(!dir.file("backup.pool.partial").exists(), "no partial file is left");
}

#[test]
fn a_backup_taken_under_writes_is_one_committed_version() {
    const KEYS: usize = 200;
    let dir = TempDir::new("consistent");
    let db = Arc::new(Db::create(dir.file("src.pool"), &opts()).unwrap());
    let write_all = |db: &Db, generation: u64| {
        let mut b = WriteBatch::new();
        for k in 0..KEYS {
            b.put(format!("k{k:04}").into_bytes(), generation.to_le_bytes().to_vec());
        }
        db.write(&b).unwrap();
    };
    write_all(&db, 0);
    let stop = Arc::new(AtomicBool::new(false));
    let writer = {
        let (db, stop) = (Arc::clone(&db), Arc::clone(&stop));
        std::thread::spawn(move || {
            let mut g = 1;
            // Every batch sets every key to one generation.
            while !stop.load(Ordering::Relaxed) || g < 50 {
                write_all(&db, g);
                g += 1;
            }
            g
        })
    };
    let mut generations = Vec::new();
    for round in 0..5 {
        let dst = dir.file(&format!("b{round}.pool"));
        let r = db.backup(&dst).unwrap();
        let copy = Db::open(&dst, &opts()).unwrap();
        let pairs = contents(&copy);
        assert_eq!(pairs.len(), KEYS);
        let g = u64::from_le_bytes(pairs[0].1.as_slice().try_into().unwrap());
        assert!(pairs.iter().all(|(_, v)| v == &g.to_le_bytes()), "round {round}: keys from two versions");
        assert_eq!(r.keys, KEYS as u64);
        generations.push(g);
    }
    stop.store(true, Ordering::Relaxed);
    let last = writer.join().unwrap();
    assert!(generations.windows(2).all(|w| w[0] <= w[1]), "{generations:?}");
    assert!(generations.iter().all(|&g| g < last));
}

#[test]
fn bad_destinations_cancellation_and_engines_get_clear_errors() {
    let dir = TempDir::new("errors");
    let src = dir.file("src.pool");
    let db = Db::create(&src, &opts()).unwrap();
    for i in 0..3_000u32 {
        db.put(format!("k{i:05}").as_bytes(), &[7u8; 100]).unwrap();
    }
    // Its own pool file: refused, and the pool is still there and whole.
    match db.backup(&src) {
        Err(DbError::Backup { why, .. }) => assert!(why.contains("own pool"), "{why}"),
        other => panic!("backup onto itself: {other:?}"),
    }
    assert_eq!(db.iter().count(), 3_000);
    // A stale partial file from an interrupted backup is replaced.
    let dst = dir.file("b.pool");
    std::fs::write(dir.file("b.pool.partial"), b"not a pool").unwrap();
    db.backup(&dst).unwrap();
    assert!(!dir.file("b.pool.partial").exists());
    // Cancelled: an error, no partial file, and the earlier backup intact.
    let control = BackupControl::default();
    control.cancel();
    match db.backup_with(&dst, &control) {
        Err(DbError::Backup { why, .. }) => assert_eq!(why, "cancelled"),
        other => panic!("cancelled backup: {other:?}"),
    }
    assert!(!dir.file("b.pool.partial").exists());
    assert_eq!(Db::open(&dst, &opts()).unwrap().iter().count(), 3_000);
    // A directory that does not exist.
    assert!(db.backup(dir.file("no/such/dir/b.pool")).is_err());
    // The in-place engines keep no versions to copy from.
    let k = Db::create(dir.file("kamino.pool"), &Options { engine: Engine::Kamino, ..opts() }).unwrap();
    k.put(b"a", b"b").unwrap();
    match k.backup(dir.file("k-backup.pool")) {
        Err(DbError::Unsupported { what, .. }) => assert_eq!(what, "a backup"),
        other => panic!("kamino backup: {other:?}"),
    }
}

#[test]
fn a_backup_started_on_another_thread_holds_what_was_committed_before_its_version_was_pinned() {
    let dir = TempDir::new("pinned");
    let db = Arc::new(Db::create(dir.file("src.pool"), &opts()).unwrap());
    for i in 0..20_000u32 {
        db.put(format!("k{i:05}").as_bytes(), &[1u8; 64]).unwrap();
    }
    let dst = dir.file("b.pool");
    for round in 0..5u8 {
        db.put(b"marker", &[round]).unwrap();
        let control = Arc::new(BackupControl::default());
        let (db2, control2, dst2) = (Arc::clone(&db), Arc::clone(&control), dst.clone());
        let copier = std::thread::spawn(move || db2.backup_with(&dst2, &control2));
        control.wait_for_version();
        // Committed at once after the start: never in this copy.
        db.put(b"marker", &[round + 100]).unwrap();
        db.put(b"after", &[round]).unwrap();
        let report = copier.join().unwrap().unwrap();
        assert_eq!(report.keys, 20_001 + u64::from(round > 0));
        let copy = Db::open(&dst, &opts()).unwrap();
        assert_eq!(copy.get(b"marker").unwrap(), Some(vec![round]));
        assert_eq!(copy.get(b"after").unwrap().is_some(), round > 0);
        copy.close().unwrap();
    }
    // One that fails before its snapshot does not leave the waiter waiting.
    let control = BackupControl::default();
    assert!(db.backup_with(dir.file("src.pool"), &control).is_err());
    control.wait_for_version();
}
