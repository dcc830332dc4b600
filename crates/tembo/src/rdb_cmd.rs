//! `tembo rdb …`: Redis's snapshot format in and out of a pool, for moving
//! data between Redis and Tembo, and for tools that read RDB files.
//!
//! - `export` writes one committed version of a stopped server's pool as an
//!   RDB file that redis-server loads (a running server gives the same file
//!   to `redis-cli --rdb`).
//! - `import` loads an RDB file (Redis 2.6 to 7.4: RDB versions up to 12) into a
//!   pool, creating it if absent. The file is read and checked whole first
//!   (every value decoded, the checksum compared), and without `--replace`
//!   every key is checked to be absent, so that a bad file or a clash writes
//!   nothing. Keys then go in through RESTORE, 512 to a MULTI/EXEC and one
//!   durable commit: an import stopped midway (a full pool) keeps the
//!   batches committed before, and says how many keys they hold.
//! - `inspect` prints what a file holds without loading it.

use std::collections::BTreeMap;
use std::io::{BufWriter, IsTerminal};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use anyhow::{bail, Context, Result};
use clap::Subcommand;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use tembo_server::rdb_load::{self, Index};
use tembo_server::rdb_save::{self, Filter};
use tembo_server::resp::Reply;
use tembo_server::{encoding, Config, Session, DEFAULT_POOL};
use tembo_store::{Db, Engine, Options};

/// The `rdb` subcommands.
#[derive(Debug, Subcommand)]
pub enum RdbCommand {
    /// Write a pool's data as an RDB file that redis-server loads
    #[command(
        long_about = "Write a pool's data as an RDB file (version 10, Redis 7.0's) that redis-server loads.\n\n\
        The file holds one committed version of every database, with expiries and function libraries; \
        keys already past their expiry are left out. It is written to FILE.partial, synced, then renamed \
        over FILE. The pool must not be in use: from a running `tembo serve`, take the same file with \
        `redis-cli --rdb FILE`. cdds engine only (the others keep no snapshot).",
        after_help = "Examples:\n  tembo rdb export dump.rdb\n  tembo rdb export --pool /mnt/pmem/tembo.pool /backup/dump.rdb"
    )]
    Export {
        /// The RDB file to write
        file: PathBuf,
        /// The pool to read
        #[arg(long, default_value = DEFAULT_POOL)]
        pool: PathBuf,
        /// Only the function libraries (as `redis-cli --functions-rdb`)
        #[arg(long)]
        functions_only: bool,
    },
    /// Load an RDB file (from Redis 2.6 to 7.4) into a pool
    #[command(
        long_about = "Load an RDB file (RDB versions up to 12: Redis 2.6 to 7.4) into a pool, created if absent.\n\n\
        The whole file is read and checked first (every value decoded, the checksum compared, no key twice); a damaged \
        file, a type Tembo does not keep (module data, 7.4's hash-field expiry) or a database past \
        --databases writes nothing. Without --replace, a key or function library that already exists \
        also writes nothing. Then the keys are restored with their expiries, 512 to a durable commit; \
        keys already expired are skipped. The pool must not be in use by a server.",
        after_help = "Examples:\n  redis-cli -p 6379 --rdb dump.rdb && tembo rdb import dump.rdb\n  \
                      tembo rdb import /var/lib/redis/dump.rdb --pool /mnt/pmem/tembo.pool --replace"
    )]
    Import {
        /// The RDB file to read
        file: PathBuf,
        /// The pool to load into (created if absent)
        #[arg(long, default_value = DEFAULT_POOL)]
        pool: PathBuf,
        /// Overwrite keys and function libraries that already exist
        #[arg(long)]
        replace: bool,
        /// Databases of the server that will serve the pool (SELECT 0..N-1)
        #[arg(long, default_value_t = 16)]
        databases: usize,
        /// Size of a new pool, e.g. 1G (it grows by itself as it fills)
        #[arg(long, value_parser = crate::size::parse_size, default_value = "256M")]
        pool_size: u64,
        /// Largest size a new pool may grow to [default: 16 x pool size, at least 1G]
        #[arg(long, value_parser = crate::size::parse_size)]
        pool_max_size: Option<u64>,
    },
    /// Show what an RDB file holds: version, fields, keys per database and type
    Inspect {
        /// The RDB file
        file: PathBuf,
    },
}

/// Runs an `rdb` subcommand.
///
/// # Errors
/// Any failure, with context naming the file or pool and what to do.
pub fn run(cmd: RdbCommand) -> Result<()> {
    match cmd {
        RdbCommand::Export { file, pool, functions_only } => export(&pool, &file, functions_only),
        RdbCommand::Import { file, pool, replace, databases, pool_size, pool_max_size } => {
            let cfg =
                Config { pool, pool_size, pool_max_size: pool_max_size.unwrap_or(0), databases, ..Config::default() };
            import(&file, cfg, replace)
        }
        RdbCommand::Inspect { file } => inspect(&file),
    }
}

