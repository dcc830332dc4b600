//! SQLite (Debian's libsqlite3 through rusqlite) as a peer: one table
//! `kv(k BLOB PRIMARY KEY, v BLOB) WITHOUT ROWID` (a clustered B-tree, the
//! closest SQLite gets to a key-value store), WAL journal. Durable:
//! `synchronous=FULL`, each statement its own transaction, so every commit
//! syncs the WAL. Volatile: `synchronous=OFF`.

use std::path::Path;

use anyhow::{Context, Result};
use rusqlite::{params, Connection, OptionalExtension};

use super::Target;

pub(super) struct SqliteTarget {
    conn: Connection,
    durable: bool,
    /// A scan's value buffer.
    scratch: Vec<u8>,
}

pub(super) fn open(dir: &Path, durable: bool) -> Result<Box<dyn Target>> {
    let path = dir.join("sqlite.db");
    let conn = Connection::open(&path).with_context(|| format!("opening {}", path.display()))?;
    let sync = if durable { "FULL" } else { "OFF" };
    conn.execute_batch(&format!(
        "PRAGMA journal_mode=WAL; PRAGMA synchronous={sync}; PRAGMA cache_size=-262144;
         CREATE TABLE kv(k BLOB PRIMARY KEY, v BLOB NOT NULL) WITHOUT ROWID;"
    ))?;
    Ok(Box::new(SqliteTarget { conn, durable, scratch: Vec::new() }))
}

impl Target for SqliteTarget {
    fn put(&mut self, key: &[u8], value: &[u8]) -> Result<()> {
        let mut st = self.conn.prepare_cached("INSERT OR REPLACE INTO kv(k, v) VALUES (?1, ?2)")?;
        st.execute(params![key, value])?;
        Ok(())
    }

    fn get(&mut self, key: &[u8], buf: &mut Vec<u8>) -> Result<bool> {
        let mut st = self.conn.prepare_cached("SELECT v FROM kv WHERE k = ?1")?;
        let found = st
            .query_row(params![key], |row| {
                let v = row.get_ref(0)?.as_blob()?;
                buf.clear();
                buf.extend_from_slice(v);
                Ok(())
            })
            .optional()?;
        Ok(found.is_some())
    }

    fn delete(&mut self, key: &[u8]) -> Result<bool> {
        let mut st = self.conn.prepare_cached("DELETE FROM kv WHERE k = ?1")?;
        Ok(st.execute(params![key])? > 0)
    }

    fn scan(&mut self, start: &[u8], n: usize) -> Result<usize> {
        let mut st = self.conn.prepare_cached("SELECT k, v FROM kv WHERE k >= ?1 ORDER BY k LIMIT ?2")?;
        let mut rows = st.query(params![start, n as i64])?;
        let mut count = 0;
        while let Some(row) = rows.next()? {
            self.scratch.clear();
            self.scratch.extend_from_slice(row.get_ref(1)?.as_blob()?);
            std::hint::black_box(&self.scratch);
            count += 1;
        }
        Ok(count)
    }

    fn mode(&self) -> String {
        if self.durable { "WAL, synchronous=FULL" } else { "WAL, synchronous=OFF" }.into()
    }
}
