//! RDB files: the whole dataset in Redis's snapshot format, read from one
//! pinned version of the pool.
//!
//! Tembo's data lives in its pool, so an RDB file is never what makes it
//! safe; it is how data leaves Tembo for Redis or for tools that read
//! Redis's format (`redis-cli --rdb`, `redis-check-rdb`, RDB analysers),
//! and how a backup is taken in Redis's format. The file is written from a
//! [`tembo_store::Snapshot`]: every key as of one committed version,
//! whatever is written meanwhile, on the caller's thread (the server runs
//! it on a thread of its own; the executor keeps serving).
//!
//! What is written (RDB version 10, Redis 7.0's): the magic, auxiliary
//! fields (`redis-ver`, `redis-bits`, `ctime`, `aof-base`), the function
//! libraries (opcode `FUNCTION2`), then for each database that holds keys
//! `SELECTDB` and its keys, each with `EXPIRETIME_MS` when it has an
//! expiry, then `EOF` and the CRC-64 of the whole file. Values are in
//! DUMP's encodings (`crate::rdb_value`), their strings LZF-compressed
//! where that saves bytes, as Redis's `rdbcompression yes` writes them. Keys already past their expiry
//! at the snapshot are left out, as a reader would drop them. `RESIZEDB`
//! (a sizing hint, optional in the format) is not written: the key counts
//! are known only once the keys have been read.

use std::io::{self, Write};
use std::ops::Bound;

use tembo_store::{Db, DbError, Snapshot};

use crate::cmd::value_of;
use crate::encoding::{self, sub_key, sub_prefix, Meta, LIBRARY};
use crate::keyspace::{fields, sub_bounds, Res, SubRange};
use crate::rdb::{self, put_string, RDB_VERSION};
use crate::rdb_value;

/// RDB opcodes (Redis's `RDB_OPCODE_*`).
pub const OP_FUNCTION2: u8 = rdb::OPCODE_FUNCTION2;
/// An auxiliary field: two strings.
pub const OP_AUX: u8 = 0xFA;
/// Hash-table sizes of the database that follows (a hint).
pub const OP_RESIZEDB: u8 = 0xFB;
/// The next key's expiry, Unix milliseconds, 8 bytes little-endian.
pub const OP_EXPIRETIME_MS: u8 = 0xFC;
/// The next key's expiry, Unix seconds, 4 bytes little-endian (old files).
pub const OP_EXPIRETIME: u8 = 0xFD;
/// The database the keys that follow belong to.
pub const OP_SELECTDB: u8 = 0xFE;
/// End of the data; the checksum follows.
pub const OP_EOF: u8 = 0xFF;
/// The next key's LFU counter (1 byte).
pub const OP_FREQ: u8 = 0xF9;
/// The next key's idle time in seconds (a length).
pub const OP_IDLE: u8 = 0xF8;
/// Module auxiliary data.
pub const OP_MODULE_AUX: u8 = 0xF7;
/// A function library in Redis 7.0's release candidates' format.
pub const OP_FUNCTION_PRE_GA: u8 = 0xF6;

/// What goes into the file (`REPLCONF rdb-filter-only`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Filter {
    /// The databases' keys.
    pub keys: bool,
    /// The function libraries.
    pub functions: bool,
}

impl Filter {
    /// Everything.
    pub const ALL: Filter = Filter { keys: true, functions: true };
}

/// What a save wrote.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SaveReport {
    /// Keys written.
    pub keys: u64,
    /// Function libraries written.
    pub functions: u64,
    /// Bytes of the file.
    pub bytes: u64,
    /// The committed version the file holds.
    pub version: u64,
}

