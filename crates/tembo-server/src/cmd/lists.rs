//! List commands: LPUSH RPUSH LPUSHX RPUSHX LPOP RPOP LLEN LRANGE LINDEX
//! LSET LREM LTRIM.
//!
//! A list's elements are sub-keys whose field is the element's absolute
//! index (8 big-endian bytes). The metadata keeps the index of the first
//! element (`head`) and the count (`size`), so element `i` lives at index
//! `head + i`; a new list starts in the middle of the index space
//! ([`LIST_MID`](crate::encoding::LIST_MID)) and grows both ways. Pushes,
//! pops, LINDEX and LSET are one sub-key access each; LRANGE reads exactly
//! the index range it returns.

use std::ops::Bound;

use super::args::{int, range};
use super::{CmdError, CmdResult, Spec};
use crate::encoding::{be64, sub_key, Kind, Meta, SUB};
use crate::exec::Ctx;
use crate::keyspace::Res;
use crate::keyspace::SubRange;
use crate::resp::Reply;

const WF: &[&str] = &["write", "denyoom", "fast"];

pub const COMMANDS: &[Spec] = &[
    Spec {
        name: "lpush",
        arity: -3,
        flags: WF,
        keys: (1, 1, 1),
        group: "list",
        summary: "Prepends elements to a list (the last argument ends up first).",
        run: lpush,
    },
    Spec {
        name: "rpush",
        arity: -3,
        flags: WF,
        keys: (1, 1, 1),
        group: "list",
        summary: "Appends elements to a list.",
        run: rpush,
    },
    Spec {
        name: "lpushx",
        arity: -3,
        flags: WF,
        keys: (1, 1, 1),
        group: "list",
        summary: "Prepends elements to a list only if the list exists.",
        run: lpushx,
    },
    Spec {
        name: "rpushx",
        arity: -3,
        flags: WF,
        keys: (1, 1, 1),
        group: "list",
        summary: "Appends elements to a list only if the list exists.",
        run: rpushx,
    },
    Spec {
        name: "lpop",
        arity: -2,
        flags: &["write", "fast"],
        keys: (1, 1, 1),
        group: "list",
        summary: "LPOP key [count]: removes and returns the first elements of a list.",
        run: lpop,
    },
    Spec {
        name: "rpop",
        arity: -2,
        flags: &["write", "fast"],
        keys: (1, 1, 1),
        group: "list",
        summary: "RPOP key [count]: removes and returns the last elements of a list.",
        run: rpop,
    },
    Spec {
        name: "llen",
        arity: 2,
        flags: &["readonly", "fast"],
        keys: (1, 1, 1),
        group: "list",
        summary: "Returns the length of a list.",
        run: llen,
    },
    Spec {
        name: "lrange",
        arity: 4,
        flags: &["readonly"],
        keys: (1, 1, 1),
        group: "list",
        summary: "Returns a range of elements of a list.",
        run: lrange,
    },
    Spec {
        name: "lindex",
        arity: 3,
        flags: &["readonly"],
        keys: (1, 1, 1),
        group: "list",
        summary: "Returns an element of a list by its index.",
        run: lindex,
    },
    Spec {
        name: "lset",
        arity: 4,
        flags: &["write", "denyoom"],
        keys: (1, 1, 1),
        group: "list",
        summary: "Sets the value of an element of a list by its index.",
        run: lset,
    },
    Spec {
        name: "lrem",
        arity: 4,
        flags: &["write"],
        keys: (1, 1, 1),
        group: "list",
        summary: "LREM key count element: removes occurrences of an element from a list.",
        run: lrem,
    },
    Spec {
        name: "ltrim",
        arity: 4,
        flags: &["write"],
        keys: (1, 1, 1),
        group: "list",
        summary: "Trims a list to a range of indices.",
        run: ltrim,
    },
];

/// Walks a collection's SUB or ZIDX entries between two field bounds in
/// growing chunks: a long walk neither loads everything at once nor holds a
/// borrow of the context, so the caller may write between steps (behind the
/// walk's position: the walk resumes after the last field it returned).
#[derive(Debug)]
pub(super) struct Walk {
    tag: u8,
    key: Vec<u8>,
    meta: Meta,
    lo: Bound<Vec<u8>>,
    hi: Bound<Vec<u8>>,
    rev: bool,
    chunk: usize,
    buf: std::vec::IntoIter<(Vec<u8>, Vec<u8>)>,
    done: bool,
}

