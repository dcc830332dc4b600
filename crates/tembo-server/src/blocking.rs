//! Clients blocked in BLPOP, BRPOP, BLMOVE, BRPOPLPUSH, BLMPOP, BZPOPMIN,
//! BZPOPMAX, BZMPOP, XREAD and XREADGROUP: who waits on which key, in what order, until when.
//!
//! As in Redis 7.0: a blocking command first tries every key in order; if all
//! are empty it blocks the client on all of them. A write that leaves a list
//! or a sorted set at a key clients wait on marks the key *ready*; after the
//! command that did it (after a whole EXEC), the executor serves the waiting
//! clients of each ready key in the order they blocked (FIFO), while the key
//! has elements (a client waiting for the other type is passed over and
//! waits on) — inside the same atomic step as the push, so no other command
//! sees the element, and in the same commit group, so a pop's reply leaves
//! only once the pop is durable. A client whose timeout passes gets a null
//! reply.
//!
//! This module only keeps the registry; serving is in `exec`,
//! `cmd::blpop` and `cmd::zsets_pop`.

use std::collections::{BTreeSet, HashMap, HashSet, VecDeque};
use std::time::Instant;

/// What a blocked client does when one of its keys gets elements.
#[derive(Clone, Debug, PartialEq)]
pub enum BlockOp {
    /// BLPOP (`left`) / BRPOP: reply `[key, element]`.
    Pop {
        /// Pop from the head.
        left: bool,
    },
    /// BLMOVE / BRPOPLPUSH: pop from the key, push onto `dst`, reply the element.
    Move {
        /// Destination list.
        dst: Vec<u8>,
        /// Pop from the head of the source.
        from_left: bool,
        /// Push onto the head of the destination.
        to_left: bool,
    },
    /// BLMPOP: reply `[key, [elements…]]`, at most `count` of them.
    MPop {
        /// Pop from the head.
        left: bool,
        /// Most elements to pop.
        count: u64,
    },
    /// BZPOPMIN (`max` false) / BZPOPMAX: reply `[key, member, score]`.
    ZPop {
        /// Pop the highest score.
        max: bool,
    },
    /// BZMPOP: reply `[key, [[member, score]…]]`, at most `count` of them.
    ZMPop {
        /// Pop the highest scores.
        max: bool,
        /// Most members to pop.
        count: u64,
    },
    /// XREAD: reply with the entries after the ID given for the key.
    XRead {
        /// (key, the ID after which entries are wanted), as named.
        ids: Vec<(Vec<u8>, crate::stream_id::StreamId)>,
        /// Most entries to reply.
        count: u64,
    },
    /// XREADGROUP with `>`: deliver new entries to a consumer of a group.
    XReadGroup {
        /// The group.
        group: Vec<u8>,
        /// The consumer.
        consumer: Vec<u8>,
        /// NOACK: no PEL entries.
        noack: bool,
        /// Most entries to reply.
        count: u64,
    },
}

/// What a blocking command asks the executor for when it found nothing.
#[derive(Clone, Debug, PartialEq)]
pub struct BlockReq {
    /// The keys, in the order the command named them.
    pub keys: Vec<Vec<u8>>,
    /// Milliseconds to wait; 0 = forever.
    pub timeout_ms: u64,
    /// What to do when served.
    pub op: BlockOp,
}

/// A blocked client's state (kept in its `Client`, so that a rolled-back
/// commit group restores it with the client).
#[derive(Clone, Debug)]
pub struct Blocked {
    /// The database of the keys.
    pub db: u8,
    /// The keys it waits on.
    pub keys: Vec<Vec<u8>>,
    /// What to do when served.
    pub op: BlockOp,
    /// When to give up; `None`: never.
    pub deadline: Option<Instant>,
    /// Order of blocking (FIFO among the clients of a key).
    pub seq: u64,
    /// Requests the client pipelined after the blocking command: they run
    /// once it is served.
    pub rest: Vec<Vec<Vec<u8>>>,
}

