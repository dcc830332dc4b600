//! Client-side caching support (CLIENT TRACKING), as Redis 7.0 does it.
//!
//! In the default mode the server remembers which keys each tracking client
//! read (the keys of its read-only commands, or of the script that ran a
//! read-only command) and, when one of them changes, sends that client one
//! invalidation and forgets the pair. In BCAST mode clients name key
//! prefixes instead and hear about every change under them, batched per
//! prefix. Invalidations go to the client itself as a RESP3 push
//! (`invalidate [keys]`), or to another connection (`REDIRECT id`): a RESP3
//! push, or for RESP2 a message on the `__redis__:invalidate` channel if that
//! connection is subscribed. FLUSHDB / FLUSHALL invalidate everything (a null
//! key list). A redirect to a closed connection is reported once, as a
//! `tracking-redir-broken` push.
//!
//! Changes are noted while commands run and the messages are made when the
//! group's output leaves, after its commit (`before_send`): a client never
//! drops a cached value before the change is durable, its own invalidations
//! follow the replies of the commands that caused them, and a group whose
//! commit fails and is re-run notes its changes again. Keys are tracked by
//! name alone, across databases, as in Redis. The table is in memory only:
//! after a restart no client is tracking.

use std::collections::{BTreeMap, HashMap, HashSet};

use crate::client::{Client, Out};
use crate::exec::State;
use crate::resp::Reply;

/// The channel invalidations are published on for RESP2 redirect targets.
pub const CHANNEL: &str = "__redis__:invalidate";

/// One client's CLIENT TRACKING settings.
#[derive(Clone, Debug, Default)]
pub struct ClientTracking {
    /// Tracking is on.
    pub on: bool,
    /// BCAST mode (prefixes, not read keys).
    pub bcast: bool,
    /// The connection invalidations go to; 0 = this one.
    pub redirect: u64,
    /// BCAST prefixes.
    pub prefixes: Vec<Vec<u8>>,
    /// OPTIN: only keys read right after CLIENT CACHING YES are tracked.
    pub optin: bool,
    /// OPTOUT: keys read right after CLIENT CACHING NO are not tracked.
    pub optout: bool,
    /// NOLOOP: no invalidations for the client's own changes.
    pub noloop: bool,
    /// CLIENT CACHING YES|NO, for the next command.
    pub caching: Option<bool>,
    /// The redirect connection was found closed.
    pub broken_redirect: bool,
}

/// Keys changed under one BCAST prefix since the last send, with who changed
/// them (for NOLOOP; `None` when several clients or the server did).
#[derive(Debug, Default)]
struct Pending {
    order: Vec<Vec<u8>>,
    origin: HashMap<Vec<u8>, Option<u64>>,
}

impl Pending {
    fn note(&mut self, key: &[u8], origin: Option<u64>) {
        match self.origin.get_mut(key) {
            Some(o) if *o != origin => *o = None,
            Some(_) => {}
            None => {
                self.order.push(key.to_vec());
                self.origin.insert(key.to_vec(), origin);
            }
        }
    }

    /// Whether client `id` changed `key` itself, alone (NOLOOP skips it).
    fn own(&self, key: &[u8], id: u64) -> bool {
        self.origin.get(key) == Some(&Some(id))
    }
}

/// The server's tracking table.
#[derive(Debug, Default)]
pub struct Table {
    /// Read key → the default-mode clients that read it.
    keys: HashMap<Vec<u8>, HashSet<u64>>,
    /// BCAST prefix → its clients.
    prefixes: BTreeMap<Vec<u8>, HashSet<u64>>,
    /// Keys changed by the group so far (default mode).
    changed: Pending,
    /// Keys changed by the group so far, per BCAST prefix.
    pending: BTreeMap<Vec<u8>, Pending>,
    /// The group flushed a database.
    flushed: bool,
}

impl Table {
    /// Nothing is tracked: writes need not look here.
    pub fn is_idle(&self) -> bool {
        self.keys.is_empty() && self.prefixes.is_empty()
    }

    /// INFO's `tracking_total_keys`, `tracking_total_items`,
    /// `tracking_total_prefixes`.
    pub fn totals(&self) -> (usize, usize, usize) {
        (self.keys.len(), self.keys.values().map(HashSet::len).sum(), self.prefixes.len())
    }

