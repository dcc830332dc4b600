//! The systems `tembo bench` measures, behind one interface.
//!
//! Every target is opened in a fresh directory of its own on the same
//! filesystem (by default `/dev/shm`, the thesis's emulated persistent
//! memory), so that the only difference between two rows of a report is the
//! system. A *durable* target acknowledges each put and delete only once it
//! is durable by its own rules (Tembo: persisted with cache-line flushes;
//! LMDB, RocksDB, SQLite, Berkeley DB, redb: a committed transaction
//! synced to the file; PMDK: a committed pmemobj transaction); a
//! *volatile* target is the same system with that guarantee turned off, and
//! `std::collections::BTreeMap` is the in-memory reference.
//!
//! The peers that come from C libraries (LMDB, RocksDB, Berkeley DB,
//! libpmemobj) and the Rust peers (SQLite through rusqlite, redb) are built
//! only with the `peers` feature, which needs Debian's liblmdb-dev,
//! librocksdb-dev, libdb-dev, libpmemobj-dev and libsqlite3-dev;
//! `scripts/test` and `bench/peers.sh` install them. Without the feature the
//! Tembo targets and `BTreeMap` still run.

mod btreemap;
pub mod cdds;
#[cfg(feature = "peers")]
mod ffi;
pub mod net;
#[cfg(feature = "peers")]
mod redb_peer;
pub mod resp;
#[cfg(feature = "peers")]
mod sqlite;

use std::fmt;
use std::path::Path;
use std::str::FromStr;

use anyhow::Result;
use tembo_pmem::{OrderingMode, WriteStats};
use tembo_store::Engine;

/// One opened system under test.
pub trait Target {
    /// Inserts or overwrites `key`; returns once the target's mode makes it durable.
    fn put(&mut self, key: &[u8], value: &[u8]) -> Result<()>;
    /// Copies the value of `key` into `buf`; false when absent.
    fn get(&mut self, key: &[u8], buf: &mut Vec<u8>) -> Result<bool>;
    /// Removes `key`; false when it was absent.
    fn delete(&mut self, key: &[u8]) -> Result<bool>;
    /// Reads up to `n` pairs in key order from the first key `>= start`,
    /// copying each value once into a buffer the target reuses (as the C
    /// peers do, `c/peer.h`), so that every target reads the bytes it
    /// returns; returns how many it read.
    fn scan(&mut self, start: &[u8], n: usize) -> Result<usize>;
    /// Cache lines flushed and fences so far, for targets that count them.
    fn write_stats(&self) -> Option<WriteStats> {
        None
    }
    /// The durability mode obtained, in words (for reports).
    fn mode(&self) -> String;
    /// Where the target's persistent data is mapped (address, bytes), for
    /// targets whose data is one memory-mapped pool (the write heat map).
    fn mapped(&self) -> Option<(usize, usize)> {
        None
    }
}

/// Which system, and in which mode.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum TargetKind {
    /// The CDDS tree through `tembo_store::Db`, ordering `fast` (durable).
    Cdds,
    /// The CDDS tree, ordering `full` (durable on 8-byte-atomic hardware).
    CddsFull,
    /// The CDDS tree, ordering `none` (volatile: no flushes or fences).
    CddsNone,
    /// The CDDS tree, ordering `fast`, without the background GC thread.
    CddsNoGc,
    /// The in-place B+tree on Kamino-Tx-Simple transactions (`tembo_store` engine `kamino`).
    Kamino,
    /// The same with a dynamic backup of half the heap (`kamino-dynamic`, α = 0.5).
    KaminoDynamic,
    /// The same tree on undo-log transactions (`undo`): Kamino-Tx's baseline.
    Undo,
    /// `std::collections::BTreeMap<Vec<u8>, Vec<u8>>` (volatile reference).
    BTreeMap,
    /// PMDK libpmemobj: a B+tree on its undo-log transactions.
    Pmemobj,
    /// LMDB, a synced write transaction per operation.
    Lmdb,
    /// LMDB with `MDB_NOSYNC`.
    LmdbNoSync,
    /// RocksDB, WAL synced per write.
    RocksDb,
    /// RocksDB with the WAL disabled.
    RocksDbNoWal,
    /// SQLite in WAL mode, `synchronous=FULL`.
    Sqlite,
    /// SQLite in WAL mode, `synchronous=OFF`.
    SqliteNoSync,
    /// Berkeley DB B-tree, a synced transaction per operation.
    Bdb,
    /// Berkeley DB with `DB_TXN_NOSYNC`.
    BdbNoSync,
    /// redb, `Durability::Immediate`.
    Redb,
    /// redb, `Durability::None`.
    RedbNoSync,
    /// `tembo serve` over loopback (CDDS engine), one connection.
    TemboServe,
    /// `redis-server`, AOF fsynced before every reply (`appendfsync always`).
    RedisAlways,
    /// `redis-server`, AOF fsynced once a second.
    RedisEverysec,
    /// `redis-server` with no persistence.
    RedisOff,
}

