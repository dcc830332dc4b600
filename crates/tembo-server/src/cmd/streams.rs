//! Stream commands without consumer groups: XADD XLEN XRANGE XREVRANGE
//! XDEL XTRIM XSETID XREAD (blocking included), with Redis 7.0's replies
//! and error words. Storage is in [`crate::stream`]; consumer groups in
//! `stream_groups`, which shares XREAD's argument parser and reply shape.

use super::args::{int, is};
use super::blpop::block;
use super::{CmdError, CmdResult, Spec};
use crate::blocking::BlockOp;
use crate::exec::Ctx;
use crate::keyspace::Res;
use crate::resp::Reply;
use crate::stream::{self, Entry, Stream, Trim};
use crate::stream_id::{self, StreamId};

pub const COMMANDS: &[Spec] = &[
    Spec {
        name: "xadd",
        arity: -5,
        flags: &["write", "denyoom", "fast"],
        keys: (1, 1, 1),
        group: "stream",
        summary:
            "XADD key [NOMKSTREAM] [MAXLEN|MINID [=|~] threshold [LIMIT n]] *|id field value...: appends an entry.",
        run: xadd,
    },
    Spec {
        name: "xlen",
        arity: 2,
        flags: &["readonly", "fast"],
        keys: (1, 1, 1),
        group: "stream",
        summary: "Returns the number of entries of a stream.",
        run: xlen,
    },
    Spec {
        name: "xrange",
        arity: -4,
        flags: &["readonly"],
        keys: (1, 1, 1),
        group: "stream",
        summary: "XRANGE key start end [COUNT n]: entries with IDs in a range.",
        run: xrange,
    },
    Spec {
        name: "xrevrange",
        arity: -4,
        flags: &["readonly"],
        keys: (1, 1, 1),
        group: "stream",
        summary: "XREVRANGE key end start [COUNT n]: entries with IDs in a range, last first.",
        run: xrevrange,
    },
    Spec {
        name: "xdel",
        arity: -3,
        flags: &["write", "fast"],
        keys: (1, 1, 1),
        group: "stream",
        summary: "XDEL key id...: deletes entries; returns how many existed.",
        run: xdel,
    },
    Spec {
        name: "xtrim",
        arity: -4,
        flags: &["write"],
        keys: (1, 1, 1),
        group: "stream",
        summary: "XTRIM key MAXLEN|MINID [=|~] threshold [LIMIT n]: trims a stream.",
        run: xtrim,
    },
    Spec {
        name: "xsetid",
        arity: -3,
        flags: &["write", "denyoom", "fast"],
        keys: (1, 1, 1),
        group: "stream",
        summary: "XSETID key id [ENTRIESADDED n] [MAXDELETEDID id]: sets a stream's last ID.",
        run: xsetid,
    },
    Spec {
        name: "xread",
        arity: -4,
        flags: &["readonly", "blocking", "movablekeys"],
        keys: (0, 0, 0),
        group: "stream",
        summary: "XREAD [COUNT n] [BLOCK ms] STREAMS key... id...: entries after IDs, waiting for some.",
        run: xread,
    },
];

/// A stream's entries as Redis replies them: `[[id, [field, value…]]…]`.
pub fn entries_reply(entries: Vec<Entry>) -> Reply {
    Reply::Array(
        entries.into_iter().map(|(id, fv)| Reply::Array(vec![Reply::bulk(id.to_string()), Reply::bulks(fv)])).collect(),
    )
}

/// XREAD's reply: per key, `[key, entries]` (RESP2) or a map (RESP3).
pub fn read_reply(proto: u8, per_key: Vec<(Vec<u8>, Reply)>) -> Reply {
    if proto >= 3 {
        Reply::Map(per_key.into_iter().map(|(k, v)| (Reply::Bulk(k), v)).collect())
    } else {
        Reply::Array(per_key.into_iter().map(|(k, v)| Reply::Array(vec![Reply::Bulk(k), v])).collect())
    }
}

