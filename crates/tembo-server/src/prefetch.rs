//! Warming the CPU cache for the keys a group of requests is about to use.
//!
//! Under pipelining a group holds hundreds of requests on random keys, and
//! each one's metadata lookup waits for three or four cache misses in the
//! engine's tree before the next can start. Ahead of the requests it is
//! about to run, the executor hands the engine the metadata keys of the
//! next few dozen ([`tembo_store::Db::prefetch`]), which walks their paths
//! together so that the misses overlap; the lookups (and the commit's puts
//! of the same keys) then find their lines in the cache.
//!
//! A hint only: it reads the client's database and each command's first
//! key as the request stands now (a SELECT or SWAPDB earlier in the group
//! may change what the request will really touch; then the hint is just
//! wasted), and nothing it does changes a reply.

use crate::cmd;
use crate::encoding;
use crate::exec::{Msg, State};

/// Keys per prefetch: enough for the misses to overlap, few enough that
/// the first key's lines are still cached when its request runs.
const KEYS_AHEAD: usize = 32;
/// Most keys taken from one message: a client that pipelines thousands of
/// requests at once (`redis-cli --pipe`) runs them in one go, and walking
/// all of their paths first would only evict the first ones again.
const KEYS_PER_MESSAGE: usize = 4 * KEYS_AHEAD;

impl State {
    /// Prefetches the metadata keys of the requests in `group[from..]`,
    /// stopping after the message that brings the count to
    /// [`KEYS_AHEAD`]; returns the index of the first message not covered.
    pub(crate) fn prefetch_ahead(&self, group: &[Msg], from: usize) -> usize {
        if self.store.db().engine() != tembo_store::Engine::Cdds {
            return group.len(); // the in-place engines ignore the hint
        }
        let mut keys = Vec::with_capacity(KEYS_AHEAD);
        let mut next = from;
        while next < group.len() && keys.len() < KEYS_AHEAD {
            if let Msg::Requests { id, reqs, .. } = &group[next] {
                if let Some(c) = self.clients.get(id) {
                    let db = self.phys(c.db);
                    let gen = self.gen(db);
                    for req in reqs.iter().take(KEYS_PER_MESSAGE) {
                        if let Some(key) = first_key(req) {
                            keys.push(encoding::meta_key(db, gen, key));
                        }
                    }
                }
            }
            next += 1;
        }
        // LPUSH, HSET and the like run on a few hot keys: one walk each.
        keys.sort_unstable();
        keys.dedup();
        if keys.len() > 1 {
            self.store.db().prefetch(keys.iter().map(Vec::as_slice));
        }
        next
    }
}

/// The first key a request names by its command's key positions, if any.
fn first_key(req: &[Vec<u8>]) -> Option<&[u8]> {
    let spec = cmd::spec(req.first()?)?;
    let first = usize::try_from(spec.keys.0).ok().filter(|&f| f > 0)?;
    req.get(first).map(Vec::as_slice)
}
