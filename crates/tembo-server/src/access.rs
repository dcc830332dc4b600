//! When each key was last used: OBJECT IDLETIME (Redis's LRU clock).
//!
//! Redis keeps 24 bits of seconds in every object. Tembo's keys live in
//! the pool, where recording a read would cost a store and a flush per
//! read, so the clock lives in DRAM instead: a fixed table of 2^16 32-bit
//! times (256 KiB, whatever the data's size) indexed by the hash of the
//! database and key that the key's metadata record already carries, so a
//! use costs one store into a table that stays in the CPU's cache. (A
//! 4 MiB table, and hashing the key a second time, cost 5-8% of GET and
//! SET throughput at 200k keys in `bench/ab.sh`; this one costs nothing
//! measurable.) Keys that share a slot share a time, so a key's idle time
//! can read low — never high — when another key of its slot was used
//! since; with more keys than slots that is common, and OBJECT IDLETIME is
//! a hint, as Redis's is (its LRU clock ticks in seconds and wraps). Like
//! Redis after loading an RDB file, every key counts as used when the
//! server started. Commands that only look at a key's existence, type or
//! expiry (EXISTS, TYPE, TTL, OBJECT…) leave its time alone, as Redis's
//! `LOOKUP_NOTOUCH` does.

use crate::encoding::key_hash;

const SLOTS_LOG2: u32 = 16;

/// The table of last-use times. Times are the commands' own clock (Unix
/// milliseconds, which a command reads once anyway), kept as seconds since
/// the table was made.
#[derive(Debug)]
pub struct AccessClock {
    /// Seconds since `start_secs`, per slot.
    slots: Vec<u32>,
    start_secs: u64,
}

impl Default for AccessClock {
    fn default() -> Self {
        AccessClock::new(crate::exec::now_ms())
    }
}

/// Commands that do not count as a use of the keys they look up.
const NO_TOUCH: &[&str] = &["exists", "type", "ttl", "pttl", "expiretime", "pexpiretime", "object", "memory", "debug"];

/// Whether running `cmd` (a full name, `object|idletime`) uses its keys.
pub fn touches(cmd: &str) -> bool {
    !NO_TOUCH.contains(&cmd.split('|').next().unwrap_or(cmd))
}

impl AccessClock {
    /// A table whose keys all count as used at `now_ms`.
    pub fn new(now_ms: u64) -> AccessClock {
        AccessClock { slots: vec![0; 1 << SLOTS_LOG2], start_secs: now_ms / 1000 }
    }

    fn slot(db: u8, key: &[u8]) -> usize {
        Self::slot_of_hash(db, key_hash(key))
    }

    fn slot_of_hash(db: u8, hash: u32) -> usize {
        let h = u64::from(hash) ^ (u64::from(db) << 32);
        // Fibonacci hashing: the top bits of the product mix every input bit.
        (h.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> (64 - SLOTS_LOG2)) as usize
    }

    fn tick(&self, now_ms: u64) -> u32 {
        (now_ms / 1000).saturating_sub(self.start_secs).min(u64::from(u32::MAX)) as u32
    }

    /// Records a use at `now_ms` of the key whose hash is `hash`
    /// ([`key_hash`]; a metadata key carries it, so a lookup need not
    /// hash the key again).
    pub fn touch_hashed(&mut self, db: u8, hash: u32, now_ms: u64) {
        let now = self.tick(now_ms);
        self.slots[Self::slot_of_hash(db, hash)] = now;
    }

    /// Seconds `key` has not been used at `now_ms` (approximate, see the module docs).
    pub fn idle_secs(&self, db: u8, key: &[u8], now_ms: u64) -> u64 {
        u64::from(self.tick(now_ms).saturating_sub(self.slots[Self::slot(db, key)]))
    }

    /// Makes `key` look unused for `idle` seconds at `now_ms` (RESTORE …
    /// IDLETIME), as far back as the table's start.
    pub fn set_idle(&mut self, db: u8, key: &[u8], idle: u64, now_ms: u64) {
        let at = u64::from(self.tick(now_ms)).saturating_sub(idle) as u32;
        self.slots[Self::slot(db, key)] = at;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_touched_key_is_not_idle_and_restore_can_age_it() {
        let t0 = 1_700_000_000_000;
        let now = t0 + 100_000;
        let mut c = AccessClock::new(t0);
        // Untouched since the start.
        assert_eq!(c.idle_secs(0, b"k", now), 100);
        c.touch_hashed(0, key_hash(b"k"), now);
        assert_eq!(c.idle_secs(0, b"k", now), 0);
        assert_eq!(c.idle_secs(0, b"k", now + 5_500), 5);
        c.set_idle(0, b"k", 30, now);
        assert_eq!(c.idle_secs(0, b"k", now), 30);
        c.set_idle(0, b"k", 1000, now);
        assert_eq!(c.idle_secs(0, b"k", now), 100);
        // Another database's key of the same name keeps its own time.
        assert_eq!(c.idle_secs(1, b"k", now), 100);
        // A clock set back reads as no time passed.
        assert_eq!(c.idle_secs(1, b"k", t0 - 50_000), 0);
    }

    #[test]
    fn existence_and_expiry_tests_do_not_touch() {
        assert!(!touches("exists"));
        assert!(!touches("object|idletime"));
        assert!(touches("get"));
        assert!(touches("touch"));
    }
}
