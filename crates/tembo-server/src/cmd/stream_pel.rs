//! Pending-entries commands: XPENDING (summary and extended forms),
//! XCLAIM and XAUTOCLAIM, with Redis 7.0's replies and error words. They
//! read and move the PEL records of [`crate::stream_cg`]; idle times are
//! against wall-clock delivery times, which survive restarts.

use super::args::{int, is};
use super::stream_groups::stream_and_group;
use super::{CmdError, CmdResult, Spec};
use crate::exec::Ctx;
use crate::keyspace::Res;
use crate::resp::Reply;
use crate::stream::{self, Stream};
use crate::stream_cg::{self as cg, Nack};
use crate::stream_id::{self, StreamId};

pub const COMMANDS: &[Spec] = &[
    Spec {
        name: "xpending",
        arity: -3,
        flags: &["readonly"],
        keys: (1, 1, 1),
        group: "stream",
        summary: "XPENDING key group [[IDLE ms] start end count [consumer]]: a group's pending entries.",
        run: xpending,
    },
    Spec {
        name: "xclaim",
        arity: -6,
        flags: &["write", "fast"],
        keys: (1, 1, 1),
        group: "stream",
        summary: "XCLAIM key group consumer min-idle id... [IDLE ms] [TIME ms] [RETRYCOUNT n] [FORCE] [JUSTID]",
        run: xclaim,
    },
    Spec {
        name: "xautoclaim",
        arity: -6,
        flags: &["write", "fast"],
        keys: (1, 1, 1),
        group: "stream",
        summary: "XAUTOCLAIM key group consumer min-idle start [COUNT n] [JUSTID]: claims idle pending entries.",
        run: xautoclaim,
    },
];

fn id_reply(id: StreamId) -> Reply {
    Reply::bulk(id.to_string())
}

fn xpending(cx: &mut Ctx, a: &[Vec<u8>]) -> CmdResult {
    let n = a.len();
    if n != 3 && !(6..=9).contains(&n) {
        return Err(CmdError::syntax());
    }
    let (mut start, mut end, mut count, mut minidle) = (StreamId::MIN, StreamId::MAX, 0i64, 0i64);
    let mut consumer = None;
    if n >= 6 {
        let mut at = 3;
        if is(&a[3], "idle") {
            minidle = int(&a[4])?;
            if n < 8 {
                return Err(CmdError::syntax());
            }
            at += 2;
        }
        count = int(&a[at + 2])?.max(0);
        let (s, ex) = stream_id::parse_interval(&a[at], 0)?;
        start = if ex { s.incr().ok_or_else(|| CmdError::err("invalid start ID for the interval"))? } else { s };
        let (e, ex) = stream_id::parse_interval(&a[at + 1], u64::MAX)?;
        end = if ex { e.decr().ok_or_else(|| CmdError::err("invalid end ID for the interval"))? } else { e };
        consumer = a.get(at + 3);
    }
    let key = &a[1];
    let (s, g) = stream_and_group(cx, key, &a[2])?;
    if n == 3 {
        let pel = cg::pel_range(cx, key, &s, &g.name, StreamId::MIN, StreamId::MAX, usize::MAX)?;
        let (Some(first), Some(last)) = (pel.first(), pel.last()) else {
            return Ok(Reply::Array(vec![Reply::Int(0), Reply::Nil, Reply::Nil, Reply::NilArray]));
        };
        let mut per: Vec<(Vec<u8>, i64)> = Vec::new();
        for (name, _) in cg::consumers(cx, key, &s, &g.name)? {
            let k = pel.iter().filter(|p| p.consumer == name).count() as i64;
            if k > 0 {
                per.push((name, k));
            }
        }
        let per = per.into_iter().map(|(c, k)| Reply::Array(vec![Reply::Bulk(c), Reply::bulk(k.to_string())]));
        return Ok(Reply::Array(vec![
            Reply::Int(pel.len() as i64),
            id_reply(first.id),
            id_reply(last.id),
            Reply::Array(per.collect()),
        ]));
    }
    let now = cx.now as i64;
    let nacks: Vec<Nack> = match consumer {
        Some(c) => {
            if cg::consumer_get(cx, key, &s, &g.name, c)?.is_none() {
                return Ok(Reply::Array(vec![]));
            }
            let ids = cg::consumer_pel(cx, key, &s, &g.name, c, start, end, usize::MAX)?;
            let mut v = Vec::with_capacity(ids.len());
            for id in ids {
                if let Some(n) = cg::nack_get(cx, key, &s, &g.name, id)? {
                    v.push(n);
                }
            }
            v
        }
        None => cg::pel_range(cx, key, &s, &g.name, start, end, usize::MAX)?,
    };
    let mut out = Vec::new();
    for nk in nacks {
        if count == 0 {
            break;
        }
        let idle = now.wrapping_sub(nk.delivery_time as i64);
        if minidle != 0 && idle < minidle {
            continue;
        }
        count -= 1;
        out.push(Reply::Array(vec![
            id_reply(nk.id),
            Reply::Bulk(nk.consumer),
            Reply::Int(idle.max(0)),
            Reply::Int(nk.delivery_count as i64),
        ]));
    }
    Ok(Reply::Array(out))
}

