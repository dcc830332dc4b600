//! Ranks of sorted sets big enough to have a rank index (`ranks`,
//! `cmd/zranks.rs`): ZRANK, ZREVRANK, ZCOUNT, ZLEXCOUNT, ZRANGE by rank,
//! the LIMIT pages of score ranges and ZREMRANGEBYRANK against a model,
//! through churn that cuts and joins the index's blocks, inside MULTI
//! (pending writes of the same group), across a restart (the index is
//! rebuilt), and after DEL, re-creation and RENAME.

mod common;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use tembo_server::resp::Reply;
use tembo_server::Session;

/// The sorted set as Redis orders it: by score, then member bytes.
#[derive(Default)]
struct Model {
    items: Vec<(i64, String)>,
}

impl Model {
    fn sort(&mut self) {
        self.items.sort();
    }

    fn position(&self, member: &str) -> Option<usize> {
        self.items.iter().position(|(_, m)| m == member)
    }

    fn add(&mut self, score: i64, member: &str) {
        if let Some(i) = self.position(member) {
            self.items.remove(i);
        }
        let at = self.items.partition_point(|(s, m)| (*s, m.as_str()) < (score, member));
        self.items.insert(at, (score, member.to_string()));
    }

    fn remove(&mut self, member: &str) -> bool {
        match self.position(member) {
            Some(i) => {
                self.items.remove(i);
                true
            }
            None => false,
        }
    }

    fn members(&self, range: impl Iterator<Item = usize>) -> Vec<String> {
        range.map(|i| self.items[i].1.clone()).collect()
    }

    fn in_scores(&self, lo: i64, hi: i64) -> Vec<String> {
        self.items.iter().filter(|(s, _)| *s >= lo && *s <= hi).map(|(_, m)| m.clone()).collect()
    }
}

fn strings(r: Reply) -> Vec<String> {
    match r {
        Reply::Array(v) => v
            .into_iter()
            .map(|x| match x {
                Reply::Bulk(b) => String::from_utf8(b).unwrap(),
                other => panic!("not a bulk: {other:?}"),
            })
            .collect(),
        other => panic!("not an array: {other:?}"),
    }
}

fn member(i: u32) -> String {
    format!("m{i:07}")
}

/// ZADD of `n` members with scores in `0..spread` (many ties).
fn fill(s: &mut Session, key: &str, n: u32, spread: i64, rng: &mut StdRng, model: &mut Model) {
    let mut args = vec!["ZADD".to_string(), key.to_string()];
    for i in 0..n {
        let score = rng.gen_range(0..spread);
        args.push(score.to_string());
        args.push(member(i));
        model.items.push((score, member(i)));
    }
    model.sort();
    assert_eq!(s.call(&args), Reply::Int(n as i64));
}

/// Checks a sample of rank queries of `key` against `model`.
fn check_queries(s: &mut Session, key: &str, model: &Model, rng: &mut StdRng, rounds: usize) {
    let n = model.items.len();
    for _ in 0..rounds {
        let i = rng.gen_range(0..n);
        let m = &model.items[i].1;
        assert_eq!(s.call(&["ZRANK", key, m]), Reply::Int(i as i64), "ZRANK {m}");
        assert_eq!(s.call(&["ZREVRANK", key, m]), Reply::Int((n - 1 - i) as i64), "ZREVRANK {m}");

        let (a, len) = (rng.gen_range(0..n), rng.gen_range(0..12usize));
        let b = (a + len).min(n - 1);
        let (sa, sb) = (a.to_string(), b.to_string());
        assert_eq!(strings(s.call(&["ZRANGE", key, &sa, &sb])), model.members(a..b + 1), "ZRANGE {a} {b}");
        let want: Vec<String> = model.members((n - 1 - b..n - a).rev());
        assert_eq!(strings(s.call(&["ZREVRANGE", key, &sa, &sb])), want, "ZREVRANGE {a} {b}");
        let (na, nb) = ((a as i64 - n as i64).to_string(), (b as i64 - n as i64).to_string());
        assert_eq!(strings(s.call(&["ZRANGE", key, &na, &nb])), model.members(a..b + 1), "ZRANGE {na} {nb}");

        let lo = rng.gen_range(-5..1005i64);
        let hi = lo + rng.gen_range(0..600);
        let inside = model.in_scores(lo, hi);
        let (los, his) = (lo.to_string(), hi.to_string());
        assert_eq!(s.call(&["ZCOUNT", key, &los, &his]), Reply::Int(inside.len() as i64), "ZCOUNT {lo} {hi}");
        let open = model.in_scores(lo + 1, hi - 1).len() as i64;
        let (olo, ohi) = (format!("({lo}"), format!("({hi}"));
        assert_eq!(s.call(&["ZCOUNT", key, &olo, &ohi]), Reply::Int(open), "ZCOUNT ({lo} ({hi}");

        let offset = rng.gen_range(0..inside.len() + 3);
        let off = offset.to_string();
        let page: Vec<String> = inside.iter().skip(offset).take(5).cloned().collect();
        assert_eq!(strings(s.call(&["ZRANGEBYSCORE", key, &los, &his, "LIMIT", &off, "5"])), page);
        let rpage: Vec<String> = inside.iter().rev().skip(offset).take(5).cloned().collect();
        assert_eq!(strings(s.call(&["ZREVRANGEBYSCORE", key, &his, &los, "LIMIT", &off, "5"])), rpage);
        assert_eq!(strings(s.call(&["ZRANGE", key, &his, &los, "BYSCORE", "REV", "LIMIT", &off, "5"])), rpage);
    }
    assert_eq!(s.call(&["ZRANK", key, "no-such-member"]), Reply::Nil);
    assert_eq!(s.call(&["DEBUG", "CHECK-RANK-INDEXES"]), Reply::ok());
    assert!(index_bytes(s) > 0, "the queries went through an index");
}

