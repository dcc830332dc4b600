//! `tembo pool …`: create, inspect, check and grow pool files.
//!
//! Each command opens the pool for as short a time as it can: a pool is
//! locked (`flock`) while any process has it open, so these commands are
//! for pools that no server is using. Every error names the path and says
//! what to do next.
//!
//! Opening a pool and closing it again would normally mark it as cleanly
//! shut down. After a crash that would hide the crash from the engine, whose
//! recovery runs only on an unclean open; so when the previous session did
//! not end cleanly, these commands leave the pool marked unclean
//! ([`release`]).
//!
//! `stat`, `check` and `init` also cover the database when the pool holds
//! one (a `tembo-db` root, see `tembo-store`). Opening the database of a
//! pool whose last session crashed runs the engine's recovery, after which
//! closing the pool clean is right; the output says so. When the database
//! cannot be opened (damage, or recovery failed), nothing has recovered the
//! pool and it stays marked unclean.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::{bail, Context, Result};
use clap::{Subcommand, ValueEnum};
use tembo_pmem::{ModeRequest, Pool, PoolOptions};
use tembo_store::{Db, DbError, Options, DB_ROOT};

use crate::size::{human_exact, parse_size};
use crate::stat::{DbStat, PoolStat, RecoveryStat};

/// Where `tembo pool init` puts the default pool.
pub const DEFAULT_POOL: &str = "tembo-data/tembo.pool";

/// Durability mode to ask for.
#[derive(Clone, Copy, Debug, ValueEnum)]
pub enum ModeArg {
    /// dax if the filesystem grants MAP_SYNC, else emulated on a RAM filesystem (/dev/shm), else msync
    Auto,
    /// MAP_SYNC on a DAX filesystem (real persistent memory); an error elsewhere
    Dax,
    /// shared mapping, flush + fence only: survives kill -9, not power loss
    Emulated,
    /// flush + msync of dirty pages at each fence: power-fail durable on any disk
    Msync,
}

impl From<ModeArg> for ModeRequest {
    fn from(m: ModeArg) -> ModeRequest {
        match m {
            ModeArg::Auto => ModeRequest::Auto,
            ModeArg::Dax => ModeRequest::Dax,
            ModeArg::Emulated => ModeRequest::Emulated,
            ModeArg::Msync => ModeRequest::Msync,
        }
    }
}

