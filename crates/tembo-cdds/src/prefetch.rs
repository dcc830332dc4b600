//! Prefetching the paths of many keys at once (a hint, never a read).
//!
//! A lookup in a tree of a million keys waits for three or four dependent
//! cache misses (the nodes below the cached top levels, the inner record
//! holding each child pointer, the leaf record), and the next lookup starts
//! only when it is done. A caller that knows the keys it will touch next —
//! the server's group of pipelined requests, a batch's puts — can instead
//! walk all of their paths in lockstep, a level at a time: issue every
//! key's node prefetch, then search each (by then its lines are arriving),
//! then read every child pointer. Each phase's misses overlap across the
//! keys instead of adding up, and the real lookups that follow find their
//! lines in the cache (the group-prefetching of Chen, Ailamaki, Gibbons and
//! Mowry's "Improving Hash Join Performance through Prefetching", applied
//! to a B+tree descent as in Masstree's node prefetch).
//!
//! It promises nothing about contents: it reads at a pinned version like
//! any reader (so every node and record it touches stays allocated), skips
//! a key whose node changed under it, and gives up on a key at the first
//! error. While a lazy recovery runs it does nothing (the checked read
//! path copies nodes; prefetching them would not help).

use crate::entry::{key_prefix, key_prefix_at, Entry};
use crate::node::{RawNode, NODE_BYTES};
use crate::search;
use crate::tree::TreeCore;

/// Keys walked together: enough for the misses of one level to overlap,
/// few enough that the first key's lines are still cached when it is used.
const PREFETCH_WINDOW: usize = 32;

impl TreeCore {
    /// Brings into the cache what looking up (or putting) each of `keys`
    /// will read: the nodes of its path, the inner records on the way, and
    /// the leaf records whose prefix word matches it. A hint: it changes
    /// nothing and returns nothing; errors end the walk of that key.
    pub fn prefetch_keys<'k>(&self, keys: impl IntoIterator<Item = &'k [u8]>) {
        if self.lazy_aborted().is_some() {
            return;
        }
        let keys: Vec<&[u8]> = keys.into_iter().collect();
        if keys.is_empty() {
            return;
        }
        let Ok(pin) = self.pin() else { return };
        let Ok(root) = self.meta.root(&self.pool) else { return };
        for chunk in keys.chunks(PREFETCH_WINDOW) {
            self.prefetch_chunk(chunk, root, pin.version);
        }
    }

    fn prefetch_chunk(&self, keys: &[&[u8]], root: u64, v: u64) {
        let pool = &*self.pool;
        // Keys still descending, each at the node it is to search next.
        let mut at: Vec<(usize, u64)> = (0..keys.len()).map(|i| (i, root)).collect();
        let mut inner: Vec<(usize, Entry)> = Vec::with_capacity(keys.len());
        let mut raw = RawNode::default();
        // A tree deeper than 64 levels is damaged; `get` reports it.
        for _ in 0..64 {
            if at.is_empty() {
                return;
            }
            for &(_, n) in &at {
                pool.prefetch(n, NODE_BYTES);
            }
            inner.clear();
            for &(i, n) in &at {
                if raw.load(pool, n, self.session).is_err() {
                    continue;
                }
                let key = keys[i];
                let pfx = if raw.plen() == 0 { key_prefix(key) } else { key_prefix_at(key, raw.plen()) };
                if raw.level() == 0 {
                    search::prefetch_ties(pool, &raw, pfx);
                    continue;
                }
                let e = search::child_raw(pool, &raw, n, key, pfx, v);
                // A node that changed under the search may have given a
                // torn entry: leave that key to its real lookup.
                if let (Ok(e), true) = (e, raw.validate()) {
                    pool.prefetch(e.rec, 64);
                    inner.push((i, e));
                }
            }
            at.clear();
            for (i, e) in &inner {
                if let Ok(child) = search::child_of(pool, e) {
                    at.push((*i, child));
                }
            }
        }
    }
}
