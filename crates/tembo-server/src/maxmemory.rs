//! `maxmemory` and `maxmemory-policy`: a limit on the pool bytes the data
//! may take, and what the server does once it is over it.
//!
//! Redis counts its heap; Tembo counts what `INFO used_memory` reports, the
//! pool's allocated bytes (keys, values, the tree's nodes). A limit of 0
//! (the default) means none: the data may then fill the pool up to its
//! maximum size, where writes fail with the pool-full error.
//!
//! Over the limit, before each command (as Redis's `performEvictions`):
//! - `noeviction` refuses the commands Redis flags `denyoom` (those that can
//!   make the data grow), every command queued in MULTI but EXEC, DISCARD,
//!   QUIT and RESET, an EXEC that holds a `denyoom` command, and scripts and
//!   functions that may write without `allow-oom`; reads and deletes run.
//! - the other policies delete keys first, chosen as Redis chooses them:
//!   `allkeys-*` among all keys, `volatile-*` among keys with a TTL; `lru`
//!   the longest unused (OBJECT IDLETIME), `lfu` the least often used
//!   (OBJECT FREQ), `ttl` the soonest to expire, `random` any. Each step
//!   samples `maxmemory-samples` keys per database and keeps the best
//!   sixteen candidates across steps (Redis's eviction pool). Evicted keys
//!   send the `evicted` keyspace event, break WATCHes and invalidate
//!   client-side caches, and count in INFO `evicted_keys`. When no key is
//!   left to evict the command is refused as under `noeviction`.
//!
//! What an eviction frees is not visible in the pool's count at once: the
//! deletion is committed with its group, and the old versions and a
//! collection's elements are freed in the background (the tree's GC and the
//! reclaimer), from tens of milliseconds to seconds later (a GC pass over a
//! big tree takes that long). Counting only what the pool has given back
//! would evict far more than needed, so each eviction is credited with an
//! estimate of its key's bytes (as MEMORY USAGE estimates them), and the
//! pool's use counts as that much lower until the pool has freed as many
//! bytes (its count of freed bytes, which new writes meanwhile do not
//! hide), or [`PENDING_FOR`] has passed (an estimate never holds the limit
//! off for longer). Frees of other garbage (overwritten values) pay the
//! credit off too, which errs toward evicting a little more, never less.
//!
//! Deleting also makes garbage of its own: nodes the tree replaces (merges)
//! hold their bytes until the GC frees them, and with small values that can
//! outweigh what the deletions free. Counted as data, it would make each
//! step evict more, and the next more again, until no key is left (seen at
//! a limit 100 KiB above an empty pool). So a commit that evicted wakes the
//! GC and has it compact every node until its pass ends (busy writers
//! otherwise keep it to nearly full nodes), and for [`SETTLE`] after a step
//! the next one evicts only if the pool is over the limit by more than the
//! bytes still credited (a lower limit, or writes that outran it).
//!
//! One step evicts for at most the time `maxmemory-eviction-tenacity`
//! allows (500 µs at its default of 10, as in Redis); if the pool is still
//! over, the command runs and the executor goes on evicting between
//! requests. Nothing is evicted (or refused) while CLIENT PAUSE holds
//! clients, as in Redis 7.0.

use std::collections::VecDeque;
use std::ops::Bound;
use std::time::{Duration, Instant};

use crate::client::Client;
use crate::cmd::scripting::ScriptFlags;
use crate::cmd::Spec;
use crate::encoding::{self, meta_key, meta_prefix, Meta, EXPIRES};
use crate::exec::State;
use crate::store::StoreError;

/// The error a refused command gets, in Redis's words.
pub const OOM_ERROR: &str = "OOM command not allowed when used memory > 'maxmemory'.";

/// How long an eviction's estimated bytes count as freed before the pool
/// has given them back.
pub const PENDING_FOR: Duration = Duration::from_secs(5);

/// How long after a step that evicted keys the next one waits for the
/// pool to free them (the GC is woken as the step commits).
pub const SETTLE: Duration = Duration::from_millis(50);

/// Most index or key entries one probe reads before it gives up: stale
/// expiry-index entries (a flushed generation's keys wait in the index
/// until they fall due) and expired keys not yet collected must not make
/// every command walk them all.
const PROBE_LIMIT: usize = 64;

/// Redis's eviction pool size: the best candidates kept across steps.
const CANDIDATES: usize = 16;

