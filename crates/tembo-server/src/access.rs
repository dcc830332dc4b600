//! When each key was last used: OBJECT IDLETIME (Redis's LRU clock).
//!
//! Redis keeps 24 bits of seconds in every object. Tembo's keys live in
//! the pool, where recording a read would cost a store and a flush per
//! read, so the clock lives in DRAM instead: a fixed table of 2^20 32-bit
//! times (4 MiB, whatever the data's size) indexed by a hash of the
//! database and key. Keys that share a slot share a time, so a key's idle
//! time can read low — never high — when another key of its slot was used
//! since; OBJECT IDLETIME is approximate in Redis too (its LRU clock ticks
//! in seconds and wraps). Like Redis after loading an RDB file, every key
//! counts as used when the server started. Commands that only look at a
//! key's existence, type or expiry (EXISTS, TYPE, TTL, OBJECT…) leave its
//! time alone, as Redis's `LOOKUP_NOTOUCH` does.

use std::time::Instant;

use crate::encoding::key_hash;

const SLOTS_LOG2: u32 = 20;

/// The table of last-use times.
#[derive(Debug)]
pub struct AccessClock {
    /// Seconds since `start`, per slot.
    slots: Vec<u32>,
    start: Instant,
}

impl Default for AccessClock {
    fn default() -> Self {
        AccessClock { slots: vec![0; 1 << SLOTS_LOG2], start: Instant::now() }
    }
}

/// Commands that do not count as a use of the keys they look up.
const NO_TOUCH: &[&str] = &["exists", "type", "ttl", "pttl", "expiretime", "pexpiretime", "object", "memory", "debug"];

/// Whether running `cmd` (a full name, `object|idletime`) uses its keys.
pub fn touches(cmd: &str) -> bool {
    !NO_TOUCH.contains(&cmd.split('|').next().unwrap_or(cmd))
}

impl AccessClock {
    fn slot(db: u8, key: &[u8]) -> usize {
        let h = u64::from(key_hash(key)) ^ (u64::from(db) << 32);
        // Fibonacci hashing: the top bits of the product mix every input bit.
        (h.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> (64 - SLOTS_LOG2)) as usize
    }

    fn now(&self) -> u32 {
        self.start.elapsed().as_secs().min(u64::from(u32::MAX)) as u32
    }

    /// Records a use of `key` now.
    pub fn touch(&mut self, db: u8, key: &[u8]) {
        let now = self.now();
        self.slots[Self::slot(db, key)] = now;
    }

    /// Seconds since `key` was last used (approximate, see the module docs).
    pub fn idle_secs(&self, db: u8, key: &[u8]) -> u64 {
        u64::from(self.now().saturating_sub(self.slots[Self::slot(db, key)]))
    }

    /// Makes `key` look unused for `idle` seconds (RESTORE … IDLETIME),
    /// as far back as the server's start.
    pub fn set_idle(&mut self, db: u8, key: &[u8], idle: u64) {
        let at = u64::from(self.now()).saturating_sub(idle) as u32;
        self.slots[Self::slot(db, key)] = at;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_touched_key_is_not_idle_and_restore_can_age_it() {
        let mut c = AccessClock { start: Instant::now() - std::time::Duration::from_secs(100), ..Default::default() };
        // Untouched since the start.
        assert_eq!(c.idle_secs(0, b"k"), 100);
        c.touch(0, b"k");
        assert_eq!(c.idle_secs(0, b"k"), 0);
        c.set_idle(0, b"k", 30);
        assert_eq!(c.idle_secs(0, b"k"), 30);
        c.set_idle(0, b"k", 1000);
        assert_eq!(c.idle_secs(0, b"k"), 100);
        // Another database's key of the same name keeps its own time.
        assert_eq!(c.idle_secs(1, b"k"), 100);
    }

    #[test]
    fn existence_and_expiry_tests_do_not_touch() {
        assert!(!touches("exists"));
        assert!(!touches("object|idletime"));
        assert!(touches("get"));
        assert!(touches("touch"));
    }
}