impl Walk {
    /// A walk over `[lo, hi]` (field bounds), descending if `rev`.
    pub(super) fn new(tag: u8, key: &[u8], meta: &Meta, lo: Bound<Vec<u8>>, hi: Bound<Vec<u8>>, rev: bool) -> Walk {
        let done = bounds_empty(&lo, &hi);
        Walk { tag, key: key.to_vec(), meta: meta.clone(), lo, hi, rev, chunk: 32, buf: Vec::new().into_iter(), done }
    }

    /// Sets the size of the first read (when the caller knows how many it needs).
    pub(super) fn first_chunk(mut self, n: usize) -> Walk {
        self.chunk = n.clamp(1, 4096);
        self
    }

    /// Reads the next chunk into the buffer.
    fn fill(&mut self, cx: &Ctx) -> Res<()> {
        let lo = self.lo.as_ref().map(|v| v.as_slice());
        let hi = self.hi.as_ref().map(|v| v.as_slice());
        let got = cx.sub_range(self.tag, &self.key, &self.meta, lo, hi, self.rev, self.chunk)?;
        if got.len() < self.chunk {
            self.done = true;
        }
        if let Some((last, _)) = got.last() {
            let after = Bound::Excluded(last.clone());
            if self.rev {
                self.hi = after;
            } else {
                self.lo = after;
            }
            if bounds_empty(&self.lo, &self.hi) {
                self.done = true;
            }
        }
        self.chunk = (self.chunk * 2).min(4096);
        self.buf = got.into_iter();
        Ok(())
    }

    /// The next (field, value), or `None` at the end.
    pub(super) fn next(&mut self, cx: &Ctx) -> Res<Option<(Vec<u8>, Vec<u8>)>> {
        loop {
            if let Some(e) = self.buf.next() {
                return Ok(Some(e));
            }
            if self.done {
                return Ok(None);
            }
            self.fill(cx)?;
        }
    }

    /// Passes over the rest of the buffer or the next chunk and says how
    /// many entries that was; `None` at the end.
    pub(super) fn count_chunk(&mut self, cx: &Ctx) -> Res<Option<u64>> {
        if self.buf.len() == 0 {
            if self.done {
                return Ok(None);
            }
            self.fill(cx)?;
        }
        let n = self.buf.len() as u64;
        self.buf = Vec::new().into_iter();
        Ok(Some(n))
    }
}

/// Whether no key lies between the bounds (the store must not be asked:
/// an inverted range is a caller error there).
pub(super) fn bounds_empty(lo: &Bound<Vec<u8>>, hi: &Bound<Vec<u8>>) -> bool {
    match (lo, hi) {
        (Bound::Included(a), Bound::Included(b)) => a > b,
        (Bound::Included(a), Bound::Excluded(b))
        | (Bound::Excluded(a), Bound::Included(b))
        | (Bound::Excluded(a), Bound::Excluded(b)) => a >= b,
        _ => false,
    }
}

/// Refuses a sub-key or value the engine would refuse at commit, before
/// the command stages its element writes (a command applies fully or not
/// at all: the refusal also undoes what it staged before, see `Store`).
pub(super) fn check_sizes(cx: &mut Ctx, key_len: usize, value_len: usize) -> Res<()> {
    Ok(cx.st.store.check_sizes(key_len, value_len)?)
}

/// `ERR value is out of range, must be positive` for anything but an integer >= 0.
pub(super) fn positive(arg: &[u8]) -> Res<u64> {
    match int(arg) {
        Ok(n) if n >= 0 => Ok(n as u64),
        _ => Err(CmdError::err("value is out of range, must be positive")),
    }
}

/// The list at `key`, or `None`; WRONGTYPE for other types.
fn list(cx: &mut Ctx, key: &[u8]) -> Res<Option<Meta>> {
    cx.lookup_kind(key, Kind::List)
}

/// The field of absolute index `idx`.
fn at(idx: u64) -> Vec<u8> {
    idx.to_be_bytes().to_vec()
}

fn full() -> CmdError {
    CmdError::err("list index space exhausted")
}

fn push(cx: &mut Ctx, a: &[Vec<u8>], left: bool, only_existing: bool) -> CmdResult {
    let key = &a[1];
    let old = list(cx, key)?;
    let mut m = match &old {
        Some(m) => m.clone(),
        None if only_existing => return Ok(Reply::Int(0)),
        None => cx.new_collection(Kind::List),
    };
    let longest = a[2..].iter().map(|v| v.len()).max().unwrap_or(0);
    check_sizes(cx, sub_key(cx.db(), key, 0, &at(0)).len(), longest)?;
    let n = (a.len() - 2) as u64;
    let room = if left { m.head } else { u64::MAX - (m.head + m.size) };
    if room < n {
        return Err(full());
    }
    for v in &a[2..] {
        let idx = if left {
            m.head -= 1;
            m.head
        } else {
            m.head + m.size
        };
        cx.sub_put(key, &m, &at(idx), v.clone())?;
        m.size += 1;
    }
    cx.save_collection(key, old.as_ref(), &m)?;
    Ok(Reply::Int(m.size as i64))
}