/// What to do over the limit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Policy {
    /// Refuse commands that may grow the data.
    NoEviction,
    /// Evict the least recently used key.
    AllKeysLru,
    /// Evict the least frequently used key.
    AllKeysLfu,
    /// Evict any key.
    AllKeysRandom,
    /// Evict the least recently used key with a TTL.
    VolatileLru,
    /// Evict the least frequently used key with a TTL.
    VolatileLfu,
    /// Evict any key with a TTL.
    VolatileRandom,
    /// Evict the key with the nearest expiry.
    VolatileTtl,
}

/// In Redis's order (its CONFIG SET error lists them so).
const NAMES: [(Policy, &str); 8] = [
    (Policy::VolatileLru, "volatile-lru"),
    (Policy::VolatileLfu, "volatile-lfu"),
    (Policy::VolatileRandom, "volatile-random"),
    (Policy::VolatileTtl, "volatile-ttl"),
    (Policy::AllKeysLru, "allkeys-lru"),
    (Policy::AllKeysLfu, "allkeys-lfu"),
    (Policy::AllKeysRandom, "allkeys-random"),
    (Policy::NoEviction, "noeviction"),
];

impl Policy {
    /// The policy named `s` (any case).
    pub fn parse(s: &str) -> Option<Policy> {
        NAMES.iter().find(|(_, n)| n.eq_ignore_ascii_case(s)).map(|(p, _)| *p)
    }

    /// Its name, as CONFIG GET and INFO show it.
    pub fn name(self) -> &'static str {
        NAMES.iter().find(|(p, _)| *p == self).map_or("noeviction", |(_, n)| n)
    }

    /// The CONFIG SET error listing the policies.
    pub fn choices() -> String {
        let names: Vec<&str> = NAMES.iter().map(|(_, n)| *n).collect();
        format!("argument(s) must be one of the following: {}", names.join(", "))
    }

    /// Whether it evicts only keys with a TTL.
    fn volatile(self) -> bool {
        matches!(self, Policy::VolatileLru | Policy::VolatileLfu | Policy::VolatileRandom | Policy::VolatileTtl)
    }

    /// Whether keys' use is counted (OBJECT FREQ) rather than timed (OBJECT IDLETIME).
    pub fn lfu(self) -> bool {
        matches!(self, Policy::AllKeysLfu | Policy::VolatileLfu)
    }
}

/// Where a step left the pool.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// At or under the limit (or no limit).
    Fits,
    /// Over it, and evicting goes on in the background.
    Running,
    /// Over it, with nothing (more) to evict.
    Fail,
}

#[derive(Clone, Debug)]
struct Candidate {
    /// Higher is a better victim.
    score: u64,
    /// The physical database.
    db: u8,
    key: Vec<u8>,
}

/// The settings, and the state eviction keeps between steps.
#[derive(Debug)]
pub struct MaxMemory {
    /// Most pool bytes in use; 0: no limit.
    pub limit: u64,
    /// What to do over it.
    pub policy: Policy,
    /// Keys sampled per database and step (`maxmemory-samples`).
    pub samples: usize,
    /// `maxmemory-eviction-tenacity` (0-100): how long a step may evict.
    pub tenacity: u32,
    /// Estimated bytes of evicted keys the pool has not given back yet, oldest first.
    pending: VecDeque<(Instant, u64)>,
    /// The sum of `pending`'s bytes.
    pending_total: u64,
    /// The pool's count of freed bytes when last looked at.
    seen_freed: u64,
    /// The best victims found so far, best last.
    candidates: Vec<Candidate>,
    /// A step ran out of time with the pool still over: the executor goes on.
    pub left: bool,
    /// Where the next allkeys step starts looking (Redis's `next_db`).
    next_db: usize,
    /// When a step last evicted keys.
    last_step: Option<Instant>,
    /// Keys were evicted since the last commit: the commit wakes the GC.
    pub wake_gc: bool,
}

impl Default for MaxMemory {
    fn default() -> Self {
        MaxMemory {
            limit: 0,
            policy: Policy::NoEviction,
            samples: 5,
            tenacity: 10,
            pending: VecDeque::new(),
            pending_total: 0,
            seen_freed: 0,
            candidates: Vec::new(),
            left: false,
            next_db: 0,
            last_step: None,
            wake_gc: false,
        }
    }
}