/// The `pool` subcommands.
#[derive(Debug, Subcommand)]
pub enum PoolCommand {
    /// Create a new pool file
    #[command(after_help = "Examples:\n  tembo pool create /dev/shm/tembo.pool --size 1G\n  \
                            tembo pool create /mnt/pmem/tembo.pool --size 64G --mode dax")]
    Create {
        /// Path of the new pool file (must not exist; its directory must)
        path: PathBuf,
        /// Initial size, e.g. 64M, 1G (at least 64K; rounded up to 4 KiB pages)
        #[arg(long, value_parser = parse_size)]
        size: u64,
        /// Largest size the pool may grow to [default: 16 × size, at least 1G]
        #[arg(long, value_parser = parse_size)]
        max_size: Option<u64>,
        /// Durability mode for this session (detected again at every open)
        #[arg(long, value_enum, default_value_t = ModeArg::Auto)]
        mode: ModeArg,
    },
    /// Show a pool's mode, durability guarantee, sizes, heap usage and roots, and its database's counts
    #[command(long_about = "Show a pool's mode, durability guarantee, sizes, heap usage and roots.\n\n\
        When the pool holds a database, also its engine, keys, live and dead entries, nodes, height, \
        data and owned bytes, current version and named snapshots. Opening the database of a pool \
        whose last session crashed runs its recovery first (the output says so). Exit status 1 when \
        the database cannot be opened or walked.")]
    Stat {
        /// The pool file
        path: PathBuf,
        /// Print JSON instead of text
        #[arg(long)]
        json: bool,
    },
    /// Check a pool's header and allocator invariants, and its database's; exit status 1 on any violation
    #[command(long_about = "Check a pool's header and allocator invariants; exit status 1 on any violation.\n\n\
        When the pool holds a database, also run the database's full check: the engine record, every \
        tree invariant, record checksums, block ownership (no leaks) and the allocator again. Opening \
        the database of a pool whose last session crashed runs its recovery first (the output says so).")]
    Check {
        /// The pool file
        path: PathBuf,
    },
    /// Grow a pool now (it also grows by itself as it fills, up to its maximum size)
    #[command(long_about = "Grow a pool now, and optionally raise its maximum size.\n\n\
        A pool also grows by itself when an allocation needs room, up to its maximum size; \
        this command grows it ahead of time or raises the maximum. The pool is locked while \
        a process has it open, so run this on a pool that no server is using.")]
    Grow {
        /// The pool file
        path: PathBuf,
        /// New size, e.g. 2G (a size at or below the current one changes nothing)
        #[arg(long, value_parser = parse_size)]
        size: u64,
        /// Also raise (or lower, not below the size) the maximum size first
        #[arg(long, value_parser = parse_size)]
        max_size: Option<u64>,
    },
    /// Write a consistent copy of a pool's database into another pool file
    #[command(
        long_about = "Write a consistent copy of a pool's database into another pool file.\n\n\
        The copy holds one committed version of the database, written into a new pool under \
        DEST.partial, closed cleanly, synced, and then renamed over DEST: DEST is the old backup or \
        the new one, never a part of one. The copy is compact (only live pairs) and opens like any \
        pool (`tembo serve --pool DEST` serves it). The source must not be in use; to back up a \
        running `tembo serve`, send it BGSAVE instead (INFO persistence reports its progress). \
        cdds engine only.",
        after_help = "Examples:\n  tembo pool backup tembo-data/tembo.pool /backup/tembo-$(date +%F).pool"
    )]
    Backup {
        /// The pool file to copy (not open in another process)
        path: PathBuf,
        /// Where to write the copy (replaced once the copy is complete)
        dest: PathBuf,
    },
    /// Create the default pool if it is absent (or open it), then show its stat
    #[command(long_about = "Create the default pool if it is absent (or open it), then show its stat.\n\n\
        The first command to run: with no arguments it creates ./tembo-data/tembo.pool (64 MiB, \
        directory included) on the first run and reopens it afterwards.")]
    Init {
        /// The pool file
        #[arg(default_value = DEFAULT_POOL)]
        path: PathBuf,
        /// Initial size if the pool is created
        #[arg(long, value_parser = parse_size, default_value = "64M")]
        size: u64,
        /// Durability mode
        #[arg(long, value_enum, default_value_t = ModeArg::Auto)]
        mode: ModeArg,
        /// Print the stat as JSON
        #[arg(long)]
        json: bool,
    },
}

/// What a command wants the process to exit with.
pub type Outcome = std::process::ExitCode;

/// Runs a `pool` subcommand.
///
/// # Errors
/// Any failure, with context naming the path and a hint.
pub fn run(cmd: PoolCommand) -> Result<Outcome> {
    match cmd {
        PoolCommand::Create { path, size, max_size, mode } => create(&path, size, max_size, mode),
        PoolCommand::Stat { path, json } => {
            let pool = open(&path, ModeRequest::Auto)?;
            stat_and_release(pool, json)
        }
        PoolCommand::Check { path } => check(&path),
        PoolCommand::Grow { path, size, max_size } => grow(&path, size, max_size),
        PoolCommand::Init { path, size, mode, json } => init(&path, size, mode, json),
        PoolCommand::Backup { path, dest } => backup(&path, &dest),
    }
}

/// `tembo pool backup`: a snapshot of the database copied into `dest`.
fn backup(path: &Path, dest: &Path) -> Result<Outcome> {
    if !path.exists() {
        bail!("no pool at {}: the file does not exist", path.display());
    }
    let db = match Db::open(path, &Options::default()) {
        Ok(db) => db,
        Err(e) if matches!(e.pmem(), Some(tembo_pmem::PmemError::Locked { .. })) => bail!(
            "{}: the pool is in use by another process; if it is a running `tembo serve`, send it BGSAVE \
             (it writes a backup while it serves; see `backup-path` in its config)",
            path.display()
        ),
        Err(e) => return Err(anyhow::Error::new(e)).with_context(|| format!("cannot open {}", path.display())),
    };
    let r = db.backup(dest).with_context(|| format!("backup of {}", path.display()))?;
    db.close().with_context(|| format!("cannot close {}", path.display()))?;
    println!(
        "backed up {} keys ({} of keys and values) at version {} to {} in {:.2?}",
        r.keys,
        crate::size::human(r.bytes),
        r.version,
        r.path.display(),
        r.elapsed
    );
    Ok(Outcome::SUCCESS)
}

