//! Every Redis type's encoding against a model: random command sequences
//! on a small key space run through an in-process [`Session`] and on plain
//! Rust collections; every reply that reads state must match. Deleted and
//! overwritten collections must never show old elements, and the background
//! reclaimer must leave no element of a deleted collection behind.

use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};
use std::sync::Arc;

use proptest::prelude::*;
use tembo_server::resp::Reply;
use tembo_server::Session;
use tembo_store::{Db, Engine, Options};

#[derive(Clone, Debug)]
enum Val {
    Str(Vec<u8>),
    Hash(BTreeMap<Vec<u8>, Vec<u8>>),
    Set(BTreeSet<Vec<u8>>),
    List(VecDeque<Vec<u8>>),
    ZSet(BTreeMap<Vec<u8>, i64>),
}

#[derive(Clone, Debug)]
enum Op {
    Set(u8, u8),
    Del(u8),
    HSet(u8, u8, u8),
    HDel(u8, u8),
    SAdd(u8, u8),
    SRem(u8, u8),
    LPush(u8, u8),
    RPush(u8, u8),
    LPop(u8),
    RPop(u8),
    LRem(u8, i8, u8),
    LTrim(u8, i8, i8),
    LSet(u8, i8, u8),
    ZAdd(u8, i8, u8),
    ZRem(u8, u8),
    Rename(u8, u8),
    LInsert(u8, bool, u8, u8),
    LPos(u8, u8),
    LMove(u8, u8, bool, bool),
    /// ZUNIONSTORE (0), ZINTERSTORE (1) or ZDIFFSTORE (2) dst a b.
    ZStore(u8, u8, u8, u8),
    /// ZMPOP 2 a b MIN|MAX COUNT n.
    ZMPop(u8, u8, bool, u8),
    /// ZRANGESTORE dst src start stop.
    ZRangeStore(u8, u8, i8, i8),
    /// BZPOPMIN a b (a session never blocks: empty keys answer nil at once).
    BZPopMin(u8, u8),
    Background,
    FlushDb,
    /// SELECT db (of three).
    Select(u8),
    /// SWAPDB a b.
    SwapDb(u8, u8),
    /// MOVE key db.
    Move(u8, u8),
}

fn op() -> impl Strategy<Value = Op> {
    let k = 0u8..4;
    let f = 0u8..6;
    prop_oneof![
        (k.clone(), f.clone()).prop_map(|(k, v)| Op::Set(k, v)),
        k.clone().prop_map(Op::Del),
        (k.clone(), f.clone(), f.clone()).prop_map(|(k, f, v)| Op::HSet(k, f, v)),
        (k.clone(), f.clone()).prop_map(|(k, f)| Op::HDel(k, f)),
        (k.clone(), f.clone()).prop_map(|(k, f)| Op::SAdd(k, f)),
        (k.clone(), f.clone()).prop_map(|(k, f)| Op::SRem(k, f)),
        (k.clone(), f.clone()).prop_map(|(k, f)| Op::LPush(k, f)),
        (k.clone(), f.clone()).prop_map(|(k, f)| Op::RPush(k, f)),
        k.clone().prop_map(Op::LPop),
        k.clone().prop_map(Op::RPop),
        (k.clone(), -2i8..3, f.clone()).prop_map(|(k, c, v)| Op::LRem(k, c, v)),
        (k.clone(), -4i8..4, -4i8..4).prop_map(|(k, a, b)| Op::LTrim(k, a, b)),
        (k.clone(), -4i8..4, f.clone()).prop_map(|(k, i, v)| Op::LSet(k, i, v)),
        (k.clone(), -3i8..4, f.clone()).prop_map(|(k, s, m)| Op::ZAdd(k, s, m)),
        (k.clone(), f.clone()).prop_map(|(k, m)| Op::ZRem(k, m)),
        (k.clone(), any::<bool>(), f.clone(), f.clone()).prop_map(|(k, a, p, v)| Op::LInsert(k, a, p, v)),
        (k.clone(), f.clone()).prop_map(|(k, v)| Op::LPos(k, v)),
        (k.clone(), k.clone(), any::<bool>(), any::<bool>()).prop_map(|(a, b, l, r)| Op::LMove(a, b, l, r)),
        (0u8..3, k.clone(), k.clone(), k.clone()).prop_map(|(h, d, a, b)| Op::ZStore(h, d, a, b)),
        (k.clone(), k.clone(), any::<bool>(), 1u8..4).prop_map(|(a, b, x, n)| Op::ZMPop(a, b, x, n)),
        (k.clone(), k.clone(), -4i8..4, -4i8..4).prop_map(|(d, a, x, y)| Op::ZRangeStore(d, a, x, y)),
        (k.clone(), k.clone()).prop_map(|(a, b)| Op::BZPopMin(a, b)),
        (k.clone(), k.clone()).prop_map(|(a, b)| Op::Rename(a, b)),
        Just(Op::Background),
        Just(Op::FlushDb),
        (0u8..3).prop_map(Op::Select),
        (0u8..3, 0u8..3).prop_map(|(a, b)| Op::SwapDb(a, b)),
        (k, 0u8..3).prop_map(|(k, d)| Op::Move(k, d)),
    ]
}