impl MaxMemory {
    /// The pool's use `used` less what evictions have freed and the pool
    /// has not given back yet; `freed` is the pool's count of bytes freed
    /// since it opened (see the module docs).
    pub fn effective_used(&mut self, used: u64, freed: u64, now: Instant) -> u64 {
        while let Some(&(at, bytes)) = self.pending.front() {
            if now.duration_since(at) <= PENDING_FOR {
                break;
            }
            self.pending.pop_front();
            self.pending_total -= bytes;
        }
        let mut given_back = freed.saturating_sub(self.seen_freed);
        self.seen_freed = freed;
        while given_back > 0 {
            let Some(front) = self.pending.front_mut() else { break };
            let paid = front.1.min(given_back);
            front.1 -= paid;
            given_back -= paid;
            self.pending_total -= paid;
            if front.1 == 0 {
                self.pending.pop_front();
            }
        }
        used.saturating_sub(self.pending_total)
    }

    /// Whether a step evicted keys less than [`SETTLE`] ago, the pool has
    /// not freed as much as they hold yet, and the `excess` over the limit
    /// is no more than that (more is not the last step's garbage: a lower
    /// limit, or writes that outran it).
    fn settling(&self, now: Instant, excess: u64) -> bool {
        let pending = self.pending_total;
        pending > 0 && excess <= pending && self.last_step.is_some_and(|t| now.duration_since(t) < SETTLE)
    }

    fn credit(&mut self, bytes: u64, now: Instant) {
        if bytes > 0 {
            self.pending.push_back((now, bytes));
            self.pending_total += bytes;
        }
    }

    /// Forgets the candidates (the policy changed: their scores mean
    /// something else now). The credits stay: what was evicted is still
    /// to be freed.
    pub fn reset(&mut self) {
        self.candidates.clear();
    }

    /// How long one step may evict (Redis's `evictionTimeLimitUs`): None
    /// is no limit.
    fn time_limit(&self) -> Option<Duration> {
        match self.tenacity {
            0..=10 => Some(Duration::from_micros(50 * u64::from(self.tenacity.max(1)))),
            11..=99 => Some(Duration::from_micros((500.0 * 1.15f64.powi(self.tenacity as i32 - 10)) as u64)),
            _ => None,
        }
    }

    fn offer(&mut self, c: Candidate) {
        if let Some(at) = self.candidates.iter().position(|o| o.db == c.db && o.key == c.key) {
            self.candidates.remove(at);
        }
        if self.candidates.len() >= CANDIDATES {
            if self.candidates[0].score >= c.score {
                return;
            }
            self.candidates.remove(0);
        }
        let at = self.candidates.partition_point(|o| o.score <= c.score);
        self.candidates.insert(at, c);
    }
}

/// Whether the pool is over the limit after evicting what the policy
/// allows: the check Redis makes before every command. `current` is the
/// client whose command is about to run (it is not among the executor's
/// clients meanwhile), for the WATCHes and events of evicted keys.
pub fn perform(st: &mut State, mut current: Option<&mut Client>, now_ms: u64) -> Outcome {
    // While clients are paused the dataset stays as it is, evictions
    // included, and nothing is refused for it (Redis 7.0's
    // `isSafeToPerformEvictions`).
    if st.maxmemory.limit == 0 || st.expiry_paused() {
        st.maxmemory.left = false;
        return Outcome::Fits;
    }
    let started = Instant::now();
    let (used, freed) = st.store.db().pool().used_and_freed_bytes();
    let effective = st.maxmemory.effective_used(used, freed, started);
    let limit = st.maxmemory.limit;
    if effective <= limit {
        st.maxmemory.left = false;
        return Outcome::Fits;
    }
    if st.maxmemory.policy == Policy::NoEviction {
        return Outcome::Fail;
    }
    if st.maxmemory.settling(started, effective - limit) {
        // The last step's deletions are not collected yet, and collecting
        // them is what makes room: deleting more now would count their
        // transient garbage (the tree's replaced nodes) as data and evict
        // far more than needed. The cron looks again.
        st.maxmemory.left = false;
        return Outcome::Running;
    }
    let to_free = effective - limit;
    let deadline = st.maxmemory.time_limit().map(|d| started + d);
    let mut freed = 0u64;
    let mut evicted = 0u64;
    let outcome = loop {
        if freed >= to_free {
            break Outcome::Fits;
        }
        let victim = match pick(st, now_ms) {
            Ok(Some(v)) => v,
            Ok(None) => break Outcome::Fail,
            Err(e) => {
                log::warn!("eviction could not read the keyspace: {e}");
                break Outcome::Fail;
            }
        };
        freed += evict(st, current.as_deref_mut(), victim);
        evicted += 1;
        // As Redis: the clock is read every 16 keys.
        if evicted % 16 == 0 && deadline.is_some_and(|d| Instant::now() >= d) {
            break Outcome::Running;
        }
    };
    st.maxmemory.credit(freed, Instant::now());
    if evicted > 0 {
        // A step that found nothing more to evict has nothing to wait for.
        st.maxmemory.last_step = (outcome != Outcome::Fail).then(Instant::now);
        st.maxmemory.wake_gc = true;
    }
    st.maxmemory.left = outcome == Outcome::Running;
    let ms = started.elapsed().as_millis() as u64;
    st.latency.add("eviction-cycle", ms, now_ms / 1000);
    outcome
}

