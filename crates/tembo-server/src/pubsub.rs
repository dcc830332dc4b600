//! Who is subscribed to what, and the output-buffer limit that protects the
//! server from a subscriber that does not read.
//!
//! Each client keeps its own channels and patterns (so that a rolled-back
//! commit group restores them with the client); this index maps the other
//! way, channel or pattern to subscribers, for PUBLISH and PUBSUB. Messages
//! are not persistent, as in Redis: a PUBLISH queues the message for every
//! subscriber connected now and forgets it.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use crate::client::Client;

/// Channel and pattern subscriptions, by name.
#[derive(Debug, Default)]
pub struct Index {
    channels: HashMap<Vec<u8>, Vec<u64>>,
    patterns: HashMap<Vec<u8>, Vec<u64>>,
    /// Shard channels (SSUBSCRIBE): a namespace of their own.
    shards: HashMap<Vec<u8>, Vec<u64>>,
}

fn add(map: &mut HashMap<Vec<u8>, Vec<u64>>, name: &[u8], id: u64) {
    let ids = map.entry(name.to_vec()).or_default();
    if !ids.contains(&id) {
        ids.push(id);
    }
}

fn del(map: &mut HashMap<Vec<u8>, Vec<u64>>, name: &[u8], id: u64) {
    if let Some(ids) = map.get_mut(name) {
        ids.retain(|&c| c != id);
        if ids.is_empty() {
            map.remove(name);
        }
    }
}

/// The names in `map` matching glob `pattern` (all if `None`), sorted.
fn matching(map: &HashMap<Vec<u8>, Vec<u64>>, pattern: Option<&[u8]>) -> Vec<Vec<u8>> {
    let mut out: Vec<Vec<u8>> =
        map.keys().filter(|c| pattern.map_or(true, |p| crate::cmd::args::glob(p, c, false))).cloned().collect();
    out.sort();
    out
}

impl Index {
    /// Client `id` subscribes to `channel`.
    pub fn subscribe(&mut self, id: u64, channel: &[u8]) {
        add(&mut self.channels, channel, id);
    }

    /// Client `id` unsubscribes from `channel`.
    pub fn unsubscribe(&mut self, id: u64, channel: &[u8]) {
        del(&mut self.channels, channel, id);
    }

    /// Client `id` subscribes to `pattern`.
    pub fn psubscribe(&mut self, id: u64, pattern: &[u8]) {
        add(&mut self.patterns, pattern, id);
    }

    /// Client `id` unsubscribes from `pattern`.
    pub fn punsubscribe(&mut self, id: u64, pattern: &[u8]) {
        del(&mut self.patterns, pattern, id);
    }

    /// Client `id` subscribes to shard channel `channel`.
    pub fn ssubscribe(&mut self, id: u64, channel: &[u8]) {
        add(&mut self.shards, channel, id);
    }

    /// Client `id` unsubscribes from shard channel `channel`.
    pub fn sunsubscribe(&mut self, id: u64, channel: &[u8]) {
        del(&mut self.shards, channel, id);
    }

    /// Subscribers of shard channel `channel`.
    pub fn shard_subscribers(&self, channel: &[u8]) -> &[u64] {
        self.shards.get(channel).map_or(&[], |v| v.as_slice())
    }

    /// Shard channels with subscribers.
    pub fn shard_count(&self) -> usize {
        self.shards.len()
    }

    /// Active shard channels matching `pattern` (all if `None`).
    pub fn shard_channels(&self, pattern: Option<&[u8]>) -> Vec<Vec<u8>> {
        matching(&self.shards, pattern)
    }

    /// Forgets every subscription of client `c`.
    pub fn remove_client(&mut self, c: &Client) {
        for ch in &c.shard_channels {
            del(&mut self.shards, ch, c.id);
        }
        for ch in &c.channels {
            del(&mut self.channels, ch, c.id);
        }
        for p in &c.patterns {
            del(&mut self.patterns, p, c.id);
        }
    }

    /// Subscribers of `channel`.
    pub fn subscribers(&self, channel: &[u8]) -> &[u64] {
        self.channels.get(channel).map_or(&[], |v| v.as_slice())
    }

    /// (pattern, subscribers) of every pattern matching `channel`.
    pub fn matching_patterns(&self, channel: &[u8]) -> Vec<(Vec<u8>, Vec<u64>)> {
        self.patterns
            .iter()
            .filter(|(p, _)| crate::cmd::args::glob(p, channel, false))
            .map(|(p, ids)| (p.clone(), ids.clone()))
            .collect()
    }

    /// Channels with at least one subscriber.
    pub fn channel_count(&self) -> usize {
        self.channels.len()
    }

    /// Distinct patterns with at least one subscriber (PUBSUB NUMPAT).
    pub fn pattern_count(&self) -> usize {
        self.patterns.len()
    }