/// Parsed XADD/XTRIM options.
struct AddTrim {
    trim: Option<Trim>,
    approx: bool,
    limit: u64,
    nomkstream: bool,
    /// The ID argument's index (XADD), and the parsed ID unless `*`.
    idpos: usize,
    id: Option<stream_id::Parsed>,
}

/// `streamParseAddOrTrimArgsOrReply`.
fn parse_add_trim(cx: &Ctx, a: &[Vec<u8>], xadd: bool) -> Res<AddTrim> {
    let mut o = AddTrim { trim: None, approx: false, limit: 0, nomkstream: false, idpos: a.len(), id: None };
    let mut limit_given = false;
    let mut i = 2;
    let both = || CmdError::err("syntax error, MAXLEN and MINID options at the same time are not compatible");
    while i < a.len() {
        let more = a.len() - 1 - i;
        let opt = &a[i];
        if xadd && opt.as_slice() == b"*" {
            o.idpos = i;
            break;
        } else if (is(opt, "maxlen") || is(opt, "minid")) && more > 0 {
            if o.trim.is_some() {
                return Err(both());
            }
            o.approx = false;
            let next = &a[i + 1];
            if more >= 2 && next.as_slice() == b"~" {
                o.approx = true;
                i += 1;
            } else if more >= 2 && next.as_slice() == b"=" {
                i += 1;
            }
            if is(opt, "maxlen") {
                let n = int(&a[i + 1])?;
                if n < 0 {
                    return Err(CmdError::err("The MAXLEN argument must be >= 0."));
                }
                o.trim = Some(Trim::MaxLen(n as u64));
            } else {
                o.trim = Some(Trim::MinId(stream_id::parse_strict(&a[i + 1], 0)?));
            }
            i += 2;
            continue;
        } else if is(opt, "limit") && more > 0 {
            let n = int(&a[i + 1])?;
            if n < 0 {
                return Err(CmdError::err("The LIMIT argument must be >= 0."));
            }
            o.limit = n as u64;
            limit_given = true;
            i += 2;
            continue;
        } else if xadd && is(opt, "nomkstream") {
            o.nomkstream = true;
        } else if xadd {
            o.id = Some(stream_id::parse_generic(opt, 0, true, true)?);
            o.idpos = i;
            break;
        } else {
            return Err(CmdError::syntax());
        }
        i += 1;
    }
    if o.limit != 0 && o.trim.is_none() {
        return Err(CmdError::err("syntax error, LIMIT cannot be used without specifying a trimming strategy"));
    }
    if !xadd && o.trim.is_none() {
        return Err(CmdError::err("syntax error, XTRIM must be called with a trimming strategy"));
    }
    if limit_given {
        if !o.approx {
            return Err(CmdError::err("syntax error, LIMIT cannot be used without the special ~ option"));
        }
    } else if o.approx {
        let per_node = super::inert_value(&cx.st.inert, "stream-node-max-entries")
            .and_then(|v| v.parse::<i64>().ok())
            .unwrap_or(100);
        o.limit = per_node.saturating_mul(100).clamp(1, 1_000_000) as u64;
        if per_node <= 0 {
            o.limit = 10_000;
        }
    } else {
        o.limit = 0;
    }
    Ok(o)
}

