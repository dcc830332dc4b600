//! SCAN-family cursors.
//!
//! Redis cursors are integers; ours stand for "resume after this element"
//! in key order. The executor keeps the resume point under a fresh number,
//! so a full iteration returns every element present throughout exactly
//! once, and elements added or removed meanwhile at most once. A cursor not
//! in the table (forgotten after [`TTL`], or made up) restarts the scan,
//! which keeps the SCAN guarantee (no element present throughout is missed).

use std::collections::HashMap;
use std::time::{Duration, Instant};

/// How long an unused cursor is remembered.
pub const TTL: Duration = Duration::from_secs(600);
/// Most cursors remembered at once.
pub const MAX: usize = 100_000;

/// Cursor number -> (resume point, last use).
#[derive(Debug, Default)]
pub struct Cursors {
    next: u64,
    table: HashMap<u64, (Vec<u8>, Instant)>,
}

impl Cursors {
    /// Remembers `resume` under a new cursor number (never 0).
    pub fn save(&mut self, resume: Vec<u8>) -> u64 {
        if self.table.len() >= MAX {
            self.expire_old();
            if self.table.len() >= MAX {
                let oldest = self.table.iter().min_by_key(|(_, (_, t))| *t).map(|(k, _)| *k);
                if let Some(k) = oldest {
                    self.table.remove(&k);
                }
            }
        }
        self.next += 1;
        self.table.insert(self.next, (resume, Instant::now()));
        self.next
    }

    /// The resume point of `cursor`; `None` for 0 or an unknown cursor (start over).
    pub fn take(&mut self, cursor: u64) -> Option<Vec<u8>> {
        self.table.remove(&cursor).map(|(k, _)| k)
    }

    /// Forgets cursors unused for [`TTL`].
    pub fn expire_old(&mut self) {
        let now = Instant::now();
        self.table.retain(|_, (_, t)| now.duration_since(*t) < TTL);
    }
}
