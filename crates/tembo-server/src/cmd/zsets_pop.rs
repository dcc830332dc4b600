//! Popping from the first non-empty of several sorted sets: ZMPOP, and the
//! blocking BZPOPMIN BZPOPMAX BZMPOP with the serving of the clients they
//! block.
//!
//! These are the sorted-set counterparts of LMPOP and the blocking list
//! commands, and share their machinery rather than copy it: the argument
//! parser of LMPOP ([`parse_mpop`], with MIN|MAX for LEFT|RIGHT), the
//! registry of blocked clients ([`crate::blocking`]) and the executor's
//! serving loop, which calls [`serve`] (through `blpop::serve`) for a client
//! blocked here once a write leaves a sorted set at one of its keys. The pop
//! itself is `zsets::pop_members`, the step ZPOPMIN and ZPOPMAX use.

use super::blpop::block;
use super::lists_extra::parse_mpop;
use super::zsets::{pop_members, zset};
use super::{CmdError, CmdResult, Spec};
use crate::blocking::{parse_timeout, BlockOp};
use crate::exec::Ctx;
use crate::keyspace::Res;
use crate::resp::Reply;

pub const COMMANDS: &[Spec] = &[
    Spec {
        name: "zmpop",
        arity: -4,
        flags: &["write", "movablekeys"],
        keys: (0, 0, 0),
        group: "sorted-set",
        summary: "ZMPOP numkeys key... MIN|MAX [COUNT count]: pops members from the first non-empty sorted set.",
        run: zmpop,
    },
    Spec {
        name: "bzpopmin",
        arity: -3,
        flags: &["write", "noscript", "fast", "blocking"],
        keys: (1, -2, 1),
        group: "sorted-set",
        summary: "BZPOPMIN key... timeout: pops the lowest-scored member of the first non-empty set, waiting for one.",
        run: bzpopmin,
    },
    Spec {
        name: "bzpopmax",
        arity: -3,
        flags: &["write", "noscript", "fast", "blocking"],
        keys: (1, -2, 1),
        group: "sorted-set",
        summary: "BZPOPMAX key... timeout: pops the highest-scored member of the first non-empty set, waiting for one.",
        run: bzpopmax,
    },
    Spec {
        name: "bzmpop",
        arity: -5,
        flags: &["write", "blocking", "movablekeys"],
        keys: (0, 0, 0),
        group: "sorted-set",
        summary: "BZMPOP timeout numkeys key... MIN|MAX [COUNT count]: ZMPOP, waiting for a member.",
        run: bzmpop,
    },
];

/// `MIN` (false) or `MAX` (true); anything else is a syntax error.
fn min_max(arg: &[u8]) -> Res<bool> {
    if super::args::is(arg, "min") {
        Ok(false)
    } else if super::args::is(arg, "max") {
        Ok(true)
    } else {
        Err(CmdError::syntax())
    }
}

/// ZMPOP's reply: `[key, [[member, score]...]]` in both protocols.
fn mpop_reply(key: &[u8], items: Vec<(Vec<u8>, f64)>) -> Reply {
    let pairs = items.into_iter().map(|(m, s)| Reply::Array(vec![Reply::Bulk(m), Reply::Double(s)])).collect();
    Reply::Array(vec![Reply::bulk(key), Reply::Array(pairs)])
}

/// BZPOPMIN's reply: `[key, member, score]`.
fn bzpop_reply(key: &[u8], mut items: Vec<(Vec<u8>, f64)>) -> Res<Reply> {
    let (member, score) = items.pop().ok_or_else(|| CmdError::corrupt(key))?;
    Ok(Reply::Array(vec![Reply::bulk(key), Reply::Bulk(member), Reply::Double(score)]))
}

/// Pops from the first sorted set of `keys` that exists (sorted sets are
/// never empty); `None` if none does. WRONGTYPE for a key of another type
/// before it.
fn mpop_first(cx: &mut Ctx, keys: &[Vec<u8>], max: bool, count: u64) -> Res<Option<Reply>> {
    for key in keys {
        if let Some(m) = zset(cx, key)? {
            let items = pop_members(cx, key, &m, max, count)?;
            return Ok(Some(mpop_reply(key, items)));
        }
    }
    Ok(None)
}

fn zmpop(cx: &mut Ctx, a: &[Vec<u8>]) -> CmdResult {
    let (keys, max, count) = parse_mpop(a, 1, min_max)?;
    Ok(mpop_first(cx, &keys, max, count)?.unwrap_or(Reply::NilArray))
}

fn bzpop(cx: &mut Ctx, a: &[Vec<u8>], max: bool) -> CmdResult {
    let timeout = parse_timeout(&a[a.len() - 1])?;
    let keys = &a[1..a.len() - 1];
    for key in keys {
        if let Some(m) = zset(cx, key)? {
            let items = pop_members(cx, key, &m, max, 1)?;
            return bzpop_reply(key, items);
        }
    }
    block(cx, keys.to_vec(), timeout, BlockOp::ZPop { max }, Reply::NilArray)
}

fn bzpopmin(cx: &mut Ctx, a: &[Vec<u8>]) -> CmdResult {
    bzpop(cx, a, false)
}

fn bzpopmax(cx: &mut Ctx, a: &[Vec<u8>]) -> CmdResult {
    bzpop(cx, a, true)
}

fn bzmpop(cx: &mut Ctx, a: &[Vec<u8>]) -> CmdResult {
    let (keys, max, count) = parse_mpop(a, 2, min_max)?;
    let timeout = parse_timeout(&a[1])?;
    if let Some(r) = mpop_first(cx, &keys, max, count)? {
        return Ok(r);
    }
    block(cx, keys, timeout, BlockOp::ZMPop { max, count }, Reply::NilArray)
}

/// Serves a client blocked in BZPOPMIN, BZPOPMAX or BZMPOP (`op`) from the
/// sorted set at `key`, just written. `None`: the key holds no sorted set
/// (any more, or another type): the client keeps waiting, as in Redis 7.0.
pub(super) fn serve(cx: &mut Ctx, key: &[u8], op: &BlockOp) -> Option<Reply> {
    let (max, count) = match op {
        BlockOp::ZPop { max } => (*max, None),
        BlockOp::ZMPop { max, count } => (*max, Some(*count)),
        _ => return None,
    };
    let m = zset(cx, key).ok()??;
    let served = pop_members(cx, key, &m, max, count.unwrap_or(1)).and_then(|items| match count {
        Some(_) => Ok(mpop_reply(key, items)),
        None => bzpop_reply(key, items),
    });
    Some(served.unwrap_or_else(|e| Reply::Error(e.0)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn where_words() {
        assert!(!min_max(b"min").unwrap());
        assert!(min_max(b"MAX").unwrap());
        assert!(min_max(b"left").is_err());
    }
}