fn key(k: u8) -> Vec<u8> {
    format!("key{k}").into_bytes()
}

fn val(v: u8) -> Vec<u8> {
    format!("v{v}").into_bytes()
}

fn bulks(items: impl IntoIterator<Item = Vec<u8>>) -> Vec<Reply> {
    items.into_iter().map(Reply::Bulk).collect()
}

/// Flattens maps and sets so RESP2 and RESP3 shapes compare alike.
fn flat(r: Reply) -> Vec<Reply> {
    match r {
        Reply::Array(v) | Reply::Set(v) => v.into_iter().flat_map(flat).collect(),
        Reply::Map(v) => v.into_iter().flat_map(|(a, b)| [flat(a), flat(b)].concat()).collect(),
        Reply::Double(d) => vec![Reply::Bulk(tembo_server::resp::format_double(d).into_bytes())],
        other => vec![other],
    }
}

const WRONGTYPE: &str = "WRONGTYPE Operation against a key holding the wrong kind of value";

fn check_state(s: &mut Session, model: &HashMap<Vec<u8>, Val>) {
    assert_eq!(s.call(&["DBSIZE"]), Reply::Int(model.len() as i64), "DBSIZE");
    let mut keys = flat(s.call(&["KEYS", "*"]));
    keys.sort_by(|a, b| format!("{a:?}").cmp(&format!("{b:?}")));
    let mut want: Vec<Vec<u8>> = model.keys().cloned().collect();
    want.sort();
    assert_eq!(keys, bulks(want), "KEYS *");
    for k in 0..4u8 {
        let kb = key(k);
        let name = String::from_utf8(kb.clone()).unwrap();
        let ty = s.call(&["TYPE", &name]);
        match model.get(&kb) {
            None => assert_eq!(ty, Reply::Simple("none".into()), "{name}"),
            Some(Val::Str(v)) => assert_eq!(s.call(&["GET", &name]), Reply::Bulk(v.clone())),
            Some(Val::Hash(h)) => {
                let got = flat(s.call(&["HGETALL", &name]));
                let want: Vec<Reply> = h.iter().flat_map(|(f, v)| bulks([f.clone(), v.clone()])).collect();
                assert_eq!(sorted_pairs(got), sorted_pairs(want), "HGETALL {name}");
                assert_eq!(s.call(&["HLEN", &name]), Reply::Int(h.len() as i64));
            }
            Some(Val::Set(m)) => {
                let mut got = flat(s.call(&["SMEMBERS", &name]));
                got.sort_by(|a, b| format!("{a:?}").cmp(&format!("{b:?}")));
                assert_eq!(got, bulks(m.iter().cloned()), "SMEMBERS {name}");
                assert_eq!(s.call(&["SCARD", &name]), Reply::Int(m.len() as i64));
            }
            Some(Val::List(l)) => {
                assert_eq!(flat(s.call(&["LRANGE", &name, "0", "-1"])), bulks(l.iter().cloned()), "LRANGE {name}");
                assert_eq!(s.call(&["LLEN", &name]), Reply::Int(l.len() as i64));
            }
            Some(Val::ZSet(z)) => {
                let mut want: Vec<(i64, Vec<u8>)> = z.iter().map(|(m, s)| (*s, m.clone())).collect();
                want.sort();
                let want: Vec<Reply> = want
                    .into_iter()
                    .flat_map(|(sc, m)| [Reply::Bulk(m), Reply::Bulk(sc.to_string().into_bytes())])
                    .collect();
                assert_eq!(flat(s.call(&["ZRANGE", &name, "0", "-1", "WITHSCORES"])), want, "ZRANGE {name}");
                assert_eq!(s.call(&["ZCARD", &name]), Reply::Int(z.len() as i64));
            }
        }
    }
    assert_eq!(s.call(&["DBSIZE"]), Reply::Int(model.len() as i64));
}

