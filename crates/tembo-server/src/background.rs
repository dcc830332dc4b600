//! The executor's background work between commands: the active expire
//! cycle and the reclaimer of deleted collections' elements. Both write
//! through the store's overlay and are committed by the caller.

use std::ops::Bound;

use tembo_store::DbError;

use crate::encoding::{
    be64, meta_key, meta_prefix, meta_user_key, split_sub, sub_prefix, Meta, EXPIRES, GARBAGE, SUB, ZIDX,
};
use crate::exec::State;

/// Deletes up to `limit` keys whose expiry time is at or before `now`;
/// returns how many, and whether more may be due (the limit was reached).
pub fn expire_cycle(st: &mut State, now: u64, limit: usize) -> Result<(u64, bool), DbError> {
    let mut hi = vec![EXPIRES];
    hi.extend_from_slice(&(now + 1).to_be_bytes());
    let due: Vec<Vec<u8>> = st
        .store
        .scan(Bound::Included(vec![EXPIRES]), Bound::Excluded(hi), false)
        .take(limit)
        .map(|kv| kv.map(|(k, _)| k))
        .collect::<Result<_, _>>()?;
    let more = due.len() == limit;
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
        if db as usize >= st.keys.len() {
            continue;
        }
        // Only a key of the current generation can be due: older ones were
        // flushed (the sweep deletes them), and this entry is then stale.
        let mk = meta_key(db, st.gen(db), key);
        let Some(raw) = st.store.get(&mk)? else { continue };
        // The index entry may be stale (the expiry changed in a group not yet
        // reflected here); only a matching expiry deletes the key.
        match Meta::decode_head(&raw) {
            Some(m) if m.expire_at == at => {
                st.store.delete(mk);
                if m.version != 0 {
                    // Cannot fail: the record is no longer than the collection's element keys.
                    let _ = st.store.put(sub_prefix(GARBAGE, db, key, m.version), Vec::new());
                }
                st.pending_counts[db as usize].0 -= 1;
                st.pending_counts[db as usize].1 -= 1;
            }
            // A record that does not decode but still holds this expiry
            // time expires as it would have.
            None if raw.get(1..9).map(be64) == Some(at) => st.drop_damaged(db, key, &raw)?,
            _ => continue,
        }
        let seen = st.logical(db);
        st.touch(seen, key, None);
        st.notes.clear();
        crate::notify::send_from(st, None, crate::notify::EXPIRED, "expired", seen, key);
        n += 1;
    }
    Ok((n, more))
}

/// Deletes up to `budget` metadata keys of flushed generations (FLUSHDB and
/// FLUSHALL only start a new generation), recording each collection's
/// elements for [`reclaim_step`]; returns how many keys.
pub fn sweep_flushed(st: &mut State, budget: usize) -> Result<u64, DbError> {
    let mut swept = 0u64;
    for db in 0..st.sweeping.len() {
        if !st.sweeping[db] || swept as usize >= budget {
            continue;
        }
        // The older generations are exactly the keys before the current one's prefix.
        let (lo, hi) = (meta_prefix(db as u8, 0), meta_prefix(db as u8, st.gens[db]));
        let (n, more) = drop_metas(st, db as u8, lo, Bound::Excluded(hi), budget - swept as usize)?;
        st.sweeping[db] = more;
        swept += n;
    }
    Ok(swept)
}

/// Deletes up to `limit` metadata keys of database `db` from `lo` up to
/// `hi` (with no count or WATCH bookkeeping: the keys are already invisible),
/// recording each collection for [`reclaim_step`]; returns how many, and
/// whether more remain.
pub fn drop_metas(
    st: &mut State,
    db: u8,
    lo: Vec<u8>,
    hi: Bound<Vec<u8>>,
    limit: usize,
) -> Result<(u64, bool), DbError> {
    let doomed: Vec<(Vec<u8>, Vec<u8>)> =
        st.store.scan(Bound::Included(lo), hi, false).take(limit.saturating_add(1)).collect::<Result<_, _>>()?;
    let more = doomed.len() > limit;
    let mut n = 0;
    for (k, v) in doomed.into_iter().take(limit) {
        if let Some(user_key) = meta_user_key(&k) {
            let version = match Meta::decode_head(&v) {
                Some(m) => Some(m.version).filter(|&v| v != 0),
                None => st.salvaged_version(db, user_key, &k, &v)?,
            };
            if let Some(version) = version {
                // Cannot fail: the record is no longer than the collection's element keys.
                let _ = st.store.put(sub_prefix(GARBAGE, db, user_key, version), Vec::new());
            }
        }
        st.store.delete(k);
        n += 1;
    }
    Ok((n, more))
}

/// Deletes up to `budget` elements of dropped collections (those recorded
/// under `R`), and each `R` record once its collection has no element left;
/// returns how many elements, and how many records.
pub fn reclaim_step(st: &mut State, budget: usize) -> Result<(u64, u64), DbError> {
    let records: Vec<Vec<u8>> =
        st.store.scan_prefix(&[GARBAGE], false).take(64).map(|kv| kv.map(|(k, _)| k)).collect::<Result<_, _>>()?;
    let (mut deleted, mut records_done) = (0u64, 0u64);
    for rec in records {
        let Some((db, key, version, _)) = split_sub(&rec) else {
            st.store.delete(rec);
            records_done += 1;
            continue;
        };
        let mut done = true;
        for tag in [SUB, ZIDX] {
            let prefix = sub_prefix(tag, db, key, version);
            let left = budget.saturating_sub(deleted as usize);
            let doomed: Vec<Vec<u8>> = st
                .store
                .scan_prefix(&prefix, false)
                .take(left + 1)
                .map(|kv| kv.map(|(k, _)| k))
                .collect::<Result<_, _>>()?;
            if doomed.len() > left {
                done = false;
            }
            for k in doomed.into_iter().take(left) {
                st.store.delete(k);
                deleted += 1;
            }
        }
        if !done {
            break;
        }
        st.store.delete(rec);
        records_done += 1;
    }
    Ok((deleted, records_done))
}
