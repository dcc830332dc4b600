//! Blocking list commands: BLPOP BRPOP BLMOVE BRPOPLPUSH BLMPOP, and
//! serving the clients they block (see [`crate::blocking`]).
//!
//! A blocking command first works like its non-blocking form on the first
//! non-empty key. When every key is empty it asks the executor to block the
//! client (`Client::block_req`); inside EXEC (and in in-process sessions)
//! it answers at once as if the timeout had passed, as Redis does in MULTI.

use super::lists_extra::{move_one, mpop_first, parse_mpop, pop_n, side};
use super::{CmdError, CmdResult, Spec};
use crate::blocking::{parse_timeout, BlockOp, BlockReq};
use crate::client::Client;
use crate::encoding::Kind;
use crate::exec::{now_ms, Ctx, State};
use crate::resp::Reply;

const BF: &[&str] = &["write", "noscript", "blocking"];

pub const COMMANDS: &[Spec] = &[
    Spec {
        name: "blpop",
        arity: -3,
        flags: BF,
        keys: (1, -2, 1),
        group: "list",
        summary: "BLPOP key... timeout: pops the first element of the first non-empty list, waiting for one.",
        run: blpop,
    },
    Spec {
        name: "brpop",
        arity: -3,
        flags: BF,
        keys: (1, -2, 1),
        group: "list",
        summary: "BRPOP key... timeout: pops the last element of the first non-empty list, waiting for one.",
        run: brpop,
    },
    Spec {
        name: "blmove",
        arity: 6,
        flags: &["write", "denyoom", "noscript", "blocking"],
        keys: (1, 2, 1),
        group: "list",
        summary: "BLMOVE source destination LEFT|RIGHT LEFT|RIGHT timeout: LMOVE, waiting for an element.",
        run: blmove,
    },
    Spec {
        name: "brpoplpush",
        arity: 4,
        flags: &["write", "denyoom", "noscript", "blocking"],
        keys: (1, 2, 1),
        group: "list",
        summary: "BRPOPLPUSH source destination timeout: RPOPLPUSH, waiting for an element.",
        run: brpoplpush,
    },
    Spec {
        name: "blmpop",
        arity: -5,
        flags: &["write", "blocking", "movablekeys"],
        keys: (0, 0, 0),
        group: "list",
        summary: "BLMPOP timeout numkeys key... LEFT|RIGHT [COUNT count]: LMPOP, waiting for an element.",
        run: blmpop,
    },
];

/// Blocks the client if it may block; the reply is what it gets if it may
/// not (inside EXEC): `nil_reply`.
pub(super) fn block(cx: &mut Ctx, keys: Vec<Vec<u8>>, timeout_ms: u64, op: BlockOp, nil_reply: Reply) -> CmdResult {
    if !cx.client.no_block {
        cx.client.block_req = Some(BlockReq { keys, timeout_ms, op });
    }
    Ok(nil_reply)
}

fn bpop(cx: &mut Ctx, a: &[Vec<u8>], left: bool) -> CmdResult {
    let timeout = parse_timeout(&a[a.len() - 1])?;
    let keys = &a[1..a.len() - 1];
    for key in keys {
        if let Some(m) = cx.lookup_kind(key, Kind::List)? {
            let v = pop_n(cx, key, &m, left, 1)?.pop().ok_or_else(|| CmdError::corrupt(key))?;
            return Ok(Reply::Array(vec![Reply::bulk(key), Reply::Bulk(v)]));
        }
    }
    block(cx, keys.to_vec(), timeout, BlockOp::Pop { left }, Reply::NilArray)
}

fn blpop(cx: &mut Ctx, a: &[Vec<u8>]) -> CmdResult {
    bpop(cx, a, true)
}

fn brpop(cx: &mut Ctx, a: &[Vec<u8>]) -> CmdResult {
    bpop(cx, a, false)
}

