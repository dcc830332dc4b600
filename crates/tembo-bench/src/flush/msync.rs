//! The cost of `msync(MS_SYNC)` of one dirty 4 KiB page: what a pool in
//! `msync` mode (a file on an ordinary filesystem) pays at a fence where an
//! `emulated` or `dax` pool pays a few cache-line flushes.
//!
//! Each iteration dirties the page with one store (untimed: on a disk
//! filesystem that store takes a write-protect fault) and times the `msync`.

use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{ensure, Result};
use serde::{Deserialize, Serialize};

use crate::machine::filesystem_of;
use crate::progress::Progress;
use crate::region::Region;
use crate::summary::percentile;

const PAGE: usize = 4096;
const WARMUP: u32 = 10;

/// Latency of `msync` of one dirty page.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct MsyncCost {
    /// Directory of the file.
    pub dir: PathBuf,
    /// Its filesystem (`ext2/3/4`, `tmpfs`, …).
    pub filesystem: String,
    /// Timed calls.
    pub iterations: u32,
    /// Median nanoseconds per call.
    pub median_ns: f64,
    /// 99th percentile.
    pub p99_ns: f64,
    /// Fastest call.
    pub min_ns: f64,
    /// Slowest call.
    pub max_ns: f64,
}

/// Times `iterations` `msync`s of one dirty page of a temporary file in `dir`.
///
/// # Errors
/// The file cannot be made or mapped, or `msync` fails (the path is named).
pub fn measure(dir: &Path, iterations: u32, progress: Progress) -> Result<MsyncCost> {
    ensure!(iterations >= 1, "at least one msync is needed");
    let region = Region::shared_file(dir, PAGE)?;
    let bar = progress.bar(u64::from(iterations), "msync of one page");
    let mut ns = Vec::with_capacity(iterations as usize);
    for i in 0..WARMUP + iterations {
        // SAFETY: the region is one mapped, writable page of our own file.
        unsafe { region.as_ptr().add(i as usize % PAGE).write_volatile(i as u8) };
        let t = Instant::now();
        // SAFETY: `as_ptr()` is page-aligned and the region is one mapped page.
        let rc = unsafe { libc::msync(region.as_ptr().cast(), PAGE, libc::MS_SYNC) };
        let elapsed = t.elapsed();
        if rc != 0 {
            let path = region.path().map(|p| p.display().to_string()).unwrap_or_default();
            return Err(std::io::Error::last_os_error())
                .map_err(|e| anyhow::anyhow!("msync of a page of {path} failed: {e}"));
        }
        if i >= WARMUP {
            ns.push(elapsed.as_nanos() as f64);
            if i % 64 == 0 {
                bar.set_position(u64::from(i - WARMUP));
            }
        }
    }
    bar.finish_and_clear();
    Ok(MsyncCost {
        dir: dir.to_path_buf(),
        filesystem: filesystem_of(dir),
        iterations,
        median_ns: percentile(&mut ns, 50.0),
        p99_ns: percentile(&mut ns, 99.0),
        min_ns: percentile(&mut ns, 0.0),
        max_ns: percentile(&mut ns, 100.0),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn measures_on_a_temp_dir() {
        let c = measure(&std::env::temp_dir(), 5, Progress::hidden()).unwrap();
        assert_eq!(c.iterations, 5);
        assert!(c.min_ns <= c.median_ns && c.median_ns <= c.p99_ns && c.p99_ns <= c.max_ns);
        assert!(measure(Path::new("/no/such/dir"), 5, Progress::hidden()).is_err());
    }
}
