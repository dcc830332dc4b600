//! SPOP, SRANDMEMBER, HRANDFIELD and ZRANDMEMBER on collections large
//! enough to be drawn by the engine (`cmd/random.rs`, `Db::sample`)
//! rather than walked: the right members with their values and scores,
//! distinct where asked, uniform, and — inside one commit group — members
//! added or removed earlier in the group counted as they now are.

mod common;

use std::collections::{BTreeMap, BTreeSet};

use tembo_server::resp::Reply;

fn bulk(s: &str) -> Reply {
    Reply::Bulk(s.as_bytes().to_vec())
}

fn strings(r: Reply) -> Vec<String> {
    match r {
        Reply::Array(v) | Reply::Set(v) => v
            .into_iter()
            .map(|x| match x {
                Reply::Bulk(b) => String::from_utf8(b).unwrap(),
                Reply::Double(d) => format!("{d}"),
                other => panic!("not a bulk: {other:?}"),
            })
            .collect(),
        other => panic!("not an array: {other:?}"),
    }
}

fn member(i: u32) -> String {
    format!("member:{i:06}")
}

/// `SADD key` of members `range`, in commands of 500.
fn fill_set(s: &mut tembo_server::Session, key: &str, range: std::ops::Range<u32>) {
    let all: Vec<u32> = range.collect();
    for chunk in all.chunks(500) {
        let mut args = vec!["SADD".to_string(), key.to_string()];
        args.extend(chunk.iter().map(|&i| member(i)));
        assert_eq!(s.call(&args), Reply::Int(chunk.len() as i64));
    }
}

#[test]
fn spop_from_a_large_set_pops_each_member_once() {
    let pool = common::TestPool::new("random-spop");
    let mut s = pool.create();
    fill_set(&mut s, "big", 0..3000);
    let mut popped = BTreeSet::new();
    for _ in 0..1000 {
        let Reply::Bulk(m) = s.call(&["SPOP", "big"]) else { panic!("SPOP gave no member") };
        assert!(popped.insert(String::from_utf8(m).unwrap()));
    }
    for m in strings(s.call(&["SPOP", "big", "40"])) {
        assert!(popped.insert(m));
    }
    assert_eq!(s.call(&["SCARD", "big"]), Reply::Int(1960));
    let left: BTreeSet<String> = strings(s.call(&["SMEMBERS", "big"])).into_iter().collect();
    assert!(popped.is_disjoint(&left));
    let all: BTreeSet<String> = popped.union(&left).cloned().collect();
    assert_eq!(all, (0..3000).map(member).collect());
    drop(s);
    // The pops were durable: after a reopen the same members are left.
    let mut s = pool.reopen();
    assert_eq!(strings(s.call(&["SMEMBERS", "big"])).into_iter().collect::<BTreeSet<_>>(), left);
}

#[test]
fn srandmember_counts_on_a_large_set() {
    let pool = common::TestPool::new("random-srandmember");
    let mut s = pool.create();
    fill_set(&mut s, "big", 0..3000);
    let all: BTreeSet<String> = (0..3000).map(member).collect();
    for _ in 0..50 {
        let distinct = strings(s.call(&["SRANDMEMBER", "big", "25"]));
        assert_eq!(distinct.len(), 25);
        assert_eq!(distinct.iter().collect::<BTreeSet<_>>().len(), 25, "distinct members");
        assert!(distinct.iter().all(|m| all.contains(m)));
        let repeated = strings(s.call(&["SRANDMEMBER", "big", "-30"]));
        assert_eq!(repeated.len(), 30);
        assert!(repeated.iter().all(|m| all.contains(m)));
    }
    assert_eq!(s.call(&["SCARD", "big"]), Reply::Int(3000), "SRANDMEMBER removes nothing");
}

#[test]
fn draws_are_uniform_over_a_large_set() {
    let pool = common::TestPool::new("random-uniform");
    let mut s = pool.create();
    fill_set(&mut s, "big", 0..1000);
    let mut counts: BTreeMap<String, u64> = BTreeMap::new();
    let (calls, per_call) = (2500, 20);
    for _ in 0..calls {
        for m in strings(s.call(&["SRANDMEMBER", "big", "-20"])) {
            *counts.entry(m).or_default() += 1;
        }
    }
    assert_eq!(counts.len(), 1000, "every member drawn");
    let expect = (calls * per_call) as f64 / 1000.0;
    let chi: f64 = counts.values().map(|&c| (c as f64 - expect).powi(2) / expect).sum();
    // df = 999: mean 999, standard deviation 44.7; 1300 is past p = 1e-10.
    assert!(chi < 1300.0, "chi-square {chi:.0}");
}