/// An entry as XCLAIM replies it (the entry is known to exist).
fn entry_reply(cx: &Ctx, key: &[u8], s: &Stream, id: StreamId) -> Res<Reply> {
    let fv = stream::get(cx, key, s, id)?.ok_or_else(|| CmdError::corrupt(key))?;
    Ok(Reply::Array(vec![id_reply(id), Reply::bulks(fv)]))
}

fn opt_int(arg: &[u8], msg: &str) -> Res<i64> {
    int(arg).map_err(|_| CmdError::err(msg))
}

fn xclaim(cx: &mut Ctx, a: &[Vec<u8>]) -> CmdResult {
    let key = &a[1];
    let (s, mut g) = stream_and_group(cx, key, &a[2])?;
    let minidle = opt_int(&a[4], "Invalid min-idle-time argument for XCLAIM")?.max(0);
    let mut ids = Vec::new();
    let mut j = 5;
    while j < a.len() {
        match stream_id::parse_strict(&a[j], 0) {
            Ok(id) => ids.push(id),
            Err(_) => break,
        }
        j += 1;
    }
    let now = cx.now as i64;
    let (mut force, mut justid, mut retry, mut time, mut last_id) = (false, false, -1i64, -1i64, StreamId::MIN);
    while j < a.len() {
        let more = j + 1 < a.len();
        let opt = &a[j];
        if is(opt, "force") {
            force = true;
        } else if is(opt, "justid") {
            justid = true;
        } else if is(opt, "idle") && more {
            j += 1;
            time = now - opt_int(&a[j], "Invalid IDLE option argument for XCLAIM")?;
        } else if is(opt, "time") && more {
            j += 1;
            time = opt_int(&a[j], "Invalid TIME option argument for XCLAIM")?;
        } else if is(opt, "retrycount") && more {
            j += 1;
            retry = opt_int(&a[j], "Invalid RETRYCOUNT option argument for XCLAIM")?;
        } else if is(opt, "lastid") && more {
            j += 1;
            last_id = stream_id::parse_strict(&a[j], 0)?;
        } else {
            return Err(CmdError::err(format!("Unrecognized XCLAIM option '{}'", String::from_utf8_lossy(opt))));
        }
        j += 1;
    }
    if last_id > g.last_id {
        g.last_id = last_id;
        cg::group_put(cx, key, &s, &g)?;
    }
    let delivery = if time == -1 || time < 0 || time > now { now } else { time } as u64;
    let consumer = &a[3];
    let mut touched = false;
    let mut out = Vec::new();
    for id in ids {
        let nack = cg::nack_get(cx, key, &s, &g.name, id)?;
        if stream::get(cx, key, &s, id)?.is_none() {
            if let Some(n) = nack {
                cg::nack_del(cx, key, &s, &g.name, &n);
            }
            continue;
        }
        let (mut n, old) = match nack {
            Some(n) => {
                if minidle != 0 && now.wrapping_sub(n.delivery_time as i64) < minidle {
                    continue;
                }
                let old = n.consumer.clone();
                (n, Some(old))
            }
            None if force => (Nack { id, consumer: Vec::new(), delivery_time: now as u64, delivery_count: 1 }, None),
            None => continue,
        };
        if !touched {
            cg::consumer_touch(cx, key, &s, &g.name, consumer)?;
            touched = true;
        }
        n.delivery_time = delivery;
        if retry >= 0 {
            n.delivery_count = retry as u64;
        } else if !justid {
            n.delivery_count = n.delivery_count.wrapping_add(1);
        }
        n.consumer = consumer.clone();
        cg::nack_put(cx, key, &s, &g.name, &n, old.as_deref())?;
        out.push(if justid { id_reply(id) } else { entry_reply(cx, key, &s, id)? });
    }
    Ok(Reply::Array(out))
}

