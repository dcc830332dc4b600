//! A pool file on a filesystem that fills up. A mapped page of a sparse
//! file is allocated by the kernel when it is first stored to; on a full
//! filesystem that store raises SIGBUS and kills the process (a server
//! under load died this way). Pools now reserve their pages when created,
//! opened and grown, so a full filesystem is an error at those points:
//! creation refuses, growth reports `PoolFull` with `filesystem_full`, and
//! the pool keeps working and reopens intact.
//!
//! Needs a small filesystem of its own: the test mounts an 8 MiB tmpfs,
//! which takes root (CI runs as root); without it, it says so and passes.

use std::path::{Path, PathBuf};
use std::process::Command;

use tembo_pmem::{PmemError, Pool, PoolOptions};

const MIB: u64 = 1 << 20;

/// A mounted tmpfs, unmounted when dropped.
struct SmallFs(PathBuf);

impl SmallFs {
    fn mount(mib: u64) -> Option<SmallFs> {
        static MOUNTS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let n = MOUNTS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let dir = std::env::temp_dir().join(format!("tembo-smallfs-{}-{n}", std::process::id()));
        std::fs::create_dir_all(&dir).ok()?;
        let ok = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={mib}m"), "tmpfs"])
            .arg(&dir)
            .status()
            .is_ok_and(|s| s.success());
        if !ok {
            let _ = std::fs::remove_dir(&dir);
            return None;
        }
        Some(SmallFs(dir))
    }

    fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for SmallFs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(&self.0).status();
        let _ = std::fs::remove_dir(&self.0);
    }
}

#[test]
fn a_full_filesystem_is_an_error_not_a_crash() {
    // Larger than the filesystem: refused at creation, no file left.
    {
        let Some(fs) = SmallFs::mount(8) else {
            eprintln!("skipped: could not mount a tmpfs (needs root)");
            return;
        };
        let big = fs.path().join("big.pool");
        let err =
            Pool::create(&big, &PoolOptions { size: 32 * MIB, max_size: Some(32 * MIB), ..PoolOptions::default() })
                .map(|_| ())
                .expect_err("a pool larger than its filesystem");
        assert!(err.to_string().contains("filesystem is full"), "{err}");
        assert!(!big.exists(), "a failed creation left its file");
    }

    // A small pool allowed to grow past what the filesystem holds, on a
    // filesystem of its own: how soon a kernel gives a removed file's
    // pages back to the filesystem's count is not this test's subject (a
    // CI machine once had not, when the next pool was created).
    let Some(fs) = SmallFs::mount(8) else {
        panic!("a second tmpfs could not be mounted where the first could");
    };
    let path = fs.path().join("t.pool");
    let opts = PoolOptions { size: 2 * MIB, max_size: Some(64 * MIB), ..PoolOptions::default() };
    let pool = Pool::create(&path, &opts).expect("a small pool fits");
    let mut blocks = Vec::new();
    let full = loop {
        match pool.alloc(64 * 1024) {
            Ok(b) => {
                // Store to every page of the block: with a sparse file a
                // store to a page the filesystem cannot back is a SIGBUS.
                for at in (0..64 * 1024).step_by(4096) {
                    pool.store_u64(b + at, b ^ at).expect("store");
                }
                pool.persist(b, 64 * 1024);
                blocks.push(b);
            }
            Err(e) => break e,
        }
        assert!(blocks.len() < 2000, "the pool never filled");
    };
    match &full {
        PmemError::PoolFull { filesystem_full: true, size, max_size, .. } => assert!(size < max_size),
        other => panic!("expected a full filesystem to be a full pool: {other}"),
    }
    assert!(full.to_string().contains("filesystem holding the pool file has no room"), "{full}");
    assert!(blocks.len() > 40, "only {} blocks before the filesystem filled", blocks.len());
    // The failed growth gave back what it had taken (the file's new length,
    // the 2 MiB pages collapsed for it): the file ends at the pool's size.
    assert_eq!(std::fs::metadata(&path).unwrap().len(), pool.size(), "a failed growth left the file longer");
    // Freed room is usable again, and everything written reads back after
    // a reopen.
    pool.free(blocks.pop().unwrap()).unwrap();
    let again = pool.alloc(64 * 1024).expect("a freed block's room");
    pool.free(again).unwrap();
    drop(pool);
    let pool = Pool::open(&path, &opts).expect("reopens");
    for &b in &blocks {
        for at in (0..64 * 1024).step_by(4096) {
            assert_eq!(pool.load_u64(b + at).unwrap(), b ^ at);
        }
    }
}

/// A pool left sparse (an older build made them so) gets its pages when it
/// is opened; a pool whose pages are all there is not walked again.
#[test]
fn opening_a_sparse_pool_reserves_its_pages() {
    use std::os::unix::fs::MetadataExt;
    let dir = std::env::temp_dir().join(format!("tembo-sparse-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("s.pool");
    let opts = PoolOptions { size: 4 * MIB, max_size: Some(8 * MIB), ..PoolOptions::default() };
    drop(Pool::create(&path, &opts).unwrap());
    let allocated = |p: &Path| std::fs::metadata(p).unwrap().blocks() * 512;
    assert!(allocated(&path) >= 4 * MIB, "a new pool's pages are reserved");
    // Punch out the unused last 2 MiB, as a sparse copy would leave them.
    let punched = Command::new("fallocate")
        .args(["--punch-hole", "--offset", &(2 * MIB).to_string(), "--length", &(2 * MIB).to_string()])
        .arg(&path)
        .status()
        .is_ok_and(|s| s.success());
    if !punched || allocated(&path) >= 4 * MIB {
        eprintln!("skipped the sparse part: this filesystem cannot punch holes");
    } else {
        drop(Pool::open(&path, &opts).unwrap());
        assert!(allocated(&path) >= 4 * MIB, "the open did not reserve the holes");
    }
    let _ = std::fs::remove_dir_all(&dir);
}
