//! Tembo's engines (CDDS, and the in-place tree on Kamino-Tx or undo
//! transactions) as bench targets, through the embedded `Db` API a user
//! calls (so the figures include everything an application pays: limits
//! checks, the batch, the commit).

use std::path::Path;

use anyhow::{Context, Result};
use tembo_pmem::{OrderingMode, WriteStats};
use tembo_store::{Db, Engine, Options};

use super::Target;

pub(super) struct CddsTarget {
    db: Db,
    /// A scan's buffers, reused for every pair.
    key: Vec<u8>,
    value: Vec<u8>,
}

/// Opens a fresh database; `gc: false` runs CDDS without its background GC
/// thread (the `cdds-nogc` target, to show what the thread costs or saves).
pub(super) fn open(
    dir: &Path,
    size_hint: u64,
    ordering: OrderingMode,
    engine: Engine,
    gc: bool,
) -> Result<Box<dyn Target>> {
    let path = dir.join("tembo.pool");
    let mut opts = options(size_hint, ordering, engine);
    if !gc {
        opts.gc = None;
    }
    let db = Db::create(&path, &opts).with_context(|| format!("creating {}", path.display()))?;
    Ok(Box::new(CddsTarget { db, key: Vec::new(), value: Vec::new() }))
}

/// The options of a bench pool: room for the data, the tree's dead entries
/// and copies (CDDS) or the backup (Kamino-Tx), and growth.
pub fn options(size_hint: u64, ordering: OrderingMode, engine: Engine) -> Options {
    let size = match engine {
        Engine::Cdds => size_hint * 3 / 2,
        _ => size_hint * 3,
    };
    let size = (size + (64 << 20)).next_multiple_of(1 << 20);
    Options { size, max_size: Some(size * 4), ordering, engine, alpha: 0.5, ..Options::default() }
}

impl Target for CddsTarget {
    fn put(&mut self, key: &[u8], value: &[u8]) -> Result<()> {
        Ok(self.db.put(key, value)?)
    }

    fn get(&mut self, key: &[u8], buf: &mut Vec<u8>) -> Result<bool> {
        Ok(self.db.get_into(key, buf)?)
    }

    fn delete(&mut self, key: &[u8]) -> Result<bool> {
        Ok(self.db.delete(key)?)
    }

    fn scan(&mut self, start: &[u8], n: usize) -> Result<usize> {
        // Into reused buffers, as the C peers copy each value into theirs.
        let mut count = 0;
        let mut it = self.db.scan(start..);
        while count < n {
            match it.next_into(&mut self.key, &mut self.value) {
                Some(pair) => pair?,
                None => break,
            }
            std::hint::black_box((&self.key, &self.value));
            count += 1;
        }
        Ok(count)
    }

    fn write_stats(&self) -> Option<WriteStats> {
        Some(self.db.pool().write_stats())
    }

    fn mapped(&self) -> Option<(usize, usize)> {
        // The whole mapping, header included: the heap starts HEADER_BYTES in.
        let pool = self.db.pool();
        let (head, size) = (tembo_pmem::header::HEADER_BYTES, pool.size());
        let heap = pool.raw(head, size - head).ok()?.as_ptr() as usize;
        Some((heap - head as usize, usize::try_from(size).ok()?))
    }

    fn mode(&self) -> String {
        let pool = self.db.pool();
        let pages = match pool.huge_page_bytes() {
            Some(b) if b > 0 => format!(", {} MiB in 2 MiB pages", b >> 20),
            Some(_) => ", 4 KiB pages".to_string(),
            None => String::new(),
        };
        format!("{} pool, ordering {}{pages}", self.db.mode().name(), pool.ordering().name())
    }
}
