//! The engine record: which engine a pool's database uses.
//!
//! The pool root `tembo-db` points to one 64-byte block (one cache line),
//! written and persisted before the root is set, so a crash leaves either
//! no root (the block is a leak the next recovery sweeps) or a root to a
//! complete record:
//!
//! | word | field |
//! |---|---|
//! | 0 | magic `TEMBODB\0` |
//! | 1 | record layout version (1) |
//! | 2 | engine id ([`Engine::id`]) |
//! | 3..7 | reserved, zero |
//!
//! Invariants:
//! - `store.record.last`: at create the engine's own root is set before
//!   `tembo-db`, so a pool with a `tembo-db` root always has a complete
//!   engine behind it;
//! - `store.record.owned`: the block is owned by the root alone; every
//!   engine's recovery keeps blocks other roots point to.

use std::path::Path;

use tembo_pmem::{PmemError, Pool};

use crate::error::{DbError, Result};
use crate::options::Engine;

/// Name of the pool root pointing to the engine record.
pub const ROOT_NAME: &str = "tembo-db";
/// Bytes of the engine record.
pub const RECORD_BYTES: u64 = 64;
const MAGIC: u64 = u64::from_le_bytes(*b"TEMBODB\0");
const LAYOUT: u64 = 1;

/// Writes and persists a record naming `engine`, then sets the root.
pub(crate) fn write(pool: &Pool, engine: Engine) -> Result<(), PmemError> {
    let off = pool.alloc(RECORD_BYTES)?;
    let mut bytes = [0u8; RECORD_BYTES as usize];
    bytes[0..8].copy_from_slice(&MAGIC.to_le_bytes());
    bytes[8..16].copy_from_slice(&LAYOUT.to_le_bytes());
    bytes[16..24].copy_from_slice(&engine.id().to_le_bytes());
    let linked = pool.write(off, &bytes).and_then(|()| {
        pool.persist(off, RECORD_BYTES);
        pool.set_root(ROOT_NAME, off)
    });
    if linked.is_err() {
        // Not linked: nothing refers to the block.
        let _ = pool.free(off);
    }
    linked
}

/// The engine the pool's record names; `None` if the pool has no record.
pub(crate) fn read(pool: &Pool, path: &Path) -> Result<Option<Engine>> {
    let Some(off) = pool.root(ROOT_NAME) else { return Ok(None) };
    let bad = |why: String| DbError::BadEngineRecord { path: path.to_path_buf(), offset: off, why };
    let mut bytes = [0u8; RECORD_BYTES as usize];
    pool.read(off, &mut bytes).map_err(|e| bad(e.to_string()))?;
    let word = |i: usize| {
        let mut w = [0u8; 8];
        w.copy_from_slice(&bytes[i * 8..i * 8 + 8]);
        u64::from_le_bytes(w)
    };
    if word(0) != MAGIC {
        return Err(bad(format!("bad magic {:#018x}", word(0))));
    }
    if word(1) != LAYOUT {
        return Err(bad(format!("record layout {} where this build reads {LAYOUT}", word(1))));
    }
    let id = word(2);
    Engine::from_id(id).map(Some).ok_or_else(|| DbError::UnknownEngine { path: path.to_path_buf(), id })
}
