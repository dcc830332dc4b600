//! The `tembo` binary as a user runs it: `pool create/stat/check/grow/init`
//! on pools in `/dev/shm` and in the temp dir, the errors a user meets
//! (a file that is not a pool, a missing file, an existing file, a bad
//! size), `pool stat --json` as machine-readable output, `stat` and
//! `check` of a pool holding a database (clean, crashed, damaged), a quick
//! `bench flush` and `bench plot-flush` of the committed report. Guards against the CLI drifting from what `--help` and
//! the README promise: exit codes, messages that name the path and say
//! what to do.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::atomic::{AtomicU32, Ordering};

fn tembo(args: &[&str]) -> Output {
    tembo_in(None, args)
}

fn tembo_in(dir: Option<&Path>, args: &[&str]) -> Output {
    let mut c = Command::new(env!("CARGO_BIN_EXE_tembo"));
    c.args(args);
    if let Some(d) = dir {
        c.current_dir(d);
    }
    c.output().expect("the tembo binary runs")
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn ok(o: &Output) -> String {
    assert!(o.status.success(), "failed ({:?}):\nstdout: {}\nstderr: {}", o.status, stdout(o), stderr(o));
    stdout(o)
}

/// A directory removed when dropped.
struct TempDir(PathBuf);

impl TempDir {
    fn new(parent: &Path) -> TempDir {
        static NEXT: AtomicU32 = AtomicU32::new(0);
        let p = parent.join(format!("tembo-cli-test-{}-{}", std::process::id(), NEXT.fetch_add(1, Ordering::Relaxed)));
        std::fs::create_dir_all(&p).unwrap();
        TempDir(p)
    }
    fn shm() -> TempDir {
        let shm = Path::new("/dev/shm");
        TempDir::new(if shm.is_dir() { shm } else { Path::new("/tmp") })
    }
    fn tmp() -> TempDir {
        TempDir::new(&std::env::temp_dir())
    }
    fn file(&self, name: &str) -> String {
        self.0.join(name).display().to_string()
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn stat_json(path: &str) -> serde_json::Value {
    let o = tembo(&["pool", "stat", path, "--json"]);
    serde_json::from_str(&ok(&o)).expect("stat --json prints JSON")
}

#[test]
fn create_stat_check_grow_on_shm() {
    let d = TempDir::shm();
    let p = d.file("a.pool");
    let out = ok(&tembo(&["pool", "create", &p, "--size", "1M", "--max-size", "8M", "--mode", "emulated"]));
    assert!(out.contains("created pool"), "{out}");

    let text = ok(&tembo(&["pool", "stat", &p]));
    for field in ["mode             emulated", "survives process crash", "last shutdown    clean", "fragmentation"] {
        assert!(text.contains(field), "missing {field:?} in\n{text}");
    }
    let j = stat_json(&p);
    assert_eq!(j["size_bytes"], 1 << 20);
    assert_eq!(j["max_size_bytes"], 8 << 20);
    assert_eq!(j["last_shutdown_clean"], true);
    assert_eq!(j["heap"]["allocated_blocks"], 0);
    assert!(j["uuid"].as_str().unwrap().len() == 36);
    assert!(j["roots"].as_array().unwrap().is_empty());
    assert!(j.get("database").is_none() && j.get("database_error").is_none(), "no database: {j}");
    assert!(!text.contains("database"), "{text}");

    let out = ok(&tembo(&["pool", "check", &p]));
    assert!(out.starts_with("OK: "), "{out}");

    let out = ok(&tembo(&["pool", "grow", &p, "--size", "4M"]));
    assert!(out.contains("1.0 MiB") && out.contains("4.0 MiB"), "{out}");
    assert_eq!(stat_json(&p)["size_bytes"], 4 << 20);

    // Past the maximum: refused with advice, nothing changed.
    let o = tembo(&["pool", "grow", &p, "--size", "16M"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("--max-size"), "{}", stderr(&o));
    // Raising the maximum in the same command works (the pool is reopened).
    ok(&tembo(&["pool", "grow", &p, "--size", "16M", "--max-size", "32M"]));
    let j = stat_json(&p);
    assert_eq!(j["size_bytes"], 16 << 20);
    assert_eq!(j["max_size_bytes"], 32 << 20);
    // A smaller size changes nothing.
    let out = ok(&tembo(&["pool", "grow", &p, "--size", "2M"]));
    assert!(out.contains("unchanged"), "{out}");
    ok(&tembo(&["pool", "check", &p]));
}

#[test]
fn create_in_temp_dir_and_errors() {
    let d = TempDir::tmp();
    let p = d.file("b.pool");
    ok(&tembo(&["pool", "create", &p, "--size", "512K"]));
    assert_eq!(stat_json(&p)["size_bytes"], 512 << 10);

    let o = tembo(&["pool", "create", &p, "--size", "512K"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("already exists"), "{}", stderr(&o));

    let o = tembo(&["pool", "create", &d.file("no/such/dir.pool"), "--size", "1M"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("mkdir -p"), "{}", stderr(&o));

    let o = tembo(&["pool", "create", &d.file("c.pool"), "--size", "12X"]);
    assert_eq!(o.status.code(), Some(2), "bad usage");
    assert!(stderr(&o).contains("invalid size"), "{}", stderr(&o));

    let o = tembo(&["pool", "create", &d.file("c.pool"), "--size", "4K"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("too small"), "{}", stderr(&o));

    let o = tembo(&["pool", "stat", &d.file("missing.pool")]);
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("tembo pool create"), "{}", stderr(&o));
}

#[test]
fn a_creation_killed_midway_leaves_no_pool_under_the_name() {
    // A pool is built under a hidden name and renamed into place once
    // formatted: `kill -9` during the minutes a big pool can take to
    // create must not leave a headerless file that no open accepts and
    // no create replaces (`tembo serve`'s first run creates its pool).
    let d = TempDir::shm();
    let p = d.file("big.pool");
    let mut child = Command::new(env!("CARGO_BIN_EXE_tembo"))
        .args(["pool", "create", &p, "--size", "3G"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let partial_named = |dir: &Path| {
        std::fs::read_dir(dir)
            .unwrap()
            .flatten()
            .any(|e| e.file_name().to_string_lossy().starts_with(".big.pool.creating-"))
    };
    let t0 = std::time::Instant::now();
    while !partial_named(&d.0) && child.try_wait().unwrap().is_none() && t0.elapsed().as_secs() < 20 {
        std::thread::sleep(std::time::Duration::from_millis(2));
    }
    let killed_midway = child.try_wait().unwrap().is_none();
    child.kill().unwrap();
    child.wait().unwrap();
    if killed_midway {
        assert!(!Path::new(&p).exists(), "a half-made pool appeared under its name");
    }
    // The name is free (or holds the finished pool); a new creation works
    // and sweeps the dead creation's hidden file away.
    let _ = std::fs::remove_file(&p);
    ok(&tembo(&["pool", "create", &p, "--size", "1M"]));
    ok(&tembo(&["pool", "check", &p]));
    assert!(!partial_named(&d.0), "the killed creation's file is left behind");
}

#[test]
fn check_of_a_file_that_is_not_a_pool_fails_clearly() {
    let d = TempDir::tmp();
    let p = d.file("notes.txt");
    std::fs::write(&p, "these are not the bytes of a pool\n".repeat(300)).unwrap();
    let o = tembo(&["pool", "check", &p]);
    assert_eq!(o.status.code(), Some(1));
    let err = stderr(&o);
    assert!(err.contains("not a Tembo pool") && err.contains(&p), "{err}");
    assert!(stdout(&o).is_empty());
    // The file is left as it was.
    assert!(std::fs::read_to_string(&p).unwrap().starts_with("these are not"));

    let empty = d.file("empty");
    std::fs::write(&empty, b"").unwrap();
    let o = tembo(&["pool", "check", &empty]);
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("tembo: error:"), "{}", stderr(&o));
}

#[test]
fn init_creates_the_default_pool_then_reopens_it() {
    let d = TempDir::shm();
    let out = ok(&tembo_in(Some(&d.0), &["pool", "init"]));
    assert!(out.contains("created pool tembo-data/tembo.pool"), "{out}");
    assert!(out.contains("size             64.0 MiB"), "{out}");
    assert!(d.0.join("tembo-data/tembo.pool").is_file());
    let out = ok(&tembo_in(Some(&d.0), &["pool", "init"]));
    assert!(out.contains("opened existing pool"), "{out}");
    let j: serde_json::Value = serde_json::from_str(&ok(&tembo_in(Some(&d.0), &["pool", "init", "--json"]))).unwrap();
    assert_eq!(j["size_bytes"], 64 << 20);

    let p = d.file("own/x.pool");
    let out = ok(&tembo(&["pool", "init", &p, "--size", "1M"]));
    assert!(out.contains("1.0 MiB"), "{out}");
}

#[test]
fn help_texts_explain_the_commands() {
    let out = ok(&tembo(&["--help"]));
    assert!(out.contains("pool") && out.contains("bench"), "{out}");
    let out = ok(&tembo(&["pool", "grow", "--help"]));
    assert!(out.contains("no server is using"), "{out}");
    let out = ok(&tembo(&["pool", "create", "--help"]));
    assert!(out.contains("64M"), "{out}");
}

#[test]
fn bench_flush_quick_prints_a_table_and_json() {
    let d = TempDir::shm();
    let json = d.file("out/flush.json");
    let svg = d.file("out/flush.svg");
    let o = tembo(&["bench", "flush", "--quick", "--dir", &d.0.display().to_string(), "--json", &json, "--plot", &svg]);
    let out = ok(&o);
    assert!(out.contains("MultCallFlushLRU"), "{out}");
    assert!(out.contains("64 B") && out.contains("4 MiB"), "{out}");
    assert!(out.contains("Mlines/s") && out.contains("msync") && out.contains("Pool::persist"), "{out}");
    let j: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert_eq!(j["mode"], "quick");
    let chart = std::fs::read_to_string(&svg).unwrap();
    assert!(chart.starts_with("<svg") && chart.trim_end().ends_with("</svg>"), "{chart}");
    for sweep in j["sweeps"].as_array().unwrap() {
        let name = sweep["instruction"].as_str().unwrap();
        assert!(chart.contains(&format!("\n{name} (+")), "no legend entry for {name}");
    }
    assert!(!j["sweeps"].as_array().unwrap().is_empty());
    assert!(j["persist"]["ratio"].as_f64().unwrap() > 0.0);
    // Only the JSON file and the chart are left behind: the benchmark removes its own files.
    let left: Vec<_> = std::fs::read_dir(&d.0).unwrap().map(|e| e.unwrap().file_name()).collect();
    assert_eq!(left, vec![std::ffi::OsString::from("out")]);
}

#[test]
fn bench_plot_flush_draws_the_committed_report() {
    let report = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/results/flush.json");
    let report = report.display().to_string();
    let j: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&report).unwrap()).unwrap();
    let d = TempDir::tmp();
    let svg = d.file("charts/flush.svg");
    let out = ok(&tembo(&["bench", "plot-flush", &report, "--out", &svg]));
    assert!(out.contains(&format!("wrote {svg}")), "{out}");
    let chart = std::fs::read_to_string(&svg).unwrap();
    assert!(chart.starts_with("<svg") && chart.trim_end().ends_with("</svg>"), "{chart}");
    assert!(chart.contains("Cache-line flushes per second by object size"));
    assert!(chart.contains(j["machine"]["kernel"].as_str().unwrap()));
    for sweep in j["sweeps"].as_array().unwrap() {
        let name = sweep["instruction"].as_str().unwrap();
        assert!(chart.contains(&format!("\n{name} (+")), "no legend entry for {name}");
    }

    // Without --out the chart goes beside the report.
    let copy = d.file("saved.json");
    std::fs::copy(&report, &copy).unwrap();
    let out = ok(&tembo(&["bench", "plot-flush", &copy]));
    assert!(out.contains("saved.svg"), "{out}");
    assert!(d.0.join("saved.svg").is_file());

    // A file that is not a report, or is missing: a clear error, no chart.
    let o = tembo(&["bench", "plot-flush", &svg, "--out", &d.file("bad.svg")]);
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("is not a flush report"), "{}", stderr(&o));
    let o = tembo(&["bench", "plot-flush", &d.file("missing.json")]);
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("cannot read") && stderr(&o).contains("missing.json"), "{}", stderr(&o));
    assert!(!d.0.join("bad.svg").exists() && !d.0.join("missing.svg").exists());

    let help = ok(&tembo(&["bench", "plot-flush", "--help"]));
    assert!(help.contains("--out") && help.contains("Nothing is measured"), "{help}");
    let help = ok(&tembo(&["bench", "flush", "--help"]));
    assert!(help.contains("--plot") && help.contains("docs/results/flush.svg"), "{help}");
}

#[test]
fn inspecting_a_crashed_pool_keeps_it_marked_unclean() {
    use tembo_pmem::{ModeRequest, Pool, PoolOptions};
    let d = TempDir::shm();
    let live = d.file("live.pool");
    let crashed = d.file("crashed.pool");
    let opts = PoolOptions { size: 1 << 20, mode: ModeRequest::Emulated, ..PoolOptions::default() };
    let pool = Pool::create(&live, &opts).unwrap();
    pool.alloc(100).unwrap();
    // A copy taken while the pool is open is what a crash leaves behind.
    std::fs::copy(&live, &crashed).unwrap();
    drop(pool);

    let text = ok(&tembo(&["pool", "stat", &crashed]));
    assert!(text.contains("NOT clean"), "{text}");
    // stat, check and grow must not mark it clean: the engine's recovery
    // has not run yet.
    ok(&tembo(&["pool", "check", &crashed]));
    ok(&tembo(&["pool", "grow", &crashed, "--size", "2M"]));
    let j = stat_json(&crashed);
    assert_eq!(j["last_shutdown_clean"], false);
    assert_eq!(j["size_bytes"], 2 << 20);
    assert_eq!(j["heap"]["allocated_blocks"], 1);
    // Raising the maximum past what was reserved needs a second run here.
    let o = tembo(&["pool", "grow", &crashed, "--size", "4G", "--max-size", "8G"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("run the same command again"), "{}", stderr(&o));
    ok(&tembo(&["pool", "grow", &crashed, "--size", "4G", "--max-size", "8G"]));
    assert_eq!(stat_json(&crashed)["size_bytes"], 4u64 << 30);

    assert_eq!(stat_json(&live)["last_shutdown_clean"], true);
}

// ----- pools holding a database ------------------------------------------------

fn db_opts() -> tembo_store::Options {
    tembo_store::Options { size: 4 << 20, mode: tembo_store::ModeRequest::Emulated, ..tembo_store::Options::default() }
}

/// Keys `key:0000`.. with 24-byte values; `deleted` of the first ones removed
/// after a named snapshot `before` was taken.
fn fill(db: &tembo_store::Db, keys: u32, deleted: u32) {
    for i in 0..keys {
        db.put(format!("key:{i:04}").as_bytes(), format!("value-{i:018}").as_bytes()).unwrap();
    }
    db.create_named_snapshot("before").unwrap();
    for i in 0..deleted {
        assert!(db.delete(format!("key:{i:04}").as_bytes()).unwrap());
    }
}

fn no_panic(o: &Output) {
    assert!(!stderr(o).contains("panicked") && o.status.code().is_some(), "{:?}: {}", o.status, stderr(o));
}

#[test]
fn stat_and_check_cover_the_database() {
    let d = TempDir::shm();
    let p = d.file("db.pool");
    let db = tembo_store::Db::create(&p, &db_opts()).unwrap();
    fill(&db, 600, 100);
    let version = db.version().unwrap();
    db.close().unwrap();

    let text = ok(&tembo(&["pool", "stat", &p]));
    for field in [
        "database         cdds engine",
        "keys           500",
        "snapshots      1",
        "before",
        "recovery       not needed",
        "last shutdown    clean",
    ] {
        assert!(text.contains(field), "missing {field:?} in\n{text}");
    }
    let j = stat_json(&p);
    let db = &j["database"];
    assert_eq!(db["engine"], "cdds");
    assert_eq!(db["keys"], 500);
    assert_eq!(db["version"], version);
    assert_eq!(db["named_snapshots"][0]["name"], "before");
    assert_eq!(db["recovery"]["ran"], false);
    assert!(db["height"].as_u64().unwrap() >= 2, "{db}");
    // The snapshot keeps the deleted keys' entries: dead, and nodes beyond the live ones.
    assert!(db["dead_entries"].as_u64().unwrap() >= 100, "{db}");
    assert!(db["owned_nodes"].as_u64().unwrap() >= db["live_nodes"].as_u64().unwrap(), "{db}");
    assert!(db["data_bytes"].as_u64().unwrap() >= 500 * 32, "{db}");
    assert!(db["owned_bytes"].as_u64().unwrap() > db["data_bytes"].as_u64().unwrap(), "{db}");
    assert!(j.get("database_error").is_none(), "{j}");

    let out = ok(&tembo(&["pool", "check", &p]));
    assert!(out.starts_with("OK: "), "{out}");
    assert!(out.contains("OK: database (cdds engine): 500 keys"), "{out}");
    assert!(!out.contains("recovery:"), "{out}");

    // `init` on an existing pool shows the database too.
    let out = ok(&tembo(&["pool", "init", &p]));
    assert!(out.contains("keys           500"), "{out}");
}

#[test]
fn stat_of_a_crashed_database_runs_recovery_and_says_so() {
    let d = TempDir::shm();
    let live = d.file("live.pool");
    let crashed = d.file("crashed.pool");
    let crashed2 = d.file("crashed2.pool");
    // No background GC thread: a file copy is not one instant, and GC
    // removing a dead entry and then freeing its node while the copy runs
    // would leave an image no crash can (the entry from before, the free
    // from after).
    let opts = tembo_store::Options { gc: None, ..db_opts() };
    let db = tembo_store::Db::create(&live, &opts).unwrap();
    fill(&db, 300, 0);
    // A copy taken while the database is open (and idle) is what a crash
    // leaves behind.
    std::fs::copy(&live, &crashed).unwrap();
    std::fs::copy(&live, &crashed2).unwrap();
    db.close().unwrap();

    let text = ok(&tembo(&["pool", "stat", &crashed]));
    assert!(text.contains("NOT clean") && text.contains("recovered now"), "{text}");
    assert!(text.contains("recovery       ran:") && text.contains("opening the database ran recovery"), "{text}");
    assert!(text.contains("keys           300"), "{text}");
    // Recovery ran, so the pool was closed clean: the next open needs none.
    let j = stat_json(&crashed);
    assert_eq!(j["last_shutdown_clean"], true);
    assert_eq!(j["database"]["recovery"]["ran"], false);
    ok(&tembo(&["pool", "check", &crashed]));

    let out = ok(&tembo(&["pool", "check", &crashed2]));
    assert!(out.contains("recovery: ") && out.contains("ran recovery"), "{out}");
    assert!(out.contains("OK: database (cdds engine): 300 keys"), "{out}");
    assert_eq!(stat_json(&crashed2)["database"]["recovery"]["ran"], false);
}

#[test]
fn a_damaged_database_fails_check_with_a_message() {
    let d = TempDir::shm();

    // 1. A value's bytes flipped: the record's checksum no longer matches.
    let p = d.file("record.pool");
    let db = tembo_store::Db::create(&p, &db_opts()).unwrap();
    fill(&db, 200, 0);
    db.put(b"victim", b"CORRUPT-ME-this-value-is-the-one").unwrap();
    db.close().unwrap();
    let mut bytes = std::fs::read(&p).unwrap();
    let at = bytes.windows(11).position(|w| w == b"CORRUPT-ME-").expect("the value is in the file");
    bytes[at] ^= 0xFF;
    std::fs::write(&p, &bytes).unwrap();
    let o = tembo(&["pool", "check", &p]);
    no_panic(&o);
    assert_eq!(o.status.code(), Some(1), "{}", stdout(&o));
    assert!(stdout(&o).contains("violation database:") && stdout(&o).contains("checksum"), "{}", stdout(&o));
    assert!(stderr(&o).contains("1 database invariant violation"), "{}", stderr(&o));
    no_panic(&tembo(&["pool", "stat", &p]));

    // 2. The root node's magic overwritten: the walk cannot proceed.
    let p = d.file("node.pool");
    let db = tembo_store::Db::create(&p, &db_opts()).unwrap();
    fill(&db, 200, 0);
    // The tree's metadata block (root `cdds`): word 3 is the root node.
    let meta = db.pool().root("cdds").unwrap();
    let root = db.pool().load_u64(meta + 24).unwrap();
    db.close().unwrap();
    let mut bytes = std::fs::read(&p).unwrap();
    let magic = root as usize + 8;
    let word = u64::from_le_bytes(bytes[magic..magic + 8].try_into().unwrap());
    assert_eq!(word >> 32, 0xCDD5_0DE0, "pool offsets are file offsets");
    bytes[magic + 4..magic + 8].copy_from_slice(&[0xAB; 4]);
    std::fs::write(&p, &bytes).unwrap();
    let o = tembo(&["pool", "check", &p]);
    no_panic(&o);
    assert_eq!(o.status.code(), Some(1), "{}", stdout(&o));
    assert!(stdout(&o).starts_with("OK: "), "the pool's own metadata is fine: {}", stdout(&o));
    let err = stderr(&o);
    assert!(err.contains("could not complete") && err.contains("bad node magic") && err.contains(&p), "{err}");
    let o = tembo(&["pool", "stat", &p]);
    no_panic(&o);
    assert_eq!(o.status.code(), Some(1));
    assert!(stdout(&o).contains("database         ERROR: cannot walk the database"), "{}", stdout(&o));
    assert!(stderr(&o).contains("bad node magic"), "{}", stderr(&o));
    let o = tembo(&["pool", "stat", &p, "--json"]);
    assert_eq!(o.status.code(), Some(1));
    let j: serde_json::Value = serde_json::from_str(&stdout(&o)).expect("still JSON");
    assert!(j["database_error"].as_str().unwrap().contains("bad node magic"), "{j}");

    // 3. The engine record's magic overwritten: the database cannot be opened.
    let p = d.file("record-root.pool");
    let db = tembo_store::Db::create(&p, &db_opts()).unwrap();
    let rec = db.pool().root(tembo_store::DB_ROOT).unwrap() as usize;
    db.close().unwrap();
    let mut bytes = std::fs::read(&p).unwrap();
    assert_eq!(&bytes[rec..rec + 8], b"TEMBODB\0");
    bytes[rec..rec + 8].copy_from_slice(b"garbage!");
    std::fs::write(&p, &bytes).unwrap();
    let o = tembo(&["pool", "check", &p]);
    no_panic(&o);
    assert_eq!(o.status.code(), Some(1));
    let err = stderr(&o);
    assert!(err.contains("cannot open the database") && err.contains("corrupted engine record"), "{err}");
}

/// `tembo bench smoke` runs every workload on every target this build has
/// (with the `peers` feature: all the peer databases too), writes reports
/// and charts, and reads them back.
#[test]
fn bench_smoke_runs_every_workload_on_every_target() {
    let d = TempDir::shm();
    let out = TempDir::tmp();
    let o = ok(&tembo(&["bench", "smoke", "--dir", &d.0.display().to_string(), "--out", &out.0.display().to_string()]));
    for w in ["micro", "ycsb", "ordering"] {
        assert!(o.contains(&format!("smoke: {w}:")), "{o}");
        for f in [
            format!("{w}.json"),
            format!("{w}-throughput.svg"),
            format!("{w}-throughput.png"),
            format!("{w}-latency.png"),
        ] {
            assert!(out.0.join(&f).is_file(), "{f} missing; output:\n{o}");
        }
    }
    assert!(o.contains("smoke: heatmap:") && out.0.join("heatmap.png").is_file(), "{o}");
    // Tembo's engines count their flushes: every report with one has the chart.
    for w in ["micro", "ycsb", "ordering"] {
        assert!(out.0.join(format!("{w}-flushes.png")).is_file(), "{w}-flushes.png missing; output:\n{o}");
    }
    let json = std::fs::read_to_string(out.0.join("micro.json")).unwrap();
    // tembo-serve: this executable started as a server by the bench.
    for t in ["cdds", "cdds-none", "btreemap", "tembo-serve"] {
        assert!(json.contains(&format!("\"target\": \"{t}\"")), "{t} missing from the micro report");
    }
    // Every target's files are removed after its run.
    assert_eq!(std::fs::read_dir(&d.0).unwrap().count(), 0);
}

/// Bad target names and a peer missing from the build get errors that say what to do.
#[test]
fn bench_targets_errors_say_what_to_do() {
    let o = tembo(&["bench", "micro", "--targets", "mongodb", "--keys", "10"]);
    assert!(!o.status.success());
    assert!(stderr(&o).contains("known: cdds"), "{}", stderr(&o));
    let o = tembo(&["bench", "micro", "--keys", "10", "--runs", "1", "--dir", "/nonexistent/dir"]);
    assert!(!o.status.success());
    assert!(stderr(&o).contains("--dir"), "{}", stderr(&o));
}

/// `tembo crashtest --engine` for every in-place engine, small: it runs
/// the campaign, prints the table and exits 0; an unknown engine is refused.
#[test]
fn crashtest_runs_the_in_place_engines() {
    for engine in ["kamino", "kamino-dynamic", "undo"] {
        let out =
            ok(&tembo(&["crashtest", "--engine", engine, "--scale", "8", "--ordering", "fast", "--keys", "uniform"]));
        assert!(
            out.contains("objects") && out.contains("uniform") && out.contains("violations under fast/full: 0"),
            "{out}"
        );
    }
    let o = tembo(&["crashtest", "--engine", "nope"]);
    assert!(!o.status.success());
    assert!(stderr(&o).contains("cdds, kamino, kamino-dynamic, undo"), "{}", stderr(&o));
}

#[test]
fn backup_copies_the_database_and_refuses_a_pool_in_use() {
    let d = TempDir::shm();
    let p = d.file("db.pool");
    let b = d.file("copy.pool");
    let db = tembo_store::Db::create(&p, &db_opts()).unwrap();
    fill(&db, 600, 100);
    // In use by this process: the lock refuses it, and the message says what to do.
    let o = tembo(&["pool", "backup", &p, &b]);
    no_panic(&o);
    assert!(!o.status.success());
    assert!(stderr(&o).contains("BGSAVE"), "{}", stderr(&o));
    db.close().unwrap();

    let out = ok(&tembo(&["pool", "backup", &p, &b]));
    assert!(out.contains("backed up 500 keys"), "{out}");
    // The copy holds the live pairs only (no named snapshot, no dead entries).
    let j = stat_json(&b);
    assert_eq!(j["database"]["keys"], 500, "{j}");
    assert_eq!(j["database"]["dead_entries"], 0, "{j}");
    let out = ok(&tembo(&["pool", "check", &b]));
    assert!(out.contains("OK: database (cdds engine): 500 keys"), "{out}");
    let copy = tembo_store::Db::open(&b, &db_opts()).unwrap();
    assert_eq!(copy.get(b"key:0100").unwrap(), Some(b"value-000000000000000100".to_vec()));
    assert_eq!(copy.get(b"key:0099").unwrap(), None);
    drop(copy);

    let o = tembo(&["pool", "backup", &p, &p]);
    no_panic(&o);
    assert!(stderr(&o).contains("own pool file"), "{}", stderr(&o));
    let o = tembo(&["pool", "backup", &d.file("absent.pool"), &b]);
    no_panic(&o);
    assert!(stderr(&o).contains("does not exist"), "{}", stderr(&o));
}