/// INFO memory's rank_index_bytes.
fn index_bytes(s: &mut Session) -> u64 {
    info_field(s, "memory", "rank_index_bytes")
}

/// INFO stats' rank_index_builds.
fn index_builds(s: &mut Session) -> u64 {
    info_field(s, "stats", "rank_index_builds")
}

fn info_field(s: &mut Session, section: &str, field: &str) -> u64 {
    let info = match s.call(&["INFO", section]) {
        Reply::Bulk(b) => String::from_utf8(b).unwrap(),
        Reply::Verbatim(t) => t,
        other => panic!("INFO gave {other:?}"),
    };
    let line = info.lines().find_map(|l| l.strip_prefix(&format!("{field}:"))).expect("the field in INFO");
    line.trim().parse().unwrap()
}

#[test]
fn ranks_of_a_big_sorted_set_follow_churn() {
    let pool = common::TestPool::new("zset-ranks-churn");
    let mut s = pool.create();
    let mut rng = StdRng::seed_from_u64(7);
    let mut model = Model::default();
    fill(&mut s, "lb", 6000, 1000, &mut rng, &mut model);
    check_queries(&mut s, "lb", &model, &mut rng, 60);
    let mut next = 6000;
    for round in 0..12 {
        // Adds, score changes and removals, one command each.
        for _ in 0..300 {
            match rng.gen_range(0..4) {
                0 => {
                    let score = rng.gen_range(0..1000i64);
                    assert_eq!(s.call(&["ZADD", "lb", &score.to_string(), &member(next)]), Reply::Int(1));
                    model.add(score, &member(next));
                    next += 1;
                }
                1 => {
                    let (score, m) =
                        (rng.gen_range(0..1000i64), model.items[rng.gen_range(0..model.items.len())].1.clone());
                    s.call(&["ZADD", "lb", &score.to_string(), &m]);
                    model.add(score, &m);
                }
                _ => {
                    let m = member(rng.gen_range(0..next));
                    let removed = model.remove(&m);
                    assert_eq!(s.call(&["ZREM", "lb", &m]), Reply::Int(removed as i64));
                }
            }
        }
        // A slice of the middle at once: empties whole blocks.
        let from = model.items.len() / 3 + round * 7;
        let to = from + 150;
        let got = s.call(&["ZREMRANGEBYRANK", "lb", &from.to_string(), &to.to_string()]);
        assert_eq!(got, Reply::Int(151));
        model.items.drain(from..=to);
        // And a run of members whose scores put them all in one place: fills one block.
        let mut args = vec!["ZADD".to_string(), "lb".to_string()];
        for _ in 0..400 {
            args.extend(["500".to_string(), member(next)]);
            model.add(500, &member(next));
            next += 1;
        }
        assert_eq!(s.call(&args), Reply::Int(400));
        assert_eq!(s.call(&["ZCARD", "lb"]), Reply::Int(model.items.len() as i64));
        check_queries(&mut s, "lb", &model, &mut rng, 15);
    }
    assert_eq!(index_builds(&mut s), 1, "one index, kept current through the churn");
}

