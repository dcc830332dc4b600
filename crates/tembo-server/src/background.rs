//! The executor's background work between commands: the active expire
//! cycle and the reclaimer of deleted collections' elements. Both write
//! through the store's overlay and are committed by the caller.

use std::ops::Bound;

use tembo_store::DbError;

use crate::encoding::{self, be64, meta_key, split_sub, Meta, EXPIRES, SUB, ZIDX};
use crate::exec::State;

/// Deletes up to `limit` keys whose expiry time is at or before `now`;
/// returns how many.
pub fn expire_cycle(st: &mut State, now: u64, limit: usize) -> Result<u64, DbError> {
    let mut hi = vec![EXPIRES];
    hi.extend_from_slice(&(now + 1).to_be_bytes());
    let due: Vec<Vec<u8>> = st
        .store
        .scan(Bound::Included(vec![EXPIRES]), Bound::Excluded(hi), false)
        .take(limit)
        .map(|kv| kv.map(|(k, _)| k))
        .collect::<Result<_, _>>()?;
    let mut n = 0;
    for k in due {
        if k.len() < 10 {
            st.store.delete(k);
            continue;
        }
        let at = be64(&k[1..9]);
        let db = k[9];
        let key = &k[10..];
        st.store.delete(k.clone());
        let mk = meta_key(db, key);
        let Some(raw) = st.store.get(&mk)? else { continue };
        // The index entry may be stale (the expiry changed in a group not yet
        // reflected here); only a matching expiry deletes the key.
        if Meta::decode(&raw).is_some_and(|m| m.expire_at == at) && (db as usize) < st.keys.len() {
            st.store.delete(mk);
            st.pending_counts[db as usize].0 -= 1;
            st.pending_counts[db as usize].1 -= 1;
            st.reclaim.dropped += 1;
            touch_others(st, db, key);
            n += 1;
        }
    }
    Ok(n)
}

fn touch_others(st: &mut State, db: u8, key: &[u8]) {
    if let Some(list) = st.watchers.get(&(db, key.to_vec())) {
        for id in list.clone() {
            if let Some(c) = st.clients.get_mut(&id) {
                c.watch_dirty = true;
            }
        }
    }
}

/// Visits up to `budget` collection elements from where the last step
/// stopped and deletes those whose collection version no metadata names
/// (the key was deleted, overwritten or recreated); returns how many.
pub fn reclaim_step(st: &mut State, budget: usize) -> Result<u64, DbError> {
    if st.reclaim_from.is_empty() {
        // A pass starts only if a collection was dropped since the last one began.
        if st.reclaim.dropped == st.reclaim.pass_began_at {
            return Ok(0);
        }
        st.reclaim.pass_began_at = st.reclaim.dropped;
    }
    let start = if st.reclaim_from.is_empty() { vec![SUB] } else { st.reclaim_from.clone() };
    let mut deleted = 0;
    let mut seen = 0;
    let mut live: Option<(Vec<u8>, bool)> = None; // (sub prefix, is live) of the group being visited
    let mut doomed = Vec::new();
    let mut resume = None;
    let hi = encoding::prefix_end(&[ZIDX]).map_or(Bound::Unbounded, Bound::Excluded);
    for kv in st.store.scan(Bound::Included(start), hi, false) {
        let (k, _) = kv?;
        seen += 1;
        if seen > budget {
            resume = Some(k);
            break;
        }
        if k[0] != SUB && k[0] != ZIDX {
            // Keys between the two prefixes (none today) are not ours.
            continue;
        }
        let Some((db, key, version, rest)) = split_sub(&k) else { continue };
        let group_len = k.len() - rest.len();
        let same = live.as_ref().is_some_and(|(p, _)| p.as_slice() == &k[..group_len]);
        if !same {
            let m = st.store.get(&meta_key(db, key))?.and_then(|raw| Meta::decode(&raw));
            let is_live = m.is_some_and(|m| m.kind != encoding::Kind::String && m.version == version);
            live = Some((k[..group_len].to_vec(), is_live));
        }
        if live.as_ref().is_some_and(|(_, l)| !l) {
            doomed.push(k);
        }
    }
    for k in doomed {
        st.store.delete(k);
        deleted += 1;
    }
    st.reclaim_from = resume.unwrap_or_default();
    Ok(deleted)
}