impl TargetKind {
    /// Every target, in report order.
    pub const ALL: [TargetKind; 23] = [
        TargetKind::Cdds,
        TargetKind::CddsFull,
        TargetKind::CddsNone,
        TargetKind::CddsNoGc,
        TargetKind::Kamino,
        TargetKind::KaminoDynamic,
        TargetKind::Undo,
        TargetKind::BTreeMap,
        TargetKind::Pmemobj,
        TargetKind::Lmdb,
        TargetKind::LmdbNoSync,
        TargetKind::RocksDb,
        TargetKind::RocksDbNoWal,
        TargetKind::Sqlite,
        TargetKind::SqliteNoSync,
        TargetKind::Bdb,
        TargetKind::BdbNoSync,
        TargetKind::Redb,
        TargetKind::RedbNoSync,
        TargetKind::TemboServe,
        TargetKind::RedisAlways,
        TargetKind::RedisEverysec,
        TargetKind::RedisOff,
    ];

    /// The name used on the command line and in reports.
    pub fn name(self) -> &'static str {
        match self {
            TargetKind::Cdds => "cdds",
            TargetKind::CddsFull => "cdds-full",
            TargetKind::CddsNone => "cdds-none",
            TargetKind::CddsNoGc => "cdds-nogc",
            TargetKind::Kamino => "kamino",
            TargetKind::KaminoDynamic => "kamino-dynamic",
            TargetKind::Undo => "undo",
            TargetKind::BTreeMap => "btreemap",
            TargetKind::Pmemobj => "pmemobj",
            TargetKind::Lmdb => "lmdb",
            TargetKind::LmdbNoSync => "lmdb-nosync",
            TargetKind::RocksDb => "rocksdb",
            TargetKind::RocksDbNoWal => "rocksdb-nowal",
            TargetKind::Sqlite => "sqlite",
            TargetKind::SqliteNoSync => "sqlite-nosync",
            TargetKind::Bdb => "bdb",
            TargetKind::BdbNoSync => "bdb-nosync",
            TargetKind::Redb => "redb",
            TargetKind::RedbNoSync => "redb-nosync",
            _ => self.server().map_or("?", net::Server::name),
        }
    }

    /// Whether each acknowledged write is durable.
    pub fn durable(self) -> bool {
        if let Some(s) = self.server() {
            return s.durable();
        }
        !matches!(
            self,
            TargetKind::CddsNone
                | TargetKind::BTreeMap
                | TargetKind::LmdbNoSync
                | TargetKind::RocksDbNoWal
                | TargetKind::SqliteNoSync
                | TargetKind::BdbNoSync
                | TargetKind::RedbNoSync
        )
    }

    /// The server a network target starts, if this is one.
    pub fn server(self) -> Option<net::Server> {
        match self {
            TargetKind::TemboServe => Some(net::Server::Tembo),
            TargetKind::RedisAlways => Some(net::Server::RedisAlways),
            TargetKind::RedisEverysec => Some(net::Server::RedisEverysec),
            TargetKind::RedisOff => Some(net::Server::RedisOff),
            _ => None,
        }
    }

    /// Whether this is one of Tembo's own engines.
    pub fn is_tembo(self) -> bool {
        matches!(
            self,
            TargetKind::Cdds
                | TargetKind::CddsFull
                | TargetKind::CddsNone
                | TargetKind::CddsNoGc
                | TargetKind::Kamino
                | TargetKind::KaminoDynamic
                | TargetKind::Undo
        )
    }

    /// Whether this build can open it (peers need the `peers` feature;
    /// network targets their server's program: the `tembo` executable, or
    /// `redis-server` on `PATH`).
    pub fn available(self) -> bool {
        match self.server() {
            Some(s) => s.program().is_some(),
            None => self.is_tembo() || self == TargetKind::BTreeMap || cfg!(feature = "peers"),
        }
    }

    /// Why this build or machine cannot open it, and what to do; `None`
    /// when it can.
    pub fn why_unavailable(self) -> Option<String> {
        if self.available() {
            return None;
        }
        Some(match self.server() {
            Some(s) => s.missing_program_advice().to_string(),
            None => format!(
                "target `{}` is a peer database and this tembo was built without them; build with \
                 `cargo build --release -p tembo --features peers` after bench/peers.sh installs their libraries",
                self.name()
            ),
        })
    }

    /// Opens a fresh instance in the empty directory `dir`, sized for about
    /// `size_hint` bytes of data, ready for scans.
    ///
    /// # Errors
    /// The system's own open errors, or this build lacking the peer.
    pub fn open(self, dir: &Path, size_hint: u64) -> Result<Box<dyn Target>> {
        self.open_for(dir, size_hint, true)
    }

    /// [`TargetKind::open`]; `scans`: whether the workload will scan (a
    /// network target then keeps a key index, which costs every put and
    /// delete a second command, as YCSB's Redis binding pays).
    ///
    /// # Errors
    /// As [`TargetKind::open`].
    pub fn open_for(self, dir: &Path, size_hint: u64, scans: bool) -> Result<Box<dyn Target>> {
        if let Some(server) = self.server() {
            return net::open(server, dir, size_hint, scans);
        }
        match self {
            TargetKind::Cdds => cdds::open(dir, size_hint, OrderingMode::Fast, Engine::Cdds, true),
            TargetKind::CddsFull => cdds::open(dir, size_hint, OrderingMode::Full, Engine::Cdds, true),
            TargetKind::CddsNone => cdds::open(dir, size_hint, OrderingMode::None, Engine::Cdds, true),
            TargetKind::CddsNoGc => cdds::open(dir, size_hint, OrderingMode::Fast, Engine::Cdds, false),
            TargetKind::Kamino => cdds::open(dir, size_hint, OrderingMode::Fast, Engine::Kamino, true),
            TargetKind::KaminoDynamic => cdds::open(dir, size_hint, OrderingMode::Fast, Engine::KaminoDynamic, true),
            TargetKind::Undo => cdds::open(dir, size_hint, OrderingMode::Fast, Engine::Undo, true),
            TargetKind::BTreeMap => Ok(Box::new(btreemap::MapTarget::default())),
            _ => self.open_peer(dir, size_hint),
        }
    }

    #[cfg(feature = "peers")]
    fn open_peer(self, dir: &Path, size_hint: u64) -> Result<Box<dyn Target>> {
        use ffi::Library;
        let durable = self.durable();
        match self {
            TargetKind::Pmemobj => ffi::open(Library::Pmemobj, dir, true, size_hint),
            TargetKind::Lmdb | TargetKind::LmdbNoSync => ffi::open(Library::Lmdb, dir, durable, size_hint),
            TargetKind::RocksDb | TargetKind::RocksDbNoWal => ffi::open(Library::RocksDb, dir, durable, size_hint),
            TargetKind::Bdb | TargetKind::BdbNoSync => ffi::open(Library::Bdb, dir, durable, size_hint),
            TargetKind::Sqlite | TargetKind::SqliteNoSync => sqlite::open(dir, durable),
            TargetKind::Redb | TargetKind::RedbNoSync => redb_peer::open(dir, durable),
            _ => unreachable!("Tembo targets and BTreeMap are opened by TargetKind::open"),
        }
    }

    #[cfg(not(feature = "peers"))]
    fn open_peer(self, _dir: &Path, _size_hint: u64) -> Result<Box<dyn Target>> {
        anyhow::bail!(
            "target `{}` is a peer database and this build has none: rebuild with \
             `--features peers` (needs liblmdb-dev librocksdb-dev libdb-dev libpmemobj-dev \
             libsqlite3-dev; bench/peers.sh installs them)",
            self.name()
        )
    }
}

