//! A stream with a consumer group, its PEL and consumers survives closing
//! and reopening the pool (everything is in the store, nothing in memory
//! only), and DEL then reclaims all of it.

mod common;

use tembo_server::resp::Reply;
use tembo_server::Session;

fn bulk(s: &str) -> Reply {
    Reply::Bulk(s.as_bytes().to_vec())
}

fn call(s: &mut Session, line: &str) -> Reply {
    s.call_line(line)
}

#[test]
fn stream_groups_survive_a_restart() {
    let pool = common::TestPool::new("streams-restart");
    {
        let mut s = pool.create();
        assert_eq!(call(&mut s, "XADD st 1-1 a 1"), bulk("1-1"));
        assert_eq!(call(&mut s, "XADD st 2-1 b 2"), bulk("2-1"));
        assert_eq!(call(&mut s, "XADD st 3-1 c 3"), bulk("3-1"));
        assert_eq!(call(&mut s, "XDEL st 3-1"), Reply::Int(1));
        assert_eq!(call(&mut s, "XGROUP CREATE st g 0"), Reply::ok());
        let r = call(&mut s, "XREADGROUP GROUP g alice COUNT 1 STREAMS st >");
        assert!(matches!(r, Reply::Array(ref v) if v.len() == 1), "{r:?}");
        assert_eq!(call(&mut s, "XGROUP CREATECONSUMER st g bob"), Reply::Int(1));
    }
    let mut s = pool.reopen();
    assert_eq!(call(&mut s, "TYPE st"), Reply::Simple("stream".into()));
    assert_eq!(call(&mut s, "XLEN st"), Reply::Int(2));
    let info = call(&mut s, "XINFO STREAM st");
    let Reply::Map(fields) = info else { panic!("{info:?}") };
    let get = |name: &str| fields.iter().find(|(k, _)| *k == bulk(name)).map(|(_, v)| v.clone());
    assert_eq!(get("last-generated-id"), Some(bulk("3-1")));
    assert_eq!(get("max-deleted-entry-id"), Some(bulk("3-1")));
    assert_eq!(get("entries-added"), Some(Reply::Int(3)));
    assert_eq!(get("groups"), Some(Reply::Int(1)));
    let pending = call(&mut s, "XPENDING st g");
    assert_eq!(
        pending,
        Reply::Array(vec![
            Reply::Int(1),
            bulk("1-1"),
            bulk("1-1"),
            Reply::Array(vec![Reply::Array(vec![bulk("alice"), bulk("1")])]),
        ])
    );
    let consumers = call(&mut s, "XINFO CONSUMERS st g");
    assert!(matches!(consumers, Reply::Array(ref v) if v.len() == 2), "{consumers:?}");
    // The group goes on from where it was.
    let r = call(&mut s, "XREADGROUP GROUP g bob STREAMS st >");
    let Reply::Array(v) = r else { panic!("{r:?}") };
    let id = format!("{:?}", bulk("2-1"));
    assert_eq!(format!("{v:?}").matches(&id).count(), 1, "{v:?}");
    assert_eq!(call(&mut s, "XACK st g 1-1 2-1"), Reply::Int(2));
    // An XADD with an ID below the persisted last ID is still refused.
    assert!(matches!(call(&mut s, "XADD st 3-0 x y"), Reply::Error(e) if e.contains("equal or smaller")));
    // DEL drops entries, nodes and groups; the reclaimer sweeps them.
    assert_eq!(call(&mut s, "DEL st"), Reply::Int(1));
    s.background();
    assert_eq!(call(&mut s, "XADD st 1-1 a 1"), bulk("1-1"));
    assert_eq!(call(&mut s, "XINFO GROUPS st"), Reply::Array(vec![]));
}