/// A bar on stderr when it is a terminal; hidden otherwise (logs, tests).
fn progress(len: Option<u64>, what: &str) -> ProgressBar {
    if !std::io::stderr().is_terminal() {
        return ProgressBar::hidden();
    }
    let bar = ProgressBar::with_draw_target(len, ProgressDrawTarget::stderr());
    let template = if len.is_some() {
        "{prefix} [{bar:30}] {pos}/{len} keys ({elapsed}, {eta} left)"
    } else {
        "{prefix} {spinner} {pos} keys ({elapsed})"
    };
    bar.set_style(ProgressStyle::with_template(template).unwrap_or_else(|_| ProgressStyle::default_bar()));
    bar.set_prefix(what.to_string());
    bar
}

fn open_existing(pool: &Path) -> Result<Db> {
    if !pool.exists() {
        bail!("no pool at {}: the file does not exist (name one with --pool)", pool.display());
    }
    Db::open(pool, &Options::default()).map_err(|e| {
        if matches!(e.pmem(), Some(tembo_pmem::PmemError::Locked { .. })) {
            anyhow::anyhow!(
                "{}: the pool is in use by another process; if it is a running `tembo serve`, take the file from \
                 it with `redis-cli -p PORT --rdb FILE`",
                pool.display()
            )
        } else {
            anyhow::Error::new(e).context(format!("cannot open {}", pool.display()))
        }
    })
}

fn export(pool: &Path, file: &Path, functions_only: bool) -> Result<()> {
    let db = open_existing(pool)?;
    if db.engine() != Engine::Cdds {
        bail!(
            "{}: the {} engine keeps no snapshot to export from; only cdds pools can be exported",
            pool.display(),
            db.engine()
        );
    }
    let layout = db.get(&encoding::layout_key()).with_context(|| format!("reading {}", pool.display()))?;
    match layout.as_deref().map(<[u8; 4]>::try_from) {
        Some(Ok(v)) if matches!(u32::from_be_bytes(v), 2 | encoding::LAYOUT) => {}
        Some(_) => bail!("{}: the server data is in a key layout this tembo does not read", pool.display()),
        None if db.snapshot()?.scan_prefix(&[]).next().is_some() => bail!(
            "{}: this pool holds keys that `tembo serve` did not write (an embedded database): there are no \
             Redis keys to export",
            pool.display()
        ),
        None => {}
    }
    let partial = PathBuf::from(format!("{}.partial", file.display()));
    let out = std::fs::File::create(&partial).with_context(|| format!("cannot create {}", partial.display()))?;
    let started = Instant::now();
    let bar = progress(None, "exporting");
    let filter = if functions_only { Filter { keys: false, functions: true } } else { Filter::ALL };
    let now = unix_ms();
    let mut writer = BufWriter::with_capacity(1 << 20, out);
    let saved = rdb_save::save(&db, tembo_server::MAX_DATABASES, filter, now, &mut writer, &mut |keys| {
        bar.set_position(keys);
        true
    });
    bar.finish_and_clear();
    let report = match saved.map_err(anyhow::Error::new).and_then(|r| {
        let f = writer.into_inner().map_err(|e| e.into_error())?;
        f.sync_all()?;
        Ok(r)
    }) {
        Ok(r) => r,
        Err(e) => {
            let _ = std::fs::remove_file(&partial);
            return Err(e.context(format!("writing {}", file.display())));
        }
    };
    if let Err(e) = std::fs::rename(&partial, file) {
        let _ = std::fs::remove_file(&partial);
        return Err(anyhow::Error::new(e).context(format!("renaming {} to {}", partial.display(), file.display())));
    }
    // The rename itself is durable once the directory is synced.
    if let Some(dir) = file.parent().map(|d| if d.as_os_str().is_empty() { Path::new(".") } else { d }) {
        std::fs::File::open(dir).and_then(|d| d.sync_all()).with_context(|| format!("syncing {}", dir.display()))?;
    }
    db.close().with_context(|| format!("cannot close {}", pool.display()))?;
    println!(
        "exported {} keys and {} function libraries at version {} to {} ({}) in {:.2?}",
        report.keys,
        report.functions,
        report.version,
        file.display(),
        crate::size::human(report.bytes),
        started.elapsed()
    );
    Ok(())
}

fn read_index(file: &Path) -> Result<(Vec<u8>, Index)> {
    let bytes = std::fs::read(file).with_context(|| format!("cannot read {}", file.display()))?;
    let index = rdb_load::index(&bytes).with_context(|| format!("{}", file.display()))?;
    Ok((bytes, index))
}