impl fmt::Display for TargetKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for TargetKind {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        TargetKind::ALL.into_iter().find(|k| k.name().eq_ignore_ascii_case(s)).ok_or_else(|| {
            let names: Vec<&str> = TargetKind::ALL.iter().map(|k| k.name()).collect();
            format!(
                "unknown target `{s}`; known: {} (or the groups all, durable, volatile, tembo, network)",
                names.join(", ")
            )
        })
    }
}

/// Parses a comma-separated target list; the groups `all`, `durable`,
/// `volatile`, `tembo` (the engines) and `network` (the servers) expand to
/// the targets this build and machine can open.
///
/// # Errors
/// An unknown name, with the known ones.
pub fn parse_list(s: &str) -> Result<Vec<TargetKind>, String> {
    let mut out = Vec::new();
    for part in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let group: Vec<TargetKind> = match part.to_ascii_lowercase().as_str() {
            "all" => TargetKind::ALL.into_iter().filter(|k| k.available()).collect(),
            "durable" => TargetKind::ALL.into_iter().filter(|k| k.available() && k.durable()).collect(),
            "volatile" => TargetKind::ALL.into_iter().filter(|k| k.available() && !k.durable()).collect(),
            "tembo" => TargetKind::ALL.into_iter().filter(|k| k.is_tembo()).collect(),
            "network" => TargetKind::ALL.into_iter().filter(|k| k.server().is_some() && k.available()).collect(),
            _ => vec![part.parse()?],
        };
        for k in group {
            if !out.contains(&k) {
                out.push(k);
            }
        }
    }
    if out.is_empty() {
        return Err("no targets given".into());
    }
    Ok(out)
}

