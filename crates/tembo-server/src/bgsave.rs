//! BGSAVE: a backup of the whole database, written while the server serves.
//!
//! Every write is durable at its commit, so BGSAVE is not what makes data
//! safe here: it makes a *copy* — a consistent, compact pool file that can
//! be moved elsewhere and served (`tembo serve --pool <backup>`). The copy
//! is [`Db::backup`]'s: one committed version read through a snapshot on a
//! thread of its own, written to a new pool and renamed over the backup
//! path only once complete. The executor keeps serving meanwhile (the
//! snapshot pins one version; writers go on). One backup runs at a time;
//! `BGSAVE SCHEDULE` queues one more. Shutdown cancels a running backup
//! (its partial file is removed; the previous backup stays).

use std::path::PathBuf;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use tembo_store::{BackupControl, BackupReport, Db, DbError};

/// The backup running now, if any, and how the last one ended.
#[derive(Debug, Default)]
pub struct Bgsave {
    running: Option<Running>,
    /// `BGSAVE SCHEDULE` arrived while one ran: where the next one goes.
    scheduled: Option<PathBuf>,
    /// Whether the last finished backup succeeded (true before any).
    last_ok: bool,
    /// Seconds the last finished backup took (-1 before any).
    last_secs: i64,
    /// Unix time of the last successful backup (0 before any).
    last_success_unix: u64,
    /// Pairs in the last successful backup.
    last_keys: u64,
    /// Unix time of the last save: SAVE, a successful backup, or the start.
    last_save_unix: u64,
    /// Backups finished since start, successful or not.
    finished: u64,
}

#[derive(Debug)]
struct Running {
    handle: JoinHandle<Result<BackupReport, DbError>>,
    control: Arc<BackupControl>,
    started: Instant,
    path: PathBuf,
}

/// What [`Bgsave::start`] did.
#[derive(Debug, PartialEq, Eq)]
pub enum Started {
    /// A backup thread is running.
    Now,
    /// One was running: another follows it.
    Scheduled,
}

impl Bgsave {
    /// A state with no backup yet.
    pub fn new() -> Bgsave {
        Bgsave { last_ok: true, last_secs: -1, last_save_unix: unix_now(), ..Bgsave::default() }
    }

    /// SAVE returned: every write is durable.
    pub fn note_save(&mut self) {
        self.last_save_unix = unix_now();
    }

    /// What LASTSAVE answers: the Unix time of the last SAVE or successful
    /// backup, or of the start. Writes do not move it, so a client may poll
    /// it to see a BGSAVE finish, as Redis documents.
    pub fn last_save(&self) -> u64 {
        self.last_save_unix
    }

    /// Starts a backup of `db` to `path` on a thread of its own; with
    /// `schedule`, one already running queues this one instead of
    /// refusing it.
    ///
    /// # Errors
    /// Redis's words when one runs (and `schedule` is not given), or the
    /// thread could not be started.
    pub fn start(&mut self, db: &Arc<Db>, path: PathBuf, schedule: bool) -> Result<Started, String> {
        self.poll(db);
        if self.running.is_some() {
            if schedule {
                self.scheduled = Some(path);
                return Ok(Started::Scheduled);
            }
            return Err("Background save already in progress".into());
        }
        self.spawn(db, path)?;
        Ok(Started::Now)
    }

    fn spawn(&mut self, db: &Arc<Db>, path: PathBuf) -> Result<(), String> {
        let control = Arc::new(BackupControl::default());
        let (db2, control2, path2) = (Arc::clone(db), Arc::clone(&control), path.clone());
        let handle = std::thread::Builder::new()
            .name("tembo-bgsave".into())
            .spawn(move || db2.backup_with(&path2, &control2))
            .map_err(|e| format!("cannot start the backup thread: {e}"))?;
        // The backup holds what was committed before BGSAVE, not what the
        // executor commits next.
        control.wait_for_version();
        log::info!("Background saving started: backup of the database to {}", path.display());
        self.running = Some(Running { handle, control, started: Instant::now(), path });
        Ok(())
    }

    /// Collects a finished backup (logging how it ended) and starts a
    /// scheduled one. Cheap while one runs.
    pub fn poll(&mut self, db: &Arc<Db>) {
        if self.running.as_ref().is_some_and(|r| r.handle.is_finished()) {
            self.collect();
        }
        if self.running.is_some() {
            return;
        }
        if let Some(path) = self.scheduled.take() {
            if let Err(e) = self.spawn(db, path) {
                log::error!("scheduled background save: {e}");
                self.last_ok = false;
            }
        }
    }

    fn collect(&mut self) {
        let Some(r) = self.running.take() else { return };
        let secs = r.started.elapsed().as_secs() as i64;
        let outcome = r.handle.join().unwrap_or_else(|_| {
            Err(DbError::Backup { path: r.path.clone(), why: "the backup thread panicked".into() })
        });
        self.finished += 1;
        self.last_secs = secs;
        match outcome {
            Ok(rep) => {
                self.last_ok = true;
                self.last_keys = rep.keys;
                self.last_success_unix = unix_now();
                self.last_save_unix = self.last_success_unix;
                log::info!(
                    "Background saving terminated with success: {} engine pairs at version {} in {:.2?} to {}",
                    rep.keys,
                    rep.version,
                    rep.elapsed,
                    rep.path.display()
                );
            }
            Err(e) => {
                self.last_ok = false;
                log::error!("Background saving error: {e}");
            }
        }
    }

    /// Cancels a running backup and waits for its thread (shutdown: the
    /// database can only be closed once no one else holds it).
    pub fn cancel_and_wait(&mut self) {
        self.scheduled = None;
        if let Some(r) = &self.running {
            r.control.cancel();
            log::info!("shutdown: cancelling the background save to {}", r.path.display());
        }
        self.collect();
    }

    /// Whether a backup runs now.
    pub fn in_progress(&self) -> bool {
        self.running.is_some()
    }

    /// Seconds the running backup has taken so far (-1 if none).
    pub fn current_secs(&self) -> i64 {
        self.running.as_ref().map_or(-1, |r| r.started.elapsed().as_secs() as i64)
    }

    /// Pairs the running backup has copied so far (0 if none).
    pub fn current_keys(&self) -> u64 {
        self.running.as_ref().map_or(0, |r| r.control.keys_copied())
    }

    /// Whether the last finished backup succeeded (true before any).
    pub fn last_ok(&self) -> bool {
        self.last_ok
    }

    /// Seconds the last finished backup took (-1 before any).
    pub fn last_secs(&self) -> i64 {
        self.last_secs
    }

    /// Unix time of the last successful backup (0 before any).
    pub fn last_success_unix(&self) -> u64 {
        self.last_success_unix
    }

    /// Pairs in the last successful backup.
    pub fn last_keys(&self) -> u64 {
        self.last_keys
    }

    /// Backups finished since start.
    pub fn finished(&self) -> u64 {
        self.finished
    }
}

fn unix_now() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs())
}