fn sorted_pairs(v: Vec<Reply>) -> Vec<(String, String)> {
    let mut p: Vec<(String, String)> = v.chunks(2).map(|c| (format!("{:?}", c[0]), format!("{:?}", c[1]))).collect();
    p.sort();
    p
}

fn run(ops: Vec<Op>, engine: Engine) {
    let db = Arc::new(Db::in_memory(&Options { engine, ..Options::with_size(64 << 20) }).unwrap());
    let mut s = Session::new(db.clone()).unwrap();
    // Three databases; `cur` is the one selected.
    let mut dbs: Vec<HashMap<Vec<u8>, Val>> = vec![HashMap::new(); 3];
    let mut cur = 0usize;
    for op in ops {
        match op {
            Op::Select(d) => {
                assert_eq!(s.call(&["SELECT", &d.to_string()]), Reply::Simple("OK".into()));
                cur = d as usize;
            }
            Op::SwapDb(a, b) => {
                assert_eq!(s.call(&["SWAPDB", &a.to_string(), &b.to_string()]), Reply::Simple("OK".into()));
                dbs.swap(a as usize, b as usize);
            }
            Op::Move(k, d) => {
                let r = s.call(&["MOVE", &String::from_utf8(key(k)).unwrap(), &d.to_string()]);
                if d as usize == cur {
                    assert!(matches!(r, Reply::Error(_)), "MOVE to the same database: {r:?}");
                } else if dbs[cur].contains_key(&key(k)) && !dbs[d as usize].contains_key(&key(k)) {
                    assert_eq!(r, Reply::Int(1));
                    let v = dbs[cur].remove(&key(k)).unwrap();
                    dbs[d as usize].insert(key(k), v);
                } else {
                    assert_eq!(r, Reply::Int(0));
                }
            }
            _ => apply(&mut s, &mut dbs[cur], &op),
        }
        check_state(&mut s, &dbs[cur]);
    }
    // Every database holds what the model says.
    for (d, model) in dbs.iter().enumerate() {
        assert_eq!(s.call(&["SELECT", &d.to_string()]), Reply::Simple("OK".into()));
        check_state(&mut s, model);
    }
    // Everything deleted: after enough background steps no element remains.
    s.call(&["FLUSHALL"]);
    for _ in 0..20 {
        s.background();
    }
    let left: Vec<_> =
        db.iter().map(|kv| kv.unwrap().0).filter(|k| k[0] == b'S' || k[0] == b'Z' || k[0] == b'M').collect();
    assert!(left.is_empty(), "keys or elements of flushed or deleted collections left behind: {left:?}");
}

