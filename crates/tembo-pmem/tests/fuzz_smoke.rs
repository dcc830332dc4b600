//! The `pool_open` fuzz target's logic, run by the ordinary test suite.
//!
//! Proves that the exact code of `fuzz/fuzz_targets/pool_open.rs` (included
//! from `pool_open_logic.rs`) never panics on every seed in
//! `fuzz/seeds/pool_open/`, on seeds generated afresh from the current
//! format, and on a few thousand deterministic mutations of them (bit flips,
//! byte and word overwrites, truncations, extensions, splices, and
//! well-formed but wrong run headers and header words that get past the
//! checksums); that a sample of them gives the same outcome through a real
//! file (`Pool::open`) as in memory (`Pool::from_image`); and that the seed
//! files are present and small. `TEMBO_REGEN_SEEDS=1` rewrites the seed files.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use tembo_pmem::alloc::run::{self, RunKind};
use tembo_pmem::header::{HEADER_BYTES, PAGE_BYTES, ROOT_NAME_MAX};
use tembo_pmem::{ModeRequest, Pool, PoolOptions};

mod logic {
    include!("../../../fuzz/fuzz_targets/pool_open_logic.rs");
}
use logic::{pool_open, pool_open_file, Outcome};

const SEED_LIMIT: usize = 64 * 1024;
const MUTATIONS: usize = 3000;
const OFF_SIZE: usize = 64;
const OFF_MAX_SIZE: usize = 72;
const OFF_CLEAN: usize = 80;
const OFF_ROOTS: usize = 128;

fn seed_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/seeds/pool_open")
}

struct TempDir(PathBuf);