fn xadd(cx: &mut Ctx, a: &[Vec<u8>]) -> CmdResult {
    let o = parse_add_trim(cx, a, true)?;
    let field_pos = o.idpos + 1;
    let nfields = a.len() as i64 - field_pos as i64;
    if nfields < 2 || nfields % 2 == 1 {
        return Err(CmdError::arity("xadd"));
    }
    if let Some(p) = o.id.filter(|p| p.seq_given && p.id.is_zero()) {
        let _ = p;
        return Err(CmdError::err("The ID specified in XADD must be greater than 0-0"));
    }
    let key = &a[1];
    let old = stream::load(cx, key)?;
    let mut s = match &old {
        Some(s) => s.clone(),
        None if o.nomkstream => return Ok(Reply::Nil),
        None => stream::create(cx),
    };
    if s.st.last_id == StreamId::MAX {
        return Err(CmdError::err("The stream has exhausted the last possible ID, unable to add more items"));
    }
    let smaller = || CmdError::err("The ID specified in XADD is equal or smaller than the target stream top item");
    let id = match o.id {
        Some(p) if p.seq_given => p.id,
        Some(p) if s.st.last_id.ms == p.id.ms => s.st.last_id.incr().filter(|n| n.ms == p.id.ms).ok_or_else(smaller)?,
        Some(p) => p.id,
        None => {
            let now = cx.now;
            if now > s.st.last_id.ms {
                StreamId::new(now, 0)
            } else {
                s.st.last_id.incr().ok_or_else(smaller)?
            }
        }
    };
    if id <= s.st.last_id {
        // A new stream is not created by a failed XADD (its last ID is 0-0, so only 0-0 could fail).
        return Err(smaller());
    }
    stream::append(cx, key, &mut s, id, &a[field_pos..])?;
    if let Some(how) = o.trim {
        stream::trim(cx, key, &mut s, how, o.approx, o.limit)?;
    }
    stream::save(cx, key, old.as_ref().map(|s| &s.meta), &s)?;
    Ok(Reply::bulk(id.to_string()))
}

fn xlen(cx: &mut Ctx, a: &[Vec<u8>]) -> CmdResult {
    Ok(Reply::Int(stream::load(cx, &a[1])?.map_or(0, |s| s.len() as i64)))
}

fn xrange_generic(cx: &mut Ctx, a: &[Vec<u8>], rev: bool) -> CmdResult {
    let (start_arg, end_arg) = if rev { (&a[3], &a[2]) } else { (&a[2], &a[3]) };
    let (mut start, start_ex) = stream_id::parse_interval(start_arg, 0)?;
    if start_ex {
        start = start.incr().ok_or_else(|| CmdError::err("invalid start ID for the interval"))?;
    }
    let (mut end, end_ex) = stream_id::parse_interval(end_arg, u64::MAX)?;
    if end_ex {
        end = end.decr().ok_or_else(|| CmdError::err("invalid end ID for the interval"))?;
    }
    let mut count: i64 = -1;
    let mut j = 4;
    while j < a.len() {
        if is(&a[j], "count") && j + 1 < a.len() {
            count = int(&a[j + 1])?.max(0);
            j += 2;
        } else {
            return Err(CmdError::syntax());
        }
    }
    let Some(s) = stream::load(cx, &a[1])? else { return Ok(Reply::Array(vec![])) };
    if count == 0 {
        return Ok(Reply::NilArray);
    }
    let count = if count < 0 { 0 } else { count as usize };
    Ok(entries_reply(stream::range(cx, &a[1], &s, start, end, rev, count)?))
}

fn xrange(cx: &mut Ctx, a: &[Vec<u8>]) -> CmdResult {
    xrange_generic(cx, a, false)
}

fn xrevrange(cx: &mut Ctx, a: &[Vec<u8>]) -> CmdResult {
    xrange_generic(cx, a, true)
}

fn xdel(cx: &mut Ctx, a: &[Vec<u8>]) -> CmdResult {
    let key = &a[1];
    let Some(old) = stream::load(cx, key)? else { return Ok(Reply::Int(0)) };
    let ids = a[2..].iter().map(|x| stream_id::parse_strict(x, 0)).collect::<Res<Vec<_>>>()?;
    let mut s = old.clone();
    let (mut deleted, mut first) = (0, false);
    for id in ids {
        if stream::delete(cx, key, &mut s, id)? {
            first |= id == s.st.first_id;
            if id > s.st.max_deleted {
                s.st.max_deleted = id;
            }
            deleted += 1;
        }
    }
    if deleted > 0 {
        if s.is_empty() {
            s.st.first_id = StreamId::MIN;
        } else if first {
            s.st.first_id = stream::edge(cx, key, &s, false)?.unwrap_or(StreamId::MIN);
        }
        stream::save(cx, key, Some(&old.meta), &s)?;
    }
    Ok(Reply::Int(deleted))
}