fn inspect(file: &Path) -> Result<()> {
    let (bytes, index) = read_index(file)?;
    println!("{}: RDB version {}, {}", file.display(), index.version, crate::size::human(bytes.len() as u64));
    println!("checksum: {}", if index.checksummed { "present, matches" } else { "absent" });
    for (k, v) in &index.aux {
        println!("aux {} = {}", String::from_utf8_lossy(k), String::from_utf8_lossy(v));
    }
    println!("function libraries: {}", index.functions.len());
    let mut per_db: BTreeMap<u64, (u64, u64, BTreeMap<&'static str, u64>)> = BTreeMap::new();
    for e in &index.entries {
        let slot = per_db.entry(e.db).or_default();
        slot.0 += 1;
        slot.1 += u64::from(e.expire_ms.is_some());
        *slot.2.entry(type_name(e.ty)).or_default() += 1;
    }
    for (db, (keys, expires, types)) in per_db {
        let types: Vec<String> = types.iter().map(|(t, n)| format!("{t} {n}")).collect();
        println!("db{db}: keys={keys} expires={expires} ({})", types.join(", "));
    }
    Ok(())
}

/// The Redis type of an RDB object type byte.
fn type_name(ty: u8) -> &'static str {
    match ty {
        0 => "string",
        1 | 10 | 14 | 18 => "list",
        2 | 11 | 20 => "set",
        3 | 5 | 12 | 17 => "zset",
        4 | 9 | 13 | 16 => "hash",
        15 | 19 | 21 => "stream",
        _ => "other",
    }
}

fn import(file: &Path, cfg: Config, replace: bool) -> Result<()> {
    let (pool, databases) = (cfg.pool.clone(), cfg.databases);
    let pool = pool.as_path();
    let (bytes, index) = read_index(file)?;
    if let Some(e) = index.entries.iter().find(|e| e.db >= databases as u64) {
        bail!(
            "{}: key {:?} is in database {}, past --databases {databases}; pass --databases {} or more (and serve \
             the pool with the same --databases)",
            file.display(),
            String::from_utf8_lossy(&e.key),
            e.db,
            e.db + 1
        );
    }
    cfg.validate()?;
    if let Some(dir) = pool.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    }
    let db = Db::open_or_create(pool, &cfg.store_options()?).map_err(|e| {
        if matches!(e.pmem(), Some(tembo_pmem::PmemError::Locked { .. })) {
            anyhow::anyhow!(
                "{}: the pool is in use by another process; stop the server first, or send the keys to it \
                 with `redis-cli --pipe` or MIGRATE",
                pool.display()
            )
        } else {
            anyhow::Error::new(e).context(format!("cannot open {}", pool.display()))
        }
    })?;
    let db = Arc::new(db);
    let mut s = Session::with_config(Arc::clone(&db), cfg).with_context(|| format!("{}", pool.display()))?;
    let imported = load(&mut s, file, &bytes, &index, replace);
    drop(s);
    let closed = match Arc::try_unwrap(db) {
        Ok(db) => db.close().with_context(|| format!("cannot close {}", pool.display())),
        Err(_) => Err(anyhow::anyhow!("internal error: the pool is still in use after the import")),
    };
    let (keys, expired, elapsed) = imported?;
    closed?;
    println!(
        "imported {keys} keys and {} function libraries from {} into {} in {elapsed:.2?}{}",
        index.functions.len(),
        file.display(),
        pool.display(),
        if expired > 0 { format!(" ({expired} keys already expired were skipped)") } else { String::new() }
    );
    Ok(())
}

fn select(s: &mut Session, db: u64) -> Result<()> {
    expect_ok(s.call(&[b"SELECT".to_vec(), db.to_string().into_bytes()]), &format!("selecting database {db}"))
}

/// Wall-clock time, Unix milliseconds (expiries are absolute).
fn unix_ms() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_millis() as u64)
}

