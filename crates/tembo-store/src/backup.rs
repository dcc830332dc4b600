//! Online backup: a consistent copy of a database, taken while it serves.
//!
//! Why: a pool file cannot be copied while a process has it open — the copy
//! is read over time and may mix states that no crash leaves. A backup
//! instead reads one snapshot (a committed version, kept for as long as the
//! copy runs, while writers go on) and writes its pairs into a new pool, in
//! batches of bounded size.
//!
//! What it promises:
//! - the copy holds exactly the source's contents at
//!   [`BackupReport::version`], whatever was written meanwhile;
//! - the destination is replaced only by a complete copy: the new pool is
//!   built under `<destination>.partial`, closed cleanly, synced, and then
//!   renamed over the destination (and the directory synced), so after a
//!   crash the destination is the previous backup or the new one, never a
//!   part of one;
//! - a cancelled or failed backup removes its partial file and leaves the
//!   source untouched;
//! - the copy is compact: the live pairs of that version only (no dead
//!   entries, no named snapshots), after one GC pass of its own.
//!
//! Only the `cdds` engine keeps versions to read a snapshot from; the
//! in-place engines answer [`DbError::Unsupported`].

use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Condvar, Mutex};
use std::time::{Duration, Instant};

use crate::batch::WriteBatch;
use crate::db::Db;
use crate::error::{DbError, Result};
use crate::options::{Engine, Options};

/// Pairs per commit in the copy.
const BATCH_PAIRS: usize = 1024;
/// Key and value bytes per commit in the copy (a batch is held in DRAM).
const BATCH_BYTES: usize = 8 << 20;

/// What a finished backup wrote.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BackupReport {
    /// The destination file.
    pub path: PathBuf,
    /// The source's version the copy holds.
    pub version: u64,
    /// Pairs copied.
    pub keys: u64,
    /// Key and value bytes copied.
    pub bytes: u64,
    /// Wall time of the whole backup.
    pub elapsed: Duration,
}

/// Shared with a backup running on another thread: cancel it, watch it,
/// or wait until it has chosen its version.
#[derive(Debug, Default)]
pub struct BackupControl {
    cancel: AtomicBool,
    keys: AtomicU64,
    /// The backup has pinned its snapshot, or has ended without one.
    settled: Mutex<bool>,
    settled_cv: Condvar,
}

/// Marks its control settled when dropped: a backup that fails before its
/// snapshot must not leave a waiter waiting.
struct SettleOnDrop<'a>(&'a BackupControl);

impl Drop for SettleOnDrop<'_> {
    fn drop(&mut self) {
        self.0.settle();
    }
}

impl BackupControl {
    fn settle(&self) {
        // A poisoned lock still holds a bool worth setting.
        *self.settled.lock().unwrap_or_else(|p| p.into_inner()) = true;
        self.settled_cv.notify_all();
    }

    /// Waits until the backup has pinned the version it copies (every
    /// commit after this returns is left out of the copy), or has ended
    /// without one. A caller that starts a backup on another thread and
    /// then goes on writing calls this in between, so that the copy holds
    /// exactly what was committed before the start.
    pub fn wait_for_version(&self) {
        let mut settled = self.settled.lock().unwrap_or_else(|p| p.into_inner());
        while !*settled {
            settled = self.settled_cv.wait(settled).unwrap_or_else(|p| p.into_inner());
        }
    }

    /// Asks the backup to stop at its next batch (it then removes its
    /// partial file and fails with [`DbError::Backup`]).
    pub fn cancel(&self) {
        self.cancel.store(true, Ordering::Relaxed);
    }

    /// Pairs copied so far.
    pub fn keys_copied(&self) -> u64 {
        self.keys.load(Ordering::Relaxed)
    }
}

impl Db {
    /// Writes a consistent copy of the current version into a new pool at
    /// `dst`, replacing any file there once the copy is complete (see the
    /// module docs of `backup`). Writers and readers go on meanwhile.
    ///
    /// # Errors
    /// [`DbError::Unsupported`] for the in-place engines; [`DbError::Backup`]
    /// when `dst` is this database's own pool or cannot be written or
    /// renamed; pool errors of the source (damage) or of the copy (no room
    /// on the filesystem).
    pub fn backup(&self, dst: impl AsRef<Path>) -> Result<BackupReport> {
        self.backup_with(dst, &BackupControl::default())
    }