fn lpush(cx: &mut Ctx, a: &[Vec<u8>]) -> CmdResult {
    push(cx, a, true, false)
}

fn rpush(cx: &mut Ctx, a: &[Vec<u8>]) -> CmdResult {
    push(cx, a, false, false)
}

fn lpushx(cx: &mut Ctx, a: &[Vec<u8>]) -> CmdResult {
    push(cx, a, true, true)
}

fn rpushx(cx: &mut Ctx, a: &[Vec<u8>]) -> CmdResult {
    push(cx, a, false, true)
}

fn pop(cx: &mut Ctx, a: &[Vec<u8>], left: bool) -> CmdResult {
    if a.len() > 3 {
        return Err(CmdError::arity(if left { "lpop" } else { "rpop" }));
    }
    let count = if a.len() == 3 { Some(positive(&a[2])?) } else { None };
    let key = &a[1];
    let Some(old) = list(cx, key)? else {
        return Ok(if count.is_some() { Reply::NilArray } else { Reply::Nil });
    };
    if count == Some(0) {
        return Ok(Reply::Array(Vec::new()));
    }
    let n = count.unwrap_or(1).min(old.size);
    let (lo, hi) = if left { (old.head, old.head + n - 1) } else { (old.head + old.size - n, old.head + old.size - 1) };
    let items = cx.sub_range(SUB, key, &old, Bound::Included(&at(lo)), Bound::Included(&at(hi)), !left, n as usize)?;
    let mut m = old.clone();
    for (f, _) in &items {
        cx.sub_del(key, &m, f);
    }
    m.size -= n;
    if left {
        m.head += n;
    }
    cx.save_shrunk(key, &old, &m)?;
    if count.is_none() {
        let v = items.into_iter().next().map(|(_, v)| v).ok_or_else(|| CmdError::corrupt(key))?;
        return Ok(Reply::Bulk(v));
    }
    Ok(Reply::Array(items.into_iter().map(|(_, v)| Reply::Bulk(v)).collect()))
}

fn lpop(cx: &mut Ctx, a: &[Vec<u8>]) -> CmdResult {
    pop(cx, a, true)
}

fn rpop(cx: &mut Ctx, a: &[Vec<u8>]) -> CmdResult {
    pop(cx, a, false)
}

fn llen(cx: &mut Ctx, a: &[Vec<u8>]) -> CmdResult {
    Ok(Reply::Int(list(cx, &a[1])?.map_or(0, |m| m.size as i64)))
}

fn lrange(cx: &mut Ctx, a: &[Vec<u8>]) -> CmdResult {
    let (start, stop) = (int(&a[2])?, int(&a[3])?);
    let Some(m) = list(cx, &a[1])? else { return Ok(Reply::Array(Vec::new())) };
    let Some((s, e)) = range(start, stop, m.size as i64) else { return Ok(Reply::Array(Vec::new())) };
    let (lo, hi) = (at(m.head + s as u64), at(m.head + e as u64));
    let items =
        cx.sub_range(SUB, &a[1], &m, Bound::Included(&lo), Bound::Included(&hi), false, (e - s + 1) as usize)?;
    Ok(Reply::Array(items.into_iter().map(|(_, v)| Reply::Bulk(v)).collect()))
}

/// The absolute index of Redis index `i` (negative from the tail), if in range.
fn index_of(m: &Meta, i: i64) -> Option<u64> {
    let len = m.size as i64;
    let i = if i < 0 { len + i } else { i };
    (0..len).contains(&i).then(|| m.head + i as u64)
}

fn lindex(cx: &mut Ctx, a: &[Vec<u8>]) -> CmdResult {
    let Some(m) = list(cx, &a[1])? else { return Ok(Reply::Nil) };
    let Some(idx) = index_of(&m, int(&a[2])?) else { return Ok(Reply::Nil) };
    Ok(cx.sub_get(&a[1], &m, &at(idx))?.map_or(Reply::Nil, Reply::Bulk))
}

