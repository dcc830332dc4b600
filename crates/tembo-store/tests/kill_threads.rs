//! A process with several writer threads killed with SIGKILL at random
//! moments, every engine: after each kill the database reopens (recovering),
//! passes `check`, and holds, for every thread, exactly its batches
//! acknowledged before the kill, or those plus the one in flight, never
//! part of a batch. The kill may land anywhere, in recovery after the last
//! kill too. (The simulator's campaigns cover torn and reordered lines;
//! this covers real threads, the GC and coordinator threads, and real
//! process death on a real file.)
//!
//! The child is this test binary re-run with the ignored test
//! `kill_child`; it appends each acknowledged batch number to a per-thread
//! file after the batch returns, so what the file holds was durable.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use tembo_store::{Db, Engine, Options, WriteBatch};

const THREADS: u64 = 4;
const KEYS_PER_THREAD: u64 = 150;
const KILLS: u64 = 8;

type Model = BTreeMap<Vec<u8>, Vec<u8>>;
type Batch = Vec<(Vec<u8>, Option<Vec<u8>>)>;

fn engine(name: &str) -> Engine {
    match name {
        "cdds" => Engine::Cdds,
        "kamino" => Engine::Kamino,
        "kamino-dynamic" => Engine::KaminoDynamic,
        "undo" => Engine::Undo,
        other => panic!("unknown engine {other}"),
    }
}

fn options(e: Engine) -> Options {
    Options { size: 8 << 20, max_size: Some(64 << 20), engine: e, ..Options::default() }
}

/// Thread `t`'s `n`-th batch of round `round`: 1-3 puts and deletes of its
/// own keys.
fn batch(round: u64, t: u64, rng: &mut ChaCha8Rng, n: u64) -> Batch {
    (0..rng.gen_range(1..=3))
        .map(|_| {
            let k = format!("t{t}/k{:04}", rng.gen_range(0..KEYS_PER_THREAD)).into_bytes();
            if rng.gen_bool(0.2) {
                (k, None)
            } else {
                let mut v = format!("r{round}-t{t}-n{n}-").into_bytes();
                v.resize(rng.gen_range(v.len()..400), b'a' + (n % 26) as u8);
                (k, Some(v))
            }
        })
        .collect()
}

fn rng_for(round: u64, t: u64) -> ChaCha8Rng {
    ChaCha8Rng::seed_from_u64(0x4B11_0000 ^ (round << 8) ^ t)
}

fn ack_path(dir: &Path, t: u64) -> PathBuf {
    dir.join(format!("acks-{t}"))
}

/// The child: opens (recovering) and writes from `THREADS` threads until
/// it is killed. Run only by `writers_survive_sigkill_*`.
#[test]
#[ignore = "the child process of the kill tests, not a test of its own"]
fn kill_child() {
    let Ok(dir) = std::env::var("TEMBO_KILL_DIR") else { return };
    let dir = PathBuf::from(dir);
    let e = engine(&std::env::var("TEMBO_KILL_ENGINE").unwrap());
    let round: u64 = std::env::var("TEMBO_KILL_ROUND").unwrap().parse().unwrap();
    let db = Db::open_or_create(dir.join("db.pool"), &options(e)).unwrap();
    std::thread::scope(|s| {
        for t in 0..THREADS {
            let (db, dir) = (&db, &dir);
            s.spawn(move || {
                let mut acks = std::fs::OpenOptions::new().append(true).open(ack_path(dir, t)).unwrap();
                let mut rng = rng_for(round, t);
                for n in 0.. {
                    let mut wb = WriteBatch::new();
                    for (k, v) in batch(round, t, &mut rng, n) {
                        match v {
                            Some(v) => wb.put(k, v),
                            None => wb.delete(k),
                        };
                    }
                    db.write(&wb).unwrap();
                    acks.write_all(&(n + 1).to_le_bytes()).unwrap();
                }
            });
        }
    });
}

fn apply(m: &mut Model, b: &Batch) {
    for (k, v) in b {
        match v {
            Some(v) => m.insert(k.clone(), v.clone()),
            None => m.remove(k),
        };
    }
}

fn thread_part(m: &Model, t: u64) -> Model {
    let p = format!("t{t}/").into_bytes();
    m.iter().filter(|(k, _)| k.starts_with(&p)).map(|(k, v)| (k.clone(), v.clone())).collect()
}

fn run(engine_name: &str) {
    let dir = std::env::temp_dir().join(format!("tembo-kill-threads-{engine_name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let mut rng = ChaCha8Rng::seed_from_u64(0x5EED);
    let mut model = Model::new();
    let mut in_flight_taken = 0;
    for round in 0..KILLS {
        for t in 0..THREADS {
            std::fs::write(ack_path(&dir, t), []).unwrap();
        }
        let mut child = Command::new(std::env::current_exe().unwrap())
            .args(["--ignored", "--exact", "kill_child", "--test-threads=1", "--nocapture"])
            .env("TEMBO_KILL_DIR", &dir)
            .env("TEMBO_KILL_ENGINE", engine_name)
            .env("TEMBO_KILL_ROUND", round.to_string())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        std::thread::sleep(Duration::from_millis(rng.gen_range(60..400)));
        if let Ok(Some(status)) = child.try_wait() {
            let out = child.wait_with_output().unwrap();
            panic!(
                "{engine_name} round {round}: the child exited ({status}): {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        child.kill().unwrap(); // SIGKILL
        child.wait().unwrap();

        let db = Db::open(dir.join("db.pool"), &options(engine(engine_name))).unwrap();
        let got: Model = db.iter().map(|r| r.unwrap()).collect();
        let mut next = Model::new();
        let mut total_acked = 0;
        for t in 0..THREADS {
            let bytes = std::fs::read(ack_path(&dir, t)).unwrap();
            let acked = bytes.len() as u64 / 8;
            total_acked += acked;
            let mut r = rng_for(round, t);
            let mut m = thread_part(&model, t);
            for n in 0..acked {
                apply(&mut m, &batch(round, t, &mut r, n));
            }
            let mut with_next = m.clone();
            apply(&mut with_next, &batch(round, t, &mut r, acked));
            let have = thread_part(&got, t);
            if have == m {
                next.extend(m);
            } else if have == with_next {
                in_flight_taken += 1;
                next.extend(with_next);
            } else {
                panic!(
                    "{engine_name} round {round} thread {t}: {} keys match neither its {acked} acknowledged batches \
                     ({} keys) nor one more",
                    have.len(),
                    m.len()
                );
            }
        }
        assert_eq!(got.len(), next.len(), "{engine_name} round {round}: keys outside every thread's range");
        let c = db.check().unwrap();
        assert!(c.is_ok(), "{engine_name} round {round}: check: {c:?}");
        db.close().unwrap();
        model = next;
        eprintln!("{engine_name} round {round}: {total_acked} batches acknowledged, {} keys", model.len());
    }
    eprintln!("{engine_name}: {in_flight_taken} in-flight batches found applied after a kill");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn writers_survive_sigkill_cdds() {
    run("cdds");
}

#[test]
fn writers_survive_sigkill_kamino() {
    run("kamino");
}

#[test]
fn writers_survive_sigkill_kamino_dynamic() {
    run("kamino-dynamic");
}

#[test]
fn writers_survive_sigkill_undo() {
    run("undo");
}