    /// [`Db::backup`], cancellable and observable through `control`.
    ///
    /// # Errors
    /// As [`Db::backup`]; [`DbError::Backup`] once cancelled.
    pub fn backup_with(&self, dst: impl AsRef<Path>, control: &BackupControl) -> Result<BackupReport> {
        let started = Instant::now();
        let settle = SettleOnDrop(control);
        let dst = dst.as_ref();
        let fail = |why: String| DbError::Backup { path: dst.to_path_buf(), why };
        self.cdds("a backup")?;
        let partial = partial_path(dst);
        if same_file(dst, self.path()) || same_file(&partial, self.path()) {
            return Err(fail("it is this database's own pool file; choose another path".into()));
        }
        let snap = self.snapshot()?;
        drop(settle);
        // A partial file is only ever a backup that did not finish.
        match std::fs::remove_file(&partial) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(fail(format!("cannot remove the stale {}: {e}", partial.display()))),
        }
        let opts = Options {
            engine: Engine::Cdds,
            limits: self.limits(),
            // Room for a copy of everything the source can hold.
            max_size: Some(self.pool().max_size().max(self.pool().size())),
            ..Options::default()
        };
        let copy = Db::create(&partial, &opts)?;
        let finished = match copy_pairs(&snap, &copy, control) {
            // The copy's splits left ended inner entries behind: one GC
            // pass makes it as compact as a fresh load can be.
            Ok(kb) => copy.gc().and_then(|_| copy.close()).map(|()| kb),
            Err(e) => {
                drop(copy);
                Err(e)
            }
        };
        let (keys, bytes) = match finished {
            Ok(kb) => kb,
            Err(e) => {
                let _ = std::fs::remove_file(&partial);
                return Err(e);
            }
        };
        if let Err(e) = publish(&partial, dst) {
            let _ = std::fs::remove_file(&partial);
            return Err(fail(e));
        }
        Ok(BackupReport { path: dst.to_path_buf(), version: snap.version(), keys, bytes, elapsed: started.elapsed() })
    }
}

/// Copies every pair of `snap` into `copy`, a batch per commit.
fn copy_pairs(snap: &crate::Snapshot<'_>, copy: &Db, control: &BackupControl) -> Result<(u64, u64)> {
    let (mut keys, mut bytes) = (0u64, 0u64);
    let mut batch = WriteBatch::with_capacity(BATCH_PAIRS);
    let mut batch_bytes = 0usize;
    let (mut k, mut v) = (Vec::new(), Vec::new());
    let mut it = snap.iter();
    loop {
        let more = match it.next_into(&mut k, &mut v) {
            Some(r) => {
                r?;
                batch_bytes += k.len() + v.len();
                batch.put(k.as_slice(), v.as_slice());
                true
            }
            None => false,
        };
        if batch.len() >= BATCH_PAIRS || batch_bytes >= BATCH_BYTES || (!more && !batch.is_empty()) {
            if control.cancel.load(Ordering::Relaxed) {
                return Err(DbError::Backup { path: copy.path().to_path_buf(), why: "cancelled".into() });
            }
            copy.write(&batch)?;
            keys += batch.len() as u64;
            bytes += batch_bytes as u64;
            control.keys.store(keys, Ordering::Relaxed);
            batch.clear();
            batch_bytes = 0;
        }
        if !more {
            return Ok((keys, bytes));
        }
    }
}

/// `<dst>.partial`, beside the destination (a rename within one directory
/// is atomic).
fn partial_path(dst: &Path) -> PathBuf {
    let mut name = dst.file_name().map(|n| n.to_os_string()).unwrap_or_default();
    name.push(".partial");
    dst.with_file_name(name)
}

/// Whether `a` and `b` name the same existing file.
fn same_file(a: &Path, b: &Path) -> bool {
    match (std::fs::canonicalize(a), std::fs::canonicalize(b)) {
        (Ok(a), Ok(b)) => a == b,
        _ => false,
    }
}

/// Syncs the finished copy, renames it over `dst` and syncs the directory,
/// so that the rename survives a power cut.
fn publish(partial: &Path, dst: &Path) -> std::result::Result<(), String> {
    File::open(partial).and_then(|f| f.sync_all()).map_err(|e| format!("cannot sync {}: {e}", partial.display()))?;
    std::fs::rename(partial, dst).map_err(|e| format!("cannot rename {} to it: {e}", partial.display()))?;
    let dir = match dst.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => PathBuf::from("."),
    };
    File::open(&dir).and_then(|d| d.sync_all()).map_err(|e| format!("cannot sync directory {}: {e}", dir.display()))
}