/// Opens `kind` in the empty directory `dir` and runs 2,000 random puts
/// (overwrites among them), gets, deletes and 10-pair scans over 300 keys
/// with values of 0–700 bytes, each checked against a `BTreeMap`: the
/// conformance check every target passes before its figures mean anything.
/// Keys end in bytes a text protocol could trip on (NUL, CR, LF, `[`,
/// `+`, `-`, 0xFF), so they are binary-safe and ordered bytewise.
///
/// # Errors
/// The target's own errors, or the first answer that differs from the model.
pub fn check_against_model(kind: TargetKind, dir: &Path) -> Result<()> {
    use anyhow::ensure;
    let mut t = kind.open(dir, 1 << 20)?;
    let mut model = std::collections::BTreeMap::new();
    let mut buf = Vec::new();
    let mut x = 7u64;
    for i in 0..2000u64 {
        x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        let n = (x >> 33) % 300;
        let mut key = format!("k{n:03}").into_bytes();
        key.push([0u8, b'\r', b'\n', b'[', b'+', b'-', 0xff][(n % 7) as usize]);
        let shown = String::from_utf8_lossy(&key).into_owned();
        match (x >> 20) % 5 {
            0 | 1 => {
                let v = vec![(i % 251) as u8; ((x >> 40) % 700) as usize];
                t.put(&key, &v)?;
                model.insert(key, v);
            }
            2 => {
                let found = t.get(&key, &mut buf)?;
                ensure!(found == model.contains_key(&key), "op {i}: get {shown}: found {found}");
                ensure!(!found || buf == model[&key], "op {i}: get {shown}: another value");
            }
            3 => {
                let had = t.delete(&key)?;
                ensure!(had == model.remove(&key).is_some(), "op {i}: delete {shown}: found {had}");
            }
            _ => {
                let n = t.scan(&key, 10)?;
                let want = model.range(key..).take(10).count();
                ensure!(n == want, "op {i}: scan from {shown}: {n} pairs, the model has {want}");
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_groups_expand() {
        for k in TargetKind::ALL {
            assert_eq!(k.name().parse::<TargetKind>(), Ok(k));
        }
        assert!("nope".parse::<TargetKind>().unwrap_err().contains("known: cdds"));
        let tembo = parse_list("tembo").unwrap();
        assert_eq!(
            tembo,
            vec![
                TargetKind::Cdds,
                TargetKind::CddsFull,
                TargetKind::CddsNone,
                TargetKind::CddsNoGc,
                TargetKind::Kamino,
                TargetKind::KaminoDynamic,
                TargetKind::Undo
            ]
        );
        let l = parse_list("btreemap, cdds,btreemap").unwrap();
        assert_eq!(l, vec![TargetKind::BTreeMap, TargetKind::Cdds]);
        assert!(parse_list("").is_err());
        assert!(parse_list("durable").unwrap().iter().all(|k| k.durable()));
    }

    /// Every target this build has behaves as a map (the redis-* targets
    /// too where redis-server is found; tembo-serve needs this build's
    /// executable, which `crates/tembo/tests/bench_net.rs` has, not
    /// whatever `tembo` is on PATH).
    #[test]
    fn every_available_target_agrees_with_a_model() {
        let root = std::env::temp_dir().join(format!("tembo-targets-{}", std::process::id()));
        for kind in TargetKind::ALL.into_iter().filter(|k| k.available() && *k != TargetKind::TemboServe) {
            let dir = root.join(kind.name());
            std::fs::create_dir_all(&dir).unwrap();
            check_against_model(kind, &dir).unwrap_or_else(|e| panic!("{kind}: {e:#}"));
            std::fs::remove_dir_all(&dir).unwrap();
        }
        let _ = std::fs::remove_dir_all(&root);
    }
}
