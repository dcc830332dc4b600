//! Online growth, manual growth and the durability mode of file pools.
//!
//! Proves that a pool that fills its initial size grows its file by itself
//! without moving the mapping's base (the address of a block is the same
//! before and after every growth, and its data stays readable), that a reader
//! thread reading while the pool grows sees correct data throughout, that at
//! the maximum size allocation fails with `PoolFull` and earlier data is
//! intact, that `Pool::grow` (what `tembo pool grow` uses) and
//! `Pool::set_max_size` work within their limits and survive close/reopen;
//! and that `Auto` picks `emulated` on tmpfs (`/dev/shm`) and `msync` on a
//! disk filesystem, that `dax` on a non-DAX filesystem is `ModeUnavailable`,
//! and that in msync mode a fence (not a flush) counts msyncs.
//!
//! Known gaps (tests that fail until the library is fixed): a pool whose
//! maximum exceeds the machine's memory opens from its file but not from its
//! image; and the `MAP_SYNC` probe of `Auto`/`Dax` opens briefly unmaps the
//! pool's range on ext4/xfs, where other threads' mappings can land (shown in
//! a child process: `msync` failures at close, aborts or segfaults).

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Barrier, Mutex};

use tembo_pmem::{Mode, ModeRequest, PmemError, Pool, PoolOptions};

struct TempDir(PathBuf);