    /// Adds a BCAST client's prefix.
    pub fn add_prefix(&mut self, prefix: Vec<u8>, id: u64) {
        self.prefixes.entry(prefix).or_default().insert(id);
    }

    /// Forgets the changes noted by a group whose writes were discarded.
    pub fn discard_pending(&mut self) {
        self.changed = Pending::default();
        self.pending.clear();
        self.flushed = false;
    }

    /// Removes a client from its BCAST prefixes (tracking off, disconnect).
    pub fn forget_prefixes(&mut self, c: &ClientTracking, id: u64) {
        for p in &c.prefixes {
            if let Some(ids) = self.prefixes.get_mut(p) {
                ids.remove(&id);
                if ids.is_empty() {
                    self.prefixes.remove(p);
                    self.pending.remove(p);
                }
            }
        }
    }
}

/// After a read-only command of a default-mode tracking client: remembers
/// `keys` for it, unless OPTIN/OPTOUT and CLIENT CACHING say otherwise.
pub fn remember(st: &mut State, c: &Client, keys: &[&[u8]]) {
    let t = &c.tracking;
    if !t.on || t.bcast || keys.is_empty() {
        return;
    }
    if (t.optin && t.caching != Some(true)) || (t.optout && t.caching == Some(false)) {
        return;
    }
    for k in keys {
        st.tracking.keys.entry(k.to_vec()).or_default().insert(c.id);
    }
}

/// `key` changed (or is gone); `current` is the client whose command
/// changed it, if a client's. Noted for [`before_send`].
pub fn modified(st: &mut State, key: &[u8], current: Option<&Client>) {
    let origin = current.map(|c| c.id);
    let t = &mut st.tracking;
    if t.keys.contains_key(key) {
        t.changed.note(key, origin);
    }
    if t.prefixes.is_empty() {
        return;
    }
    let matching: Vec<Vec<u8>> = t.prefixes.keys().filter(|p| key.starts_with(p)).cloned().collect();
    for p in matching {
        t.pending.entry(p).or_default().note(key, origin);
    }
}

/// `key` was evicted before a command runs: as Redis, its readers are told
/// at once, so a client whose command made room reads the invalidation
/// before that command's reply (`current`: that client, which is not among
/// the executor's clients meanwhile). BCAST prefixes are told with the
/// group's other changes.
pub fn evicted(st: &mut State, key: &[u8], mut current: Option<&mut Client>) {
    if st.tracking.keys.contains_key(key) {
        let mut ids: Vec<u64> = st.tracking.keys.remove(key).into_iter().flatten().collect();
        ids.sort_unstable();
        for id in ids {
            let Some(c) = current.as_deref_mut().filter(|c| c.id == id) else {
                if st.clients.get(&id).is_some_and(|c| c.tracking.on && !c.tracking.bcast) {
                    send(st, id, Some(&[key.to_vec()]));
                }
                continue;
            };
            // As Redis: a NOLOOP client is not told of what its own
            // command's eviction removed.
            if !c.tracking.on || c.tracking.bcast || c.tracking.noloop {
                continue;
            }
            if c.tracking.redirect == 0 && c.proto >= 3 {
                let list = Reply::Array(vec![Reply::bulk(key)]);
                Reply::Push(vec![Reply::bulk("invalidate"), list]).encode(c.proto, &mut c.pushbuf);
            } else if c.tracking.redirect != 0 {
                // Told through its redirect target with the group's changes.
                st.tracking.keys.entry(key.to_vec()).or_default().insert(id);
                st.tracking.changed.note(key, None);
            }
        }
    }
    if !st.tracking.prefixes.is_empty() {
        let t = &mut st.tracking;
        let matching: Vec<Vec<u8>> = t.prefixes.keys().filter(|p| key.starts_with(p)).cloned().collect();
        for p in matching {
            t.pending.entry(p).or_default().note(key, None);
        }
    }
}

/// FLUSHDB / FLUSHALL: every tracking client is to be told to drop
/// everything (a null key list), and the table of read keys emptied.
pub fn flushed(st: &mut State) {
    st.tracking.flushed = true;
}