impl TempDir {
    fn new(tag: &str) -> TempDir {
        static N: AtomicU64 = AtomicU64::new(0);
        let p = std::env::temp_dir().join(format!(
            "tembo-fuzz-{tag}-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = std::fs::remove_dir_all(&p);
        std::fs::create_dir_all(&p).unwrap();
        TempDir(p)
    }
    fn join(&self, name: &str) -> PathBuf {
        self.0.join(name)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Runs the fuzz logic, turning a panic into a test failure naming the case.
fn run_case(what: &str, data: &[u8]) -> Outcome {
    match std::panic::catch_unwind(|| pool_open(data)) {
        Ok(o) => o,
        Err(_) => panic!("the pool_open fuzz logic panicked on {what} ({} bytes)", data.len()),
    }
}

// ----- crafting valid words ----------------------------------------------------------

/// A header word: value << 16 | its check, as the format defines it.
fn word(field: u8, extra: &[u8], value: u64) -> u64 {
    tembo_pmem::header::encode_word(field, extra, value & ((1 << 48) - 1))
}

fn put(img: &mut Vec<u8>, off: usize, w: u64) {
    if img.len() < off + 8 {
        img.resize(off + 8, 0);
    }
    img[off..off + 8].copy_from_slice(&w.to_le_bytes());
}

fn get(img: &[u8], off: usize) -> u64 {
    u64::from_le_bytes(img[off..off + 8].try_into().unwrap())
}

// ----- seeds -----------------------------------------------------------------------------

fn opts(size: u64) -> PoolOptions {
    PoolOptions { size, max_size: Some(4 << 20), mode: ModeRequest::Emulated, ..PoolOptions::default() }
}

fn trim(mut img: Vec<u8>) -> Vec<u8> {
    let end = img.iter().rposition(|b| *b != 0).map_or(0, |i| i + 1);
    img.truncate(end.max(HEADER_BYTES as usize));
    img
}

/// Builds a pool file with `work`, returning its bytes while open
/// (`clean = 0`, as a crash leaves them) and after close.
fn build(dir: &TempDir, name: &str, size: u64, work: impl FnOnce(&Pool)) -> (Vec<u8>, Vec<u8>) {
    let path = dir.join(name);
    let pool = Pool::create(&path, &opts(size)).unwrap();
    work(&pool);
    let open = std::fs::read(&path).unwrap();
    pool.close().unwrap();
    let closed = std::fs::read(&path).unwrap();
    std::fs::remove_file(&path).unwrap();
    (trim(open), trim(closed))
}

/// Seed images made from the current format, each under 64 KiB (trailing
/// zero pages left out: the target zero-extends to the header's size).
fn generated_seeds() -> Vec<(String, Vec<u8>)> {
    let dir = TempDir::new("seeds");
    let page = PAGE_BYTES;
    let mut out = Vec::new();

    // A fresh pool: one free run.
    let (crashed, fresh) = build(&dir, "fresh", 64 << 10, |_| {});
    out.push(("fresh-clean".to_string(), fresh.clone()));
    out.push(("fresh-unclean".to_string(), crashed));
    out.push(("header-only".to_string(), fresh[..HEADER_BYTES as usize].to_vec()));

    // Two adjacent free runs (a crash between growth and merge): open merges them.
    let mut split = fresh.clone();
    put(&mut split, HEADER_BYTES as usize, run::encode(0, RunKind::Free, 5));
    put(&mut split, (HEADER_BYTES + 5 * page) as usize, run::encode(5, RunKind::Free, 10));
    out.push(("split-free-runs".to_string(), split));

    // One large block filling the heap, with roots.
    let (crashed, closed) = build(&dir, "large", 64 << 10, |p| {
        let b = p.alloc(15 * page - 64).unwrap();
        p.fill(b, 256, 0x11).unwrap();
        p.persist(b, 256);
        p.set_root("large", b).unwrap();
        p.set_root("null-root", 0).unwrap();
    });
    out.push(("large-clean".to_string(), closed));
    out.push(("large-unclean".to_string(), crashed));

    // A large block then a slab of 16-byte blocks, nothing free; some freed.
    let (crashed, closed) = build(&dir, "mixed", HEADER_BYTES + 17 * page, |p| {
        let big = p.alloc(33 << 10).unwrap();
        p.fill(big, 64, 0x22).unwrap();
        p.persist(big, 64);
        let smalls: Vec<u64> = (0..40).map(|_| p.alloc(16).unwrap()).collect();
        for (i, s) in smalls.iter().enumerate() {
            p.store_u64(*s, i as u64 + 1).unwrap();
            p.persist(*s, 8);
        }
        for s in smalls.iter().step_by(3) {
            p.free(*s).unwrap();
        }
        p.set_root("big", big).unwrap();
        p.set_root("first-small", smalls[1]).unwrap();
        assert_eq!(p.alloc_stats().free_runs, 0, "the seed's heap is full");
    });
    out.push(("mixed-clean".to_string(), closed));
    // An interrupted root creation: name set, word zero.
    let mut torn = crashed.clone();
    let slot = (0..32).find(|s| get(&torn, OFF_ROOTS + s * 32 + ROOT_NAME_MAX) != 0).unwrap();
    put(&mut torn, OFF_ROOTS + slot * 32 + ROOT_NAME_MAX, 0);
    out.push(("mixed-unclean".to_string(), crashed));
    out.push(("torn-root".to_string(), torn));

    // A slab of 1 KiB blocks filling the heap exactly.
    let (_, closed) = build(&dir, "slab", HEADER_BYTES + 16 * page, |p| {
        for _ in 0..10 {
            let b = p.alloc(1000).unwrap();
            p.fill(b, 1000, 0x33).unwrap();
            p.persist(b, 1000);
        }
    });
    out.push(("slab-clean".to_string(), closed));

    // Not pools.
    out.push(("empty".to_string(), Vec::new()));
    out.push(("text".to_string(), b"this is not a Tembo pool\n".to_vec()));
    out.push(("magic-only".to_string(), b"TEMBOPL\x01".to_vec()));

    for (name, img) in &out {
        assert!(img.len() < SEED_LIMIT, "seed {name} is {} bytes", img.len());
    }
    out
}

fn seed_files() -> Vec<(String, Vec<u8>)> {
    let mut v: Vec<_> = std::fs::read_dir(seed_dir())
        .unwrap_or_else(|e| panic!("{}: {e}", seed_dir().display()))
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_file())
        .map(|p| (p.file_name().unwrap().to_string_lossy().into_owned(), std::fs::read(&p).unwrap()))
        .collect();
    v.sort();
    v
}

// ----- mutations --------------------------------------------------------------------------

/// Offsets worth hitting: the header's fields and every page start (run headers).
fn hot_offset(rng: &mut ChaCha8Rng, len: usize) -> usize {
    let len = len.max(1);
    match rng.gen_range(0..4) {
        0 => rng.gen_range(0..len.min(160)),
        1 => {
            let pages = (len as u64).div_ceil(PAGE_BYTES).max(1);
            ((rng.gen_range(0..pages) * PAGE_BYTES) as usize + rng.gen_range(0..72)).min(len - 1)
        }
        _ => rng.gen_range(0..len),
    }
}

fn mutate(rng: &mut ChaCha8Rng, img: &mut Vec<u8>, other: &[u8]) {
    let heap_pages = |img: &[u8]| (img.len() as u64).saturating_sub(HEADER_BYTES) / PAGE_BYTES;
    match rng.gen_range(0..10) {
        0 | 1 if !img.is_empty() => {
            let at = hot_offset(rng, img.len());
            img[at] ^= 1 << rng.gen_range(0..8);
        }
        2 if !img.is_empty() => {
            let at = hot_offset(rng, img.len());
            img[at] = rng.gen();
        }
        3 => {
            let n = rng.gen_range(0..=img.len());
            img.truncate(n);
        }
        4 => {
            let extra = rng.gen_range(1..9000);
            let fill: u8 = if rng.gen_bool(0.5) { 0 } else { rng.gen() };
            img.extend(std::iter::repeat(fill).take(extra));
        }
        5 => {
            // A well-formed run header with a wrong kind or length.
            let pages = heap_pages(img).max(1);
            let page = rng.gen_range(0..pages);
            let kind = match rng.gen_range(0..3) {
                0 => RunKind::Free,
                1 => RunKind::Large,
                _ => RunKind::Slab(rng.gen_range(0..64)),
            };
            let n = if rng.gen_bool(0.8) { rng.gen_range(1..=pages + 2) } else { rng.gen_range(1..1 << 36) };
            put(img, (HEADER_BYTES + page * PAGE_BYTES) as usize, run::encode(page, kind, n));
        }
        6 => {
            // A well-formed size, max-size or clean word with another value.
            let (off, field) = [(OFF_SIZE, 1u8), (OFF_MAX_SIZE, 2), (OFF_CLEAN, 3)][rng.gen_range(0..3)];
            let value = match rng.gen_range(0..4) {
                0 => rng.gen_range(0..3),
                1 => rng.gen_range(0..2048u64) * PAGE_BYTES,
                2 => rng.gen_range(0..1u64 << 48),
                _ => get_or_zero(img, off) >> 16 ^ (1 << rng.gen_range(0..48)),
            };
            put(img, off, word(field, &[], value));
        }
        7 => {
            // A well-formed root in a random slot.
            let slot = rng.gen_range(0..32);
            let mut name = [0u8; ROOT_NAME_MAX];
            let len = rng.gen_range(1..=ROOT_NAME_MAX);
            for b in &mut name[..len] {
                *b = rng.gen_range(b'a'..=b'z');
            }
            if rng.gen_bool(0.1) {
                name[rng.gen_range(0..len)] = 0xC3; // not UTF-8 on its own
            }
            let value = if rng.gen_bool(0.5) { rng.gen_range(0..img.len().max(1) as u64 + 8192) } else { rng.gen() };
            let off = OFF_ROOTS + slot * 32;
            if img.len() < off + 32 {
                img.resize(off + 32, 0);
            }
            img[off..off + ROOT_NAME_MAX].copy_from_slice(&name);
            let w = if rng.gen_bool(0.1) { 0 } else { word(4, &name, value) };
            put(img, off + ROOT_NAME_MAX, w);
        }
        8 if !other.is_empty() && !img.is_empty() => {
            // Splice a stretch of another seed in at the same offset.
            let at = rng.gen_range(0..img.len().min(other.len()));
            let n = rng.gen_range(1..=(img.len().min(other.len()) - at).min(4096));
            img[at..at + n].copy_from_slice(&other[at..at + n]);
        }
        _ if img.len() >= 8 => {
            let at = hot_offset(rng, img.len() - 7) / 8 * 8;
            put(img, at.min(img.len() - 8), rng.gen());
        }
        _ => img.push(rng.gen()),
    }
}

fn get_or_zero(img: &[u8], off: usize) -> u64 {
    if img.len() >= off + 8 {
        get(img, off)
    } else {
        0
    }
}

// ----- tests ---------------------------------------------------------------------------------

#[test]
fn crafted_words_match_the_library() {
    let (_, img) = &generated_seeds()[0];
    let size = get(img, OFF_SIZE) >> 16;
    assert_eq!(size, 64 << 10);
    assert_eq!(word(1, &[], size), get(img, OFF_SIZE), "the test's CRC-16 matches the header's");
    assert_eq!(word(2, &[], 4 << 20), get(img, OFF_MAX_SIZE));
    assert_eq!(word(3, &[], 1), get(img, OFF_CLEAN));
}

#[test]
fn generated_seeds_open_as_expected() {
    for (name, img) in generated_seeds() {
        let got = run_case(&name, &img);
        let want_open = !matches!(name.as_str(), "header-only" | "empty" | "text" | "magic-only");
        match (&got, want_open) {
            (Outcome::Opened { consistent: true }, true) => {}
            (Outcome::Refused(_), false) => {}
            _ => panic!("seed {name}: {got:?}"),
        }
    }
}

#[test]
fn seed_files_are_present_small_and_never_panic() {
    if std::env::var_os("TEMBO_REGEN_SEEDS").is_some() {
        let dir = seed_dir();
        std::fs::create_dir_all(&dir).unwrap();
        for (name, img) in generated_seeds() {
            std::fs::write(dir.join(name), img).unwrap();
        }
    }
    let seeds = seed_files();
    assert!(seeds.len() >= 5, "seed files in {}: {}", seed_dir().display(), seeds.len());
    let mut opened = 0;
    for (name, img) in &seeds {
        assert!(img.len() < SEED_LIMIT, "seed file {name} is {} bytes", img.len());
        if let Outcome::Opened { .. } = run_case(&format!("seed file {name}"), img) {
            opened += 1;
        }
    }
    assert!(opened >= 3, "most seed files are pools that open: {opened} of {}", seeds.len());
}

#[test]
fn mutated_seeds_never_panic() {
    let mut seeds = generated_seeds();
    seeds.extend(seed_files());
    let mut rng = ChaCha8Rng::seed_from_u64(0x7E4B0);
    let mut tally = std::collections::BTreeMap::<String, u32>::new();
    for case in 0..MUTATIONS {
        let (name, base) = &seeds[case % seeds.len()];
        let other = &seeds[rng.gen_range(0..seeds.len())].1;
        let mut img = base.clone();
        for _ in 0..rng.gen_range(1..=4) {
            mutate(&mut rng, &mut img, other);
        }
        let key = match run_case(&format!("mutation {case} of seed {name}"), &img) {
            Outcome::Opened { consistent } => format!("opened (consistent: {consistent})"),
            Outcome::Refused(v) => v,
        };
        *tally.entry(key).or_default() += 1;
    }
    eprintln!("{MUTATIONS} mutations: {tally:?}");
    assert!(tally.keys().any(|k| k.starts_with("opened")), "{tally:?}");
    assert!(tally.get("Corrupted").copied().unwrap_or(0) > 0, "{tally:?}");
}

#[test]
fn file_and_image_opens_agree() {
    let dir = TempDir::new("agree");
    let mut seeds = generated_seeds();
    seeds.extend(seed_files());
    let mut rng = ChaCha8Rng::seed_from_u64(99);
    for case in 0..150 {
        let (name, base) = &seeds[case % seeds.len()];
        let mut img = base.clone();
        if case >= seeds.len() {
            for _ in 0..rng.gen_range(1..=3) {
                mutate(&mut rng, &mut img, base);
            }
        }
        let mem = run_case(&format!("case {case} ({name})"), &img);
        let path = dir.join("case.pool");
        let file = std::panic::catch_unwind(|| pool_open_file(&img, &path))
            .unwrap_or_else(|_| panic!("case {case} ({name}): Pool::open panicked"));
        // Address space or memory limits may differ between the two; nothing else.
        let resource = |o: &Outcome| matches!(o, Outcome::Refused(v) if v == "TooLarge" || v == "Io");
        if !resource(&mem) && !resource(&file) {
            assert_eq!(mem, file, "case {case} ({name}): from_image and open disagree");
        }
    }
}