fn xautoclaim(cx: &mut Ctx, a: &[Vec<u8>]) -> CmdResult {
    let minidle = opt_int(&a[4], "Invalid min-idle-time argument for XAUTOCLAIM")?.max(0);
    let (start, ex) = stream_id::parse_interval(&a[5], 0)?;
    let start =
        if ex { start.incr().ok_or_else(|| CmdError::err("invalid start ID for the interval"))? } else { start };
    let (mut count, mut justid) = (100i64, false);
    let mut j = 6;
    while j < a.len() {
        if is(&a[j], "count") && j + 1 < a.len() {
            let max = i64::MAX / 16;
            count = int(&a[j + 1])
                .ok()
                .filter(|c| (1..=max).contains(c))
                .ok_or_else(|| CmdError::err("COUNT must be > 0"))?;
            j += 1;
        } else if is(&a[j], "justid") {
            justid = true;
        } else {
            return Err(CmdError::syntax());
        }
        j += 1;
    }
    let key = &a[1];
    let (s, g) = stream_and_group(cx, key, &a[2])?;
    let consumer = &a[3];
    let now = cx.now as i64;
    let mut attempts = count.saturating_mul(10);
    // One more than can be examined: the one after the last examined is the cursor.
    let scan = (attempts as usize).saturating_add(1);
    let pel = cg::pel_range(cx, key, &s, &g.name, start, StreamId::MAX, scan)?;
    let (mut claimed, mut deleted) = (Vec::new(), Vec::new());
    let mut touched = false;
    let mut next = 0;
    while attempts > 0 && count > 0 && next < pel.len() {
        attempts -= 1;
        let mut n = pel[next].clone();
        next += 1;
        if stream::get(cx, key, &s, n.id)?.is_none() {
            cg::nack_del(cx, key, &s, &g.name, &n);
            deleted.push(id_reply(n.id));
            count -= 1;
            continue;
        }
        if minidle != 0 && now.wrapping_sub(n.delivery_time as i64) < minidle {
            continue;
        }
        if !touched {
            cg::consumer_touch(cx, key, &s, &g.name, consumer)?;
            touched = true;
        }
        let old = std::mem::replace(&mut n.consumer, consumer.clone());
        n.delivery_time = now as u64;
        if !justid {
            n.delivery_count = n.delivery_count.wrapping_add(1);
        }
        cg::nack_put(cx, key, &s, &g.name, &n, Some(&old))?;
        claimed.push(if justid { id_reply(n.id) } else { entry_reply(cx, key, &s, n.id)? });
        count -= 1;
    }
    let cursor = pel.get(next).map_or(StreamId::MIN, |n| n.id);
    Ok(Reply::Array(vec![id_reply(cursor), Reply::Array(claimed), Reply::Array(deleted)]))
}
