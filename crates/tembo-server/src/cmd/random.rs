//! Random elements of a collection: SPOP, SRANDMEMBER, HRANDFIELD and
//! ZRANDMEMBER.
//!
//! A collection's elements are one key range of the engine, with no rank
//! index. A large collection is sampled by the engine ([`Db::sample`]:
//! random descents, exactly uniform, O(tree height) each), a small one
//! or a large count walked (exact too, and then cheaper). Redis's own
//! picks are only approximately uniform (its documentation says so).
//!
//! [`Db::sample`]: tembo_store::Db::sample

use std::collections::HashSet;

use rand::seq::SliceRandom;
use rand::Rng;
use tembo_store::KeyValue;

use super::args::int;
use super::CmdError;
use crate::encoding::{sub_prefix, Meta, SUB};
use crate::exec::Ctx;
use crate::keyspace::Res;

/// Collections smaller than this are walked: a walk of a few dozen
/// elements costs about what one random draw does, and cannot fail.
const DRAW_FROM: u64 = 128;
/// About what one engine draw costs, in elements walked (a draw of the
/// `cdds` engine is ~3 µs, a walk ~0.2 µs an element, on the development
/// VM): a count whose draws would cost more than walking the whole
/// collection walks instead.
const DRAW_COST: u64 = 16;
/// The engine descents a request may spend, shared by all its rounds:
/// this many per element asked for (about ten are expected; see
/// `tembo_pmem::sample`)...
const ATTEMPTS_PER_DRAW: usize = 32;
/// ...plus one per this many elements of the collection, one descent
/// costing about what walking a few elements does. A large collection
/// whose draws fail often (its key range a sliver of the tree nodes it
/// spans) is then still drawn, not walked (a walk of a million elements
/// takes 0.2 s), and a request whose budget runs out has spent about
/// what walking at once would have, besides its draws.
const ATTEMPT_COST: u64 = 16;
/// Fewest descents allowed for any request.
const MIN_ATTEMPTS: usize = 32;
/// Rounds of draws for distinct elements before walking instead.
const DISTINCT_ROUNDS: usize = 16;

/// How many random elements, and whether they must be distinct.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum RandomCount {
    /// Up to this many distinct elements (a positive count).
    Distinct(u64),
    /// Exactly this many, possibly repeated (a negative count).
    Repeat(u64),
}

/// The most elements a negative count may ask for. Redis has no limit (a
/// huge count makes it build a reply until memory runs out); we refuse.
const MAX_REPEAT: u64 = 1 << 24;

impl RandomCount {
    /// SRANDMEMBER / HRANDFIELD's count argument.
    pub(super) fn parse(arg: &[u8]) -> Res<RandomCount> {
        let n = int(arg)?;
        if n == i64::MIN {
            return Err(CmdError::err(
                "value is out of range, value must between -9223372036854775807 and 9223372036854775807",
            ));
        }
        Ok(if n >= 0 { RandomCount::Distinct(n as u64) } else { RandomCount::Repeat(n.unsigned_abs()) })
    }

    /// Whether the count is beyond ±LONG_MAX/2 (refused with WITHVALUES).
    pub(super) fn out_of_half_range(self) -> bool {
        let (RandomCount::Distinct(n) | RandomCount::Repeat(n)) = self;
        n > (i64::MAX / 2) as u64
    }
}

/// Random elements (field, value) of the collection `key` (which exists,
/// with metadata `meta`), in random order: drawn by the engine
/// ([`draw_elements`]) when that is cheaper than a walk and succeeds,
/// walked to ([`walk_to_ranks`]) otherwise.
pub(super) fn random_elements(
    cx: &mut Ctx,
    key: &[u8],
    meta: &Meta,
    count: RandomCount,
) -> Res<Vec<(Vec<u8>, Vec<u8>)>> {
    let n = meta.size;
    let wanted = match count {
        _ if n == 0 => return Ok(Vec::new()),
        RandomCount::Distinct(0) | RandomCount::Repeat(0) => return Ok(Vec::new()),
        RandomCount::Distinct(k) if k >= n => return cx.sub_all(key, meta),
        RandomCount::Repeat(k) if k > MAX_REPEAT => return Err(CmdError::err("value is out of range")),
        RandomCount::Distinct(k) | RandomCount::Repeat(k) => k,
    };
    if n >= DRAW_FROM && wanted.saturating_mul(DRAW_COST) < n {
        if let Some(out) = draw_elements(cx, key, meta, count)? {
            return Ok(out);
        }
    }
    walk_to_ranks(cx, key, meta, count)
}