fn xtrim(cx: &mut Ctx, a: &[Vec<u8>]) -> CmdResult {
    let o = parse_add_trim(cx, a, false)?;
    let key = &a[1];
    let Some(old) = stream::load(cx, key)? else { return Ok(Reply::Int(0)) };
    let mut s = old.clone();
    let how = o.trim.ok_or_else(CmdError::syntax)?;
    let deleted = stream::trim(cx, key, &mut s, how, o.approx, o.limit)?;
    if deleted > 0 {
        stream::save(cx, key, Some(&old.meta), &s)?;
    }
    Ok(Reply::Int(deleted as i64))
}

fn xsetid(cx: &mut Ctx, a: &[Vec<u8>]) -> CmdResult {
    let id = stream_id::parse_strict(&a[2], 0)?;
    let (mut added, mut max_del): (i64, StreamId) = (-1, StreamId::MIN);
    let mut i = 3;
    while i < a.len() {
        let more = i + 1 < a.len();
        if is(&a[i], "entriesadded") && more {
            added = int(&a[i + 1])?;
            if added < 0 {
                return Err(CmdError::err("entries_added must be positive"));
            }
        } else if is(&a[i], "maxdeletedid") && more {
            max_del = stream_id::parse_strict(&a[i + 1], 0)?;
            if id < max_del {
                return Err(CmdError::err(
                    "The ID specified in XSETID is smaller than the provided max_deleted_entry_id",
                ));
            }
        } else {
            return Err(CmdError::syntax());
        }
        i += 2;
    }
    let key = &a[1];
    let Some(old) = stream::load(cx, key)? else { return Err(CmdError::err("no such key")) };
    let mut s = old.clone();
    if !s.is_empty() {
        let top = stream::edge(cx, key, &s, true)?.unwrap_or(StreamId::MIN);
        if id < top {
            return Err(CmdError::err("The ID specified in XSETID is smaller than the target stream top item"));
        }
        if added != -1 && s.len() > added as u64 {
            return Err(CmdError::err(
                "The entries_added specified in XSETID is smaller than the target stream length",
            ));
        }
    }
    s.st.last_id = id;
    if added != -1 {
        s.st.entries_added = added as u64;
    }
    if !max_del.is_zero() {
        s.st.max_deleted = max_del;
    }
    stream::save_quiet(cx, key, &s)?;
    Ok(Reply::ok())
}

/// XREAD / XREADGROUP arguments.
pub(super) struct ReadArgs {
    /// BLOCK milliseconds (0: forever), if given.
    pub timeout: Option<u64>,
    /// COUNT (0: no limit).
    pub count: u64,
    /// NOACK.
    pub noack: bool,
    /// GROUP group consumer.
    pub group: Option<(Vec<u8>, Vec<u8>)>,
    /// The stream keys.
    pub keys: Vec<Vec<u8>>,
    /// Their ID arguments.
    pub ids: Vec<Vec<u8>>,
}