fn lset(cx: &mut Ctx, a: &[Vec<u8>]) -> CmdResult {
    let Some(m) = list(cx, &a[1])? else { return Err(CmdError::err("no such key")) };
    let i = int(&a[2])?;
    let Some(idx) = index_of(&m, i) else { return Err(CmdError::err("index out of range")) };
    check_sizes(cx, 0, a[3].len())?;
    cx.sub_put(&a[1], &m, &at(idx), a[3].clone())?;
    Ok(Reply::ok())
}

fn lrem(cx: &mut Ctx, a: &[Vec<u8>]) -> CmdResult {
    let count = int(&a[2])?;
    let key = &a[1];
    let Some(old) = list(cx, key)? else { return Ok(Reply::Int(0)) };
    let (head, size) = (old.head, old.size);
    // 1. The positions (0-based) of the elements to remove, ascending.
    let want = if count == 0 { u64::MAX } else { count.unsigned_abs() };
    let mut removed: Vec<u64> = Vec::new();
    let mut walk =
        Walk::new(SUB, key, &old, Bound::Included(at(head)), Bound::Included(at(head + size - 1)), count < 0);
    while (removed.len() as u64) < want {
        let Some((f, v)) = walk.next(cx)? else { break };
        if v == a[3] {
            removed.push(be64(&f) - head);
        }
    }
    if count < 0 {
        removed.reverse();
    }
    let k = removed.len() as u64;
    if k == 0 {
        return Ok(Reply::Int(0));
    }
    let mut m = old.clone();
    if k == size {
        m.size = 0;
        cx.save_collection(key, Some(&old), &m)?;
        return Ok(Reply::Int(k as i64));
    }
    // 2. Close the gaps, moving the side with fewer elements to move.
    let (first, last) = (removed[0], removed[removed.len() - 1]);
    if size - 1 - first <= last {
        // Elements after the first removed one move toward the head.
        let (lo, hi) = (Bound::Excluded(at(head + first)), Bound::Included(at(head + size - 1)));
        let mut walk = Walk::new(SUB, key, &old, lo, hi, false);
        let mut before = 1; // removed positions passed so far
        while let Some((f, v)) = walk.next(cx)? {
            let p = be64(&f) - head;
            if removed.get(before) == Some(&p) {
                before += 1;
                continue;
            }
            cx.sub_put(key, &m, &at(head + p - before as u64), v)?;
        }
        for p in size - k..size {
            cx.sub_del(key, &m, &at(head + p));
        }
    } else {
        // Elements before the last removed one move toward the tail.
        let mut walk = Walk::new(SUB, key, &old, Bound::Included(at(head)), Bound::Excluded(at(head + last)), true);
        let mut rest = removed.len() - 1; // removed[..rest] are still ahead (below)
        while let Some((f, v)) = walk.next(cx)? {
            let p = be64(&f) - head;
            if rest > 0 && removed[rest - 1] == p {
                rest -= 1;
                continue;
            }
            let after = (removed.len() - rest) as u64;
            cx.sub_put(key, &m, &at(head + p + after), v)?;
        }
        for p in 0..k {
            cx.sub_del(key, &m, &at(head + p));
        }
        m.head += k;
    }
    m.size -= k;
    cx.save_shrunk(key, &old, &m)?;
    Ok(Reply::Int(k as i64))
}

fn ltrim(cx: &mut Ctx, a: &[Vec<u8>]) -> CmdResult {
    let (start, stop) = (int(&a[2])?, int(&a[3])?);
    let key = &a[1];
    let Some(old) = list(cx, key)? else { return Ok(Reply::ok()) };
    let (head, size) = (old.head, old.size);
    let (s, e) = match range(start, stop, size as i64) {
        Some((s, e)) => (s as u64, e as u64),
        None => {
            let gone = Meta { size: 0, ..old.clone() };
            cx.save_collection(key, Some(&old), &gone)?;
            return Ok(Reply::ok());
        }
    };
    let kept = e - s + 1;
    let mut m = Meta { head: head + s, size: kept, ..old.clone() };
    if kept < size - kept {
        // Fewer to keep than to drop: copy the survivors under a fresh
        // version and let the reclaimer drop the old one.
        m.version = cx.st.store.new_version();
        let items = cx.sub_range(
            SUB,
            key,
            &old,
            Bound::Included(&at(head + s)),
            Bound::Included(&at(head + e)),
            false,
            kept as usize,
        )?;
        let db = cx.db();
        for (f, v) in items {
            cx.st.store.put(sub_key(db, key, m.version, &f), v)?;
        }
    } else {
        for p in (0..s).chain(e + 1..size) {
            cx.sub_del(key, &m, &at(head + p));
        }
    }
    cx.save_collection(key, Some(&old), &m)?;
    Ok(Reply::ok())
}
