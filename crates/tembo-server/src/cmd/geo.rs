//! GEO commands: GEOADD GEOPOS GEODIST GEOHASH GEOSEARCH GEOSEARCHSTORE
//! GEORADIUS GEORADIUSBYMEMBER and the read-only GEORADIUS*_RO.
//!
//! As in Redis, a geo index is nothing but a sorted set whose scores are
//! 52-bit geohashes ([`crate::geohash`]), so applications that mix GEO and
//! Z commands on one key (ZREM to delete a place, ZRANGE to list them) work
//! unchanged. GEOADD is ZADD with computed scores; a search reads the score
//! ranges of up to nine geohash cells from the sorted-set index, filters by
//! exact distance, then sorts, trims and replies (or stores) the way
//! Redis's `georadiusGeneric` does, option quirks and error texts included.

use std::ops::Bound;

use super::args::{int, is};
use super::lists::Walk;
use super::zparse::parse_score;
use super::zsets::{entry, score_of, zadd_generic, zset};
use super::zsets_multi::store_new;
use super::{CmdError, CmdResult, Spec};
use crate::encoding::{score_bytes, Meta, ZIDX};
use crate::exec::Ctx;
use crate::geohash::{self, pqsort, Search, Shape};
use crate::keyspace::Res;
use crate::resp::Reply;

const R: &[&str] = &["readonly"];
const W: &[&str] = &["write", "denyoom"];
/// GEORADIUS[BYMEMBER]: a STORE option names a second key (movable keys).
const WM: &[&str] = &["write", "denyoom", "movablekeys"];

macro_rules! spec {
    ($name:literal, $arity:expr, $flags:expr, $keys:expr, $summary:literal, $run:ident) => {
        Spec { name: $name, arity: $arity, flags: $flags, keys: $keys, group: "geo", summary: $summary, run: $run }
    };
}

pub const COMMANDS: &[Spec] = &[
    spec!("geoadd", -5, W, (1, 1, 1), "GEOADD key [NX|XX] [CH] lon lat member [...]: adds places.", geoadd),
    spec!("geopos", -2, R, (1, 1, 1), "GEOPOS key [member ...]: the places' coordinates.", geopos),
    spec!("geodist", -4, R, (1, 1, 1), "GEODIST key m1 m2 [M|KM|FT|MI]: the distance between two places.", geodist),
    spec!("geohash", -2, R, (1, 1, 1), "GEOHASH key [member ...]: the places' standard geohash strings.", geohash),
    spec!(
        "geosearch",
        -7,
        R,
        (1, 1, 1),
        "GEOSEARCH key FROMMEMBER m|FROMLONLAT lon lat BYRADIUS r unit|BYBOX w h unit [ASC|DESC] [COUNT n [ANY]] [WITH...].",
        geosearch
    ),
    spec!(
        "geosearchstore",
        -8,
        W,
        (1, 2, 1),
        "GEOSEARCHSTORE dest src ... [STOREDIST]: GEOSEARCH into a sorted set.",
        geosearchstore
    ),
    spec!(
        "georadius",
        -6,
        WM,
        (1, 1, 1),
        "GEORADIUS key lon lat radius unit [...] [STORE key|STOREDIST key]: places within a radius.",
        georadius
    ),
    spec!("georadius_ro", -6, R, (1, 1, 1), "GEORADIUS_RO key lon lat radius unit [...]: read-only GEORADIUS.", georadius_ro),
    spec!(
        "georadiusbymember",
        -5,
        WM,
        (1, 1, 1),
        "GEORADIUSBYMEMBER key member radius unit [...] [STORE key|STOREDIST key]: places near a member.",
        georadiusbymember
    ),
    spec!(
        "georadiusbymember_ro",
        -5,
        R,
        (1, 1, 1),
        "GEORADIUSBYMEMBER_RO key member radius unit [...]: read-only GEORADIUSBYMEMBER.",
        georadiusbymember_ro
    ),
];

/// A (longitude, latitude) argument pair within the index's limits.
fn lonlat(lon: &[u8], lat: &[u8]) -> Res<(f64, f64)> {
    let (x, y) = (parse_score(lon)?, parse_score(lat)?);
    if !(geohash::LON_MIN..=geohash::LON_MAX).contains(&x) || !(geohash::LAT_MIN..=geohash::LAT_MAX).contains(&y) {
        return Err(CmdError::err(format!("invalid longitude,latitude pair {x:.6},{y:.6}")));
    }
    Ok((x, y))
}

/// Metres per unit.
fn unit(arg: &[u8]) -> Res<f64> {
    Ok(match () {
        _ if is(arg, "m") => 1.0,
        _ if is(arg, "km") => 1000.0,
        _ if is(arg, "ft") => 0.3048,
        _ if is(arg, "mi") => 1609.34,
        _ => return Err(CmdError::err("unsupported unit provided. please use M, KM, FT, MI")),
    })
}