fn apply(s: &mut Session, model: &mut HashMap<Vec<u8>, Val>, op: &Op) {
    let name = |k: u8| String::from_utf8(key(k)).unwrap();
    let sv = |v: u8| String::from_utf8(val(v)).unwrap();
    match *op {
        Op::Set(k, v) => {
            assert_eq!(s.call(&["SET", &name(k), &sv(v)]), Reply::Simple("OK".into()));
            model.insert(key(k), Val::Str(val(v)));
        }
        Op::Del(k) => {
            let r = s.call(&["DEL", &name(k)]);
            assert_eq!(r, Reply::Int(model.remove(&key(k)).is_some() as i64));
        }
        Op::Background => s.background(),
        Op::FlushDb => {
            assert_eq!(s.call(&["FLUSHDB"]), Reply::Simple("OK".into()));
            model.clear();
        }
        Op::Select(_) | Op::SwapDb(..) | Op::Move(..) => unreachable!("handled by `run`, which knows every database"),
        Op::Rename(a, b) => {
            let r = s.call(&["RENAME", &name(a), &name(b)]);
            match model.remove(&key(a)) {
                None => assert!(matches!(r, Reply::Error(_)), "{r:?}"),
                Some(v) => {
                    assert_eq!(r, Reply::Simple("OK".into()));
                    model.insert(key(b), v);
                }
            }
        }
        Op::LMove(a, b, from_left, to_left) => {
            let side = |l: bool| if l { "LEFT" } else { "RIGHT" };
            let r = s.call(&["LMOVE", &name(a), &name(b), side(from_left), side(to_left)]);
            let is_list = |v: Option<&Val>| v.map_or(true, |v| matches!(v, Val::List(_)));
            let want = match model.get(&key(a)) {
                None => Reply::Nil,
                Some(Val::List(_)) if is_list(model.get(&key(b))) => {
                    let Some(Val::List(src)) = model.get_mut(&key(a)) else { unreachable!() };
                    let x = if from_left { src.pop_front() } else { src.pop_back() }.unwrap();
                    if src.is_empty() {
                        model.remove(&key(a));
                    }
                    let Val::List(dst) = model.entry(key(b)).or_insert_with(|| Val::List(VecDeque::new())) else {
                        unreachable!()
                    };
                    if to_left {
                        dst.push_front(x.clone());
                    } else {
                        dst.push_back(x.clone());
                    }
                    Reply::Bulk(x)
                }
                Some(_) => Reply::Error(WRONGTYPE.into()),
            };
            assert_eq!(r, want, "LMOVE {a} {b}");
        }
        Op::ZStore(..) | Op::ZMPop(..) | Op::ZRangeStore(..) | Op::BZPopMin(..) => apply_zmulti(s, model, op),
        _ => apply_typed(s, model, op, &name, &sv),
    }
}

/// A sorted-set input as ZUNIONSTORE reads it: a set's members score 1;
/// `Err` for another type.
fn zinput(model: &HashMap<Vec<u8>, Val>, k: u8) -> Result<BTreeMap<Vec<u8>, i64>, ()> {
    match model.get(&key(k)) {
        None => Ok(BTreeMap::new()),
        Some(Val::ZSet(z)) => Ok(z.clone()),
        Some(Val::Set(s)) => Ok(s.iter().map(|m| (m.clone(), 1)).collect()),
        Some(_) => Err(()),
    }
}

/// Members in score order (then member bytes).
fn by_score(z: &BTreeMap<Vec<u8>, i64>) -> Vec<(Vec<u8>, i64)> {
    let mut v: Vec<(Vec<u8>, i64)> = z.iter().map(|(m, s)| (m.clone(), *s)).collect();
    v.sort_by(|a, b| (a.1, &a.0).cmp(&(b.1, &b.0)));
    v
}

/// Stores `out` at `dst` as the *STORE commands do (deleting it if empty).
fn zstore_model(model: &mut HashMap<Vec<u8>, Val>, dst: u8, out: BTreeMap<Vec<u8>, i64>) -> Reply {
    let n = out.len() as i64;
    if out.is_empty() {
        model.remove(&key(dst));
    } else {
        model.insert(key(dst), Val::ZSet(out));
    }
    Reply::Int(n)
}