    /// Active channels matching `pattern` (all if `None`).
    pub fn channels(&self, pattern: Option<&[u8]>) -> Vec<Vec<u8>> {
        matching(&self.channels, pattern)
    }

    /// Rebuilds the index from the clients' own subscriptions.
    pub fn rebuild<'a>(&mut self, clients: impl Iterator<Item = &'a Client>) {
        *self = Index::default();
        for c in clients {
            for ch in &c.channels {
                add(&mut self.channels, ch, c.id);
            }
            for p in &c.patterns {
                add(&mut self.patterns, p, c.id);
            }
            for ch in &c.shard_channels {
                add(&mut self.shards, ch, c.id);
            }
        }
    }
}

/// Whether subscriber `c`, with `pending` bytes not yet written, is past the
/// pub/sub output-buffer limits at `now` (updates its soft-limit clock).
pub fn over_limit(c: &mut Client, pending: usize, now: Instant, limit: &crate::cmd::config_compat::Limit) -> bool {
    let pending = pending as u64;
    if limit.hard > 0 && pending > limit.hard {
        return true;
    }
    if limit.soft == 0 || pending <= limit.soft {
        c.soft_limit_since = None;
        return false;
    }
    let since = *c.soft_limit_since.get_or_insert(now);
    now.duration_since(since) >= Duration::from_secs(limit.soft_secs)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn client(id: u64) -> Client {
        let (tx, _rx) = tokio::sync::mpsc::unbounded_channel();
        Client::new(id, String::new(), String::new(), true, tx)
    }

    #[test]
    fn index_tracks_subscribers() {
        let mut ix = Index::default();
        ix.subscribe(1, b"news");
        ix.subscribe(2, b"news");
        ix.subscribe(1, b"news");
        ix.psubscribe(3, b"n*");
        ix.psubscribe(3, b"x?");
        assert_eq!(ix.subscribers(b"news"), &[1, 2]);
        assert_eq!(ix.channel_count(), 1);
        assert_eq!(ix.pattern_count(), 2);
        let m = ix.matching_patterns(b"news");
        assert_eq!(m, vec![(b"n*".to_vec(), vec![3])]);
        assert!(ix.matching_patterns(b"xyz").is_empty());
        assert_eq!(ix.channels(Some(b"ne[w]s")), vec![b"news".to_vec()]);
        assert!(ix.channels(Some(b"z*")).is_empty());
        ix.unsubscribe(1, b"news");
        ix.unsubscribe(2, b"news");
        assert_eq!(ix.channel_count(), 0);
        assert!(ix.subscribers(b"news").is_empty());
    }

    #[test]
    fn rebuild_and_remove_client() {
        let mut a = client(1);
        a.channels.insert(b"c1".to_vec());
        a.patterns.insert(b"p*".to_vec());
        let mut b = client(2);
        b.channels.insert(b"c1".to_vec());
        let mut ix = Index::default();
        ix.subscribe(9, b"stale");
        ix.rebuild([&a, &b].into_iter());
        assert!(ix.subscribers(b"stale").is_empty());
        assert_eq!(ix.subscribers(b"c1").len(), 2);
        ix.remove_client(&a);
        assert_eq!(ix.subscribers(b"c1"), &[2]);
        assert_eq!(ix.pattern_count(), 0);
    }

    #[test]
    fn output_limits() {
        // Redis's pub/sub defaults: 32 MiB at once, 8 MiB for 60 s.
        let lim = crate::cmd::OutputLimits::default().pubsub;
        const HARD_LIMIT: usize = 32 << 20;
        const SOFT_LIMIT: usize = 8 << 20;
        let mut c = client(1);
        let t0 = Instant::now();
        assert!(!over_limit(&mut c, SOFT_LIMIT, t0, &lim));
        assert!(over_limit(&mut c, HARD_LIMIT + 1, t0, &lim));
        assert!(!over_limit(&mut c, SOFT_LIMIT + 1, t0, &lim));
        assert!(!over_limit(&mut c, SOFT_LIMIT + 1, t0 + Duration::from_secs(59), &lim));
        assert!(over_limit(&mut c, SOFT_LIMIT + 1, t0 + Duration::from_secs(60), &lim));
        // Dropping under the soft limit restarts the clock.
        assert!(!over_limit(&mut c, 10, t0 + Duration::from_secs(61), &lim));
        assert!(!over_limit(&mut c, SOFT_LIMIT + 1, t0 + Duration::from_secs(62), &lim));
        assert!(!over_limit(&mut c, SOFT_LIMIT + 1, t0 + Duration::from_secs(100), &lim));
        // Zero turns a limit off.
        let off = crate::cmd::config_compat::Limit { hard: 0, soft: 0, soft_secs: 0 };
        assert!(!over_limit(&mut c, usize::MAX / 2, t0, &off));
    }
}
