// The logic of the `pool_open` fuzz target, shared with
// `crates/tembo-pmem/tests/fuzz_smoke.rs` (both `include!` this file into a
// module of their own, so it holds items only and no inner attributes).
//
// The input is a pool image. Opening it must give a typed error or a pool;
// an opened pool must survive `check()`, reading its roots and header, and,
// when `check()` finds it consistent, a few allocations, frees and a leak
// reclamation that keep it consistent. A panic anywhere is a bug, and so is
// `PmemError::Invariant` (Tembo's own "this is a bug" error).

use tembo_pmem::{ModeRequest, PmemError, Pool, PoolOptions};

/// Inputs shorter than the size their header records are also tried
/// zero-extended to it, up to this many bytes: seeds can leave out trailing
/// zero pages and still reach the heap.
pub const PAD_LIMIT: u64 = 8 << 20;

/// What opening an input led to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// It opened; `consistent` is what `check()` said.
    Opened {
        /// Whether `check()` found no violation.
        consistent: bool,
    },
    /// It was refused with this error variant.
    Refused(String),
}

/// Opens `data` as a pool image in memory (the crash simulator's
/// `Pool::from_image`) and exercises the pool if it opens.
pub fn pool_open(data: &[u8]) -> Outcome {
    let opts = PoolOptions::default();
    match Pool::from_image(data, &opts) {
        Ok(pool) => exercise(&pool),
        Err(PmemError::Truncated { expected, found, .. }) if expected <= PAD_LIMIT && found < expected => {
            let mut img = data.to_vec();
            img.resize(expected as usize, 0);
            match Pool::from_image(&img, &opts) {
                Ok(pool) => exercise(&pool),
                Err(e) => refused(&e),
            }
        }
        Err(e) => refused(&e),
    }
}

/// The same through a real file at `path` (written, opened with
/// `Pool::open`, removed), zero-extended the same way.
pub fn pool_open_file(data: &[u8], path: &std::path::Path) -> Outcome {
    let opts = PoolOptions { mode: ModeRequest::Emulated, ..PoolOptions::default() };
    std::fs::write(path, data).expect("writing the input file");
    let mut r = Pool::open(path, &opts);
    if let Err(PmemError::Truncated { expected, found, .. }) = &r {
        if *expected <= PAD_LIMIT && found < expected {
            let f = std::fs::OpenOptions::new().write(true).open(path).expect("reopening the input file");
            f.set_len(*expected).expect("zero-extending the input file");
            drop(f);
            r = Pool::open(path, &opts);
        }
    }
    let out = match r {
        Ok(pool) => {
            let o = exercise(&pool);
            drop(pool);
            o
        }
        Err(e) => refused(&e),
    };
    let _ = std::fs::remove_file(path);
    out
}

/// The error's variant name.
pub fn variant(e: &PmemError) -> String {
    let s = format!("{e:?}");
    s.split(|c: char| !c.is_alphanumeric()).next().unwrap_or_default().to_string()
}

fn refused(e: &PmemError) -> Outcome {
    if let PmemError::Invariant { .. } = e {
        panic!("opening a pool image broke an internal invariant: {e}");
    }
    assert!(!e.to_string().is_empty());
    Outcome::Refused(variant(e))
}

fn exercise(pool: &Pool) -> Outcome {
    let report = pool.check();
    if let Err(e) = pool.header() {
        panic!("the header of an opened pool does not validate: {e}");
    }
    for root in pool.roots() {
        let mut word = [0u8; 8];
        let _ = pool.read(root.offset, &mut word);
    }
    let stats = pool.alloc_stats();
    if !report.is_ok() {
        for v in &report.violations {
            assert!(!v.name.is_empty() && !v.detail.is_empty());
        }
        return Outcome::Opened { consistent: false };
    }

    // A consistent pool: its block list agrees with its statistics...
    let blocks = pool.allocated_blocks().expect("the blocks of a consistent pool");
    assert_eq!(blocks.len() as u64, stats.allocated_blocks, "block list vs statistics");
    assert_eq!(blocks.iter().map(|b| b.1).sum::<u64>(), stats.used_bytes, "block sizes vs statistics");
    for &(off, len) in blocks.iter().take(256) {
        assert_eq!(pool.usable_size(off).ok(), Some(len), "usable size of listed block {off:#x}");
    }
    // ...it stays consistent through allocations and frees...
    let mut got = Vec::new();
    for size in [16u64, 200, 5000, 40 << 10] {
        match pool.alloc(size) {
            Ok(off) => {
                assert!(pool.usable_size(off).expect("a fresh block") >= size);
                pool.fill(off, size, 0xEE).expect("writing a fresh block");
                got.push(off);
            }
            Err(PmemError::PoolFull { .. }) => {}
            Err(e) => panic!("alloc({size}) on a consistent pool: {e}"),
        }
    }
    for off in got {
        pool.free(off).expect("free of a fresh block");
    }
    let after = pool.check();
    assert!(after.is_ok(), "alloc/free made a consistent pool inconsistent: {:?}", after.violations);
    // ...and reclaiming with no tracer frees every block.
    let r = pool.reclaim_leaks(&[]).expect("leak reclamation on a consistent pool");
    assert_eq!(r.reclaimed_blocks, blocks.len() as u64);
    assert_eq!(pool.alloc_stats().allocated_blocks, 0);
    let after = pool.check();
    assert!(after.is_ok(), "reclamation made a consistent pool inconsistent: {:?}", after.violations);
    Outcome::Opened { consistent: true }
}