/// Why a save stopped.
#[derive(Debug, thiserror::Error)]
pub enum SaveError {
    /// The pool could not be read.
    #[error(transparent)]
    Db(#[from] DbError),
    /// The destination refused the bytes (a closed connection, a full disk).
    #[error("writing the RDB: {0}")]
    Io(#[from] io::Error),
    /// A stored record does not decode: the pool's server data is damaged.
    #[error("database {db}, key {key:?}: {why}")]
    Corrupt {
        /// The logical database.
        db: u8,
        /// The key, lossily as text.
        key: String,
        /// What was wrong.
        why: String,
    },
    /// The progress callback asked to stop.
    #[error("cancelled")]
    Cancelled,
}

/// Reads collections' elements at a snapshot, for [`value_of`].
struct SnapView<'s, 'a> {
    snap: &'s Snapshot<'a>,
    /// The stored (physical) database.
    db: u8,
}

impl SubRange for SnapView<'_, '_> {
    fn sub_range(
        &self,
        tag: u8,
        key: &[u8],
        meta: &Meta,
        from: Bound<&[u8]>,
        to: Bound<&[u8]>,
        rev: bool,
        limit: usize,
    ) -> Res<Vec<(Vec<u8>, Vec<u8>)>> {
        let prefix = sub_prefix(tag, self.db, key, meta.version);
        let range = sub_bounds(&prefix, from, to);
        let iter = if rev { self.snap.scan_rev(range) } else { self.snap.scan(range) };
        fields(iter, prefix.len(), limit)
    }
}

/// A writer that checksums and counts what passes through it.
struct Checksummed<W: Write> {
    inner: W,
    digest: crc::Digest<'static, u64, crc::Table<16>>,
    bytes: u64,
}

impl<W: Write> Checksummed<W> {
    fn put(&mut self, b: &[u8]) -> io::Result<()> {
        self.digest.update(b);
        self.bytes += b.len() as u64;
        self.inner.write_all(b)
    }
}

/// Writes the whole dataset of `db` (its logical databases `0..databases`
/// as clients SELECT them) to `out` as an RDB file, from one snapshot.
/// `progress` is called with the keys written so far every few thousand
/// keys; returning false stops the save ([`SaveError::Cancelled`]).
///
/// # Errors
/// [`SaveError`]: the pool unreadable or damaged, `out` failing, or a cancel.
pub fn save<W: Write>(
    db: &Db,
    databases: usize,
    filter: Filter,
    now_ms: u64,
    out: W,
    progress: &mut dyn FnMut(u64) -> bool,
) -> Result<SaveReport, SaveError> {
    save_snapshot(&db.snapshot()?, databases, filter, now_ms, out, progress)
}

/// [`save`] of a snapshot the caller has taken already.
///
/// # Errors
/// As [`save`].
pub fn save_snapshot<W: Write>(
    snap: &Snapshot<'_>,
    databases: usize,
    filter: Filter,
    now_ms: u64,
    out: W,
    progress: &mut dyn FnMut(u64) -> bool,
) -> Result<SaveReport, SaveError> {
    let mut w = Checksummed { inner: out, digest: rdb::CRC64_REDIS.digest(), bytes: 0 };
    let mut report = SaveReport { version: snap.version(), ..SaveReport::default() };
    w.put(format!("REDIS{RDB_VERSION:04}").as_bytes())?;
    let mut buf = Vec::with_capacity(64 * 1024);
    let ctime = (now_ms / 1000).to_string();
    for (k, v) in
        [("redis-ver", crate::REDIS_VERSION), ("redis-bits", "64"), ("ctime", ctime.as_str()), ("aof-base", "0")]
    {
        buf.push(OP_AUX);
        put_string(&mut buf, k.as_bytes());
        put_string(&mut buf, v.as_bytes());
    }
    if filter.functions {
        for kv in snap.scan_prefix(&[LIBRARY]) {
            buf.push(OP_FUNCTION2);
            put_string(&mut buf, &kv?.1);
            report.functions += 1;
        }
    }
    w.put(&buf)?;
    if filter.keys {
        let map = db_map(snap)?;
        for (logical, &stored) in map.iter().enumerate().take(databases) {
            let gen = flush_gen(snap, stored)?;
            let view = SnapView { snap, db: stored };
            let mut selected = false;
            for kv in snap.scan_prefix(&encoding::meta_prefix(stored, gen)) {
                let (mk, record) = kv?;
                let corrupt = |why: &str| SaveError::Corrupt {
                    db: logical as u8,
                    key: String::from_utf8_lossy(encoding::meta_user_key(&mk).unwrap_or_default()).into_owned(),
                    why: why.to_string(),
                };
                let key = encoding::meta_user_key(&mk).ok_or_else(|| corrupt("metadata key too short"))?;
                let mut meta = Meta::decode_owned(record).ok_or_else(|| corrupt("metadata record does not decode"))?;
                if meta.expired(now_ms) {
                    continue;
                }
                if meta.is_chunked() {
                    meta.value = chunked_string(snap, stored, key, &meta)?;
                }
                let value = value_of(&view, key, &meta).map_err(|e| corrupt(&e.0))?;
                buf.clear();
                if !selected {
                    buf.push(OP_SELECTDB);
                    rdb::put_len(&mut buf, logical as u64);
                    selected = true;
                }
                if meta.expire_at != 0 {
                    buf.push(OP_EXPIRETIME_MS);
                    buf.extend_from_slice(&meta.expire_at.to_le_bytes());
                }
                // An object is its type byte, then the value; a file puts the key between them.
                let object = rdb_value::encode_compressed(&value);
                buf.push(object[0]);
                put_string(&mut buf, key);
                w.put(&buf)?;
                w.put(&object[1..])?;
                report.keys += 1;
                if report.keys % 4096 == 0 && !progress(report.keys) {
                    return Err(SaveError::Cancelled);
                }
            }
        }
    }
    w.put(&[OP_EOF])?;
    let crc = w.digest.clone().finalize();
    w.put(&crc.to_le_bytes())?;
    w.inner.flush()?;
    report.bytes = w.bytes;
    progress(report.keys);
    Ok(report)
}

/// The stored database of each logical one (SWAPDB's map; absent: each is itself).
fn db_map(snap: &Snapshot<'_>) -> Result<Vec<u8>, SaveError> {
    match snap.get(&encoding::db_map_key())? {
        Some(map) => Ok(map),
        None => Ok((0..=255u8).collect()),
    }
}

/// The flush generation stored database `db`'s live keys carry.
fn flush_gen(snap: &Snapshot<'_>, db: u8) -> Result<u16, SaveError> {
    match snap.get(&encoding::flush_gen_key(db))? {
        None => Ok(0),
        Some(raw) => <[u8; 2]>::try_from(raw.as_slice()).map(u16::from_be_bytes).map_err(|_| SaveError::Corrupt {
            db,
            key: String::new(),
            why: "the flush generation record is not 2 bytes".into(),
        }),
    }
}

/// A string stored in chunks, whole (`crate::chunked`: a missing or short
/// chunk reads as zeros).
fn chunked_string(snap: &Snapshot<'_>, db: u8, key: &[u8], meta: &Meta) -> Result<Vec<u8>, SaveError> {
    let len = usize::try_from(meta.size).map_err(|_| SaveError::Corrupt {
        db,
        key: String::from_utf8_lossy(key).into_owned(),
        why: "chunked string longer than this machine's address space".into(),
    })?;
    let mut out = vec![0u8; len];
    let chunk = crate::chunked::CHUNK as usize;
    for (i, part) in out.chunks_mut(chunk).enumerate() {
        if let Some(bytes) = snap.get(&sub_key(db, key, meta.version, &(i as u64).to_be_bytes()))? {
            let n = bytes.len().min(part.len());
            part[..n].copy_from_slice(&bytes[..n]);
        }
    }
    Ok(out)
}