/// Before a group's output leaves, after its commit: the invalidations its
/// changes call for, then keys evicted from a table over
/// `tracking-table-max-keys`.
pub fn before_send(st: &mut State) {
    if std::mem::take(&mut st.tracking.flushed) {
        let mut ids: Vec<u64> = st.clients.values().filter(|c| c.tracking.on).map(|c| c.id).collect();
        ids.sort_unstable();
        for id in ids {
            send(st, id, None);
        }
        st.tracking.keys.clear();
    }
    let changed = std::mem::take(&mut st.tracking.changed);
    for key in &changed.order {
        invalidate(st, key, |id| changed.own(key, id));
    }
    let pending = std::mem::take(&mut st.tracking.pending);
    for (prefix, p) in pending {
        let Some(ids) = st.tracking.prefixes.get(&prefix) else { continue };
        let mut ids: Vec<u64> = ids.iter().copied().collect();
        ids.sort_unstable();
        for id in ids {
            let Some(noloop) = st.clients.get(&id).map(|c| c.tracking.noloop) else { continue };
            let keys: Vec<Vec<u8>> = p.order.iter().filter(|k| !(noloop && p.own(k, id))).cloned().collect();
            if !keys.is_empty() {
                send(st, id, Some(&keys));
            }
        }
    }
    let max = crate::cmd::inert_value(&st.inert, "tracking-table-max-keys").and_then(|v| v.parse::<usize>().ok());
    if let Some(max) = max.filter(|&m| m > 0) {
        while st.tracking.keys.len() > max {
            let Some(key) = st.tracking.keys.keys().next().cloned() else { break };
            invalidate(st, &key, |_| false);
        }
    }
}

/// Sends the default-mode clients that read `key` its invalidation and
/// forgets them; `own(id)`: client `id` made the change itself.
fn invalidate(st: &mut State, key: &[u8], own: impl Fn(u64) -> bool) {
    let Some(ids) = st.tracking.keys.remove(key) else { return };
    let mut ids: Vec<u64> = ids.into_iter().collect();
    ids.sort_unstable();
    for id in ids {
        let Some(t) = st.clients.get(&id).map(|c| &c.tracking) else { continue };
        // A client that turned tracking off, or switched to BCAST, since it
        // read the key is not told (its entries are dropped lazily).
        if !t.on || t.bcast || (t.noloop && own(id)) {
            continue;
        }
        send(st, id, Some(&[key.to_vec()]));
    }
}

/// Sends tracking client `id` an invalidation of `keys` (`None`: all), to
/// itself or its redirect target.
fn send(st: &mut State, id: u64, keys: Option<&[Vec<u8>]>) {
    let Some(c) = st.clients.get_mut(&id) else { return };
    let (redirect, proto) = (c.tracking.redirect, c.proto);
    let target = if redirect == 0 { id } else { redirect };
    let Some((target_proto, subscribed)) = st.clients.get(&target).map(|t| (t.proto, t.subscribed())) else {
        // The redirect connection is gone: said once, to RESP3 clients.
        let c = st.clients.get_mut(&id).expect("looked up above");
        if !std::mem::replace(&mut c.tracking.broken_redirect, true) && proto >= 3 {
            let msg = Reply::Push(vec![Reply::bulk("tracking-redir-broken"), Reply::Int(redirect as i64)]);
            deliver(st, id, proto, &msg);
        }
        return;
    };
    let list = keys.map_or(Reply::Nil, |k| Reply::Array(k.iter().map(Reply::bulk).collect()));
    let msg = if target_proto >= 3 {
        Reply::Push(vec![Reply::bulk("invalidate"), list])
    } else if redirect != 0 && subscribed {
        Reply::Push(vec![Reply::bulk("message"), Reply::bulk(CHANNEL), list])
    } else {
        // A RESP2 connection cannot receive a message it did not subscribe
        // for (Redis sends nothing either).
        return;
    };
    deliver(st, target, target_proto, &msg);
}

fn deliver(st: &mut State, id: u64, proto: u8, msg: &Reply) {
    let mut b = Vec::new();
    msg.encode(proto, &mut b);
    st.outbox.push((id, Out::Push(b)));
}