/// A number argument, with Redis's text for one that is not.
fn number(arg: &[u8], what: &str) -> Res<f64> {
    parse_score(arg).map_err(|_| CmdError::err(format!("need numeric {what}")))
}

/// A non-negative number argument, with Redis's text for a bad one.
fn length(arg: &[u8], what: &str, negative: &str) -> Res<f64> {
    let v = number(arg, what)?;
    if v < 0.0 {
        return Err(CmdError::err(negative));
    }
    Ok(v)
}

/// RADIUS + unit: (radius, metres per unit).
fn radius_args(a: &[Vec<u8>]) -> Res<(f64, f64)> {
    let r = length(&a[0], "radius", "radius cannot be negative")?;
    Ok((r, unit(&a[1])?))
}

/// A member's coordinates.
fn member_lonlat(cx: &Ctx, key: &[u8], m: &Meta, member: &[u8]) -> Res<Option<(f64, f64)>> {
    Ok(score_of(cx, key, m, member)?.and_then(geohash::score_to_lonlat))
}

/// A distance in the reply's fixed-point form (4 decimals, half to even).
fn distance_reply(d: f64) -> Reply {
    let v = (d * 10000.0).round_ties_even() as i64;
    let sign = if v < 0 { "-" } else { "" };
    Reply::bulk(format!("{sign}{}.{:04}", (v / 10000).unsigned_abs(), (v % 10000).unsigned_abs()))
}

fn geoadd(cx: &mut Ctx, a: &[Vec<u8>]) -> CmdResult {
    let (mut nx, mut xx) = (false, false);
    let mut at = 2;
    while at < a.len() {
        if is(&a[at], "nx") {
            nx = true;
        } else if is(&a[at], "xx") {
            xx = true;
        } else if !is(&a[at], "ch") {
            break;
        }
        at += 1;
    }
    if (a.len() - at) % 3 != 0 || (nx && xx) {
        return Err(CmdError::syntax());
    }
    let mut zadd: Vec<Vec<u8>> = a[..at].to_vec();
    for place in a[at..].chunks(3) {
        let (lon, lat) = lonlat(&place[0], &place[1])?;
        zadd.push(geohash::lonlat_to_score(lon, lat).to_string().into_bytes());
        zadd.push(place[2].clone());
    }
    zadd_generic(cx, &zadd, false)
}

fn geopos(cx: &mut Ctx, a: &[Vec<u8>]) -> CmdResult {
    let m = zset(cx, &a[1])?;
    let mut out = Vec::with_capacity(a.len() - 2);
    for member in &a[2..] {
        let at = match &m {
            Some(m) => member_lonlat(cx, &a[1], m, member)?,
            None => None,
        };
        out.push(match at {
            Some((lon, lat)) => Reply::Array(vec![Reply::Human(lon), Reply::Human(lat)]),
            None => Reply::NilArray,
        });
    }
    Ok(Reply::Array(out))
}

fn geodist(cx: &mut Ctx, a: &[Vec<u8>]) -> CmdResult {
    let to_metres = match a.len() {
        5 => unit(&a[4])?,
        4 => 1.0,
        _ => return Err(CmdError::syntax()),
    };
    let Some(m) = zset(cx, &a[1])? else { return Ok(Reply::Nil) };
    let (Some(p1), Some(p2)) = (member_lonlat(cx, &a[1], &m, &a[2])?, member_lonlat(cx, &a[1], &m, &a[3])?) else {
        return Ok(Reply::Nil);
    };
    Ok(distance_reply(geohash::distance(p1.0, p1.1, p2.0, p2.1) / to_metres))
}

fn geohash(cx: &mut Ctx, a: &[Vec<u8>]) -> CmdResult {
    let m = zset(cx, &a[1])?;
    let mut out = Vec::with_capacity(a.len() - 2);
    for member in &a[2..] {
        let score = match &m {
            Some(m) => score_of(cx, &a[1], m, member)?,
            None => None,
        };
        out.push(score.and_then(geohash::to_standard).map_or(Reply::Nil, Reply::bulk));
    }
    Ok(Reply::Array(out))
}

/// Which search command runs.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Mode {
    /// GEORADIUS[_RO]: centre and radius as arguments.
    Radius,
    /// GEORADIUSBYMEMBER[_RO]: centre at a member.
    ByMember,
    /// GEOSEARCH.
    Search,
    /// GEOSEARCHSTORE.
    SearchStore,
}

/// A place found.
struct Found {
    member: Vec<u8>,
    score: f64,
    dist: f64,
    lon: f64,
    lat: f64,
}

fn geosearch(cx: &mut Ctx, a: &[Vec<u8>]) -> CmdResult {
    search_generic(cx, a, Mode::Search, true)
}

