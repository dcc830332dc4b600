//! Reading RDB files: the keys and function libraries of a Redis snapshot
//! (`dump.rdb`), checked whole before any of it is used.
//!
//! [`index`] walks a file once: its header, every opcode, every value
//! (decoded, so that a damaged one is found now and not halfway through an
//! import), and the CRC-64 at its end when the file has one. It returns
//! where each key's object lies in the file; [`Entry::payload`] turns one
//! into the DUMP payload RESTORE takes, in the object's own encoding, so
//! that the server that restores it reads exactly what Redis wrote.
//!
//! Read: RDB versions 1–12 (Redis 2.6 to 7.4, and older files without
//! zipmap-encoded hashes), every encoding
//! `crate::rdb_value` reads, expiries in seconds or milliseconds, the
//! LFU/LRU hints (skipped: Tembo keeps its own access times), `RESIZEDB`
//! (a hint, skipped), auxiliary fields. Refused with a typed error: module
//! data, Redis 7.0 release candidates' function format, and any type
//! `crate::rdb_value` does not read (7.4's hashes with field expiry).

use std::ops::Range;

use crate::rdb::{self, PayloadError, Reader, RDB_VERSION_READ};
use crate::rdb_save::{
    OP_AUX, OP_EOF, OP_EXPIRETIME, OP_EXPIRETIME_MS, OP_FREQ, OP_FUNCTION2, OP_FUNCTION_PRE_GA, OP_IDLE, OP_MODULE_AUX,
    OP_RESIZEDB, OP_SELECTDB,
};
use crate::rdb_value::{self, Value};

/// A key found in the file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Entry {
    /// The database it was in.
    pub db: u64,
    /// The key.
    pub key: Vec<u8>,
    /// Its expiry, Unix milliseconds.
    pub expire_ms: Option<u64>,
    /// Its RDB type byte.
    pub ty: u8,
    /// Where its value (after the key) lies in the file.
    pub value: Range<usize>,
}

impl Entry {
    /// The DUMP payload of this key's value (RESTORE's argument), sealed
    /// with the file's RDB version so that it is read as the file was.
    /// `None` if `file` is not (as long as) the file this entry was found in.
    pub fn payload(&self, file: &[u8], version: u16) -> Option<Vec<u8>> {
        let value = file.get(self.value.clone())?;
        let mut object = Vec::with_capacity(1 + value.len() + 10);
        object.push(self.ty);
        object.extend_from_slice(value);
        Some(rdb::seal_as(object, version.max(rdb::RDB_VERSION)))
    }
}

/// What a file holds.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Index {
    /// The file's RDB version.
    pub version: u16,
    /// Auxiliary fields (`redis-ver`, `ctime`…), as written.
    pub aux: Vec<(Vec<u8>, Vec<u8>)>,
    /// Function libraries' code, in file order.
    pub functions: Vec<Vec<u8>>,
    /// Every key, in file order.
    pub entries: Vec<Entry>,
    /// Whether the file carried a checksum (and it matched).
    pub checksummed: bool,
}

impl Index {
    /// The FUNCTION RESTORE payload of the file's libraries (`None` if it has none).
    pub fn functions_payload(&self) -> Option<Vec<u8>> {
        if self.functions.is_empty() {
            return None;
        }
        let mut body = Vec::new();
        for code in &self.functions {
            body.push(OP_FUNCTION2);
            rdb::put_string(&mut body, code);
        }
        Some(rdb::seal(body))
    }
}