/// The sorted-set commands over several keys.
fn apply_zmulti(s: &mut Session, model: &mut HashMap<Vec<u8>, Val>, op: &Op) {
    let name = |k: u8| String::from_utf8(key(k)).unwrap();
    let wrongtype = Reply::Error(WRONGTYPE.into());
    match *op {
        Op::ZStore(how, d, a, b) => {
            let cmd = ["ZUNIONSTORE", "ZINTERSTORE", "ZDIFFSTORE"][how as usize];
            let r = s.call(&[cmd, &name(d), "2", &name(a), &name(b)]);
            let (Ok(x), Ok(y)) = (zinput(model, a), zinput(model, b)) else {
                return assert_eq!(r, wrongtype, "{cmd}");
            };
            let out: BTreeMap<Vec<u8>, i64> = match how {
                0 => {
                    let mut o = x;
                    for (m, sc) in y {
                        *o.entry(m).or_insert(0) += sc;
                    }
                    o
                }
                1 => x.iter().filter_map(|(m, sc)| y.get(m).map(|t| (m.clone(), sc + t))).collect(),
                _ => x.into_iter().filter(|(m, _)| !y.contains_key(m)).collect(),
            };
            assert_eq!(r, zstore_model(model, d, out), "{cmd} {d} {a} {b}");
        }
        Op::ZRangeStore(d, src, start, stop) => {
            let r = s.call(&["ZRANGESTORE", &name(d), &name(src), &start.to_string(), &stop.to_string()]);
            let items = match model.get(&key(src)) {
                None => Vec::new(),
                Some(Val::ZSet(z)) => by_score(z),
                Some(_) => return assert_eq!(r, wrongtype),
            };
            let n = items.len() as i64;
            let first = if start < 0 { (n + start as i64).max(0) } else { start as i64 };
            let last = if stop < 0 { n + stop as i64 } else { (stop as i64).min(n - 1) };
            let kept = if first > last || first >= n {
                BTreeMap::new()
            } else {
                items[first as usize..=last as usize].iter().cloned().collect()
            };
            assert_eq!(r, zstore_model(model, d, kept), "ZRANGESTORE {d} {src} {start} {stop}");
        }
        Op::ZMPop(a, b, max, count) => {
            let r = s.call(&[
                "ZMPOP",
                "2",
                &name(a),
                &name(b),
                if max { "MAX" } else { "MIN" },
                "COUNT",
                &count.to_string(),
            ]);
            assert_eq!(r, zpop_model(model, &[a, b], max, count as usize, true), "ZMPOP {a} {b}");
        }
        Op::BZPopMin(a, b) => {
            let r = s.call(&["BZPOPMIN", &name(a), &name(b), "0"]);
            assert_eq!(r, zpop_model(model, &[a, b], false, 1, false), "BZPOPMIN {a} {b}");
        }
        _ => unreachable!(),
    }
}

/// ZMPOP (`nested`) or BZPOPMIN on the model: the first existing key must
/// be a sorted set.
fn zpop_model(model: &mut HashMap<Vec<u8>, Val>, keys: &[u8], max: bool, count: usize, nested: bool) -> Reply {
    for &k in keys {
        let z = match model.get_mut(&key(k)) {
            None => continue,
            Some(Val::ZSet(z)) => z,
            Some(_) => return Reply::Error(WRONGTYPE.into()),
        };
        let mut order = by_score(z);
        if max {
            order.reverse();
        }
        order.truncate(count);
        for (m, _) in &order {
            z.remove(m);
        }
        if z.is_empty() {
            model.remove(&key(k));
        }
        let kb = Reply::Bulk(key(k));
        if !nested {
            let (m, sc) = order.pop().unwrap();
            return Reply::Array(vec![kb, Reply::Bulk(m), Reply::Double(sc as f64)]);
        }
        let pairs = order.into_iter().map(|(m, sc)| Reply::Array(vec![Reply::Bulk(m), Reply::Double(sc as f64)]));
        return Reply::Array(vec![kb, Reply::Array(pairs.collect())]);
    }
    Reply::NilArray
}