/// Opens a pool, turning the common failures into advice.
fn open(path: &Path, mode: ModeRequest) -> Result<Pool> {
    if !path.exists() {
        bail!(
            "no pool at {}: the file does not exist; create one with `tembo pool create {} --size 64M` \
             (or `tembo pool init`)",
            path.display(),
            path.display()
        );
    }
    let opts = PoolOptions { mode, ..PoolOptions::default() };
    Pool::open(path, &opts).map_err(|e| {
        // Most pool errors name the file already; name it once.
        let names_path = e.to_string().contains(&path.display().to_string());
        let context =
            if names_path { "cannot open pool".to_string() } else { format!("cannot open pool {}", path.display()) };
        anyhow::Error::new(e).context(context)
    })
}

/// Closes a pool, or, if its previous session crashed and nothing here ran
/// the recovery, leaves it marked unclean so the engine's recovery still runs
/// at its next open. (The process exits right after, which unmaps the pool
/// and drops its lock.)
fn release(pool: Pool) -> Result<()> {
    if pool.opened_unclean() && !pool.leaks_reclaimed() {
        std::mem::forget(pool);
        return Ok(());
    }
    let path = pool.path().to_path_buf();
    pool.close().with_context(|| format!("closing pool {}", path.display()))
}

/// The database of an open pool, if it holds one.
#[derive(Debug)]
enum DbState {
    /// No `tembo-db` root.
    Absent,
    /// Opened (and recovered, if the pool was opened unclean).
    Open(Box<Db>),
    /// The pool holds a database that cannot be opened.
    Failed(DbError),
}

/// Opens the database of `pool` if it holds one. The database shares the
/// pool; [`release_shared`] closes both.
fn open_db(pool: &Arc<Pool>) -> DbState {
    if pool.root(DB_ROOT).is_none() {
        return DbState::Absent;
    }
    // With the root present, `from_pool` only opens (it never creates).
    match Db::from_pool(Arc::clone(pool), &Options::default()) {
        Ok(db) => DbState::Open(Box::new(db)),
        Err(e) => DbState::Failed(e),
    }
}

/// Closes the database (its engine; the pool stays open, being shared),
/// then releases the pool as [`release`] does: clean if nothing needed
/// recovering or the database's recovery ran, else left unclean.
fn release_shared(pool: Arc<Pool>, db: DbState) -> Result<()> {
    drop(db);
    match Arc::try_unwrap(pool) {
        Ok(pool) => release(pool),
        Err(_) => bail!("internal error: the pool is still in use after its database was closed"),
    }
}

/// Prints the stat of `pool` and its database, then releases it. Exit
/// status 1 (after printing what it could) when the database cannot be
/// opened or walked.
fn stat_and_release(pool: Pool, json: bool) -> Result<Outcome> {
    let pool = Arc::new(pool);
    let db = open_db(&pool);
    // Collected after the database's recovery (if it ran), so the heap
    // counts and the database's agree.
    let mut stat = PoolStat::of(&pool);
    match &db {
        DbState::Absent => {}
        DbState::Open(d) => match DbStat::of(d) {
            Ok(s) => stat.database = Some(s),
            Err(e) => {
                let r = RecoveryStat::of(d.recovery_report());
                let ran = if r.ran { format!(" (after recovery: {})", r.summary()) } else { String::new() };
                stat.database_error = Some(format!("cannot walk the database: {e}{ran}"));
            }
        },
        DbState::Failed(e) => stat.database_error = Some(format!("cannot open the database: {e}")),
    }
    if json {
        println!("{}", serde_json::to_string_pretty(&stat).context("encoding the stat as JSON")?);
    } else {
        print!("{}", stat.render());
    }
    let hint = match &db {
        DbState::Failed(e) => db_error_hint(e),
        _ => DAMAGED,
    };
    release_shared(pool, db)?;
    if let Some(e) = &stat.database_error {
        eprintln!("tembo: {}: {e}\ntembo: {hint}", stat.path);
        return Ok(Outcome::from(1));
    }
    Ok(Outcome::SUCCESS)
}

/// What to do about a database that cannot be opened or walked.
const DAMAGED: &str = "the database is damaged: keep a copy of the file, restore from a backup, and please report it";