/// Why a file cannot be loaded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LoadError {
    /// Not an RDB file at all.
    #[error("not an RDB file (it does not start with REDIS and a four-digit version)")]
    NotRdb,
    /// A version this build does not read.
    #[error("RDB version {0} is newer than this build reads (up to {RDB_VERSION_READ})")]
    Version(u16),
    /// Damaged or truncated at `offset`.
    #[error("damaged RDB file at byte {offset}: {what}")]
    Damaged {
        /// Where the walk stopped.
        offset: usize,
        /// What was wrong there.
        what: String,
    },
    /// Something Tembo does not load, at `offset`.
    #[error("RDB file holds {what} (at byte {offset}), which Tembo does not load")]
    Unsupported {
        /// Where.
        offset: usize,
        /// What.
        what: String,
    },
    /// The CRC-64 at the end does not match the file.
    #[error("RDB checksum mismatch: the file is damaged (stored {stored:#018x}, computed {computed:#018x})")]
    Checksum {
        /// What the file says.
        stored: u64,
        /// What its bytes give.
        computed: u64,
    },
}

/// Walks `file` whole and returns what it holds; see the module docs.
///
/// # Errors
/// [`LoadError`] for anything but a whole, undamaged file of supported content.
pub fn index(file: &[u8]) -> Result<Index, LoadError> {
    let head = file.get(..9).ok_or(LoadError::NotRdb)?;
    if &head[..5] != b"REDIS" || !head[5..].iter().all(u8::is_ascii_digit) {
        return Err(LoadError::NotRdb);
    }
    let version: u16 = std::str::from_utf8(&head[5..]).ok().and_then(|v| v.parse().ok()).ok_or(LoadError::NotRdb)?;
    if version == 0 {
        return Err(LoadError::NotRdb);
    }
    if version > RDB_VERSION_READ {
        return Err(LoadError::Version(version));
    }
    let mut r = Reader::new(&file[9..]);
    let at = |r: &Reader<'_>| 9 + r.position();
    let damaged = |r: &Reader<'_>, e: PayloadError| LoadError::Damaged {
        offset: 9 + r.position(),
        what: match e {
            PayloadError::Malformed(m) => m.to_string(),
            PayloadError::VersionOrChecksum => "bad checksum".to_string(),
        },
    };
    let mut out = Index { version, ..Index::default() };
    let (mut db, mut expire_ms) = (0u64, None);
    loop {
        let op_at = at(&r);
        let op = r.byte().map_err(|e| damaged(&r, e))?;
        match op {
            OP_EOF => break,
            OP_AUX => {
                let k = r.string().map_err(|e| damaged(&r, e))?;
                let v = r.string().map_err(|e| damaged(&r, e))?;
                out.aux.push((k, v));
            }
            OP_RESIZEDB => {
                r.len().map_err(|e| damaged(&r, e))?;
                r.len().map_err(|e| damaged(&r, e))?;
            }
            OP_SELECTDB => db = r.len().map_err(|e| damaged(&r, e))?,
            OP_EXPIRETIME_MS => {
                let b = r.bytes(8).map_err(|e| damaged(&r, e))?;
                expire_ms = Some(u64::from_le_bytes(b.try_into().unwrap_or([0; 8])));
            }
            OP_EXPIRETIME => {
                let b = r.bytes(4).map_err(|e| damaged(&r, e))?;
                expire_ms = Some(u64::from(u32::from_le_bytes(b.try_into().unwrap_or([0; 4]))) * 1000);
            }
            OP_FREQ => {
                r.byte().map_err(|e| damaged(&r, e))?;
            }
            OP_IDLE => {
                r.len().map_err(|e| damaged(&r, e))?;
            }
            OP_FUNCTION2 => out.functions.push(r.string().map_err(|e| damaged(&r, e))?),
            OP_MODULE_AUX => {
                return Err(LoadError::Unsupported { offset: op_at, what: "module data (MODULE_AUX)".into() })
            }
            OP_FUNCTION_PRE_GA => {
                return Err(LoadError::Unsupported {
                    offset: op_at,
                    what: "a function library in Redis 7.0 release candidates' format".into(),
                })
            }
            ty => {
                let key = r.string().map_err(|e| damaged(&r, e))?;
                let value_at = at(&r);
                let value = rdb_value::decode_typed(&mut r, ty, version).map_err(|e| match e {
                    PayloadError::Malformed("bad DUMP payload") if !known_type(ty) => LoadError::Unsupported {
                        offset: op_at,
                        what: format!("a value of RDB type {ty} (key {:?})", String::from_utf8_lossy(&key)),
                    },
                    PayloadError::Malformed("bad DUMP payload") => LoadError::Damaged {
                        offset: value_at,
                        what: format!("the value of key {:?} does not decode", String::from_utf8_lossy(&key)),
                    },
                    e => damaged(&r, e),
                })?;
                if is_empty(&value) {
                    return Err(LoadError::Damaged {
                        offset: value_at,
                        what: format!("empty collection (key {:?})", String::from_utf8_lossy(&key)),
                    });
                }
                out.entries.push(Entry { db, key, expire_ms: expire_ms.take(), ty, value: value_at..at(&r) });
            }
        }
    }
    let body_end = at(&r);
    if version >= 5 {
        let stored = r.bytes(8).map_err(|e| damaged(&r, e))?;
        let stored = u64::from_le_bytes(stored.try_into().unwrap_or([0; 8]));
        if stored != 0 {
            let computed = rdb::CRC64_REDIS.checksum(&file[..body_end]);
            if computed != stored {
                return Err(LoadError::Checksum { stored, computed });
            }
            out.checksummed = true;
        }
    }
    if !r.at_end() {
        return Err(LoadError::Damaged { offset: at(&r), what: "bytes after the end of the data".into() });
    }
    // Redis refuses such a file too: which copy would win is not the file's to say.
    let mut seen = std::collections::HashSet::with_capacity(out.entries.len());
    if let Some(e) = out.entries.iter().find(|e| !seen.insert((e.db, e.key.as_slice()))) {
        return Err(LoadError::Damaged {
            offset: e.value.start,
            what: format!("duplicated key {:?} in database {}", String::from_utf8_lossy(&e.key), e.db),
        });
    }
    Ok(out)
}

