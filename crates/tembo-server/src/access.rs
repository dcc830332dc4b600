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
//!
//! Under an LFU `maxmemory-policy` the table also counts uses, as Redis's
//! LFU does in the same 24 bits of an object: a logarithmic 8-bit counter
//! (`lfu-log-factor`) that loses one every `lfu-decay-time` minutes
//! without a use, per slot, beside the slot's time. OBJECT FREQ reads it
//! and the LFU policies evict by it; other policies leave it alone, so a
//! read costs nothing more.

use crate::encoding::key_hash;

const SLOTS_LOG2: u32 = 16;

/// How far before its creation the table's clock starts, in seconds (17
/// years): RESTORE … IDLETIME may make a key look unused for longer than
/// the server has run, and the LFU clock's minutes still fit in 24 bits.
const BACK: u32 = 1 << 29;

/// The counter a key starts from (Redis's `LFU_INIT_VAL`): new keys are
/// not evicted before they had a chance to be used.
const LFU_INIT: u8 = 5;

/// The table of last-use times. Times are the commands' own clock (Unix
/// milliseconds, which a command reads once anyway), kept as seconds since
/// the table was made.
#[derive(Debug)]
pub struct AccessClock {
    /// Seconds since `start_secs`, per slot.
    slots: Vec<u32>,
    start_secs: u64,
    /// Per slot: minutes since `start_secs` of the last decay (high 24
    /// bits) and the use counter (low 8 bits).
    lfu: Vec<u32>,
    /// Whether uses are counted (an LFU policy is in force).
    pub lfu_on: bool,
    /// `lfu-log-factor`: how many uses it takes to raise the counter.
    pub lfu_log_factor: u32,
    /// `lfu-decay-time`: minutes without a use per counter step lost (0: none).
    pub lfu_decay_minutes: u32,
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
        AccessClock {
            slots: vec![BACK; 1 << SLOTS_LOG2],
            start_secs: (now_ms / 1000).saturating_sub(u64::from(BACK)),
            lfu: vec![(BACK / 60) << 8 | u32::from(LFU_INIT); 1 << SLOTS_LOG2],
            lfu_on: false,
            lfu_log_factor: 10,
            lfu_decay_minutes: 1,
        }
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
        let slot = Self::slot_of_hash(db, hash);
        self.slots[slot] = now;
        if self.lfu_on {
            let counter = self.log_incr(self.decayed(slot, now_ms));
            self.lfu[slot] = (now / 60) << 8 | u32::from(counter);
        }
    }

    /// Records that the key whose hash is `hash` was written at `now_ms`:
    /// a new key starts its counter at `LFU_INIT` (Redis's new object); an
    /// overwritten one keeps its counter (Redis's `dbOverwrite` keeps the
    /// old object's, and the command's lookup already counted the use).
    pub fn write_hashed(&mut self, db: u8, hash: u32, now_ms: u64, new_key: bool) {
        let now = self.tick(now_ms);
        let slot = Self::slot_of_hash(db, hash);
        self.slots[slot] = now;
        if new_key {
            self.lfu[slot] = (now / 60) << 8 | u32::from(LFU_INIT);
        }
    }

    /// Starts counting uses from nothing, at `now_ms`, when an LFU policy
    /// replaces another: Redis reads the LRU clock left in an object as an
    /// LFU word then, which decays to 0 (OBJECT FREQ is 1 after one use).
    pub fn restart_lfu(&mut self, now_ms: u64) {
        let word = (self.tick(now_ms) / 60) << 8;
        self.lfu.iter_mut().for_each(|w| *w = word);
    }

    /// The slot's counter less a step per `lfu_decay_minutes` since its
    /// last decay (Redis's `LFUDecrAndReturn`).
    fn decayed(&self, slot: usize, now_ms: u64) -> u8 {
        let word = self.lfu[slot];
        let counter = (word & 0xff) as u8;
        if self.lfu_decay_minutes == 0 {
            return counter;
        }
        let elapsed = (self.tick(now_ms) / 60).saturating_sub(word >> 8);
        let periods = elapsed / self.lfu_decay_minutes;
        counter.saturating_sub(periods.min(255) as u8)
    }

    /// Raises `counter` by one with probability 1 / ((counter - LFU_INIT)
    /// × lfu_log_factor + 1) (Redis's `LFULogIncr`).
    fn log_incr(&self, counter: u8) -> u8 {
        if counter == u8::MAX {
            return counter;
        }
        let base = f64::from(counter.saturating_sub(LFU_INIT));
        let p = 1.0 / (base * f64::from(self.lfu_log_factor) + 1.0);
        if rand::random::<f64>() < p {
            counter + 1
        } else {
            counter
        }
    }

    /// `key`'s use counter at `now_ms` (OBJECT FREQ).
    pub fn freq(&self, db: u8, key: &[u8], now_ms: u64) -> u8 {
        self.decayed(Self::slot(db, key), now_ms)
    }

    /// Sets `key`'s use counter (RESTORE … FREQ).
    pub fn set_freq(&mut self, db: u8, key: &[u8], freq: u8, now_ms: u64) {
        let minutes = self.tick(now_ms) / 60;
        self.lfu[Self::slot(db, key)] = minutes << 8 | u32::from(freq);
    }

    /// Seconds `key` has not been used at `now_ms` (approximate, see the module docs).
    pub fn idle_secs(&self, db: u8, key: &[u8], now_ms: u64) -> u64 {
        u64::from(self.tick(now_ms).saturating_sub(self.slots[Self::slot(db, key)]))
    }

    /// Makes `key` look unused for `idle` seconds at `now_ms` (RESTORE …
    /// IDLETIME), up to 17 years back.
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
        // Further back than the server has run, as Redis allows.
        c.set_idle(0, b"k", 1000, now);
        assert_eq!(c.idle_secs(0, b"k", now), 1000);
        // Another database's key of the same name keeps its own time.
        assert_eq!(c.idle_secs(1, b"k", now), 100);
        // A clock set back reads as no time passed.
        assert_eq!(c.idle_secs(1, b"k", t0 - 50_000), 0);
    }

    #[test]
    fn lfu_counts_uses_logarithmically_and_decays_per_minute() {
        let t0 = 1_700_000_000_000;
        let mut c = AccessClock::new(t0);
        // Not counted while no LFU policy is in force.
        c.touch_hashed(0, key_hash(b"k"), t0);
        assert_eq!(c.freq(0, b"k", t0), LFU_INIT);
        c.lfu_on = true;
        for _ in 0..1_000 {
            c.touch_hashed(0, key_hash(b"k"), t0);
        }
        // With log factor 10, a thousand uses reach about 18 (the table in
        // Redis's redis.conf); a linear counter would be at 255. The steps
        // are random (step j takes 10j + 1 uses on average): 27 came up in
        // a CI run, and 20,000 simulated runs fell in 11..=31 (9 in 10,000
        // outside 12..=26, the bounds before).
        let f = c.freq(0, b"k", t0);
        assert!((10..=36).contains(&f), "{f}");
        // One step lost per idle minute.
        assert_eq!(c.freq(0, b"k", t0 + 3 * 60_000), f - 3);
        c.set_freq(0, b"k", 100, t0);
        assert_eq!(c.freq(0, b"k", t0), 100);
        c.lfu_decay_minutes = 0;
        assert_eq!(c.freq(0, b"k", t0 + 600_000), 100);
        c.lfu_log_factor = 0;
        c.lfu_decay_minutes = 1;
        c.set_freq(0, b"k", 254, t0);
        c.touch_hashed(0, key_hash(b"k"), t0);
        c.touch_hashed(0, key_hash(b"k"), t0);
        assert_eq!(c.freq(0, b"k", t0), 255);
    }

    #[test]
    fn new_keys_start_at_the_initial_count_and_an_lfu_switch_starts_from_zero() {
        let t0 = 1_700_000_000_000;
        let mut c = AccessClock::new(t0);
        c.lfu_on = true;
        // Ten minutes on, an untouched slot has decayed to 0; a key made
        // there starts at LFU_INIT, and overwriting it adds nothing.
        let later = t0 + 600_000;
        assert_eq!(c.freq(0, b"k", later), 0);
        c.write_hashed(0, key_hash(b"k"), later, true);
        assert_eq!(c.freq(0, b"k", later), LFU_INIT);
        c.write_hashed(0, key_hash(b"k"), later, false);
        assert_eq!(c.freq(0, b"k", later), LFU_INIT);
        assert_eq!(c.idle_secs(0, b"k", later), 0);
        // The first use of a counter at LFU_INIT always counts.
        c.touch_hashed(0, key_hash(b"k"), later);
        assert_eq!(c.freq(0, b"k", later), LFU_INIT + 1);
        c.restart_lfu(later);
        assert_eq!(c.freq(0, b"k", later), 0);
        c.touch_hashed(0, key_hash(b"k"), later);
        assert_eq!(c.freq(0, b"k", later), 1);
    }

    #[test]
    fn existence_and_expiry_tests_do_not_touch() {
        assert!(!touches("exists"));
        assert!(!touches("object|idletime"));
        assert!(touches("get"));
        assert!(touches("touch"));
    }
}
