//! The bench's network targets, for real: `tembo serve` (this build's
//! executable) and, where `redis-server` is installed (`scripts/test`
//! installs it), Redis in its three persistence modes, each started by the
//! bench on loopback, checked against a model, then run through
//! `tembo bench micro` and `tembo bench ycsb` (workload E scans through the
//! key index) with their JSON reports read back.

use std::path::{Path, PathBuf};
use std::process::Command;

use tembo_bench::targets::{check_against_model, net, TargetKind};

fn tembo() -> &'static str {
    env!("CARGO_BIN_EXE_tembo")
}

fn scratch(name: &str) -> PathBuf {
    let base = if Path::new("/dev/shm").is_dir() { PathBuf::from("/dev/shm") } else { std::env::temp_dir() };
    let d = base.join(format!("tembo-bench-net-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// The network targets this machine can start (tembo-serve always).
fn network_targets() -> Vec<TargetKind> {
    net::set_tembo_binary(PathBuf::from(tembo()));
    let found: Vec<TargetKind> =
        TargetKind::ALL.into_iter().filter(|k| k.server().is_some() && k.available()).collect();
    assert!(found.contains(&TargetKind::TemboServe), "tembo-serve must be available with the tembo executable");
    if found.len() == 1 {
        eprintln!("redis-server not on PATH: only tembo-serve is checked (scripts/test installs redis-server)");
    }
    found
}

#[test]
fn every_network_target_agrees_with_a_model() {
    let root = scratch("model");
    for kind in network_targets() {
        let dir = root.join(kind.name());
        std::fs::create_dir_all(&dir).unwrap();
        check_against_model(kind, &dir).unwrap_or_else(|e| panic!("{kind}: {e:#}"));
    }
    let _ = std::fs::remove_dir_all(&root);
}

fn run_json(args: &[&str], json: &Path) -> serde_json::Value {
    let out = Command::new(tembo()).args(args).arg("--json").arg(json).output().unwrap();
    assert!(
        out.status.success(),
        "tembo {args:?} failed:\n{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_str(&std::fs::read_to_string(json).unwrap()).unwrap()
}

/// Every phase of every network target measured something, and the modes
/// say what ran.
fn check_report(report: &serde_json::Value, targets: &[TargetKind], phases: usize) {
    let rows = report["targets"].as_array().unwrap();
    assert_eq!(rows.len(), targets.len(), "{report}");
    for (row, kind) in rows.iter().zip(targets) {
        assert_eq!(row["target"], kind.name());
        assert_eq!(row["durable"], kind.durable());
        let mode = row["mode"].as_str().unwrap();
        let expect =
            if *kind == TargetKind::TemboServe { "tembo serve over loopback, pool mode" } else { "redis-server" };
        assert!(mode.contains(expect), "{kind}: mode {mode}");
        let ph = row["phases"].as_array().unwrap();
        assert_eq!(ph.len(), phases, "{kind}");
        for p in ph {
            assert!(p["per_s"].as_f64().unwrap() > 0.0, "{kind}: {p}");
            assert!(p["latency"]["count"].as_u64().unwrap() > 0, "{kind}: {p}");
        }
    }
}

#[test]
fn micro_and_ycsb_run_over_the_network() {
    let targets = network_targets();
    let dir = scratch("cli");
    let dir_s = dir.to_str().unwrap();
    let micro = run_json(
        &["bench", "micro", "--keys", "400", "--runs", "1", "--targets", "network", "--dir", dir_s],
        &dir.join("micro.json"),
    );
    check_report(&micro, &targets, 3);
    // E scans (so its targets keep the key index); A reads and updates.
    let ycsb = run_json(
        &[
            "bench",
            "ycsb",
            "--workloads",
            "a,e",
            "--records",
            "300",
            "--ops",
            "300",
            "--runs",
            "1",
            "--targets",
            "network",
            "--dir",
            dir_s,
        ],
        &dir.join("ycsb.json"),
    );
    check_report(&ycsb, &targets, 4);
    // No run directory and no server is left: the bench stops every server
    // it started (each ran with its run directory, under `dir`, as its
    // working directory).
    let left = std::fs::read_dir(&dir).unwrap().filter_map(Result::ok).filter(|e| e.path().is_dir()).count();
    assert_eq!(left, 0, "a run directory was left behind in {}", dir.display());
    let running: Vec<String> = std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(Result::ok)
        .filter_map(|e| Some((e.file_name().into_string().ok()?, std::fs::read_link(e.path().join("cwd")).ok()?)))
        .filter(|(_, cwd)| cwd.starts_with(&dir))
        .map(|(pid, cwd)| format!("{pid} in {}", cwd.display()))
        .collect();
    assert!(running.is_empty(), "servers left running: {running:?}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_missing_server_program_is_a_clear_error() {
    let dir = scratch("missing");
    let out = Command::new(tembo())
        .args(["bench", "micro", "--keys", "10", "--runs", "1", "--targets", "redis-always", "--dir"])
        .arg(&dir)
        .env("PATH", "/nonexistent")
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("redis-server on PATH"), "{err}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// `tembo bench sizes` (the thesis's Figure 5.5): a phase per operation and
/// value size, and the puts-by-size chart.
#[test]
fn sizes_measures_each_value_size_and_draws_the_figure() {
    let dir = scratch("sizes");
    let stem = dir.join("sizes");
    let out = Command::new(tembo())
        .args(["bench", "sizes", "--keys", "200", "--value-sizes", "64,512", "--runs", "1", "--targets", "tembo-serve"])
        .arg("--dir")
        .arg(&dir)
        .arg("--json")
        .arg(dir.join("sizes.json"))
        .arg("--plot")
        .arg(&stem)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let report: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("sizes.json")).unwrap()).unwrap();
    let phases: Vec<&str> =
        report["targets"][0]["phases"].as_array().unwrap().iter().map(|p| p["phase"].as_str().unwrap()).collect();
    assert_eq!(phases, ["put 64 B", "get 64 B", "delete 64 B", "put 512 B", "get 512 B", "delete 512 B"]);
    for f in ["sizes-puts-by-size.svg", "sizes-puts-by-size.png", "sizes-throughput.png"] {
        assert!(dir.join(f).is_file(), "{f} missing");
    }
    let _ = std::fs::remove_dir_all(&dir);
}