/// Who waits on what.
#[derive(Debug, Default)]
pub struct Registry {
    /// Client ids per (db, key), in the order they blocked.
    queues: HashMap<(u8, Vec<u8>), VecDeque<u64>>,
    /// (deadline, client id) of the clients with a timeout.
    deadlines: BTreeSet<(Instant, u64)>,
    /// Keys signalled since the last serve, in signal order.
    ready: VecDeque<(u8, Vec<u8>)>,
    ready_set: HashSet<(u8, Vec<u8>)>,
    /// Blocked clients.
    count: usize,
    next_seq: u64,
}

impl Registry {
    /// Blocked clients with a timeout (INFO clients_in_timeout_table).
    pub fn timed(&self) -> usize {
        self.deadlines.len()
    }

    /// Blocked clients.
    pub fn len(&self) -> usize {
        self.count
    }

    /// Whether no client is blocked.
    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// The state for a client blocking now on `req`'s keys of `db`.
    pub fn block(&mut self, id: u64, db: u8, req: BlockReq, rest: Vec<Vec<Vec<u8>>>, now: Instant) -> Blocked {
        let deadline =
            (req.timeout_ms > 0).then(|| now.checked_add(std::time::Duration::from_millis(req.timeout_ms))).flatten();
        let b = Blocked { db, keys: req.keys, op: req.op, deadline, seq: self.next_seq, rest };
        self.next_seq += 1;
        self.add(id, &b);
        b
    }

    /// Registers client `id` in the state `b`, after the clients already waiting.
    fn add(&mut self, id: u64, b: &Blocked) {
        for k in &b.keys {
            let q = self.queues.entry((b.db, k.clone())).or_default();
            // BLPOP k k: one place in the queue.
            if !q.contains(&id) {
                q.push_back(id);
            }
        }
        if let Some(d) = b.deadline {
            self.deadlines.insert((d, id));
        }
        self.count += 1;
    }

    /// Forgets client `id`, blocked in `b`.
    pub fn remove(&mut self, id: u64, b: &Blocked) {
        for k in &b.keys {
            let slot = (b.db, k.clone());
            if let Some(q) = self.queues.get_mut(&slot) {
                q.retain(|&c| c != id);
                if q.is_empty() {
                    self.queues.remove(&slot);
                }
            }
        }
        if let Some(d) = b.deadline {
            self.deadlines.remove(&(d, id));
        }
        self.count = self.count.saturating_sub(1);
    }

    /// A key was written or deleted at `key` of `db`: if clients wait on it, it is ready.
    pub fn signal(&mut self, db: u8, key: &[u8]) {
        if self.queues.is_empty() {
            return;
        }
        let slot = (db, key.to_vec());
        if self.queues.contains_key(&slot) && self.ready_set.insert(slot.clone()) {
            self.ready.push_back(slot);
        }
    }

    /// Every key of `db` clients wait on is ready (FLUSHDB, FLUSHALL: an
    /// XREADGROUP client learns its stream is gone).
    pub fn signal_db(&mut self, db: u8) {
        let mut keys: Vec<Vec<u8>> = self.queues.keys().filter(|(d, _)| *d == db).map(|(_, k)| k.clone()).collect();
        keys.sort();
        for k in keys {
            self.signal(db, &k);
        }
    }

    /// Whether a key is waiting to be served.
    pub fn has_ready(&self) -> bool {
        !self.ready.is_empty()
    }

    /// The next ready key.
    pub fn take_ready(&mut self) -> Option<(u8, Vec<u8>)> {
        let slot = self.ready.pop_front()?;
        self.ready_set.remove(&slot);
        Some(slot)
    }

    /// The clients waiting on `key` of `db`, first come first.
    pub fn waiting(&self, db: u8, key: &[u8]) -> Vec<u64> {
        self.queues.get(&(db, key.to_vec())).map_or_else(Vec::new, |q| q.iter().copied().collect())
    }

    /// The earliest deadline.
    pub fn next_deadline(&self) -> Option<Instant> {
        self.deadlines.first().map(|(d, _)| *d)
    }

    /// Clients whose deadline is at or before `now`, earliest first.
    pub fn expired(&self, now: Instant) -> Vec<u64> {
        self.deadlines.iter().take_while(|(d, _)| *d <= now).map(|(_, id)| *id).collect()
    }