/// Restores the file's libraries and keys; (keys restored, skipped as expired, time).
fn load(
    s: &mut Session,
    file: &Path,
    bytes: &[u8],
    index: &Index,
    replace: bool,
) -> Result<(u64, u64, std::time::Duration)> {
    let started = Instant::now();
    let fail = |what: &str, reply: &Reply| -> anyhow::Error {
        anyhow::anyhow!(
            "{what}: {}",
            match reply {
                Reply::Error(e) => e.clone(),
                other => format!("{other:?}"),
            }
        )
    };
    if !replace {
        let mut clashes = Vec::new();
        let mut current = None;
        for e in &index.entries {
            if current != Some(e.db) {
                select(s, e.db)?;
                current = Some(e.db);
            }
            if matches!(s.call(&[b"EXISTS".as_slice(), &e.key]), Reply::Int(1)) {
                clashes.push(format!("db{} {:?}", e.db, String::from_utf8_lossy(&e.key)));
            }
        }
        if !clashes.is_empty() {
            bail!(
                "{} keys of {} already exist in the pool (first: {}); nothing was written: pass --replace to \
                 overwrite them",
                clashes.len(),
                file.display(),
                clashes[0]
            );
        }
    }
    if let Some(payload) = index.functions_payload() {
        let policy: &[u8] = if replace { b"REPLACE" } else { b"APPEND" };
        let reply = s.call(&[b"FUNCTION".as_slice(), b"RESTORE", &payload, policy]);
        if let Reply::Error(_) = reply {
            return Err(fail("restoring the function libraries (nothing was written)", &reply));
        }
    }
    let bar = progress(Some(index.entries.len() as u64), "importing");
    let now = unix_ms();
    let live: Vec<&rdb_load::Entry> = index.entries.iter().filter(|e| !e.expire_ms.is_some_and(|t| t <= now)).collect();
    let expired = (index.entries.len() - live.len()) as u64;
    bar.inc(expired);
    let (mut keys, mut current, mut at) = (0u64, None, 0);
    while at < live.len() {
        // One MULTI/EXEC, one durable commit, per batch.
        let (mut n, mut size) = (0, 0);
        while at + n < live.len() && n < BATCH_KEYS && size < BATCH_BYTES {
            size += live[at + n].value.len();
            n += 1;
        }
        let batch = &live[at..at + n];
        expect_ok(s.call(&[b"MULTI".as_slice()]), "MULTI")?;
        // Which entry each reply of EXEC belongs to (SELECTs belong to none).
        let mut owner = Vec::with_capacity(n);
        for (i, e) in batch.iter().enumerate() {
            if current != Some(e.db) {
                let reply = s.call(&[b"SELECT".to_vec(), e.db.to_string().into_bytes()]);
                expect_queued(s, reply, "SELECT")?;
                owner.push(None);
                current = Some(e.db);
            }
            let ttl = e.expire_ms.unwrap_or(0).to_string().into_bytes();
            let payload =
                e.payload(bytes, index.version).context("internal error: the file changed under its index")?;
            let mut args: Vec<&[u8]> = vec![b"RESTORE", &e.key, &ttl, &payload, b"ABSTTL"];
            if replace {
                args.push(b"REPLACE");
            }
            let reply = s.call(&args);
            expect_queued(s, reply, "RESTORE")?;
            owner.push(Some(i));
        }
        match s.call(&[b"EXEC".as_slice()]) {
            Reply::Array(replies) => {
                let bad = replies.iter().zip(&owner).find_map(|(r, o)| match (r, o) {
                    (Reply::Error(_), Some(i)) => Some((r, *i)),
                    _ => None,
                });
                if let Some((reply, i)) = bad {
                    bar.finish_and_clear();
                    let ok = replies.iter().zip(&owner).filter(|(r, o)| o.is_some() && !matches!(r, Reply::Error(_)));
                    let kept = keys + ok.count() as u64;
                    let e = batch[i];
                    let what = format!(
                        "restoring key {:?} of database {} ({kept} keys imported and kept)",
                        String::from_utf8_lossy(&e.key),
                        e.db
                    );
                    return Err(fail(&what, reply));
                }
            }
            // Nothing of the batch was applied (a full pool refuses its commit).
            reply => {
                bar.finish_and_clear();
                return Err(fail(
                    &format!(
                        "restoring {n} keys from {:?} of database {} on ({keys} keys imported and \
                         kept)",
                        String::from_utf8_lossy(&batch[0].key),
                        batch[0].db
                    ),
                    &reply,
                ));
            }
        }
        keys += n as u64;
        at += n;
        bar.inc(n as u64);
    }
    bar.finish_and_clear();
    Ok((keys, expired, started.elapsed()))
}

/// Keys restored per MULTI/EXEC (one durable commit each).
const BATCH_KEYS: usize = 512;
/// Payload bytes after which a batch is closed early.
const BATCH_BYTES: usize = 8 << 20;

fn expect_ok(reply: Reply, what: &str) -> Result<()> {
    match reply {
        Reply::Error(e) => bail!("{what}: {e}"),
        _ => Ok(()),
    }
}

/// A command queued inside MULTI; on an error the transaction is discarded.
fn expect_queued(s: &mut Session, reply: Reply, what: &str) -> Result<()> {
    if let Reply::Error(e) = reply {
        s.call(&[b"DISCARD".as_slice()]);
        bail!("queueing {what}: {e}");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::type_name;

    #[test]
    fn every_value_type_has_a_name() {
        for ty in [0u8, 1, 2, 3, 4, 5, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21] {
            assert_ne!(type_name(ty), "other", "type {ty}");
        }
        assert_eq!(type_name(7), "other");
    }
}
