//! A new pool file appears under its name only once it is a pool.
//!
//! Creating a pool sizes its file, reserves every page and formats the
//! header: seconds for a large pool on a disk. A process killed meanwhile
//! (Ctrl-C, `kill -9`, a power cut) used to leave a file with no header
//! under the pool's name, which every later open refused as "not a Tembo
//! pool", and which `tembo serve`'s create-on-first-run could not replace.
//! So a pool is built under a hidden name beside its final one
//! (`.NAME.creating-PID`), locked the whole time, and renamed into place,
//! without replacing anything, once it is formatted and synced. What a
//! killed creation leaves is a hidden file that the next creation of the
//! same name removes (when no live process holds it).

use std::ffi::CString;
use std::fs::File;
use std::os::fd::AsRawFd;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use crate::error::{PmemError, Result};

/// The hidden name a pool for `path` is built under by this process.
pub(super) fn partial_path(path: &Path) -> PathBuf {
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    path.with_file_name(format!("{}{}", partial_prefix(&name), std::process::id()))
}

fn partial_prefix(name: &str) -> String {
    format!(".{name}.creating-")
}

/// Removes what killed creations of `path` left: hidden partial files whose
/// creator is gone (no process with their pid, and their lock free).
pub(super) fn remove_stale_partials(path: &Path) {
    let Some(name) = path.file_name().map(|n| n.to_string_lossy().into_owned()) else { return };
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    let prefix = partial_prefix(&name);
    for entry in entries.flatten() {
        let file_name = entry.file_name();
        let Some(pid) = file_name.to_str().and_then(|n| n.strip_prefix(prefix.as_str())) else { continue };
        let Ok(pid) = pid.parse::<i32>() else { continue };
        if pid_alive(pid) {
            continue;
        }
        let Ok(file) = File::open(entry.path()) else { continue };
        // SAFETY: flock on a valid descriptor has no memory-safety preconditions.
        if unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } == 0 {
            let _ = std::fs::remove_file(entry.path());
        }
    }
}

/// Whether a process `pid` exists (EPERM: it does, owned by another user).
fn pid_alive(pid: i32) -> bool {
    if pid <= 0 {
        return false;
    }
    // SAFETY: kill with signal 0 only checks that the process exists.
    let rc = unsafe { libc::kill(pid, 0) };
    rc == 0 || std::io::Error::last_os_error().raw_os_error() == Some(libc::EPERM)
}

/// Gives the finished pool at `partial` its name `path`, unless something
/// is already there (an error then, and `partial` is left to the caller).
pub(super) fn publish(partial: &Path, path: &Path) -> Result<()> {
    let c = |p: &Path| {
        CString::new(p.as_os_str().as_bytes())
            .map_err(|_| PmemError::io(format!("pool path {}", p.display()), std::io::ErrorKind::InvalidInput.into()))
    };
    let (from, to) = (c(partial)?, c(path)?);
    // SAFETY: both arguments are NUL-terminated paths that outlive the call.
    let rc =
        unsafe { libc::renameat2(libc::AT_FDCWD, from.as_ptr(), libc::AT_FDCWD, to.as_ptr(), libc::RENAME_NOREPLACE) };
    if rc == 0 {
        return Ok(());
    }
    let err = std::io::Error::last_os_error();
    if !matches!(err.raw_os_error(), Some(libc::EINVAL | libc::ENOSYS)) {
        return Err(PmemError::io(format!("creating pool file {}", path.display()), err));
    }
    // A filesystem without RENAME_NOREPLACE: a hard link fails just as
    // surely when the name is taken.
    std::fs::hard_link(partial, path)
        .map_err(|e| PmemError::io(format!("creating pool file {}", path.display()), e))?;
    let _ = std::fs::remove_file(partial);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn publish_never_replaces_and_stale_partials_go() {
        let dir = std::env::temp_dir().join(format!("tembo-publish-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("p.pool");
        let partial = partial_path(&path);
        assert!(partial.file_name().unwrap().to_str().unwrap().starts_with(".p.pool.creating-"));
        std::fs::write(&partial, b"new").unwrap();
        publish(&partial, &path).unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), b"new");
        assert!(!partial.exists());

        std::fs::write(&partial, b"second").unwrap();
        assert!(publish(&partial, &path).is_err(), "an existing pool is never replaced");
        assert_eq!(std::fs::read(&path).unwrap(), b"new");

        // This process is alive: its partial stays; a dead pid's goes.
        remove_stale_partials(&path);
        assert!(partial.exists());
        let dead = dir.join(format!(".p.pool.creating-{}", i32::MAX));
        std::fs::write(&dead, b"left by a killed creation").unwrap();
        let other = dir.join(format!(".q.pool.creating-{}", i32::MAX));
        std::fs::write(&other, b"another pool's").unwrap();
        remove_stale_partials(&path);
        assert!(!dead.exists());
        assert!(other.exists(), "only partials of this pool's name are touched");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
