//! SORT and SORT_RO (Redis 7.0): the elements of a list, set or sorted set,
//! ordered numerically or by bytes (ALPHA), optionally by other keys' values
//! (BY pattern, `*` replaced by the element, `key->field` for a hash field),
//! sliced (LIMIT), projected (GET pattern, `#` for the element itself) and
//! stored as a list (STORE).
//!
//! Equal sort values tie-break on the elements' bytes, as Redis does, so the
//! result is deterministic. ALPHA compares bytes (Redis's `strcoll` under
//! the C locale).

use std::cmp::Ordering;
use std::ops::Bound;

use super::args::is;
use super::{CmdError, CmdResult, Spec};
use crate::encoding::{Kind, LIST_MID, SUB, ZIDX};
use crate::exec::Ctx;
use crate::keyspace::Res;
use crate::keyspace::SubRange;
use crate::resp::Reply;

pub const COMMANDS: &[Spec] = &[
    Spec {
        name: "sort",
        arity: -2,
        flags: &["write", "denyoom", "movablekeys"],
        keys: (1, 1, 1),
        group: "generic",
        summary: "SORT key [BY pattern] [LIMIT offset count] [GET pattern ...] [ASC|DESC] [ALPHA] [STORE destination].",
        run: sort,
    },
    Spec {
        name: "sort_ro",
        arity: -2,
        flags: &["readonly", "movablekeys"],
        keys: (1, 1, 1),
        group: "generic",
        summary: "SORT_RO key [BY pattern] [LIMIT offset count] [GET pattern ...] [ASC|DESC] [ALPHA].",
        run: sort_ro,
    },
];

/// A parsed SORT request.
struct Request {
    by: Option<Vec<u8>>,
    dont_sort: bool,
    limit: Option<(i64, i64)>,
    gets: Vec<Vec<u8>>,
    desc: bool,
    alpha: bool,
    store: Option<Vec<u8>>,
}

fn parse(a: &[Vec<u8>], read_only: bool) -> Res<Request> {
    let mut r =
        Request { by: None, dont_sort: false, limit: None, gets: Vec::new(), desc: false, alpha: false, store: None };
    let mut j = 2;
    while j < a.len() {
        let left = a.len() - j - 1;
        if is(&a[j], "asc") {
            r.desc = false;
        } else if is(&a[j], "desc") {
            r.desc = true;
        } else if is(&a[j], "alpha") {
            r.alpha = true;
        } else if is(&a[j], "limit") && left >= 2 {
            let n = |b: &[u8]| super::args::int(b);
            r.limit = Some((n(&a[j + 1])?, n(&a[j + 2])?));
            j += 2;
        } else if is(&a[j], "store") && left >= 1 && !read_only {
            r.store = Some(a[j + 1].clone());
            j += 1;
        } else if is(&a[j], "by") && left >= 1 {
            // A pattern without `*` names no key per element: no sorting.
            r.dont_sort = !a[j + 1].contains(&b'*');
            r.by = (!r.dont_sort).then(|| a[j + 1].clone());
            j += 1;
        } else if is(&a[j], "get") && left >= 1 {
            r.gets.push(a[j + 1].clone());
            j += 1;
        } else {
            return Err(CmdError::syntax());
        }
        j += 1;
    }
    Ok(r)
}

/// The elements of the collection at `key`, in its natural order (list
/// order, member order, or score order for a sorted set).
fn elements(cx: &mut Ctx, key: &[u8]) -> Res<Option<(Kind, Vec<Vec<u8>>)>> {
    let Some(m) = cx.lookup(key)? else { return Ok(None) };
    let all = |cx: &Ctx, tag| cx.sub_range(tag, key, &m, Bound::Unbounded, Bound::Unbounded, false, usize::MAX);
    let items = match m.kind {
        Kind::List => all(cx, SUB)?.into_iter().map(|(_, v)| v).collect(),
        Kind::Set => all(cx, SUB)?.into_iter().map(|(f, _)| f).collect(),
        // An index entry's field is the 8 score bytes, then the member.
        Kind::ZSet => all(cx, ZIDX)?.into_iter().filter_map(|(f, _)| f.get(8..).map(<[u8]>::to_vec)).collect(),
        _ => return Err(CmdError::wrongtype()),
    };
    Ok(Some((m.kind, items)))
}

/// The value a BY or GET pattern names for `elem`: `#` is the element;
/// otherwise the first `*` is replaced by it, and `key->field` reads a hash
/// field. `None` when the key is missing or of the wrong type.
fn lookup_pattern(cx: &mut Ctx, pattern: &[u8], elem: &[u8]) -> Res<Option<Vec<u8>>> {
    if pattern == b"#" {
        return Ok(Some(elem.to_vec()));
    }
    let Some(star) = pattern.iter().position(|&b| b == b'*') else { return Ok(None) };
    let arrow = pattern[star + 1..].windows(2).position(|w| w == b"->").map(|p| p + star + 1);
    let (key_pat, field) = match arrow {
        Some(p) if p + 2 < pattern.len() => (&pattern[..p], Some(&pattern[p + 2..])),
        _ => (pattern, None),
    };
    let mut key = key_pat[..star].to_vec();
    key.extend_from_slice(elem);
    key.extend_from_slice(&key_pat[star + 1..]);
    let Some(m) = cx.lookup(&key)? else { return Ok(None) };
    match (field, m.kind) {
        (None, Kind::String) => Ok(Some(m.value)),
        (Some(f), Kind::Hash) => cx.sub_get(&key, &m, f),
        _ => Ok(None),
    }
}