/// [`DAMAGED`], unless the database is fine but this build cannot read it.
fn db_error_hint(e: &DbError) -> &'static str {
    match e {
        DbError::UnknownEngine { .. } => "the database was made by another version of Tembo; use that version",
        _ => DAMAGED,
    }
}

fn create_pool(path: &Path, opts: &PoolOptions) -> Result<Pool> {
    if path.exists() {
        bail!(
            "{} already exists; inspect it with `tembo pool stat {}`, or choose another path",
            path.display(),
            path.display()
        );
    }
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        if !dir.is_dir() {
            bail!(
                "cannot create pool {}: directory {} does not exist; create it first (mkdir -p {})",
                path.display(),
                dir.display(),
                dir.display()
            );
        }
    }
    Pool::create(path, opts).with_context(|| format!("cannot create pool {}", path.display()))
}

fn create(path: &Path, size: u64, max_size: Option<u64>, mode: ModeArg) -> Result<Outcome> {
    let opts = PoolOptions { size, max_size, mode: mode.into(), ..PoolOptions::default() };
    let pool = create_pool(path, &opts)?;
    println!(
        "created pool {}: {}, max {}, mode {} ({})",
        path.display(),
        human_exact(pool.size()),
        human_exact(pool.max_size()),
        pool.mode(),
        pool.mode().guarantee()
    );
    release(pool)?;
    Ok(Outcome::SUCCESS)
}

fn check(path: &Path) -> Result<Outcome> {
    let pool = open(path, ModeRequest::Auto)?;
    let report = pool.check();
    let has_db = pool.root(DB_ROOT).is_some();
    if report.is_ok() {
        println!(
            "OK: {}: header valid, {} runs, {} allocated blocks, no violations",
            path.display(),
            report.runs,
            report.blocks
        );
    } else {
        for v in &report.violations {
            println!("violation {}: {}", v.name, v.detail);
        }
    }
    if !has_db || (!report.is_ok() && pool.opened_unclean()) {
        // Without a database there is nothing more to check. With one, after
        // a crash, its recovery would free blocks through an allocator that
        // is inconsistent: leave both as they are.
        let skipped = has_db && !report.is_ok();
        release(pool)?;
        if report.is_ok() {
            return Ok(Outcome::SUCCESS);
        }
        eprintln!(
            "tembo: {}: {} invariant violation(s) — the pool's metadata is inconsistent; \
             keep a copy of the file, restore from a backup, and please report the violations",
            path.display(),
            report.violations.len()
        );
        if skipped {
            eprintln!(
                "tembo: {}: the database was not opened: the last session crashed, and its recovery would run \
                 on the inconsistent allocator",
                path.display()
            );
        }
        return Ok(Outcome::from(1));
    }
    let pool = Arc::new(pool);
    let db = open_db(&pool);
    let verdict = check_db(path, &db, !report.is_ok());
    let hint = match &db {
        DbState::Failed(e) => db_error_hint(e),
        _ => DAMAGED,
    };
    release_shared(pool, db)?;
    let db_violations = match verdict {
        Ok(n) => n,
        Err(e) => {
            eprintln!("tembo: {}: {e:#}\ntembo: {hint}", path.display());
            return Ok(Outcome::from(1));
        }
    };
    if report.is_ok() && db_violations == 0 {
        return Ok(Outcome::SUCCESS);
    }
    if !report.is_ok() {
        eprintln!(
            "tembo: {}: {} pool invariant violation(s) — the pool's metadata is inconsistent",
            path.display(),
            report.violations.len()
        );
    }
    if db_violations > 0 {
        eprintln!(
            "tembo: {}: {db_violations} database invariant violation(s) — the database is damaged",
            path.display()
        );
    }
    eprintln!("tembo: keep a copy of the file, restore from a backup, and please report the violations");
    Ok(Outcome::from(1))
}