#[test]
fn a_group_draws_from_the_set_as_its_earlier_commands_left_it() {
    let pool = common::TestPool::new("random-group");
    let mut s = pool.create();
    fill_set(&mut s, "big", 0..2000);
    assert_eq!(s.call_line("MULTI"), Reply::ok());
    let queued = Reply::Simple("QUEUED".into());
    // Half the committed members go, 60 new ones come (pending writes).
    let gone: Vec<String> = (0..2000).filter(|i| i % 2 == 0).map(member).collect();
    let mut srem = vec!["SREM".to_string(), "big".to_string()];
    srem.extend(gone.iter().cloned());
    assert_eq!(s.call(&srem), queued);
    let new: Vec<String> = (5000..5060).map(member).collect();
    let mut sadd = vec!["SADD".to_string(), "big".to_string()];
    sadd.extend(new.iter().cloned());
    assert_eq!(s.call(&sadd), queued);
    for _ in 0..150 {
        assert_eq!(s.call(&["SRANDMEMBER", "big", "-20"]), queued);
    }
    assert_eq!(s.call(&["SPOP", "big", "10"]), queued);
    let Reply::Array(results) = s.call_line("EXEC") else { panic!("EXEC failed") };
    assert_eq!(results[0], Reply::Int(1000));
    assert_eq!(results[1], Reply::Int(60));
    let gone: BTreeSet<String> = gone.into_iter().collect();
    let new: BTreeSet<String> = new.into_iter().collect();
    let mut drawn_new = 0;
    for r in results[2..152].iter().cloned() {
        for m in strings(r) {
            assert!(!gone.contains(&m), "{m} was removed earlier in the group");
            drawn_new += usize::from(new.contains(&m));
        }
    }
    // 3000 draws, 60 of 1060 members new: about 170 expected.
    assert!((80..300).contains(&drawn_new), "{drawn_new} draws of new members");
    let popped = strings(results[152].clone());
    assert_eq!(popped.len(), 10);
    assert!(popped.iter().all(|m| !gone.contains(m)));
    assert_eq!(s.call(&["SCARD", "big"]), Reply::Int(1050));
    for m in &popped {
        assert_eq!(s.call(&["SISMEMBER", "big", m]), Reply::Int(0));
    }
}

#[test]
fn hrandfield_and_zrandmember_give_values_and_scores() {
    let pool = common::TestPool::new("random-hash-zset");
    let mut s = pool.create();
    for chunk in (0..2000u32).collect::<Vec<_>>().chunks(400) {
        let mut hset = vec!["HSET".to_string(), "h".to_string()];
        let mut zadd = vec!["ZADD".to_string(), "z".to_string()];
        for &i in chunk {
            hset.extend([member(i), format!("value-{i}")]);
            zadd.extend([format!("{}", i * 2), member(i)]);
        }
        assert_eq!(s.call(&hset), Reply::Int(chunk.len() as i64));
        assert_eq!(s.call(&zadd), Reply::Int(chunk.len() as i64));
    }
    let index = |m: &str| m["member:".len()..].parse::<u32>().unwrap();
    for _ in 0..30 {
        let pairs = strings(s.call(&["HRANDFIELD", "h", "-12", "WITHVALUES"]));
        assert_eq!(pairs.len(), 24);
        for p in pairs.chunks(2) {
            assert_eq!(p[1], format!("value-{}", index(&p[0])));
        }
        let scored = strings(s.call(&["ZRANDMEMBER", "z", "12", "WITHSCORES"]));
        assert_eq!(scored.len(), 24);
        let mut seen = BTreeSet::new();
        for p in scored.chunks(2) {
            assert_eq!(p[1], format!("{}", index(&p[0]) * 2));
            assert!(seen.insert(p[0].clone()), "distinct members");
        }
        let Reply::Bulk(field) = s.call(&["HRANDFIELD", "h"]) else { panic!("HRANDFIELD gave no field") };
        let field = String::from_utf8(field).unwrap();
        assert_eq!(s.call(&["HGET", "h", &field]), bulk(&format!("value-{}", index(&field))));
    }
}

#[test]
fn a_set_made_in_the_same_group_is_drawn_from_its_pending_members() {
    let pool = common::TestPool::new("random-fresh");
    let mut s = pool.create();
    assert_eq!(s.call_line("MULTI"), Reply::ok());
    let mut sadd = vec!["SADD".to_string(), "fresh".to_string()];
    sadd.extend((0..600).map(member));
    assert_eq!(s.call(&sadd), Reply::Simple("QUEUED".into()));
    assert_eq!(s.call(&["SRANDMEMBER", "fresh", "-30"]), Reply::Simple("QUEUED".into()));
    assert_eq!(s.call(&["SPOP", "fresh", "3"]), Reply::Simple("QUEUED".into()));
    let Reply::Array(results) = s.call_line("EXEC") else { panic!("EXEC failed") };
    let all: BTreeSet<String> = (0..600).map(member).collect();
    let drawn = strings(results[1].clone());
    assert_eq!(drawn.len(), 30);
    assert!(drawn.iter().all(|m| all.contains(m)));
    let popped = strings(results[2].clone());
    assert_eq!(popped.len(), 3);
    assert_eq!(s.call(&["SCARD", "fresh"]), Reply::Int(597));
}