fn apply_typed(
    s: &mut Session,
    model: &mut HashMap<Vec<u8>, Val>,
    op: &Op,
    name: &dyn Fn(u8) -> String,
    sv: &dyn Fn(u8) -> String,
) {
    let k = match *op {
        Op::HSet(k, ..)
        | Op::HDel(k, ..)
        | Op::SAdd(k, ..)
        | Op::SRem(k, ..)
        | Op::LPush(k, ..)
        | Op::RPush(k, ..)
        | Op::LPop(k)
        | Op::RPop(k)
        | Op::LRem(k, ..)
        | Op::LTrim(k, ..)
        | Op::LSet(k, ..)
        | Op::LInsert(k, ..)
        | Op::LPos(k, ..)
        | Op::ZAdd(k, ..)
        | Op::ZRem(k, ..) => k,
        _ => unreachable!(),
    };
    let kb = key(k);
    let want_kind = match op {
        Op::HSet(..) | Op::HDel(..) => 1,
        Op::SAdd(..) | Op::SRem(..) => 2,
        Op::ZAdd(..) | Op::ZRem(..) => 4,
        _ => 3,
    };
    let kind_of = |v: &Val| match v {
        Val::Hash(_) => 1,
        Val::Set(_) => 2,
        Val::List(_) => 3,
        Val::ZSet(_) => 4,
        Val::Str(_) => 0,
    };
    let args: Vec<String> = match *op {
        Op::HSet(_, f, v) => vec!["HSET".into(), name(k), sv(f), sv(v)],
        Op::HDel(_, f) => vec!["HDEL".into(), name(k), sv(f)],
        Op::SAdd(_, m) => vec!["SADD".into(), name(k), sv(m)],
        Op::SRem(_, m) => vec!["SREM".into(), name(k), sv(m)],
        Op::LPush(_, v) => vec!["LPUSH".into(), name(k), sv(v)],
        Op::RPush(_, v) => vec!["RPUSH".into(), name(k), sv(v)],
        Op::LPop(_) => vec!["LPOP".into(), name(k)],
        Op::RPop(_) => vec!["RPOP".into(), name(k)],
        Op::LRem(_, c, v) => vec!["LREM".into(), name(k), c.to_string(), sv(v)],
        Op::LTrim(_, a, b) => vec!["LTRIM".into(), name(k), a.to_string(), b.to_string()],
        Op::LSet(_, i, v) => vec!["LSET".into(), name(k), i.to_string(), sv(v)],
        Op::LInsert(_, after, p, v) => {
            vec!["LINSERT".into(), name(k), if after { "AFTER" } else { "BEFORE" }.into(), sv(p), sv(v)]
        }
        Op::LPos(_, v) => vec!["LPOS".into(), name(k), sv(v)],
        Op::ZAdd(_, sc, m) => vec!["ZADD".into(), name(k), sc.to_string(), sv(m)],
        Op::ZRem(_, m) => vec!["ZREM".into(), name(k), sv(m)],
        _ => unreachable!(),
    };
    let r = s.call(&args);
    if let Some(v) = model.get(&kb) {
        if kind_of(v) != want_kind {
            assert_eq!(r, Reply::Error(WRONGTYPE.into()), "{args:?}");
            return;
        }
    }
    let entry = model.entry(kb.clone());
    let v = entry.or_insert_with(|| match want_kind {
        1 => Val::Hash(BTreeMap::new()),
        2 => Val::Set(BTreeSet::new()),
        4 => Val::ZSet(BTreeMap::new()),
        _ => Val::List(VecDeque::new()),
    });
    let want: Reply = match (op, v) {
        (Op::HSet(_, f, x), Val::Hash(h)) => Reply::Int(h.insert(val(*f), val(*x)).is_none() as i64),
        (Op::HDel(_, f), Val::Hash(h)) => Reply::Int(h.remove(&val(*f)).is_some() as i64),
        (Op::SAdd(_, m), Val::Set(st)) => Reply::Int(st.insert(val(*m)) as i64),
        (Op::SRem(_, m), Val::Set(st)) => Reply::Int(st.remove(&val(*m)) as i64),
        (Op::LPush(_, x), Val::List(l)) => {
            l.push_front(val(*x));
            Reply::Int(l.len() as i64)
        }
        (Op::RPush(_, x), Val::List(l)) => {
            l.push_back(val(*x));
            Reply::Int(l.len() as i64)
        }
        (Op::LPop(_), Val::List(l)) => l.pop_front().map_or(Reply::Nil, Reply::Bulk),
        (Op::RPop(_), Val::List(l)) => l.pop_back().map_or(Reply::Nil, Reply::Bulk),
        (Op::LRem(_, c, x), Val::List(l)) => Reply::Int(lrem(l, *c as i64, &val(*x))),
        (Op::LTrim(_, a, b), Val::List(l)) => {
            ltrim(l, *a as i64, *b as i64);
            Reply::Simple("OK".into())
        }
        (Op::LSet(_, i, x), Val::List(l)) => {
            let n = l.len() as i64;
            let idx = if *i < 0 { n + *i as i64 } else { *i as i64 };
            if n == 0 {
                Reply::Error("ERR no such key".into())
            } else if idx < 0 || idx >= n {
                Reply::Error("ERR index out of range".into())
            } else {
                l[idx as usize] = val(*x);
                Reply::Simple("OK".into())
            }
        }
        (Op::LInsert(_, after, p, x), Val::List(l)) => match l.iter().position(|e| *e == val(*p)) {
            _ if l.is_empty() => Reply::Int(0),
            None => Reply::Int(-1),
            Some(i) => {
                l.insert(i + *after as usize, val(*x));
                Reply::Int(l.len() as i64)
            }
        },
        (Op::LPos(_, x), Val::List(l)) => {
            l.iter().position(|e| *e == val(*x)).map_or(Reply::Nil, |i| Reply::Int(i as i64))
        }
        (Op::ZAdd(_, sc, m), Val::ZSet(z)) => Reply::Int(z.insert(val(*m), *sc as i64).is_none() as i64),
        (Op::ZRem(_, m), Val::ZSet(z)) => Reply::Int(z.remove(&val(*m)).is_some() as i64),
        _ => unreachable!(),
    };
    assert_eq!(r, want, "{args:?}");
    let empty = match model.get(&kb) {
        Some(Val::Hash(h)) => h.is_empty(),
        Some(Val::Set(s)) => s.is_empty(),
        Some(Val::List(l)) => l.is_empty(),
        Some(Val::ZSet(z)) => z.is_empty(),
        _ => false,
    };
    if empty {
        model.remove(&kb);
    }
}

