//! Ordering points inside a multi-store update, per [`OrderingMode`].
//!
//! A data structure that shifts entries in a node (the NVM B-tree ordering
//! study, FAST_FAIR) calls [`OrderedWrites::wrote`] after each dependent
//! store. In `full` mode every such store is persisted at once. In `fast`
//! mode stores within one cache line are ordered by the CPU already (x86 TSO
//! keeps them in program order and a line is written back whole), so a line
//! is persisted only when the stores move on to another line (before the
//! first store to the new line: [`OrderedWrites::before`]), and at
//! [`OrderedWrites::finish`]. In `none` mode nothing is persisted.

use crate::persist::{OrderingMode, CACHE_LINE_BYTES};
use crate::{Pool, PoolOffset};

/// Tracks the cache line a sequence of dependent stores is in.
#[derive(Debug)]
pub struct OrderedWrites<'p> {
    pool: &'p Pool,
    open_line: Option<u64>,
}

impl<'p> OrderedWrites<'p> {
    /// Starts a sequence of dependent stores on `pool`.
    pub fn new(pool: &'p Pool) -> Self {
        OrderedWrites { pool, open_line: None }
    }

    /// Call before storing to `[offset, offset + len)`: in `fast` mode, if
    /// the store goes to another line than the open one, the open line is
    /// persisted first, so that what was copied into it is durable before
    /// the store can overwrite the copy's source (a shift's invariant).
    pub fn before(&mut self, offset: PoolOffset, len: u64) {
        if len == 0 || self.pool.ordering() != OrderingMode::Fast {
            return;
        }
        if let Some(open) = self.open_line {
            let first = offset / CACHE_LINE_BYTES;
            let last = (offset + len - 1) / CACHE_LINE_BYTES;
            if first != open || last != open {
                self.pool.persist(open * CACHE_LINE_BYTES, CACHE_LINE_BYTES);
                self.open_line = None;
            }
        }
    }

    /// Records that `[offset, offset + len)` was just stored.
    pub fn wrote(&mut self, offset: PoolOffset, len: u64) {
        if len == 0 {
            return;
        }
        match self.pool.ordering() {
            OrderingMode::None => {}
            OrderingMode::Full => self.pool.persist(offset, len),
            OrderingMode::Fast => {
                let first = offset / CACHE_LINE_BYTES;
                let last = (offset + len - 1) / CACHE_LINE_BYTES;
                for line in first..=last {
                    match self.open_line {
                        Some(open) if open == line => {}
                        Some(open) => {
                            self.pool.persist(open * CACHE_LINE_BYTES, CACHE_LINE_BYTES);
                            self.open_line = Some(line);
                        }
                        None => self.open_line = Some(line),
                    }
                }
            }
        }
    }

    /// Persists the last open line.
    pub fn finish(mut self) {
        self.close();
    }

    fn close(&mut self) {
        if let Some(open) = self.open_line.take() {
            self.pool.persist(open * CACHE_LINE_BYTES, CACHE_LINE_BYTES);
        }
    }
}

impl Drop for OrderedWrites<'_> {
    fn drop(&mut self) {
        self.close();
    }
}