fn geosearchstore(cx: &mut Ctx, a: &[Vec<u8>]) -> CmdResult {
    search_generic(cx, a, Mode::SearchStore, false)
}

fn georadius(cx: &mut Ctx, a: &[Vec<u8>]) -> CmdResult {
    search_generic(cx, a, Mode::Radius, false)
}

fn georadius_ro(cx: &mut Ctx, a: &[Vec<u8>]) -> CmdResult {
    search_generic(cx, a, Mode::Radius, true)
}

fn georadiusbymember(cx: &mut Ctx, a: &[Vec<u8>]) -> CmdResult {
    search_generic(cx, a, Mode::ByMember, false)
}

fn georadiusbymember_ro(cx: &mut Ctx, a: &[Vec<u8>]) -> CmdResult {
    search_generic(cx, a, Mode::ByMember, true)
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Sort {
    None,
    Asc,
    Desc,
}

/// Redis's `georadiusGeneric`: `nostore` for the commands without STORE
/// options (the _RO forms, and GEOSEARCH's own parsing).
fn search_generic(cx: &mut Ctx, a: &[Vec<u8>], mode: Mode, nostore: bool) -> CmdResult {
    let src_at = if mode == Mode::SearchStore { 2 } else { 1 };
    let src = &a[src_at];
    let zobj = zset(cx, src)?;
    let searchish = matches!(mode, Mode::Search | Mode::SearchStore);
    let mut s = Search { lon: 0.0, lat: 0.0, shape: Shape::Circle { radius: 0.0 }, conversion: 1.0 };
    let mut store: Option<&[u8]> = None;
    let base = match mode {
        Mode::Radius => {
            (s.lon, s.lat) = lonlat(&a[2], &a[3])?;
            let (radius, conv) = radius_args(&a[4..6])?;
            (s.shape, s.conversion) = (Shape::Circle { radius }, conv);
            6
        }
        Mode::ByMember => {
            if let Some(m) = &zobj {
                (s.lon, s.lat) = member_lonlat(cx, src, m, &a[2])?
                    .ok_or_else(|| CmdError::err("could not decode requested zset member"))?;
                let (radius, conv) = radius_args(&a[3..5])?;
                (s.shape, s.conversion) = (Shape::Circle { radius }, conv);
            }
            5
        }
        Mode::Search => 2,
        Mode::SearchStore => {
            store = Some(&a[1]);
            3
        }
    };
    let (mut withdist, mut withhash, mut withcoord, mut any, mut storedist) = (false, false, false, false, false);
    let (mut frommember, mut fromloc, mut byradius, mut bybox) = (false, false, false, false);
    let mut sort = Sort::None;
    let mut count: i64 = 0;
    let mut i = base;
    while i < a.len() {
        let arg = &a[i];
        let left = a.len() - i - 1;
        if is(arg, "withdist") {
            withdist = true;
        } else if is(arg, "withhash") {
            withhash = true;
        } else if is(arg, "withcoord") {
            withcoord = true;
        } else if is(arg, "any") {
            any = true;
        } else if is(arg, "asc") {
            sort = Sort::Asc;
        } else if is(arg, "desc") {
            sort = Sort::Desc;
        } else if is(arg, "count") && left >= 1 {
            count = int(&a[i + 1])?;
            if count <= 0 {
                return Err(CmdError::err("COUNT must be > 0"));
            }
            i += 1;
        } else if (is(arg, "store") || is(arg, "storedist")) && left >= 1 && !nostore && !searchish {
            store = Some(&a[i + 1]);
            storedist = is(arg, "storedist");
            i += 1;
        } else if is(arg, "storedist") && mode == Mode::SearchStore {
            storedist = true;
        } else if is(arg, "frommember") && left >= 1 && searchish && !fromloc {
            if let Some(m) = &zobj {
                (s.lon, s.lat) = member_lonlat(cx, src, m, &a[i + 1])?
                    .ok_or_else(|| CmdError::err("could not decode requested zset member"))?;
            }
            frommember = true;
            i += 1;
        } else if is(arg, "fromlonlat") && left >= 2 && searchish && !frommember {
            (s.lon, s.lat) = lonlat(&a[i + 1], &a[i + 2])?;
            fromloc = true;
            i += 2;
        } else if is(arg, "byradius") && left >= 2 && searchish && !bybox {
            let (radius, conv) = radius_args(&a[i + 1..i + 3])?;
            (s.shape, s.conversion) = (Shape::Circle { radius }, conv);
            byradius = true;
            i += 2;
        } else if is(arg, "bybox") && left >= 3 && searchish && !byradius {
            // Both numbers are parsed before either's sign is judged, as Redis does.
            let width = number(&a[i + 1], "width")?;
            let height = number(&a[i + 2], "height")?;
            if width < 0.0 || height < 0.0 {
                return Err(CmdError::err("height or width cannot be negative"));
            }
            (s.shape, s.conversion) = (Shape::Box { width, height }, unit(&a[i + 3])?);
            bybox = true;
            i += 3;
        } else {
            return Err(CmdError::syntax());
        }
        i += 1;
    }
    if store.is_some() && (withdist || withhash || withcoord) {
        let what = if mode == Mode::SearchStore { "GEOSEARCHSTORE" } else { "STORE option in GEORADIUS" };
        return Err(CmdError::err(format!("{what} is not compatible with WITHDIST, WITHHASH and WITHCOORD options")));
    }
    let name = String::from_utf8_lossy(&a[0]);
    if searchish && !(frommember || fromloc) {
        return Err(CmdError::err(format!("exactly one of FROMMEMBER or FROMLONLAT can be specified for {name}")));
    }
    if searchish && !(byradius || bybox) {
        return Err(CmdError::err(format!("exactly one of BYRADIUS and BYBOX can be specified for {name}")));
    }
    if any && count == 0 {
        return Err(CmdError::err("the ANY argument requires COUNT argument"));
    }
    let Some(m) = zobj else {
        return match store {
            Some(dst) => store_new(cx, dst, Vec::new()),
            None => Ok(Reply::Array(Vec::new())),
        };
    };
    if count != 0 && sort == Sort::None && !any {
        sort = Sort::Asc;
    }
    let mut found = gather(cx, src, &m, &s, if any { count as usize } else { 0 })?;
    let returned = if count > 0 { found.len().min(count as usize) } else { found.len() };
    if sort != Sort::None {
        let sign = if sort == Sort::Asc { 1 } else { -1 };
        let cmp = |x: &Found, y: &Found| sign * (x.dist > y.dist) as i32 - sign * (x.dist < y.dist) as i32;
        if returned == found.len() {
            // glibc's qsort is a merge sort: stable.
            found.sort_by(|x, y| cmp(x, y).cmp(&0));
        } else {
            pqsort(&mut found, &cmp, 0, returned.saturating_sub(1));
        }
    }
    found.truncate(returned);
    if let Some(dst) = store {
        let mut items: Vec<(Vec<u8>, f64)> = Vec::with_capacity(found.len());
        let mut seen = std::collections::HashSet::new();
        for f in found {
            if seen.insert(f.member.clone()) {
                items.push((f.member, if storedist { f.dist / s.conversion } else { f.score }));
            }
        }
        return store_new(cx, dst, items);
    }
    let extra = withdist as usize + withhash as usize + withcoord as usize;
    let out = found
        .into_iter()
        .map(|f| {
            if extra == 0 {
                return Reply::Bulk(f.member);
            }
            let mut item = vec![Reply::Bulk(f.member)];
            if withdist {
                item.push(distance_reply(f.dist / s.conversion));
            }
            if withhash {
                item.push(Reply::Int(geohash::c_i64(f.score)));
            }
            if withcoord {
                item.push(Reply::Array(vec![Reply::Human(f.lon), Reply::Human(f.lat)]));
            }
            Reply::Array(item)
        })
        .collect();
    Ok(Reply::Array(out))
}

/// The members inside the search's shape, cell by cell in Redis's order
/// (a cell equal to the one read just before is skipped); with `limit`
/// (COUNT ANY) the reading stops as soon as that many were found.
fn gather(cx: &Ctx, key: &[u8], m: &Meta, s: &Search, limit: usize) -> Res<Vec<Found>> {
    let mut found = Vec::new();
    let cells = s.cells();
    // The index of the cell read last; like Redis, the centre cell (index
    // 0) is never compared with.
    let mut last = 0;
    let full = |found: &Vec<Found>| limit > 0 && found.len() >= limit;
    for (i, cell) in cells.iter().enumerate() {
        if cell.bits == 0 && cell.step == 0 {
            continue;
        }
        if last != 0 && cells[last] == *cell {
            continue;
        }
        if full(&found) {
            break;
        }
        let (lo, hi) = geohash::cell_scores(*cell);
        let lo = Bound::Included(score_bytes(lo as f64).to_vec());
        let hi = Bound::Excluded(score_bytes(hi as f64).to_vec());
        let mut walk = Walk::new(ZIDX, key, m, lo, hi, false);
        while let Some((field, _)) = walk.next(cx)? {
            let (member, score) = entry(key, field)?;
            if let Some((lon, lat)) = geohash::score_to_lonlat(score) {
                if let Some(dist) = s.contains(lon, lat) {
                    found.push(Found { member, score, dist, lon, lat });
                }
            }
            if full(&found) {
                break;
            }
        }
        last = i;
    }
    Ok(found)
}