#[test]
fn ranks_count_the_pending_writes_of_a_multi() {
    let pool = common::TestPool::new("zset-ranks-multi");
    let mut s = pool.create();
    let mut rng = StdRng::seed_from_u64(8);
    let mut model = Model::default();
    fill(&mut s, "lb", 3000, 100_000, &mut rng, &mut model);
    check_queries(&mut s, "lb", &model, &mut rng, 5);
    for round in 0..20 {
        assert_eq!(s.call(&["MULTI"]), Reply::ok());
        let mut queued = 0;
        for j in 0..rng.gen_range(0..40) {
            let score = rng.gen_range(0..100_000i64);
            let m = format!("x{round}-{j}");
            s.call(&["ZADD", "lb", &score.to_string(), &m]);
            model.add(score, &m);
            queued += 1;
        }
        for _ in 0..rng.gen_range(0..40) {
            let m = model.items[rng.gen_range(0..model.items.len())].1.clone();
            s.call(&["ZREM", "lb", &m]);
            model.remove(&m);
            queued += 1;
        }
        let probe = model.items[rng.gen_range(0..model.items.len())].1.clone();
        let a = rng.gen_range(300..model.items.len() - 300);
        let (lo, hi) = (rng.gen_range(0..50_000i64), rng.gen_range(50_000..100_000i64));
        let offset = rng.gen_range(300..600usize);
        for cmd in [
            vec!["ZRANK".to_string(), "lb".into(), probe.clone()],
            vec!["ZRANGE".into(), "lb".into(), a.to_string(), (a + 3).to_string()],
            vec!["ZCOUNT".into(), "lb".into(), lo.to_string(), hi.to_string()],
            vec![
                "ZRANGEBYSCORE".into(),
                "lb".into(),
                lo.to_string(),
                hi.to_string(),
                "LIMIT".into(),
                offset.to_string(),
                "4".into(),
            ],
        ] {
            assert_eq!(s.call(&cmd), Reply::Simple("QUEUED".into()));
        }
        let Reply::Array(replies) = s.call(&["EXEC"]) else { panic!("EXEC failed") };
        let tail = &replies[queued..];
        let inside = model.in_scores(lo, hi);
        assert_eq!(tail[0], Reply::Int(model.position(&probe).unwrap() as i64), "round {round}");
        assert_eq!(strings(tail[1].clone()), model.members(a..a + 4), "round {round}");
        assert_eq!(tail[2], Reply::Int(inside.len() as i64), "round {round}");
        let page: Vec<String> = inside.iter().skip(offset).take(4).cloned().collect();
        assert_eq!(strings(tail[3].clone()), page, "round {round}");
    }
    check_queries(&mut s, "lb", &model, &mut rng, 10);
    assert_eq!(index_builds(&mut s), 1, "one index, kept current through the groups");
}

#[test]
fn ranks_survive_restart_deletion_and_rename() {
    let pool = common::TestPool::new("zset-ranks-restart");
    let mut rng = StdRng::seed_from_u64(9);
    let mut model = Model::default();
    {
        let mut s = pool.create();
        fill(&mut s, "lb", 4000, 500, &mut rng, &mut model);
        check_queries(&mut s, "lb", &model, &mut rng, 10);
    }
    let mut s = pool.reopen();
    check_queries(&mut s, "lb", &model, &mut rng, 10);
    assert_eq!(index_builds(&mut s), 1, "rebuilt after the restart");
    // A new set under the same name: its own version, its own index.
    assert_eq!(s.call(&["DEL", "lb"]), Reply::Int(1));
    let mut fresh = Model::default();
    fill(&mut s, "lb", 2500, 50, &mut rng, &mut fresh);
    check_queries(&mut s, "lb", &fresh, &mut rng, 10);
    assert_eq!(s.call(&["RENAME", "lb", "board"]), Reply::ok());
    assert_eq!(s.call(&["ZRANK", "lb", &fresh.items[0].1]), Reply::Nil);
    check_queries(&mut s, "board", &fresh, &mut rng, 10);
    assert_eq!(index_builds(&mut s), 3, "one per set: the first, its successor, the renamed one");
    // One score throughout: lex ranges count through the index too.
    let mut args = vec!["ZADD".to_string(), "lex".to_string()];
    for i in 0..3000 {
        args.extend(["0".to_string(), member(i)]);
    }
    s.call(&args);
    let (a, b) = (member(700), member(2100));
    let (lo, hi) = (format!("[{a}"), format!("({b}"));
    assert_eq!(s.call(&["ZLEXCOUNT", "lex", &lo, &hi]), Reply::Int(1400));
    assert_eq!(s.call(&["ZRANK", "lex", &member(2999)]), Reply::Int(2999));
    assert_eq!(strings(s.call(&["ZRANGE", "lex", "1500", "1501"])), vec![member(1500), member(1501)]);
    assert_eq!(s.call(&["DEBUG", "CHECK-RANK-INDEXES"]), Reply::ok());
}