/// Runs the database's full check, printing the verdict (and, first,
/// whether opening it ran recovery). Returns the number of violations; an
/// error when the database cannot be opened or the walk cannot proceed.
/// `alloc_listed`: the pool's own check already listed the allocator's
/// violations (the pool was clean, so nothing changed them since).
fn check_db(path: &Path, db: &DbState, alloc_listed: bool) -> Result<usize> {
    let db = match db {
        DbState::Absent => return Ok(0),
        DbState::Failed(e) => bail!("cannot open the database: {e}"),
        DbState::Open(db) => db,
    };
    let recovery = RecoveryStat::of(db.recovery_report());
    if recovery.ran {
        println!("recovery: {}", recovery.summary());
    }
    let c = db.check().map_err(|e| anyhow::anyhow!("the database check could not complete: {e}"))?;
    if c.is_ok() {
        let s = &c.tree.stats;
        println!(
            "OK: database ({} engine): {} keys, version {}, height {}, {} nodes: engine record, tree invariants, \
             record checksums, block ownership (no leaks) and allocator hold",
            db.engine(),
            s.keys,
            s.version,
            s.height,
            s.nodes
        );
        return Ok(0);
    }
    // The allocator's violations are in `c.alloc` (and `c.tree.allocator`): list them once.
    let mut violations: Vec<String> = c.record.iter().map(|r| format!("engine record: {r}")).collect();
    violations.extend(c.tree.violations.iter().cloned());
    if !alloc_listed {
        violations.extend(c.alloc.violations.iter().map(|x| format!("allocator: {}: {}", x.name, x.detail)));
    }
    if violations.is_empty() {
        println!("database ({} engine): no violations besides the allocator's, listed above", db.engine());
        return Ok(0);
    }
    for v in &violations {
        println!("violation database: {v}");
    }
    println!("database check of {}: {} violation(s)", path.display(), violations.len());
    Ok(violations.len())
}

fn grow(path: &Path, size: u64, max_size: Option<u64>) -> Result<Outcome> {
    let mut pool = open(path, ModeRequest::Auto)?;
    let old_size = pool.size();
    let old_max = pool.max_size();
    let page = 4096u64;
    let target = size.checked_next_multiple_of(page).context("size is too large")?;
    let new_max = match max_size {
        Some(m) => m.checked_next_multiple_of(page).context("maximum size is too large")?,
        None => old_max,
    };
    if target > new_max {
        bail!(
            "cannot grow {} to {}: its maximum size is {}; pass --max-size {} (or larger) to raise it",
            path.display(),
            human_exact(target),
            human_exact(new_max),
            target
        );
    }
    if max_size.is_some() {
        pool.set_max_size(new_max).with_context(|| format!("cannot set the maximum size of {}", path.display()))?;
        if target > old_max {
            // The address range for growth was reserved at open for the old
            // maximum: reopen to reserve the new one. A pool whose last
            // session crashed stays marked unclean, and so stays locked by
            // this process until it exits: a second run does the growth.
            if pool.opened_unclean() {
                release(pool)?;
                bail!(
                    "raised the maximum size of {} to {}, but growing past the old maximum ({}) needs the pool \
                     reopened, which this run cannot do for a pool whose last session crashed: run the same \
                     command again",
                    path.display(),
                    human_exact(new_max),
                    human_exact(old_max)
                );
            }
            release(pool)?;
            pool = open(path, ModeRequest::Auto)?;
        }
    }
    pool.grow(target).with_context(|| format!("cannot grow {} to {}", path.display(), human_exact(target)))?;
    let new_size = pool.size();
    if new_size == old_size {
        println!(
            "{}: size {} unchanged (already at least {})",
            path.display(),
            human_exact(old_size),
            human_exact(target)
        );
    } else {
        println!("grew {}: {} -> {}", path.display(), human_exact(old_size), human_exact(new_size));
    }
    if pool.max_size() != old_max {
        println!("max size of {}: {} -> {}", path.display(), human_exact(old_max), human_exact(pool.max_size()));
    }
    release(pool)?;
    Ok(Outcome::SUCCESS)
}

fn init(path: &Path, size: u64, mode: ModeArg, json: bool) -> Result<Outcome> {
    let pool = if path.exists() {
        let pool = open(path, mode.into())?;
        if !json {
            println!("opened existing pool {}\n", path.display());
        }
        pool
    } else {
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).with_context(|| format!("cannot create directory {}", dir.display()))?;
        }
        let opts = PoolOptions { size, mode: mode.into(), ..PoolOptions::default() };
        let pool = create_pool(path, &opts)?;
        if !json {
            println!("created pool {}\n", path.display());
        }
        pool
    };
    stat_and_release(pool, json)
}
