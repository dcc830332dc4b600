//! A collection created since the last commit has no committed elements,
//! so its element lookups read only the pending writes
//! (`Store::get_element`). These checks pin down what that shortcut must
//! still see: elements written earlier in the same command and the same
//! commit group, and — once committed, or after a restart — the engine's.

mod common;

use tembo_server::resp::Reply;

fn bulk(s: &str) -> Reply {
    Reply::Bulk(s.as_bytes().to_vec())
}

fn ints(v: &[i64]) -> Vec<Reply> {
    v.iter().map(|&i| Reply::Int(i)).collect()
}

#[test]
fn new_collections_count_elements_of_their_own_group_and_of_earlier_commits() {
    let pool = common::TestPool::new("fresh-versions");
    {
        let mut s = pool.create();
        // One commit group: each collection is created and then added to.
        assert_eq!(s.call_line("MULTI"), Reply::ok());
        for line in [
            "HSET h a 1 b 2 a 3",
            "HSET h a 4 c 5",
            "SADD s x y x",
            "SADD s y z",
            "ZADD z 1 m 2 n",
            "ZADD z CH 3 m 4 o",
            "DEL h",
            "HSET h a 6",
        ] {
            assert_eq!(s.call_line(line), Reply::Simple("QUEUED".into()), "{line}");
        }
        assert_eq!(s.call_line("EXEC"), Reply::Array(ints(&[2, 1, 2, 1, 2, 2, 1, 1])));
        assert_eq!(s.call_line("HGETALL h"), Reply::Map(vec![(bulk("a"), bulk("6"))]));
        assert_eq!(s.call_line("SCARD s"), Reply::Int(3));
        assert_eq!(s.call_line("ZSCORE z m"), Reply::Double(3.0));
        assert_eq!(s.call_line("ZCARD z"), Reply::Int(3));
        // Committed now: the engine's elements count.
        assert_eq!(s.call_line("HSET h a 7 b 8"), Reply::Int(1));
        assert_eq!(s.call_line("SADD s x w"), Reply::Int(1));
        assert_eq!(s.call_line("ZADD z 5 n"), Reply::Int(0));
        assert_eq!(s.call_line("ZRANGEBYSCORE z 4 5"), Reply::Array(vec![bulk("o"), bulk("n")]));
        // A collection created and added to within one command.
        assert_eq!(s.call_line("HSET h2 f 1 g 2 f 3"), Reply::Int(2));
        assert_eq!(s.call_line("HSET h2 f 4"), Reply::Int(0));
    }
    // Versions handed out after a restart start above every committed one.
    let mut s = pool.reopen();
    assert_eq!(s.call_line("HSET h a 9 c 1"), Reply::Int(1));
    assert_eq!(s.call_line("HLEN h"), Reply::Int(3));
    assert_eq!(s.call_line("HSET h3 a 1 a 2"), Reply::Int(1));
    assert_eq!(s.call_line("SADD s w v"), Reply::Int(1));
    assert_eq!(s.call_line("HGET h3 a"), bulk("2"));
    assert_eq!(s.call_line("HLEN h2"), Reply::Int(2));
}
