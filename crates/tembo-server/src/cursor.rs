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
    /// Cursors taken since [`Cursors::mark`], for [`Cursors::restore`].
    taken: Vec<(u64, (Vec<u8>, Instant))>,
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
        let (resume, used) = self.table.remove(&cursor)?;
        self.taken.push((cursor, (resume.clone(), used)));
        Some(resume)
    }

    /// A commit group starts: what [`Cursors::restore`] gives back is
    /// what is taken from now on.
    pub fn mark(&mut self) {
        self.taken.clear();
    }

    /// Gives back the cursors taken since [`Cursors::mark`]: the group
    /// that took them is rerun (its commit failed, or a command in it
    /// stopped midway), and a SCAN rerun must resume where it did, not
    /// start over.
    pub fn restore(&mut self) {
        for (cursor, entry) in self.taken.drain(..) {
            self.table.insert(cursor, entry);
        }
    }

    /// Forgets cursors unused for [`TTL`].
    pub fn expire_old(&mut self) {
        let now = Instant::now();
        self.table.retain(|_, (_, t)| now.duration_since(*t) < TTL);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_restored_cursor_resumes_again_and_an_unmarked_one_is_gone() {
        let mut c = Cursors::default();
        let a = c.save(b"after-a".to_vec());
        let b = c.save(b"after-b".to_vec());
        c.mark();
        assert_eq!(c.take(a), Some(b"after-a".to_vec()));
        assert_eq!(c.take(a), None, "a cursor is taken once");
        c.restore();
        assert_eq!(c.take(a), Some(b"after-a".to_vec()), "the rerun resumes where the first run did");
        c.mark();
        c.restore();
        assert_eq!(c.take(a), None, "taken before the mark: not given back");
        assert_eq!(c.take(b), Some(b"after-b".to_vec()));
        assert_eq!(c.take(0), None);
    }
}