impl TempDir {
    fn new_in(parent: &Path, tag: &str) -> TempDir {
        static N: AtomicU64 = AtomicU64::new(0);
        let p = parent.join(format!("tembo-growth-{tag}-{}-{}", std::process::id(), N.fetch_add(1, Ordering::Relaxed)));
        let _ = std::fs::remove_dir_all(&p);
        std::fs::create_dir_all(&p).unwrap();
        TempDir(p)
    }
    fn new(tag: &str) -> TempDir {
        TempDir::new_in(&std::env::temp_dir(), tag)
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

const KIB: u64 = 1024;
const MIB: u64 = 1024 * 1024;
/// Large blocks (> 32 KiB) get page runs of their own.
const BLOCK: u64 = 40 * KIB;

fn opts(size: u64, max: u64) -> PoolOptions {
    PoolOptions { size, max_size: Some(max), mode: ModeRequest::Emulated, ..PoolOptions::default() }
}

/// Block `i`'s contents: its index in the first word, then a fill byte.
fn fill_block(pool: &Pool, off: u64, i: u64) {
    pool.fill(off, BLOCK, (i % 251) as u8 + 1).unwrap();
    pool.store_u64(off, i).unwrap();
    pool.persist(off, BLOCK);
}

fn block_ok(pool: &Pool, off: u64, i: u64) -> bool {
    let mut buf = vec![0u8; BLOCK as usize];
    pool.read(off, &mut buf).unwrap();
    let b = (i % 251) as u8 + 1;
    u64::from_le_bytes(buf[..8].try_into().unwrap()) == i && buf[8..].iter().all(|x| *x == b)
}

fn addr(pool: &Pool, off: u64) -> usize {
    pool.raw(off, BLOCK).unwrap().as_ptr() as usize
}

#[test]
fn pool_grows_in_place_under_a_concurrent_reader_until_full() {
    let dir = TempDir::new("online");
    let path = dir.join("p.pool");
    let max = 2 * MIB;
    let pool = Arc::new(Pool::create(&path, &opts(64 * KIB, max)).unwrap());
    assert_eq!(pool.size(), 64 * KIB);
    assert_eq!(pool.max_size(), max);
    let known = pool.alloc(BLOCK).unwrap();
    fill_block(&pool, known, 0);
    let base = addr(&pool, known);
    let header_addr = pool.raw(pool.heap_offset(), 8).unwrap().as_ptr() as usize;

    // The reader: the known block and the latest published block, all along.
    let published: Arc<Mutex<Vec<(u64, u64)>>> = Arc::new(Mutex::new(vec![(known, 0)]));
    let stop = Arc::new(AtomicBool::new(false));
    let start = Arc::new(Barrier::new(2));
    let reader = {
        let (pool, published, stop, start) = (pool.clone(), published.clone(), stop.clone(), start.clone());
        std::thread::spawn(move || {
            let mut reads = 0u64;
            let mut bad = Vec::new();
            let mut round = |reads: &mut u64| {
                if addr(&pool, known) != base {
                    bad.push("base moved".to_string());
                }
                if !block_ok(&pool, known, 0) {
                    bad.push(format!("known block wrong at pool size {}", pool.size()));
                }
                let last = *published.lock().unwrap().last().unwrap();
                if !block_ok(&pool, last.0, last.1) {
                    bad.push(format!("block {} wrong", last.1));
                }
                *reads += 1;
            };
            round(&mut reads);
            start.wait();
            while !stop.load(Ordering::Acquire) {
                round(&mut reads);
            }
            round(&mut reads);
            (reads, bad)
        })
    };
    start.wait();

    // The writer: allocate until the pool is full.
    let mut sizes = vec![pool.size()];
    let mut blocks = vec![(known, 0u64)];
    let full = loop {
        match pool.alloc(BLOCK) {
            Ok(off) => {
                let i = blocks.len() as u64;
                fill_block(&pool, off, i);
                blocks.push((off, i));
                published.lock().unwrap().push((off, i));
                if pool.size() != *sizes.last().unwrap() {
                    sizes.push(pool.size());
                    assert_eq!(addr(&pool, known), base, "the base moved when growing to {}", pool.size());
                    assert!(block_ok(&pool, known, 0));
                }
            }
            Err(e) => break e,
        }
        assert!(blocks.len() < 10_000, "the pool never filled");
    };
    stop.store(true, Ordering::Release);
    let (reads, bad) = reader.join().unwrap();
    assert!(bad.is_empty(), "the reader saw: {bad:?}");
    assert!(reads >= 2);

    assert!(sizes.len() >= 4, "the pool grew several times: {sizes:?}");
    assert!(sizes.windows(2).all(|w| w[0] < w[1]));
    match &full {
        PmemError::PoolFull { size, max_size, .. } => assert_eq!((*size, *max_size), (max, max)),
        other => panic!("expected PoolFull, got {other:?}"),
    }
    assert!(full.to_string().contains("tembo pool grow"), "{full}");
    assert_eq!(pool.size(), max);
    assert_eq!(std::fs::metadata(&path).unwrap().len(), max, "the file grew with the pool");
    assert_eq!(addr(&pool, known), base);
    assert_eq!(pool.raw(pool.heap_offset(), 8).unwrap().as_ptr() as usize, header_addr);
    for &(off, i) in &blocks {
        assert!(block_ok(&pool, off, i), "block {i} intact after PoolFull");
    }
    assert!(pool.check().is_ok(), "{:?}", pool.check().violations);
    // Still full: a small allocation may fit in slab space, a large one not.
    assert!(matches!(pool.alloc(BLOCK), Err(PmemError::PoolFull { .. })));

    Arc::try_unwrap(pool).unwrap().close().unwrap();
    let pool = Pool::open(&path, &opts(64 * KIB, max)).unwrap();
    assert!(!pool.opened_unclean());
    assert_eq!((pool.size(), pool.max_size()), (max, max));
    for &(off, i) in &blocks {
        assert!(block_ok(&pool, off, i), "block {i} intact after reopen");
    }
    assert!(pool.check().is_ok());
}

#[test]
fn manual_grow_and_max_size_survive_reopen() {
    let dir = TempDir::new("manual");
    let path = dir.join("p.pool");
    let pool = Pool::create(&path, &opts(64 * KIB, MIB)).unwrap();
    let known = pool.alloc(BLOCK).unwrap();
    fill_block(&pool, known, 7);
    let base = addr(&pool, known);

    pool.grow(256 * KIB).unwrap();
    assert_eq!(pool.size(), 256 * KIB);
    assert_eq!(std::fs::metadata(&path).unwrap().len(), 256 * KIB);
    assert_eq!(addr(&pool, known), base);
    assert!(block_ok(&pool, known, 7));
    assert_eq!(pool.alloc_stats().heap_bytes, 256 * KIB - pool.heap_offset());
    // Smaller or equal: a no-op.
    pool.grow(100 * KIB).unwrap();
    pool.grow(256 * KIB).unwrap();
    assert_eq!(pool.size(), 256 * KIB);
    // Rounded up to whole pages.
    pool.grow(300_000).unwrap();
    assert_eq!(pool.size(), 300_000u64.div_ceil(4096) * 4096);
    // Past the maximum.
    match pool.grow(2 * MIB) {
        Err(PmemError::PoolFull { max_size, .. }) => assert_eq!(max_size, MIB),
        other => panic!("{other:?}"),
    }
    // The grown space is usable.
    let big = pool.alloc(200 * KIB).unwrap();
    pool.fill(big, 200 * KIB, 1).unwrap();
    assert!(pool.check().is_ok());
    let grown = pool.size();
    pool.close().unwrap();

    let pool = Pool::open(&path, &PoolOptions { mode: ModeRequest::Emulated, ..PoolOptions::default() }).unwrap();
    assert_eq!((pool.size(), pool.max_size()), (grown, MIB), "size and max come from the header");
    assert!(!pool.opened_unclean());
    assert!(block_ok(&pool, known, 7));

    // Raising the maximum: recorded now, usable past the old reservation
    // only after a reopen.
    assert!(matches!(pool.set_max_size(grown - 4096), Err(PmemError::SizeTooSmall { .. })));
    assert!(matches!(pool.set_max_size(1 << 50), Err(PmemError::TooLarge { .. })));
    pool.set_max_size(4 * MIB).unwrap();
    assert_eq!(pool.max_size(), 4 * MIB);
    pool.grow(MIB).unwrap();
    assert_eq!(pool.size(), MIB);
    assert!(matches!(pool.grow(2 * MIB), Err(PmemError::PoolFull { .. })), "bounded by this session's reservation");
    pool.close().unwrap();

    let pool = Pool::open(&path, &opts(0, 0)).unwrap();
    assert_eq!((pool.size(), pool.max_size()), (MIB, 4 * MIB));
    let base = addr(&pool, known);
    pool.grow(3 * MIB).unwrap();
    assert_eq!(pool.size(), 3 * MIB);
    assert_eq!(addr(&pool, known), base);
    assert!(block_ok(&pool, known, 7));
    // Lowering the maximum to the current size stops growth there.
    pool.set_max_size(3 * MIB).unwrap();
    assert!(matches!(pool.grow(4 * MIB), Err(PmemError::PoolFull { .. })));
    assert!(pool.check().is_ok());
    pool.close().unwrap();
    let pool = Pool::open(&path, &opts(0, 0)).unwrap();
    assert_eq!((pool.size(), pool.max_size()), (3 * MIB, 3 * MIB));
    assert_eq!(std::fs::metadata(&path).unwrap().len(), 3 * MIB);
}

#[test]
fn in_memory_and_simulated_pools_grow_too() {
    for pool in [Pool::in_memory(&opts(64 * KIB, MIB)).unwrap(), Pool::simulated(&opts(64 * KIB, MIB)).unwrap()] {
        let known = pool.alloc(BLOCK).unwrap();
        fill_block(&pool, known, 3);
        let base = addr(&pool, known);
        let mut n = 0;
        while pool.alloc(BLOCK).is_ok() {
            n += 1;
        }
        assert!(n > 5);
        assert_eq!(pool.size(), MIB, "{}", pool.mode());
        assert_eq!(addr(&pool, known), base);
        assert!(block_ok(&pool, known, 3));
        assert!(pool.check().is_ok());
    }
}

// ----- modes ---------------------------------------------------------------------------

/// The filesystem type and mount options of the mount holding `path`, from
/// /proc/self/mountinfo (longest matching mount point, latest mount wins).
fn mount_of(path: &Path) -> Option<(String, String)> {
    let path = path.canonicalize().ok()?;
    let info = std::fs::read_to_string("/proc/self/mountinfo").ok()?;
    let mut best: Option<(usize, String, String)> = None;
    for line in info.lines() {
        let (pre, post) = line.split_once(" - ")?;
        let pre: Vec<&str> = pre.split(' ').collect();
        let post: Vec<&str> = post.split(' ').collect();
        let (Some(mp), Some(mopts), Some(fstype)) = (pre.get(4), pre.get(5), post.first()) else { continue };
        let mp = mp.replace("\\040", " ");
        if !path.starts_with(&mp) {
            continue;
        }
        let depth = Path::new(&mp).components().count();
        if best.as_ref().map_or(true, |b| depth >= b.0) {
            let opts = format!("{mopts},{}", post.get(2).unwrap_or(&""));
            best = Some((depth, fstype.to_string(), opts));
        }
    }
    best.map(|(_, t, o)| (t, o))
}

fn is_ram_fs(fstype: &str) -> bool {
    fstype == "tmpfs" || fstype == "ramfs"
}

fn may_be_dax(opts: &str) -> bool {
    opts.split(',').any(|o| o.starts_with("dax"))
}

/// A directory on a disk (non-RAM, non-DAX) filesystem, if there is one.
fn disk_dir() -> Option<PathBuf> {
    let candidates = [std::env::temp_dir(), PathBuf::from("/var/tmp"), PathBuf::from(env!("CARGO_TARGET_TMPDIR"))];
    candidates.into_iter().find(|d| d.is_dir() && mount_of(d).is_some_and(|(t, o)| !is_ram_fs(&t) && !may_be_dax(&o)))
}

fn shm_dir() -> Option<PathBuf> {
    let d = PathBuf::from("/dev/shm");
    (d.is_dir() && mount_of(&d).is_some_and(|(t, _)| is_ram_fs(&t))).then_some(d)
}

fn auto() -> PoolOptions {
    PoolOptions { size: 256 * KIB, max_size: Some(MIB), mode: ModeRequest::Auto, ..PoolOptions::default() }
}

fn with_mode(mode: ModeRequest) -> PoolOptions {
    PoolOptions { mode, ..auto() }
}

fn assert_dax_unavailable(dir: &Path) {
    let path = dir.join("dax.pool");
    match Pool::create(&path, &with_mode(ModeRequest::Dax)) {
        Err(e @ PmemError::ModeUnavailable { requested: "dax", .. }) => {
            assert!(e.to_string().contains(&path.display().to_string()), "{e}");
        }
        other => panic!("dax on a non-DAX filesystem: {:?}", other.map(|p| p.mode())),
    }
    assert!(!path.exists(), "a failed create removes its file");
    // Opening an existing pool asking for dax: refused, and the lock is not kept.
    let pool = Pool::create(&path, &auto()).unwrap();
    pool.close().unwrap();
    assert!(matches!(Pool::open(&path, &with_mode(ModeRequest::Dax)), Err(PmemError::ModeUnavailable { .. })));
    Pool::open(&path, &auto()).unwrap().close().unwrap();
}

#[test]
fn tmpfs_file_is_emulated() {
    let Some(shm) = shm_dir() else {
        eprintln!("skipped: /dev/shm is not a RAM filesystem here");
        return;
    };
    let dir = TempDir::new_in(&shm, "shm");
    let path = dir.join("p.pool");
    let pool = Pool::create(&path, &auto()).unwrap();
    assert_eq!(pool.mode(), Mode::Emulated, "Auto on tmpfs");
    assert_eq!(pool.mode().name(), "emulated");
    let off = pool.alloc(4096).unwrap();
    pool.reset_write_stats();
    pool.fill(off, 4096, 2).unwrap();
    pool.persist(off, 4096);
    let s = pool.write_stats();
    assert_eq!((s.fence_count, s.msync_count), (1, 0), "emulated mode never msyncs");
    // Growth keeps the mode working.
    pool.grow(MIB).unwrap();
    let big = pool.alloc(500 * KIB).unwrap();
    pool.fill(big, 500 * KIB, 4).unwrap();
    pool.persist(big, 500 * KIB);
    pool.close().unwrap();
    let pool = Pool::open(&path, &auto()).unwrap();
    assert_eq!(pool.mode(), Mode::Emulated);
    let mut b = vec![0u8; 500 * KIB as usize];
    pool.read(big, &mut b).unwrap();
    assert!(b.iter().all(|x| *x == 4));
    drop(pool);
    // Forcing msync on tmpfs is allowed.
    assert_eq!(Pool::open(&path, &with_mode(ModeRequest::Msync)).unwrap().mode(), Mode::Msync);
    std::fs::remove_file(&path).unwrap();
    assert_dax_unavailable(&dir.0);
}

#[test]
fn disk_file_is_msync_and_fences_count_msyncs() {
    let Some(disk) = disk_dir() else {
        eprintln!("skipped: no disk (non-tmpfs, non-DAX) directory found");
        return;
    };
    let dir = TempDir::new_in(&disk, "disk");
    let path = dir.join("p.pool");
    let pool = Pool::create(&path, &auto()).unwrap();
    assert_eq!(pool.mode(), Mode::Msync, "Auto on {}", disk.display());
    let off = pool.alloc(4096).unwrap();
    pool.reset_write_stats();
    pool.fill(off, 64, 5).unwrap();
    pool.flush(off, 64);
    assert_eq!(pool.write_stats().msync_count, 0, "a flush alone does not msync");
    pool.fence();
    let s = pool.write_stats();
    assert_eq!((s.flush_count, s.fence_count, s.msync_count), (1, 1, 1), "{s:?}");
    pool.fill(off, 4096, 6).unwrap();
    pool.persist(off, 4096);
    let s2 = pool.write_stats().since(&s);
    assert_eq!(s2.fence_count, 1);
    assert!(s2.msync_count >= 1, "persist + fence msyncs: {s2:?}");
    // Ranges far apart, flushed before one fence, take one msync (one disk
    // flush), not one each; a fence with nothing flushed takes none.
    let far = pool.alloc(64 * KIB).unwrap();
    pool.fill(far, 64 * KIB, 7).unwrap();
    let s3 = pool.write_stats();
    pool.flush(off, 64);
    pool.flush(far + 32 * KIB, 64);
    pool.flush(far + 60 * KIB, 64);
    pool.fence();
    pool.fence();
    let d = pool.write_stats().since(&s3);
    assert_eq!((d.fence_count, d.msync_count), (2, 1), "{d:?}");
    // Growth in msync mode.
    pool.grow(MIB).unwrap();
    let big = pool.alloc(600 * KIB).unwrap();
    pool.fill(big, 600 * KIB, 8).unwrap();
    let before = pool.write_stats();
    pool.persist(big, 600 * KIB);
    assert!(pool.write_stats().since(&before).msync_count >= 1);
    pool.close().unwrap();
    let pool = Pool::open(&path, &auto()).unwrap();
    assert_eq!(pool.mode(), Mode::Msync);
    let mut b = vec![0u8; 600 * KIB as usize];
    pool.read(big, &mut b).unwrap();
    assert!(b.iter().all(|x| *x == 8));
    drop(pool);
    assert_eq!(Pool::open(&path, &with_mode(ModeRequest::Emulated)).unwrap().mode(), Mode::Emulated);
    std::fs::remove_file(&path).unwrap();
    assert_dax_unavailable(&dir.0);
}

#[test]
fn mode_requests_parse() {
    assert_eq!("AUTO".parse::<ModeRequest>().unwrap(), ModeRequest::Auto);
    assert_eq!("dax".parse::<ModeRequest>().unwrap(), ModeRequest::Dax);
    assert!("fast".parse::<ModeRequest>().unwrap_err().contains("auto, dax, emulated or msync"));
    assert_eq!(ModeRequest::default(), ModeRequest::Auto);
}

/// The maximum only reserves address space: a pool whose maximum exceeds the
/// machine's memory opens from its file, and — as `Pool::from_image`
/// promises ("exactly as `Pool::open` would") — from its image too.
#[test]
fn large_maximum_opens_from_file_and_from_image() {
    let dir = TempDir::new("bigmax");
    let path = dir.join("p.pool");
    let max = 1u64 << 40;
    let pool = Pool::create(&path, &opts(256 * KIB, max)).unwrap();
    assert_eq!(pool.max_size(), max);
    let off = pool.alloc(BLOCK).unwrap();
    fill_block(&pool, off, 5);
    pool.close().unwrap();
    let pool = Pool::open(&path, &opts(0, 0)).unwrap();
    assert_eq!(pool.max_size(), max);
    drop(pool);
    let img = std::fs::read(&path).unwrap();
    match Pool::from_image(&img, &PoolOptions::default()) {
        Ok(pool) => assert!(block_ok(&pool, off, 5)),
        Err(e) => panic!("the image of a pool that opens from its file is refused: {e}"),
    }
}

// ----- mapping races -------------------------------------------------------------------

const RACE_ENV: &str = "TEMBO_MAP_RACE_DIR";

/// Helper for `auto_mode_does_not_expose_the_reserved_range_to_other_threads`,
/// run in a child process because the bug it shows can crash the process.
/// Does nothing unless `RACE_ENV` names a directory.
#[test]
#[ignore = "helper for the mapping race test; runs only when re-executed by it"]
fn helper_map_race() {
    let Some(dir) = std::env::var_os(RACE_ENV) else { return };
    let dir = PathBuf::from(dir);
    let stop = Arc::new(AtomicBool::new(false));
    // Other threads mapping memory: process spawns (glibc maps a stack for
    // each) and short-lived threads (each with a fresh stack mapping).
    let churn: Vec<_> = (0..2)
        .map(|kind| {
            let stop = stop.clone();
            std::thread::spawn(move || {
                let mut failures = 0u64;
                let mut n = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    n += 1;
                    let ok = if kind == 0 {
                        std::process::Command::new("true")
                            .stdout(std::process::Stdio::null())
                            .status()
                            .is_ok_and(|s| s.success())
                    } else {
                        std::thread::Builder::new()
                            .stack_size((64 + (n % 7) * 4) as usize * 1024)
                            .spawn(move || std::hint::black_box(n))
                            .map(|h| h.join().is_ok())
                            .unwrap_or(false)
                    };
                    failures += u64::from(!ok);
                }
                failures
            })
        })
        .collect();
    let opts = PoolOptions { size: 256 * KIB, max_size: Some(MIB), mode: ModeRequest::Auto, ..PoolOptions::default() };
    let (mut cycles, mut close_errors, mut bad_header, mut bad_data) = (0, 0, 0, 0);
    let started = std::time::Instant::now();
    while cycles < 1000 && started.elapsed() < std::time::Duration::from_secs(6) {
        let path = dir.join(format!("race-{cycles}.pool"));
        let pool = Pool::create(&path, &opts).unwrap();
        let off = pool.alloc(4096).unwrap();
        pool.fill(off, 4096, 0x5C).unwrap();
        pool.persist(off, 4096);
        bad_header += u32::from(pool.header().is_err());
        let mut b = vec![0u8; 4096];
        pool.read(off, &mut b).unwrap();
        bad_data += u32::from(b.iter().any(|x| *x != 0x5C));
        if let Err(e) = pool.close() {
            if close_errors == 0 {
                eprintln!("close failed: {e}");
            }
            close_errors += 1;
        }
        std::fs::remove_file(&path).unwrap();
        cycles += 1;
    }
    stop.store(true, Ordering::Relaxed);
    let failures: u64 = churn.into_iter().map(|t| t.join().unwrap()).sum();
    println!(
        "\nMAPRACE cycles={cycles} close_errors={close_errors} bad_header={bad_header} bad_data={bad_data} \
         churn_failures={failures}"
    );
}

/// In `Auto` (and `Dax`) mode, open first tries `MAP_SYNC` with `MAP_FIXED`
/// over the start of the reserved range. On a non-DAX ext4/xfs file the
/// kernel unmaps that range before refusing, so until the fallback mapping
/// lands, the pool's range is a hole that another thread's mmap (a thread
/// stack, a spawned process's stack) can take — and the fallback `MAP_FIXED`
/// then silently replaces that thread's memory with the pool file, while the
/// thread's later munmap punches a hole in the pool (seen as `msync … Cannot
/// allocate memory` at close, or a segfault).
#[test]
fn auto_mode_does_not_expose_the_reserved_range_to_other_threads() {
    let Some(disk) = disk_dir() else {
        eprintln!("skipped: no disk (non-tmpfs, non-DAX) directory found");
        return;
    };
    let dir = TempDir::new_in(&disk, "race");
    let out = std::process::Command::new(std::env::current_exe().unwrap())
        .args(["helper_map_race", "--exact", "--ignored", "--nocapture", "--test-threads=1"])
        .env(RACE_ENV, &dir.0)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    let line = stdout.lines().find(|l| l.starts_with("MAPRACE")).unwrap_or("(no report: the process died)");
    let clean = line.contains("close_errors=0 bad_header=0 bad_data=0 churn_failures=0");
    assert!(
        out.status.success() && clean,
        "pool mappings raced with other threads' mappings: exit {:?}, {line}\n{}",
        out.status,
        stderr
            .lines()
            .filter(|l| !l.trim_start().starts_with(|c: char| c.is_ascii_digit() || c == 'a'))
            .take(8)
            .collect::<Vec<_>>()
            .join("\n")
    );
}

/// File pools and in-memory pools map at a 2 MiB boundary (so the kernel
/// can back them with huge pages), grow without moving, and report their
/// huge pages only for files; `prefetch` ignores a range outside the heap.
#[test]
fn mappings_are_huge_page_aligned() {
    const HUGE: usize = 2 << 20;
    let dir = TempDir::new("align");
    let file = Pool::create(dir.join("a.pool"), &opts(256 * KIB, 8 * MIB)).unwrap();
    let base = |p: &Pool| p.raw(p.heap_offset(), 8).unwrap().as_ptr() as usize - p.heap_offset() as usize;
    let before = base(&file);
    assert_eq!(before % HUGE, 0, "file pool base {before:#x}");
    file.grow(4 * MIB).unwrap();
    assert_eq!(base(&file), before, "growth moved the base");
    assert!(file.huge_page_bytes().is_some_and(|b| b <= file.size()), "a file pool can say");
    file.prefetch(file.size() + 4096, 64);
    file.prefetch(u64::MAX - 8, 64);
    let mem = Pool::in_memory(&PoolOptions { size: 256 * KIB, max_size: Some(MIB), ..PoolOptions::default() }).unwrap();
    assert_eq!(base(&mem) % HUGE, 0, "in-memory pool base");
    assert_eq!(mem.huge_page_bytes(), None, "an anonymous region does not say");
}

/// Whether the running kernel is at least `major.minor` (`MADV_COLLAPSE`
/// came in 6.1).
fn kernel_at_least(major: u32, minor: u32) -> bool {
    let release = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default();
    let mut parts = release.trim().split(|c: char| !c.is_ascii_digit()).map(|p| p.parse::<u32>().unwrap_or(0));
    let (a, b) = (parts.next().unwrap_or(0), parts.next().unwrap_or(0));
    (a, b) >= (major, minor)
}

/// A pool on tmpfs is backed by 2 MiB pages from its creation, though
/// `/dev/shm` is mounted without `huge=`; so are the pages its growths
/// add, and every block written across the growths reads back; a reopen
/// maps the file's huge pages again.
#[test]
fn pools_on_tmpfs_get_huge_pages_at_creation_and_growth() {
    let Some(shm) = shm_dir() else {
        eprintln!("skipped: /dev/shm is not a RAM filesystem here");
        return;
    };
    if !kernel_at_least(6, 1) {
        eprintln!("skipped: a kernel before 6.1 has no MADV_COLLAPSE");
        return;
    }
    let dir = TempDir::new_in(&shm, "huge");
    let path = dir.join("h.pool");
    let pool = Pool::create(&path, &opts(8 * MIB, 64 * MIB)).unwrap();
    let at_create = pool.huge_page_bytes().expect("a file pool says");
    assert!(at_create > 0, "no 2 MiB pages after creating an 8 MiB pool on tmpfs");
    // 24 MiB of blocks: the pool grows twice (to 16 and 32 MiB) while
    // they are written.
    let blocks: Vec<u64> = (0..600)
        .map(|i| {
            let off = pool.alloc(BLOCK).unwrap();
            fill_block(&pool, off, i);
            off
        })
        .collect();
    assert!(pool.size() >= 32 * MIB, "the blocks made the pool grow ({} bytes)", pool.size());
    let grown = pool.huge_page_bytes().unwrap();
    assert!(grown >= at_create + 8 * MIB, "growth's pages not collapsed: {grown} bytes huge after, {at_create} before");
    for (i, &off) in blocks.iter().enumerate() {
        assert!(block_ok(&pool, off, i as u64), "block {i} damaged");
    }
    pool.close().unwrap();
    let pool = Pool::open(&path, &opts(8 * MIB, 64 * MIB)).unwrap();
    for (i, &off) in blocks.iter().enumerate() {
        assert!(block_ok(&pool, off, i as u64), "block {i} damaged after reopen");
    }
    assert!(pool.huge_page_bytes().unwrap() >= 8 * MIB, "a reopen maps the file's huge pages");
}

/// `Pool::prepare_growth` extends the file for the next growth step only
/// when the pool is nearly full, without changing the pool; the growth an
/// allocation then needs uses that range (the file does not grow again);
/// and a pool whose file is longer than its size (a prepared step not yet
/// taken, as a close or crash may leave it) reopens as that size and grows
/// again past it.
#[test]
fn a_growth_prepared_ahead_is_taken_by_the_next_growth_and_survives_reopen() {
    let dir = TempDir::new("prepared");
    let path = dir.join("p.pool");
    let file_len = || std::fs::metadata(&path).unwrap().len();
    let pool = Pool::create(&path, &opts(256 * KIB, 4 * MIB)).unwrap();
    assert!(!pool.prepare_growth().unwrap(), "an empty pool needs no growth yet");
    let mut blocks = Vec::new();
    // Fill to within half a step (128 KiB) of the end, without growing.
    while pool.size() - pool.used_bytes() > 128 * KIB + BLOCK {
        let off = pool.alloc(BLOCK).unwrap();
        fill_block(&pool, off, blocks.len() as u64);
        blocks.push(off);
    }
    let off = pool.alloc(BLOCK).unwrap();
    fill_block(&pool, off, blocks.len() as u64);
    blocks.push(off);
    assert_eq!(pool.size(), 256 * KIB, "not grown yet");
    assert!(pool.prepare_growth().unwrap());
    assert_eq!((pool.size(), file_len()), (256 * KIB, 512 * KIB), "the file is ready, the pool unchanged");
    assert!(!pool.prepare_growth().unwrap(), "prepared once");
    while pool.size() == 256 * KIB {
        let off = pool.alloc(BLOCK).unwrap();
        fill_block(&pool, off, blocks.len() as u64);
        blocks.push(off);
    }
    assert_eq!((pool.size(), file_len()), (512 * KIB, 512 * KIB), "the growth took the prepared range");
    while pool.size() - pool.used_bytes() > 256 * KIB {
        let off = pool.alloc(BLOCK).unwrap();
        fill_block(&pool, off, blocks.len() as u64);
        blocks.push(off);
    }
    assert!(pool.prepare_growth().unwrap());
    assert_eq!((pool.size(), file_len()), (512 * KIB, MIB));
    assert!(blocks.iter().enumerate().all(|(i, &off)| block_ok(&pool, off, i as u64)));
    assert!(pool.check().is_ok(), "{:?}", pool.check().violations);
    pool.close().unwrap();

    let pool = Pool::open(&path, &opts(0, 0)).unwrap();
    assert_eq!((pool.size(), file_len()), (512 * KIB, MIB), "the header's size, the longer file kept");
    assert!(blocks.iter().enumerate().all(|(i, &off)| block_ok(&pool, off, i as u64)));
    pool.grow(2 * MIB).unwrap();
    assert_eq!((pool.size(), file_len()), (2 * MIB, 2 * MIB));
    let big = pool.alloc(MIB).unwrap();
    pool.fill(big, MIB, 3).unwrap();
    assert!(blocks.iter().enumerate().all(|(i, &off)| block_ok(&pool, off, i as u64)));
    assert!(pool.check().is_ok(), "{:?}", pool.check().violations);
    pool.close().unwrap();
}
