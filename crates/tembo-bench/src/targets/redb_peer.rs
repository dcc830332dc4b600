//! redb (a pure-Rust copy-on-write B-tree) as a peer: one table of byte
//! keys and values, one write transaction per put or delete.
//! Durable: `Durability::Immediate` (the commit is fsynced). Volatile:
//! `Durability::None`.

use std::path::Path;

use anyhow::{Context, Result};
use redb::{Database, Durability, TableDefinition};

use super::Target;

const TABLE: TableDefinition<&[u8], &[u8]> = TableDefinition::new("kv");

pub(super) struct RedbTarget {
    db: Database,
    durable: bool,
    /// A scan's value buffer.
    scratch: Vec<u8>,
}

pub(super) fn open(dir: &Path, durable: bool) -> Result<Box<dyn Target>> {
    let path = dir.join("redb.db");
    let db = Database::create(&path).with_context(|| format!("creating {}", path.display()))?;
    Ok(Box::new(RedbTarget { db, durable, scratch: Vec::new() }))
}

impl RedbTarget {
    fn durability(&self) -> Durability {
        if self.durable {
            Durability::Immediate
        } else {
            Durability::None
        }
    }
}

impl Target for RedbTarget {
    fn put(&mut self, key: &[u8], value: &[u8]) -> Result<()> {
        let mut tx = self.db.begin_write()?;
        tx.set_durability(self.durability());
        {
            let mut table = tx.open_table(TABLE)?;
            table.insert(key, value)?;
        }
        tx.commit()?;
        Ok(())
    }

    fn get(&mut self, key: &[u8], buf: &mut Vec<u8>) -> Result<bool> {
        let tx = self.db.begin_read()?;
        let table = match tx.open_table(TABLE) {
            Ok(t) => t,
            Err(redb::TableError::TableDoesNotExist(_)) => return Ok(false),
            Err(e) => return Err(e.into()),
        };
        match table.get(key)? {
            Some(v) => {
                buf.clear();
                buf.extend_from_slice(v.value());
                Ok(true)
            }
            None => Ok(false),
        }
    }

    fn delete(&mut self, key: &[u8]) -> Result<bool> {
        let mut tx = self.db.begin_write()?;
        tx.set_durability(self.durability());
        let removed = {
            let mut table = tx.open_table(TABLE)?;
            let removed = table.remove(key)?.is_some();
            removed
        };
        tx.commit()?;
        Ok(removed)
    }

    fn scan(&mut self, start: &[u8], n: usize) -> Result<usize> {
        let tx = self.db.begin_read()?;
        let table = match tx.open_table(TABLE) {
            Ok(t) => t,
            Err(redb::TableError::TableDoesNotExist(_)) => return Ok(0),
            Err(e) => return Err(e.into()),
        };
        let mut count = 0;
        for pair in table.range(start..)?.take(n) {
            let (_k, v) = pair?;
            self.scratch.clear();
            self.scratch.extend_from_slice(v.value());
            std::hint::black_box(&self.scratch);
            count += 1;
        }
        Ok(count)
    }

    fn mode(&self) -> String {
        if self.durable { "Durability::Immediate" } else { "Durability::None" }.into()
    }
}