fn bmove(cx: &mut Ctx, src: &[u8], dst: &[u8], from_left: bool, to_left: bool, timeout: &[u8]) -> CmdResult {
    let timeout = parse_timeout(timeout)?;
    if let Some(m) = cx.lookup_kind(src, Kind::List)? {
        return move_one(cx, src, &m, dst, from_left, to_left);
    }
    let op = BlockOp::Move { dst: dst.to_vec(), from_left, to_left };
    block(cx, vec![src.to_vec()], timeout, op, Reply::Nil)
}

fn blmove(cx: &mut Ctx, a: &[Vec<u8>]) -> CmdResult {
    let (from_left, to_left) = (side(&a[3])?, side(&a[4])?);
    bmove(cx, &a[1], &a[2], from_left, to_left, &a[5])
}

fn brpoplpush(cx: &mut Ctx, a: &[Vec<u8>]) -> CmdResult {
    bmove(cx, &a[1], &a[2], false, true, &a[3])
}

fn blmpop(cx: &mut Ctx, a: &[Vec<u8>]) -> CmdResult {
    let (keys, left, count) = parse_mpop(a, 2, side)?;
    let timeout = parse_timeout(&a[1])?;
    if let Some(r) = mpop_first(cx, &keys, left, count)? {
        return Ok(r);
    }
    block(cx, keys, timeout, BlockOp::MPop { left, count }, Reply::NilArray)
}

/// Serves blocked client `c` from the list at `key` (in its database), which
/// was just written (from the sorted set there for the blocking sorted-set
/// pops: `zsets_pop::serve`). `None`: nothing to serve it (the key holds no
/// list, or it is empty): it keeps waiting.
pub fn serve(st: &mut State, c: &mut Client, key: &[u8], op: &BlockOp) -> Option<Reply> {
    let mut cx = Ctx { st, client: c, now: now_ms() };
    if matches!(op, BlockOp::ZPop { .. } | BlockOp::ZMPop { .. }) {
        return super::zsets_pop::serve(&mut cx, key, op);
    }
    if matches!(op, BlockOp::XRead { .. } | BlockOp::XReadGroup { .. }) {
        return super::streams::serve(&mut cx, key, op);
    }
    // A key that is not a list (any more) serves nobody: the clients stay blocked, as in Redis 7.0.
    let m = cx.lookup_kind(key, Kind::List).ok()??;
    let served = match op {
        BlockOp::Pop { left } => pop_n(&mut cx, key, &m, *left, 1).and_then(|mut v| {
            let v = v.pop().ok_or_else(|| CmdError::corrupt(key))?;
            Ok(Reply::Array(vec![Reply::bulk(key), Reply::Bulk(v)]))
        }),
        BlockOp::Move { dst, from_left, to_left } => move_one(&mut cx, key, &m, dst, *from_left, *to_left),
        BlockOp::MPop { left, count } => pop_n(&mut cx, key, &m, *left, *count)
            .map(|items| Reply::Array(vec![Reply::bulk(key), Reply::bulks(items)])),
        _ => return None,
    };
    Some(served.unwrap_or_else(|e| Reply::Error(e.0)))
}

/// CLIENT UNBLOCK id [TIMEOUT|ERROR].
pub fn client_unblock(cx: &mut Ctx, a: &[Vec<u8>]) -> CmdResult {
    let id = super::args::int(&a[2])?;
    let error = match a.get(3) {
        None => false,
        Some(w) if super::args::is(w, "timeout") => false,
        Some(w) if super::args::is(w, "error") => true,
        Some(_) => return Err(CmdError::err("CLIENT UNBLOCK reason should be TIMEOUT or ERROR")),
    };
    let reply =
        if error { Reply::Error("UNBLOCKED client unblocked via CLIENT UNBLOCK".into()) } else { Reply::NilArray };
    let done = u64::try_from(id).is_ok_and(|id| id != cx.client.id && cx.st.unblock(id, reply));
    Ok(Reply::Int(done as i64))
}