#[test]
fn flushes_drop_the_indexes_of_their_sets() {
    let pool = common::TestPool::new("zset-ranks-flush");
    let mut s = pool.create();
    let mut rng = StdRng::seed_from_u64(10);
    for db in ["0", "1"] {
        assert_eq!(s.call(&["SELECT", db]), Reply::ok());
        fill(&mut s, "lb", 5000, 100, &mut rng, &mut Model::default());
        let Reply::Int(_) = s.call(&["ZRANK", "lb", &member(2500)]) else { panic!("no rank") };
    }
    let both = index_bytes(&mut s);
    assert_eq!(index_builds(&mut s), 2);
    assert_eq!(s.call(&["FLUSHDB"]), Reply::ok());
    let one = index_bytes(&mut s);
    assert!(one > 0 && one < both, "FLUSHDB drops its database's index only: {both} -> {one}");
    assert_eq!(s.call(&["FLUSHALL"]), Reply::ok());
    assert_eq!(index_bytes(&mut s), 0);
}

#[test]
fn short_counts_walk_and_build_no_index() {
    let pool = common::TestPool::new("zset-ranks-short");
    let mut s = pool.create();
    let mut rng = StdRng::seed_from_u64(11);
    let mut model = Model::default();
    fill(&mut s, "lb", 5000, 1000, &mut rng, &mut model);
    let want = model.in_scores(10, 12).len() as i64;
    assert_eq!(s.call(&["ZCOUNT", "lb", "10", "12"]), Reply::Int(want));
    assert_eq!(s.call(&["ZRANK", "lb", &model.items[3].1]), Reply::Int(3));
    assert_eq!(s.call(&["ZREVRANK", "lb", &model.items[4990].1]), Reply::Int(9));
    assert_eq!(strings(s.call(&["ZRANGE", "lb", "1000", "1001"])), model.members(1000..1002));
    assert_eq!(index_builds(&mut s), 0, "walks of a few entries need no index");
    // A LIMIT offset far past the end is an empty page, with or without an index.
    let huge = i64::MAX.to_string();
    let page = s.call(&["ZRANGEBYSCORE", "lb", "(0", "+inf", "LIMIT", &huge, "1"]);
    assert_eq!(page, Reply::Array(vec![]));
    assert_eq!(s.call(&["ZRANK", "lb", &model.items[2500].1]), Reply::Int(2500));
    assert_eq!(index_builds(&mut s), 1);
    let page = s.call(&["ZRANGEBYSCORE", "lb", "(0", "+inf", "LIMIT", &huge, "1"]);
    assert_eq!(page, Reply::Array(vec![]));
    let rpage = s.call(&["ZREVRANGEBYSCORE", "lb", "+inf", "(0", "LIMIT", &huge, "1"]);
    assert_eq!(rpage, Reply::Array(vec![]));
    // A negative offset is an empty page too (Redis's answer), not one
    // that starts before the range.
    for off in ["-1", "-5", "-3000"] {
        let page = s.call(&["ZRANGEBYSCORE", "lb", "100", "200", "LIMIT", off, "3"]);
        assert_eq!(page, Reply::Array(vec![]), "offset {off}");
        let rpage = s.call(&["ZREVRANGEBYSCORE", "lb", "200", "100", "LIMIT", off, "3"]);
        assert_eq!(rpage, Reply::Array(vec![]), "offset {off}");
    }
}