/// Whether a call is refused while the pool is over the limit: Redis's
/// `denyoom` commands, scripts and functions that may write and did not
/// declare `allow-oom` (a script without a shebang is checked at its
/// first write instead), and an EXEC holding any of those.
pub fn denies_on_oom(st: &State, client: &Client, spec: &Spec, args: &[Vec<u8>]) -> bool {
    let script_denies =
        |source: &[u8]| matches!(crate::cmd::scripting::shebang_flags(source), Ok(Some(f)) if f.denies_oom());
    let engine = st.scripts.as_ref();
    match spec.name {
        "eval" | "eval_ro" => script_denies(&args[1]),
        "evalsha" | "evalsha_ro" => {
            let sha = String::from_utf8_lossy(&args[1]).to_ascii_lowercase();
            engine.and_then(|e| e.source(&sha)).is_some_and(script_denies)
        }
        "fcall" | "fcall_ro" => engine.and_then(|e| e.function_flags(&args[1])).is_some_and(|f| f.denies_oom()),
        "exec" => client
            .multi
            .iter()
            .flatten()
            .any(|q| crate::cmd::spec(&q[0]).is_some_and(|s| s.name != "exec" && denies_on_oom(st, client, s, q))),
        _ => crate::cmd::has_flag(spec, args, "denyoom"),
    }
}

/// Redis's refusal of a script or function with declared flags that may
/// write without `allow-oom`, when the pool was over the limit as its
/// command started (`scriptPrepareForRun`): what the check before the
/// command cannot see (a function library loaded only as it runs).
pub fn script_start_refused(st: &State, flags: ScriptFlags) -> Option<crate::cmd::CmdError> {
    (st.maxmemory.limit != 0 && st.oom_at_start && flags.denies_oom()).then(|| {
        crate::cmd::CmdError(
            "OOM allow-oom flag is not set on the script, can not run it when used memory > 'maxmemory'".into(),
        )
    })
}

/// Whether a script's call of `spec` is refused (Redis's `scriptVerifyOOM`):
/// only before its first write, when the pool was over the limit as the
/// script started and the script did not declare `allow-oom`.
pub fn script_call_refused(st: &State, spec: &Spec, args: &[Vec<u8>]) -> bool {
    st.maxmemory.limit != 0
        && st.oom_at_start
        && !st.script_allow_oom
        && !st.script_run.as_ref().is_some_and(|r| r.wrote)
        && crate::cmd::has_flag(spec, args, "denyoom")
}

/// The next key to evict under the policy, with its metadata.
fn pick(st: &mut State, now_ms: u64) -> Result<Option<(u8, Vec<u8>, Meta)>, StoreError> {
    let policy = st.maxmemory.policy;
    if policy == Policy::VolatileTtl {
        // The expiry index is ordered by time: its first live entry is
        // the exact answer Redis's sampling approximates.
        return first_expiring(st);
    }
    if matches!(policy, Policy::AllKeysRandom | Policy::VolatileRandom) {
        let sample = sample_keys(st, 1, now_ms)?;
        return Ok(sample.into_iter().next());
    }
    let samples = st.maxmemory.samples.max(1);
    for (db, key, _) in sample_keys(st, samples, now_ms)? {
        let score = score(st, policy, db, &key, now_ms);
        st.maxmemory.offer(Candidate { score, db, key });
    }
    while let Some(c) = st.maxmemory.candidates.pop() {
        if let Some(meta) = live_meta(st, c.db, &c.key, now_ms)? {
            if !policy.volatile() || meta.expire_at != 0 {
                return Ok(Some((c.db, c.key, meta)));
            }
        }
    }
    Ok(None)
}

/// A candidate's score: idle seconds (LRU), 255 less its use counter
/// (LFU). Higher is a better victim.
fn score(st: &State, policy: Policy, db: u8, key: &[u8], now_ms: u64) -> u64 {
    if policy.lfu() {
        255 - u64::from(st.access.freq(db, key, now_ms))
    } else {
        st.access.idle_secs(db, key, now_ms)
    }
}