/// Parses XREAD's (`group` false) or XREADGROUP's options.
pub(super) fn parse_read(a: &[Vec<u8>], group: bool) -> Res<ReadArgs> {
    let mut r = ReadArgs { timeout: None, count: 0, noack: false, group: None, keys: vec![], ids: vec![] };
    let mut streams_at = 0;
    let mut i = 1;
    while i < a.len() {
        let more = a.len() - 1 - i;
        if is(&a[i], "block") && more > 0 {
            i += 1;
            let t = int(&a[i]).map_err(|_| CmdError::err("timeout is not an integer or out of range"))?;
            if t < 0 {
                return Err(CmdError::err("timeout is negative"));
            }
            r.timeout = Some(t as u64);
        } else if is(&a[i], "count") && more > 0 {
            i += 1;
            r.count = int(&a[i])?.max(0) as u64;
        } else if is(&a[i], "streams") && more > 0 {
            streams_at = i + 1;
            let n = a.len() - streams_at;
            if n % 2 != 0 {
                return Err(CmdError::err(
                    "Unbalanced XREAD list of streams: for each stream key an ID or '$' must be specified.",
                ));
            }
            r.keys = a[streams_at..streams_at + n / 2].to_vec();
            r.ids = a[streams_at + n / 2..].to_vec();
            break;
        } else if is(&a[i], "group") && more >= 2 {
            if !group {
                return Err(CmdError::err(
                    "The GROUP option is only supported by XREADGROUP. You called XREAD instead.",
                ));
            }
            r.group = Some((a[i + 1].clone(), a[i + 2].clone()));
            i += 2;
        } else if is(&a[i], "noack") {
            if !group {
                return Err(CmdError::err(
                    "The NOACK option is only supported by XREADGROUP. You called XREAD instead.",
                ));
            }
            r.noack = true;
        } else {
            return Err(CmdError::syntax());
        }
        i += 1;
    }
    if streams_at == 0 {
        return Err(CmdError::syntax());
    }
    if group && r.group.is_none() {
        return Err(CmdError::err("Missing GROUP option for XREADGROUP"));
    }
    Ok(r)
}

fn xread(cx: &mut Ctx, a: &[Vec<u8>]) -> CmdResult {
    let r = parse_read(a, false)?;
    let mut ids = Vec::with_capacity(r.keys.len());
    for (key, arg) in r.keys.iter().zip(&r.ids) {
        let s = stream::load(cx, key)?;
        if arg.as_slice() == b"$" {
            ids.push(s.map_or(StreamId::MIN, |s| s.st.last_id));
        } else if arg.as_slice() == b">" {
            return Err(CmdError::err(
                "The > ID can be specified only when calling XREADGROUP using the GROUP <group> <consumer> option.",
            ));
        } else {
            ids.push(stream_id::parse_strict(arg, 0)?);
        }
    }
    let mut out = Vec::new();
    for (key, gt) in r.keys.iter().zip(&ids) {
        let Some(s) = stream::load(cx, key)? else { continue };
        let Some(top) = stream::edge(cx, key, &s, true)? else { continue };
        if top > *gt {
            let entries = read_after(cx, key, &s, *gt, r.count)?;
            out.push((key.clone(), entries_reply(entries)));
        }
    }
    if !out.is_empty() {
        return Ok(read_reply(cx.client.proto, out));
    }
    match r.timeout {
        Some(t) => {
            let count = if r.count == 0 { 1000 } else { r.count };
            let ids = r.keys.iter().cloned().zip(ids).collect();
            block(cx, r.keys, t, BlockOp::XRead { ids, count }, Reply::NilArray)
        }
        None => Ok(Reply::NilArray),
    }
}

/// Entries with IDs greater than `gt`, at most `count` (0: all).
pub(super) fn read_after(cx: &Ctx, key: &[u8], s: &Stream, gt: StreamId, count: u64) -> Res<Vec<Entry>> {
    match gt.incr() {
        Some(start) => stream::range(cx, key, s, start, StreamId::MAX, false, count as usize),
        None => Ok(Vec::new()),
    }
}

/// Serves a client blocked in XREAD or XREADGROUP on `key`, just written.
/// `None`: nothing new for it; it keeps waiting.
pub(super) fn serve(cx: &mut Ctx, key: &[u8], op: &BlockOp) -> Option<Reply> {
    match op {
        BlockOp::XRead { ids, count } => {
            // The first time a key is named is the ID it waits after.
            let gt = ids.iter().find(|(k, _)| k.as_slice() == key)?.1;
            let s = stream::load(cx, key).ok()??;
            if s.st.last_id <= gt {
                return None;
            }
            let served = read_after(cx, key, &s, gt, *count)
                .map(|e| read_reply(cx.client.proto, vec![(key.to_vec(), entries_reply(e))]));
            Some(served.unwrap_or_else(|e| Reply::Error(e.0)))
        }
        BlockOp::XReadGroup { .. } => super::stream_groups::serve(cx, key, op),
        _ => None,
    }
}