/// SORT's keys for COMMAND GETKEYS: the source and the last STORE target
/// (`args` starts at the command name).
pub fn keys_of(args: &[Vec<u8>]) -> Vec<&[u8]> {
    let mut keys: Vec<&[u8]> = args.get(1).map(|k| k.as_slice()).into_iter().collect();
    let mut store = None;
    let mut j = 2;
    while j < args.len() {
        let skip = if is(&args[j], "limit") {
            2
        } else if is(&args[j], "get") || is(&args[j], "by") {
            1
        } else if is(&args[j], "store") {
            store = args.get(j + 1).map(|k| k.as_slice());
            1
        } else {
            0
        };
        j += 1 + skip;
    }
    keys.extend(store);
    keys
}

/// SORT's or SORT_RO's entry in the command table.
fn sort_spec(read_only: bool) -> &'static Spec {
    &COMMANDS[usize::from(read_only)]
}

fn sort(cx: &mut Ctx, a: &[Vec<u8>]) -> CmdResult {
    run(cx, a, false)
}

fn sort_ro(cx: &mut Ctx, a: &[Vec<u8>]) -> CmdResult {
    run(cx, a, true)
}

fn run(cx: &mut Ctx, a: &[Vec<u8>], read_only: bool) -> CmdResult {
    let mut req = parse(a, read_only)?;
    // BY and GET patterns read keys no ACL check saw: they need a user
    // who may read every key, as in Redis.
    let patterned_by = req.by.as_ref().is_some_and(|_| !req.dont_sort);
    if (patterned_by || !req.gets.is_empty()) && !cx.st.acl.reads_all_keys(&cx.client.user, sort_spec(read_only), a) {
        let what = if patterned_by { "BY" } else { "GET" };
        return Err(CmdError::err(format!("{what} option of SORT denied due to insufficient ACL permissions.")));
    }
    let (kind, mut items) = elements(cx, &a[1])?.unwrap_or((Kind::List, Vec::new()));
    // An unsorted set would come out in storage order; Redis sorts it by
    // bytes when the result is stored, and so does Tembo.
    if req.dont_sort && kind == Kind::Set && req.store.is_some() {
        req.dont_sort = false;
        req.alpha = true;
    }
    if req.dont_sort {
        if kind == Kind::ZSet && req.desc {
            items.reverse();
        }
    } else {
        order(cx, &req, &mut items)?;
    }
    let n = items.len() as i64;
    let (start, count) = match req.limit {
        None => (0, n),
        Some((off, cnt)) => {
            let start = off.clamp(0, n);
            let count = if cnt < 0 { n } else { cnt };
            (start, count.min(n - start))
        }
    };
    let picked = &items[start as usize..(start + count.max(0)) as usize];
    let mut out: Vec<Option<Vec<u8>>> = Vec::with_capacity(picked.len() * req.gets.len().max(1));
    for elem in picked {
        if req.gets.is_empty() {
            out.push(Some(elem.clone()));
        }
        for pattern in &req.gets {
            out.push(lookup_pattern(cx, pattern, elem)?);
        }
    }
    match req.store {
        None => Ok(Reply::Array(out.into_iter().map(|v| v.map_or(Reply::Nil, Reply::Bulk)).collect())),
        Some(dest) => store(cx, &dest, out),
    }
}

/// Sorts `items` by the request's key: numbers (error if one is not), or
/// bytes with ALPHA; equal keys fall back to the elements' bytes.
fn order(cx: &mut Ctx, req: &Request, items: &mut Vec<Vec<u8>>) -> Res<()> {
    let mut keyed = Vec::with_capacity(items.len());
    for elem in items.drain(..) {
        let by = match &req.by {
            Some(p) => lookup_pattern(cx, p, &elem)?,
            None => Some(elem.clone()),
        };
        let score = match (&by, req.alpha) {
            (Some(v), false) => super::strtod::sort_weight(v)
                .ok_or_else(|| CmdError::err("One or more scores can't be converted into double"))?,
            _ => 0.0,
        };
        keyed.push((elem, by, score));
    }
    let by_pattern = req.by.is_some();
    keyed.sort_by(|x, y| {
        let cmp = if !req.alpha {
            x.2.partial_cmp(&y.2).unwrap_or(Ordering::Equal).then_with(|| x.0.cmp(&y.0))
        } else if by_pattern {
            // A missing BY value sorts first.
            x.1.cmp(&y.1)
        } else {
            x.0.cmp(&y.0)
        };
        if req.desc {
            cmp.reverse()
        } else {
            cmp
        }
    });
    items.extend(keyed.into_iter().map(|(e, _, _)| e));
    Ok(())
}

/// SORT … STORE: replaces `dest` with a list of the results (a missing GET
/// value stored as an empty string); an empty result deletes `dest`.
fn store(cx: &mut Ctx, dest: &[u8], values: Vec<Option<Vec<u8>>>) -> CmdResult {
    let old = cx.lookup(dest)?;
    let n = values.len() as i64;
    let mut m = cx.new_collection(Kind::List);
    for v in values {
        cx.sub_put(dest, &m, &(LIST_MID + m.size).to_be_bytes(), v.unwrap_or_default())?;
        m.size += 1;
    }
    if m.size == 0 {
        if let Some(o) = &old {
            cx.remove(dest, o);
        }
    } else {
        cx.write_meta(dest, old.as_ref(), &m)?;
    }
    Ok(Reply::Int(n))
}