/// `key`'s metadata in physical database `db`, if it is there and not expired.
fn live_meta(st: &State, db: u8, key: &[u8], now_ms: u64) -> Result<Option<Meta>, StoreError> {
    let Some(raw) = st.store.get(&meta_key(db, st.gen(db), key))? else { return Ok(None) };
    Ok(Meta::decode(&raw).filter(|m| !m.expired(now_ms)))
}

/// Up to `n` keys per database that the policy may evict, each the first
/// key at or after a random point of the database's keys (ordered by their
/// hash; one point per key, because similar keys hash near each other and
/// neighbours would be a correlated sample); volatile policies draw from
/// the expiry index instead.
fn sample_keys(st: &mut State, n: usize, now_ms: u64) -> Result<Vec<(u8, Vec<u8>, Meta)>, StoreError> {
    if st.maxmemory.policy.volatile() {
        return sample_expiring(st, n, now_ms);
    }
    let dbs = st.keys.len();
    let mut out = Vec::new();
    for i in 0..dbs {
        let db = (st.maxmemory.next_db + i) % dbs;
        if st.key_count(db) <= 0 {
            continue;
        }
        let db = db as u8;
        let prefix = meta_prefix(db, st.gen(db));
        let end = encoding::prefix_end(&prefix).map_or(Bound::Unbounded, Bound::Excluded);
        let before = out.len();
        for _ in 0..n {
            let mut probe = prefix.clone();
            probe.extend_from_slice(&rand::random::<u32>().to_be_bytes());
            // The first live key from the point, wrapping around to the start.
            'probe: for (lo, hi) in [(probe.clone(), end.clone()), (prefix.clone(), Bound::Excluded(probe))] {
                for kv in st.store.scan(Bound::Included(lo), hi, false).take(PROBE_LIMIT) {
                    let (k, v) = kv?;
                    let (Some(key), Some(meta)) = (encoding::meta_user_key(&k), Meta::decode(&v)) else { continue };
                    if !meta.expired(now_ms) {
                        out.push((db, key.to_vec(), meta));
                        break 'probe;
                    }
                }
            }
        }
        if n == 1 && out.len() > before {
            // A random victim: one database per pick, the next one next time.
            st.maxmemory.next_db = (db as usize + 1) % dbs;
            break;
        }
    }
    Ok(out)
}

/// Decodes an expiry-index key into (expiry, physical db, key).
fn split_expire_key(k: &[u8]) -> Option<(u64, u8, &[u8])> {
    (k.len() >= 10 && k[0] == EXPIRES).then(|| (encoding::be64(&k[1..9]), k[9], &k[10..]))
}

/// An index entry's key, if it still has that expiry and is not past it.
fn indexed(st: &State, k: &[u8], now_ms: u64) -> Result<Option<(u8, Vec<u8>, Meta)>, StoreError> {
    let Some((at, db, key)) = split_expire_key(k) else { return Ok(None) };
    if db as usize >= st.keys.len() {
        return Ok(None);
    }
    Ok(live_meta(st, db, key, now_ms)?.filter(|m| m.expire_at == at).map(|m| (db, key.to_vec(), m)))
}

fn first_expiring(st: &mut State) -> Result<Option<(u8, Vec<u8>, Meta)>, StoreError> {
    let hi = encoding::prefix_end(&[EXPIRES]).map_or(Bound::Unbounded, Bound::Excluded);
    for kv in st.store.scan(Bound::Included(vec![EXPIRES]), hi, false).take(PROBE_LIMIT) {
        let (k, _) = kv?;
        // Past entries are keys the active expire cycle has yet to delete:
        // evicting one frees as much as any.
        if let Some(found) = indexed(st, &k, 0)? {
            return Ok(Some(found));
        }
    }
    Ok(None)
}