/// [`random_elements`] by engine draws ([`Store::sample`], exactly
/// uniform): `None` when they fail (a collection that fills little of
/// the tree nodes it spans, or a count above what it holds), for the
/// caller to walk instead. Distinct elements are drawn until enough
/// differ; the callers ask for few of many, so repeats are rare.
///
/// [`Store::sample`]: crate::store::Store::sample
fn draw_elements(cx: &mut Ctx, key: &[u8], meta: &Meta, count: RandomCount) -> Res<Option<Vec<KeyValue>>> {
    let prefix = sub_prefix(SUB, cx.db(), key, meta.version);
    let mut rng = rand::thread_rng();
    let (wanted, distinct) = match count {
        RandomCount::Distinct(k) => (k as usize, true),
        RandomCount::Repeat(k) => (k as usize, false),
    };
    let mut out = Vec::with_capacity(wanted);
    let mut seen = HashSet::new();
    let walk = usize::try_from(meta.size / ATTEMPT_COST).unwrap_or(usize::MAX);
    let mut budget = wanted.saturating_mul(ATTEMPTS_PER_DRAW).saturating_add(walk).max(MIN_ATTEMPTS);
    for _ in 0..DISTINCT_ROUNDS {
        let need = wanted - out.len();
        let Some(got) = cx.st.store.sample(&prefix, meta.version, meta.size, need, &mut budget, &mut rng)? else {
            return Ok(None);
        };
        for (k, v) in got {
            let field = k[prefix.len()..].to_vec();
            if !distinct || seen.insert(field.clone()) {
                out.push((field, v));
            }
        }
        if out.len() == wanted {
            return Ok(Some(out));
        }
    }
    Ok(None)
}

/// [`random_elements`] by walking: the store keeps no rank index, so
/// reaching the element of rank r means walking r elements from one end.
/// All the ranks are drawn first (distinct ones with Floyd-style
/// sampling, O(count)), sorted, and the elements fetched in ONE walk from
/// whichever end is nearer to the ranks drawn: O(count + min(max rank +
/// 1, size - min rank)) elements visited, about size/4 on average for a
/// single pick and at most size for any count.
fn walk_to_ranks(cx: &mut Ctx, key: &[u8], meta: &Meta, count: RandomCount) -> Res<Vec<(Vec<u8>, Vec<u8>)>> {
    let n = meta.size;
    let mut rng = rand::thread_rng();
    let mut ranks: Vec<u64> = match count {
        RandomCount::Distinct(k) => {
            rand::seq::index::sample(&mut rng, n as usize, k as usize).into_iter().map(|i| i as u64).collect()
        }
        RandomCount::Repeat(k) => (0..k).map(|_| rng.gen_range(0..n)).collect(),
    };
    ranks.sort_unstable();
    let (lo, hi) = (ranks[0], ranks[ranks.len() - 1]);
    let forward = hi < n - lo;
    if !forward {
        ranks.reverse();
    }
    let prefix = sub_prefix(SUB, cx.db(), key, meta.version);
    let mut out = Vec::with_capacity(ranks.len());
    let mut next = 0;
    for (i, kv) in cx.st.store.scan_prefix(&prefix, !forward).enumerate() {
        if next == ranks.len() {
            break;
        }
        let (k, v) = kv?;
        let rank = if forward { i as u64 } else { n - 1 - i as u64 };
        if ranks[next] != rank {
            continue;
        }
        let field = k[prefix.len()..].to_vec();
        while next < ranks.len() && ranks[next] == rank {
            out.push((field.clone(), v.clone()));
            next += 1;
        }
    }
    out.shuffle(&mut rng);
    Ok(out)
}