/// The value types `crate::rdb_value` reads (else: an unsupported type, not damage).
fn known_type(ty: u8) -> bool {
    matches!(ty, 0..=5 | 10..=21)
}

/// A collection with no elements: Redis never writes one and refuses to load it.
fn is_empty(v: &Value) -> bool {
    match v {
        Value::String(_) | Value::Stream(_) => false,
        Value::List(x) | Value::Set(x) => x.is_empty(),
        Value::ZSet(x) => x.is_empty(),
        Value::Hash(x) => x.is_empty(),
    }
}

#[cfg(test)]
mod tests {
    use super::{index, LoadError};

    /// A file of string keys (db, key, value), no checksum.
    fn file(keys: &[(u8, &[u8], &[u8])]) -> Vec<u8> {
        let mut f = b"REDIS0010".to_vec();
        for (db, k, v) in keys {
            f.extend_from_slice(&[0xFE, *db, 0]);
            crate::rdb::put_string(&mut f, k);
            crate::rdb::put_string(&mut f, v);
        }
        f.push(0xFF);
        f.extend_from_slice(&[0; 8]);
        f
    }

    #[test]
    fn a_key_twice_is_damage_in_the_same_database_only() {
        let ok = index(&file(&[(0, b"a", b"1"), (1, b"a", b"2")])).unwrap();
        assert_eq!(ok.entries.len(), 2);
        let f = file(&[(0, b"a", b"1"), (0, b"b", b"2"), (0, b"a", b"3")]);
        match index(&f) {
            Err(LoadError::Damaged { what, .. }) => assert!(what.contains("duplicated key"), "{what}"),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_payload_of_another_buffer_is_none_not_a_panic() {
        let f = file(&[(0, b"key", b"value")]);
        let e = &index(&f).unwrap().entries[0];
        assert!(e.payload(&f, 10).is_some());
        assert!(e.payload(&f[..12], 10).is_none());
    }
}
