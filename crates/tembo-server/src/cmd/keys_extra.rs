//! More key commands: EXPIRETIME PEXPIRETIME COPY MOVE.
//!
//! COPY writes a new collection under a fresh version (element by element,
//! O(n) like Redis's), keeping the source's expiry; with DB it writes into
//! another database of the same pool. MOVE is a COPY to another database
//! and a delete of the source in the same batch: its elements' keys name
//! their database, so unlike Redis's O(1) MOVE it is O(n).

use super::args::{int, is};
use super::{CmdError, CmdResult, Spec};
use crate::encoding::Kind;
use crate::exec::Ctx;
use crate::keyspace::Res;
use crate::resp::Reply;

pub const COMMANDS: &[Spec] = &[
    Spec {
        name: "expiretime",
        arity: 2,
        flags: &["readonly", "fast"],
        keys: (1, 1, 1),
        group: "generic",
        summary: "Returns the Unix time in seconds at which a key expires (-1: no expiry, -2: no key).",
        run: expiretime,
    },
    Spec {
        name: "pexpiretime",
        arity: 2,
        flags: &["readonly", "fast"],
        keys: (1, 1, 1),
        group: "generic",
        summary: "Returns the Unix time in milliseconds at which a key expires (-1: no expiry, -2: no key).",
        run: pexpiretime,
    },
    Spec {
        name: "copy",
        arity: -3,
        flags: &["write", "denyoom"],
        keys: (1, 2, 1),
        group: "generic",
        summary: "COPY source destination [DB db] [REPLACE]: copies a key's value and expiry.",
        run: copy,
    },
    Spec {
        name: "move",
        arity: 3,
        flags: &["write", "fast"],
        keys: (1, 1, 1),
        group: "generic",
        summary: "MOVE key db: moves a key (and its expiry) to another database; 0 if the target has it.",
        run: move_key,
    },
];

fn expire_at(cx: &mut Ctx, key: &[u8]) -> Res<i64> {
    Ok(match cx.lookup(key)? {
        None => -2,
        Some(m) if m.expire_at == 0 => -1,
        Some(m) => m.expire_at as i64,
    })
}

fn expiretime(cx: &mut Ctx, a: &[Vec<u8>]) -> CmdResult {
    Ok(Reply::Int(super::keys::rounded_seconds(expire_at(cx, &a[1])?)))
}

fn pexpiretime(cx: &mut Ctx, a: &[Vec<u8>]) -> CmdResult {
    Ok(Reply::Int(expire_at(cx, &a[1])?))
}

fn copy(cx: &mut Ctx, a: &[Vec<u8>]) -> CmdResult {
    // Databases as clients number them; `cx.db()` maps to where keys are stored.
    let src_db = cx.client.db;
    let (mut dst_db, mut replace) = (src_db, false);
    let mut j = 3;
    while j < a.len() {
        if is(&a[j], "replace") {
            replace = true;
            j += 1;
        } else if is(&a[j], "db") && j + 1 < a.len() {
            let n = int(&a[j + 1])?;
            if n < 0 || n as usize >= cx.st.cfg.databases {
                return Err(CmdError::err("DB index is out of range"));
            }
            dst_db = n as u8;
            j += 2;
        } else {
            return Err(CmdError::syntax());
        }
    }
    let (src, dst) = (&a[1], &a[2]);
    if src_db == dst_db && src == dst {
        return Err(CmdError::err("source and destination objects are the same"));
    }
    let Some(meta) = cx.lookup(src)? else { return Ok(Reply::Int(0)) };
    // The destination is looked up, and written, in its own database.
    cx.client.db = dst_db;
    let result = copy_into(cx, src_db, src, &meta, dst, replace);
    cx.client.db = src_db;
    result
}

fn move_key(cx: &mut Ctx, a: &[Vec<u8>]) -> CmdResult {
    let src_db = cx.client.db;
    let n = int(&a[2]).map_err(|_| CmdError::err("value is not an integer or out of range"))?;
    if n < 0 || n as usize >= cx.st.cfg.databases {
        return Err(CmdError::err("DB index is out of range"));
    }
    let dst_db = n as u8;
    if dst_db == src_db {
        return Err(CmdError::err("source and destination objects are the same"));
    }
    let key = &a[1];
    let Some(meta) = cx.lookup(key)? else { return Ok(Reply::Int(0)) };
    cx.client.db = dst_db;
    let result = copy_into(cx, src_db, key, &meta, key, false);
    cx.client.db = src_db;
    if matches!(result, Ok(Reply::Int(1))) {
        cx.remove(key, &meta);
    }
    result
}

/// The second half of COPY, run with the destination database selected
/// (`src_db` as the client numbers it).
fn copy_into(
    cx: &mut Ctx,
    src_db: u8,
    src: &[u8],
    meta: &crate::encoding::Meta,
    dst: &[u8],
    replace: bool,
) -> CmdResult {
    let dst_db = cx.client.db;
    let dst_stored = cx.db();
    let old = cx.lookup(dst)?;
    if old.is_some() && !replace {
        return Ok(Reply::Int(0));
    }
    let mut new = meta.clone();
    if meta.kind != Kind::String {
        new.version = cx.st.store.new_version();
        // Read the source's elements in its database.
        cx.client.db = src_db;
        let copied = super::keys::copy_elements(cx, src, meta, dst_stored, dst, new.version);
        cx.client.db = dst_db;
        copied?;
        if meta.kind == Kind::Stream {
            // Nodes, consumer groups, PELs and consumers go with the entries.
            crate::stream::copy_aux(cx, src_db, src, meta, dst, new.version)?;
        }
    }
    cx.write_meta(dst, old.as_ref(), &new)?;
    Ok(Reply::Int(1))
}