    /// Rebuilds the registry from the clients' own states (after a commit
    /// group is rolled back and the clients are restored), keeping the
    /// order they blocked in.
    pub fn rebuild<'a>(&mut self, blocked: impl Iterator<Item = (u64, &'a Blocked)>) {
        let mut all: Vec<(u64, &Blocked)> = blocked.collect();
        all.sort_by_key(|(_, b)| b.seq);
        let next_seq = self.next_seq;
        *self = Registry { next_seq, ..Registry::default() };
        for (id, b) in all {
            self.add(id, b);
        }
    }
}

/// Parses a blocking command's timeout (seconds, a double) as Redis 7.0
/// does: milliseconds rounded up; 0 waits forever; a negative value or one
/// that does not fit in 64 bits of milliseconds is "negative" (Redis's
/// overflowing cast gives the same answer).
pub fn parse_timeout(arg: &[u8]) -> Result<u64, crate::cmd::CmdError> {
    use crate::cmd::CmdError;
    let secs = parse_long_double(arg).ok_or_else(|| CmdError::err("timeout is not a float or out of range"))?;
    let ms = (secs * 1000.0).ceil();
    if ms.is_nan() || !(0.0..9.223_372_036_854_775e18).contains(&ms) {
        // -0.0001 rounds up to -0: that is 0, forever, as in Redis.
        if ms == 0.0 {
            return Ok(0);
        }
        return Err(CmdError::err("timeout is negative"));
    }
    Ok(ms as u64)
}

/// `strtold` as Redis's `getLongDoubleFromObject` uses it: decimal or hex
/// (`0x10`), `inf`; no blanks, no trailing bytes, no NaN.
fn parse_long_double(arg: &[u8]) -> Option<f64> {
    let s = std::str::from_utf8(arg).ok()?;
    if s.is_empty() || s.starts_with(|c: char| c.is_ascii_whitespace()) {
        return None;
    }
    let (neg, body) = match s.as_bytes()[0] {
        b'-' => (true, &s[1..]),
        b'+' => (false, &s[1..]),
        _ => (false, s),
    };
    let lower = body.to_ascii_lowercase();
    let v = if lower == "inf" || lower == "infinity" {
        f64::INFINITY
    } else if let Some(hex) = lower.strip_prefix("0x") {
        parse_hex_float(hex)?
    } else {
        if lower.contains("nan") || lower.contains("inf") || lower.starts_with(['+', '-']) {
            return None;
        }
        lower.parse::<f64>().ok()?
    };
    Some(if neg { -v } else { v })
}