/// `n` keys with a TTL, each the first live one at or after a random
/// expiry between the index's first and last (wrapping around).
fn sample_expiring(st: &mut State, n: usize, now_ms: u64) -> Result<Vec<(u8, Vec<u8>, Meta)>, StoreError> {
    let start = vec![EXPIRES];
    let end = encoding::prefix_end(&start).map_or(Bound::Unbounded, Bound::Excluded);
    let edge = |rev: bool| -> Result<Option<u64>, StoreError> {
        match st.store.scan(Bound::Included(start.clone()), end.clone(), rev).next() {
            Some(kv) => Ok(split_expire_key(&kv?.0).map(|(at, _, _)| at)),
            None => Ok(None),
        }
    };
    let (Some(first), Some(last)) = (edge(false)?, edge(true)?) else { return Ok(Vec::new()) };
    let mut out = Vec::new();
    for _ in 0..n {
        let at = first + rand::random::<u64>() % (last - first + 1);
        let mut probe = start.clone();
        probe.extend_from_slice(&at.to_be_bytes());
        'probe: for (lo, hi) in [(probe.clone(), end.clone()), (start.clone(), Bound::Excluded(probe))] {
            for kv in st.store.scan(Bound::Included(lo), hi, false).take(PROBE_LIMIT) {
                if let Some(found) = indexed(st, &kv?.0, now_ms)? {
                    out.push(found);
                    break 'probe;
                }
            }
        }
    }
    Ok(out)
}

/// Deletes `key` of physical database `db` as an eviction; returns the
/// bytes it is estimated to free.
fn evict(st: &mut State, mut current: Option<&mut Client>, (db, key, meta): (u8, Vec<u8>, Meta)) -> u64 {
    let bytes = crate::cmd::memory::key_bytes(st, db, &key, &meta, 5).unwrap_or(0);
    st.drop_key(db, &key, &meta);
    let seen = st.logical(db);
    st.blocking.signal(seen, &key);
    // As Redis's `signalModifiedKey(NULL, …)`: no client made the change,
    // so client-side caches are told whatever their NOLOOP says (and at
    // once, before the reply of the command that made room), and the
    // running command's notes (its events) do not include it.
    if !st.tracking.is_idle() {
        crate::tracking::evicted(st, &key, current.as_deref_mut());
    }
    st.mark_watchers(seen, &key, current.as_deref_mut());
    crate::notify::send_from(st, current, crate::notify::EVICTED, "evicted", seen, &key);
    st.stats.evicted_keys += 1;
    bytes
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn policies_parse_by_name_in_any_case() {
        for (p, n) in NAMES {
            assert_eq!(Policy::parse(n), Some(p));
            assert_eq!(Policy::parse(&n.to_uppercase()), Some(p));
            assert_eq!(p.name(), n);
        }
        assert_eq!(Policy::parse("allkeys"), None);
        assert!(Policy::choices().contains("volatile-ttl"));
    }

    #[test]
    fn evicted_bytes_count_until_the_pool_frees_as_much_or_time_passes() {
        let t0 = Instant::now();
        let mut m = MaxMemory::default();
        assert_eq!(m.effective_used(1000, 0, t0), 1000);
        m.credit(300, t0);
        // Nothing freed yet: the credit counts.
        assert_eq!(m.effective_used(1000, 0, t0), 700);
        // 100 freed while new writes took 150: 200 of the credit is left.
        assert_eq!(m.effective_used(1050, 100, t0), 850);
        // All freed: the credit is spent.
        assert_eq!(m.effective_used(800, 400, t0), 800);
        m.credit(500, t0);
        assert_eq!(m.effective_used(800, 400, t0 + PENDING_FOR / 2), 300);
        // An estimate never outlives PENDING_FOR.
        assert_eq!(m.effective_used(800, 400, t0 + PENDING_FOR + Duration::from_millis(1)), 800);
    }

    #[test]
    fn the_candidate_pool_keeps_the_best_sixteen_best_last() {
        let mut m = MaxMemory::default();
        for score in 0..40u64 {
            m.offer(Candidate { score: (score * 7) % 40, db: 0, key: score.to_be_bytes().to_vec() });
        }
        assert_eq!(m.candidates.len(), CANDIDATES);
        let scores: Vec<u64> = m.candidates.iter().map(|c| c.score).collect();
        assert_eq!(scores, (24..40).collect::<Vec<_>>());
        // Offering a key again replaces its entry.
        let key = m.candidates[0].key.clone();
        m.offer(Candidate { score: 100, db: 0, key: key.clone() });
        assert_eq!(m.candidates.last().map(|c| &c.key), Some(&key));
        assert_eq!(m.candidates.len(), CANDIDATES);
    }

    #[test]
    fn tenacity_bounds_a_step_as_redis_does() {
        let mut m = MaxMemory::default();
        assert_eq!(m.time_limit(), Some(Duration::from_micros(500)));
        m.tenacity = 0;
        assert_eq!(m.time_limit(), Some(Duration::from_micros(50)));
        m.tenacity = 100;
        assert_eq!(m.time_limit(), None);
    }
}
