//! Page-aligned benchmark buffers: anonymous memory, or a temporary file
//! mapped shared (e.g. on `/dev/shm`, the way the papers emulated PM with
//! DRAM, and the way an `emulated` pool is mapped).
//!
//! The buffer is touched once when made, so page faults are not timed.

use std::fs::{File, OpenOptions};
use std::os::fd::AsRawFd;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::ptr::NonNull;

use anyhow::{bail, Context, Result};

/// A mapped, page-aligned, writable buffer owned by the benchmark.
#[derive(Debug)]
pub(crate) struct Region {
    base: NonNull<u8>,
    len: usize,
    /// The backing file (removed on drop), for a shared file mapping.
    file: Option<(File, PathBuf)>,
}

/// A unique name for a temporary file of this process.
pub(crate) fn temp_name(prefix: &str) -> String {
    use std::sync::atomic::{AtomicU64, Ordering};
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.subsec_nanos());
    format!("{prefix}-{}-{}-{nanos}", std::process::id(), NEXT.fetch_add(1, Ordering::Relaxed))
}

impl Region {
    /// `len` bytes of anonymous memory.
    pub(crate) fn anonymous(len: usize) -> Result<Region> {
        Self::map(len, None)
    }

    /// `len` bytes of a new temporary file in `dir`, mapped shared. The file
    /// is removed when the region is dropped.
    pub(crate) fn shared_file(dir: &Path, len: usize) -> Result<Region> {
        let path = dir.join(temp_name("tembo-bench"));
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&path)
            .with_context(|| format!("creating benchmark file {}", path.display()))?;
        let sized = file.set_len(len as u64).with_context(|| format!("sizing {} to {len} bytes", path.display()));
        let region = sized.and_then(|()| Self::map(len, Some((file, path.clone()))));
        if region.is_err() {
            let _ = std::fs::remove_file(&path);
        }
        region
    }

    fn map(len: usize, file: Option<(File, PathBuf)>) -> Result<Region> {
        if len == 0 {
            bail!("a benchmark region needs at least one byte");
        }
        let (flags, fd) = match &file {
            Some((f, _)) => (libc::MAP_SHARED, f.as_raw_fd()),
            None => (libc::MAP_PRIVATE | libc::MAP_ANONYMOUS, -1),
        };
        // SAFETY: a new mapping at an address of the kernel's choosing touches
        // no existing memory; `fd` is either -1 (anonymous) or a file we own
        // that is at least `len` bytes long.
        let p = unsafe { libc::mmap(std::ptr::null_mut(), len, libc::PROT_READ | libc::PROT_WRITE, flags, fd, 0) };
        if p == libc::MAP_FAILED {
            return Err(std::io::Error::last_os_error()).with_context(|| format!("mapping {len} bytes"));
        }
        let base = NonNull::new(p.cast::<u8>()).context("mmap returned a null address")?;
        let region = Region { base, len, file };
        // SAFETY: `base..base+len` is the mapping just made, readable and
        // writable; nothing else refers to it yet.
        unsafe { std::ptr::write_bytes(region.base.as_ptr(), 0xa5, len) };
        Ok(region)
    }

    /// The first byte (page-aligned). Valid for `len()` bytes while `self` lives.
    pub(crate) fn as_ptr(&self) -> *mut u8 {
        self.base.as_ptr()
    }

    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// The backing file, for a shared file mapping.
    pub(crate) fn path(&self) -> Option<&Path> {
        self.file.as_ref().map(|(_, p)| p.as_path())
    }
}

impl Drop for Region {
    fn drop(&mut self) {
        // SAFETY: `base..base+len` is exactly the mapping made in `map`; no
        // pointer into it is used after the region is dropped (all users
        // borrow the region).
        unsafe { libc::munmap(self.base.as_ptr().cast(), self.len) };
        if let Some((_, path)) = &self.file {
            let _ = std::fs::remove_file(path);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn regions_are_page_aligned_and_files_removed() {
        let r = Region::anonymous(8192).unwrap();
        assert_eq!(r.as_ptr() as usize % 4096, 0);
        assert_eq!(r.len(), 8192);
        let r = Region::shared_file(&std::env::temp_dir(), 4096).unwrap();
        let path = r.path().unwrap().to_path_buf();
        assert!(path.exists());
        drop(r);
        assert!(!path.exists());
        assert!(Region::shared_file(Path::new("/no/such/dir"), 4096).is_err());
    }
}