/// A C hex float body (`1f`, `1.8`, `1p4`), without its `0x`.
fn parse_hex_float(s: &str) -> Option<f64> {
    let (mant, exp) = match s.split_once('p') {
        Some((m, e)) => (m, e.parse::<i32>().ok()?),
        None => (s, 0),
    };
    let (int, frac) = mant.split_once('.').unwrap_or((mant, ""));
    if int.is_empty() && frac.is_empty() {
        return None;
    }
    let mut v = 0f64;
    for c in int.chars() {
        v = v * 16.0 + c.to_digit(16)? as f64;
    }
    let mut scale = 1.0 / 16.0;
    for c in frac.chars() {
        v += c.to_digit(16)? as f64 * scale;
        scale /= 16.0;
    }
    Some(v * 2f64.powi(exp))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn req(keys: &[&str], timeout_ms: u64) -> BlockReq {
        BlockReq {
            keys: keys.iter().map(|k| k.as_bytes().to_vec()).collect(),
            timeout_ms,
            op: BlockOp::Pop { left: true },
        }
    }

    #[test]
    fn fifo_per_key_and_removal() {
        let mut r = Registry::default();
        let now = Instant::now();
        let b1 = r.block(1, 0, req(&["a", "b"], 0), vec![], now);
        let b2 = r.block(2, 0, req(&["b"], 0), vec![], now);
        let _b3 = r.block(3, 0, req(&["a", "a"], 0), vec![], now);
        assert_eq!(r.len(), 3);
        assert_eq!(r.waiting(0, b"a"), vec![1, 3]);
        assert_eq!(r.waiting(0, b"b"), vec![1, 2]);
        assert_eq!(r.waiting(1, b"a"), Vec::<u64>::new());
        r.remove(1, &b1);
        assert_eq!(r.waiting(0, b"a"), vec![3]);
        assert_eq!(r.waiting(0, b"b"), vec![2]);
        r.remove(2, &b2);
        assert!(r.waiting(0, b"b").is_empty());
        assert_eq!(r.len(), 1);
    }

    #[test]
    fn ready_keys_dedup_and_only_when_waited_on() {
        let mut r = Registry::default();
        r.signal(0, b"x");
        assert!(!r.has_ready());
        r.block(1, 0, req(&["x", "y"], 0), vec![], Instant::now());
        r.signal(0, b"y");
        r.signal(0, b"x");
        r.signal(0, b"y");
        r.signal(1, b"x");
        assert_eq!(r.take_ready(), Some((0, b"y".to_vec())));
        assert_eq!(r.take_ready(), Some((0, b"x".to_vec())));
        assert_eq!(r.take_ready(), None);
        r.signal(0, b"y");
        assert!(r.has_ready());
    }

    #[test]
    fn deadlines_in_order() {
        let mut r = Registry::default();
        let now = Instant::now();
        r.block(1, 0, req(&["a"], 300), vec![], now);
        let b2 = r.block(2, 0, req(&["a"], 100), vec![], now);
        r.block(3, 0, req(&["a"], 0), vec![], now);
        assert_eq!(r.next_deadline(), Some(now + Duration::from_millis(100)));
        assert_eq!(r.expired(now + Duration::from_millis(150)), vec![2]);
        assert_eq!(r.expired(now + Duration::from_secs(1)), vec![2, 1]);
        r.remove(2, &b2);
        assert_eq!(r.expired(now + Duration::from_secs(1)), vec![1]);
    }

    #[test]
    fn rebuild_keeps_block_order() {
        let mut r = Registry::default();
        let now = Instant::now();
        let b1 = r.block(7, 0, req(&["k"], 0), vec![], now);
        let b2 = r.block(5, 0, req(&["k"], 50), vec![], now);
        let b3 = r.block(6, 0, req(&["k"], 0), vec![], now);
        r.signal(0, b"k");
        r.rebuild([(6, &b3), (7, &b1), (5, &b2)].into_iter());
        assert_eq!(r.waiting(0, b"k"), vec![7, 5, 6]);
        assert!(!r.has_ready());
        assert_eq!(r.len(), 3);
        assert_eq!(r.expired(now + Duration::from_secs(1)), vec![5]);
        // New blockers still come after the restored ones.
        r.block(1, 0, req(&["k"], 0), vec![], now);
        assert_eq!(r.waiting(0, b"k"), vec![7, 5, 6, 1]);
    }

    #[test]
    fn timeouts_parse_like_redis() {
        assert_eq!(parse_timeout(b"0").unwrap(), 0);
        assert_eq!(parse_timeout(b"1").unwrap(), 1000);
        assert_eq!(parse_timeout(b"0.0001").unwrap(), 1);
        assert_eq!(parse_timeout(b"1.5").unwrap(), 1500);
        assert_eq!(parse_timeout(b"-0").unwrap(), 0);
        assert_eq!(parse_timeout(b"-0.0001").unwrap(), 0);
        assert_eq!(parse_timeout(b"0x10").unwrap(), 16000);
        assert_eq!(parse_timeout(b"1e2").unwrap(), 100_000);
        let neg = "ERR timeout is negative";
        let nf = "ERR timeout is not a float or out of range";
        for (arg, want) in [
            (&b"-1"[..], neg),
            (b"inf", neg),
            (b"1e400", neg),
            (b"9223372036854775807", neg),
            (b"abc", nf),
            (b"nan", nf),
            (b" 1", nf),
            (b"1 ", nf),
            (b"1.5e3x", nf),
            (b"", nf),
        ] {
            assert_eq!(parse_timeout(arg).unwrap_err().0, want, "{:?}", String::from_utf8_lossy(arg));
        }
    }
}