fn lrem(l: &mut VecDeque<Vec<u8>>, count: i64, x: &[u8]) -> i64 {
    let mut removed = 0;
    let limit = if count == 0 { i64::MAX } else { count.abs() };
    let idx: Vec<usize> = if count >= 0 { (0..l.len()).collect() } else { (0..l.len()).rev().collect() };
    let mut gone = BTreeSet::new();
    for i in idx {
        if removed < limit && l[i] == x {
            gone.insert(i);
            removed += 1;
        }
    }
    let kept: VecDeque<Vec<u8>> =
        l.iter().enumerate().filter(|(i, _)| !gone.contains(i)).map(|(_, v)| v.clone()).collect();
    *l = kept;
    removed
}

fn ltrim(l: &mut VecDeque<Vec<u8>>, a: i64, b: i64) {
    let n = l.len() as i64;
    let s = if a < 0 { (n + a).max(0) } else { a };
    let e = if b < 0 { n + b } else { b.min(n - 1) };
    if s > e || s >= n {
        l.clear();
    } else {
        *l = l.iter().skip(s as usize).take((e - s + 1) as usize).cloned().collect();
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    #[test]
    // Every engine serves the same Redis semantics.
    fn redis_types_match_the_model(ops in proptest::collection::vec(op(), 1..120), e in 0..Engine::ALL.len()) {
        run(ops, Engine::ALL[e]);
    }
}

#[test]
fn a_recreated_collection_shows_no_old_elements() {
    let db = Arc::new(Db::in_memory(&Options::with_size(64 << 20)).unwrap());
    let mut s = Session::new(db).unwrap();
    let fields: Vec<String> = (0..5000).flat_map(|i| [format!("f{i}"), "x".to_string()]).collect();
    let mut args = vec!["HSET".to_string(), "h".into()];
    args.extend(fields);
    assert_eq!(s.call(&args), Reply::Int(5000));
    assert_eq!(s.call(&["DEL", "h"]), Reply::Int(1));
    assert_eq!(s.call(&["HSET", "h", "a", "b"]), Reply::Int(1));
    assert_eq!(s.call(&["HLEN", "h"]), Reply::Int(1));
    assert_eq!(flat(s.call(&["HGETALL", "h"])), bulks([b"a".to_vec(), b"b".to_vec()]));
}

/// A pool holding server keys of the first layout (no flush generation,
/// no layout record) is refused with an error that says what to do; an
/// empty one gets the current layout recorded.
#[test]
fn a_pool_in_an_older_key_layout_is_refused() {
    let db = Arc::new(Db::in_memory(&Options::with_size(8 << 20)).unwrap());
    db.put(b"M\x00\x12\x34\x56\x78k", b"\x00\x00\x00\x00\x00\x00\x00\x00\x00v").unwrap();
    let err = Session::new(db).unwrap_err().to_string();
    assert!(err.contains("layout 1") && err.contains("--pool"), "{err}");

    let db = Arc::new(Db::in_memory(&Options::with_size(8 << 20)).unwrap());
    let mut s = Session::new(db.clone()).unwrap();
    s.call(&["SET", "k", "v"]);
    drop(s);
    let mut s = Session::new(db.clone()).unwrap();
    assert_eq!(s.call(&["GET", "k"]), Reply::Bulk(b"v".to_vec()));
    drop(s);
    assert_eq!(db.get(b"Glayout").unwrap(), Some(3u32.to_be_bytes().to_vec()));

    // Layout 2 (before chunked strings) opens as it is and is recorded as 3.
    db.put(b"Glayout", &2u32.to_be_bytes()).unwrap();
    let mut s = Session::new(db.clone()).unwrap();
    assert_eq!(s.call(&["GET", "k"]), Reply::Bulk(b"v".to_vec()));
    drop(s);
    assert_eq!(db.get(b"Glayout").unwrap(), Some(3u32.to_be_bytes().to_vec()));
    // A layout this build does not know is refused.
    db.put(b"Glayout", &9u32.to_be_bytes()).unwrap();
    let err = Session::new(db).unwrap_err().to_string();
    assert!(err.contains("layout 9") && err.contains("--pool"), "{err}");
}

/// The 16-bit flush generation wraps around: the flush that would overflow
/// it deletes every generation's keys at once and starts again at 0.
#[test]
fn the_flush_generation_wraps_around_without_losing_or_leaking_keys() {
    let db = Arc::new(Db::in_memory(&Options::with_size(8 << 20)).unwrap());
    db.put(b"F\x00", &0xFFFEu16.to_be_bytes()).unwrap();
    let mut s = Session::new(db.clone()).unwrap();
    let ok = Reply::Simple("OK".into());
    assert_eq!(s.call(&["SET", "a", "1"]), ok);
    assert_eq!(s.call(&["FLUSHDB"]), ok); // generation 0xFFFF
    assert_eq!(s.call(&["SET", "b", "2"]), ok);
    assert_eq!(s.call(&["HSET", "h", "f", "v"]), Reply::Int(1));
    assert_eq!(s.call(&["DBSIZE"]), Reply::Int(2));
    assert_eq!(s.call(&["FLUSHDB"]), ok); // wraps to 0
    assert_eq!(s.call(&["GET", "a"]), Reply::Nil);
    assert_eq!(s.call(&["GET", "b"]), Reply::Nil);
    assert_eq!(s.call(&["SET", "c", "3"]), ok);
    assert_eq!(s.call(&["DBSIZE"]), Reply::Int(1));
    assert_eq!(s.call(&["KEYS", "*"]), Reply::Array(vec![Reply::Bulk(b"c".to_vec())]));
    for _ in 0..5 {
        s.background();
    }
    let left: Vec<_> = db.iter().map(|kv| kv.unwrap().0).filter(|k| k[0] == b'S' || k[0] == b'M').collect();
    assert_eq!(left.len(), 1, "only c's metadata may remain: {left:?}");
    drop(s);
    // Reopened: the generation and the key survive.
    let mut s = Session::new(db).unwrap();
    assert_eq!(s.call(&["GET", "c"]), Reply::Bulk(b"3".to_vec()));
    assert_eq!(s.call(&["DBSIZE"]), Reply::Int(1));
}
