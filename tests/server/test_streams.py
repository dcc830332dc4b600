"""Real-client tests for the stream type: XADD XLEN XRANGE XREVRANGE XDEL
XTRIM XSETID XREAD (blocking included), consumer groups (XGROUP
XREADGROUP XACK XPENDING XCLAIM XAUTOCLAIM XINFO), and streams under the
key commands (TYPE, OBJECT ENCODING, COPY, RENAME, MOVE, SCAN TYPE).
Expected values are Redis 7.0's (checked against redis-server 7.0.15).

    TEMBO_PORT=6379 python3 -m pytest -q tests/server/test_streams.py
"""

import threading
import time

import pytest
import redis

from test_commands import err, make_client, r  # noqa: F401  (r is a fixture)

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


def raw(r, *args):
    return r.execute_command(*args)


def test_xadd_ids_and_errors(r):
    assert r.xadd("s", {"a": "1"}, id="1-1") == "1-1"
    assert r.xadd("s", {"a": "2"}, id="1-*") == "1-2"
    assert r.xadd("s", {"a": "3"}, id="5") == "5-0"
    auto = r.xadd("s", {"a": "4"})
    ms, seq = map(int, auto.split("-"))
    assert ms >= 5
    with pytest.raises(redis.ResponseError) as e:
        r.xadd("s", {"a": "x"}, id="2-0")
    assert err(e) == "The ID specified in XADD is equal or smaller than the target stream top item"
    with pytest.raises(redis.ResponseError) as e:
        r.xadd("t", {"a": "x"}, id="0-0")
    assert err(e) == "The ID specified in XADD must be greater than 0-0"
    assert r.exists("t") == 0
    for bad in ("abc", "1-x", "-1", "+"):
        with pytest.raises(redis.ResponseError) as e:
            r.xadd("s", {"a": "x"}, id=bad)
        assert err(e) == "Invalid stream ID specified as stream command argument"
    with pytest.raises(redis.ResponseError) as e:
        raw(r, "XADD", "s", "*", "field")
    assert "wrong number of arguments for 'xadd'" in err(e)
    assert raw(r, "XADD", "nope", "NOMKSTREAM", "*", "a", "b") is None
    assert r.exists("nope") == 0
    r.set("str", "x")
    with pytest.raises(redis.ResponseError) as e:
        r.xadd("str", {"a": "b"})
    assert "WRONGTYPE" in err(e)
    r.xsetid("u", "18446744073709551615-18446744073709551615") if r.exists("u") else None
    r.xadd("u", {"a": "1"}, id="18446744073709551615-18446744073709551615")
    with pytest.raises(redis.ResponseError) as e:
        r.xadd("u", {"a": "1"})
    assert "exhausted the last possible ID" in err(e)


def test_xadd_trimming(r):
    for i in range(1, 11):
        r.xadd("s", {"i": str(i)}, id=f"{i}-0")
    assert raw(r, "XADD", "s", "MAXLEN", "=", "5", "11-0", "i", "11") == "11-0"
    assert r.xlen("s") == 5
    assert raw(r, "XADD", "s", "MINID", "9", "12-0", "i", "12") == "12-0"
    assert [e[0] for e in r.xrange("s")] == ["9-0", "10-0", "11-0", "12-0"]
    with pytest.raises(redis.ResponseError) as e:
        raw(r, "XADD", "s", "MAXLEN", "5", "LIMIT", "1", "*", "a", "b")
    assert err(e) == "syntax error, LIMIT cannot be used without the special ~ option"
    with pytest.raises(redis.ResponseError) as e:
        raw(r, "XADD", "s", "MAXLEN", "5", "MINID", "1", "*", "a", "b")
    assert "MAXLEN and MINID options at the same time" in err(e)
    with pytest.raises(redis.ResponseError) as e:
        raw(r, "XADD", "s", "MAXLEN", "-1", "*", "a", "b")
    assert err(e) == "The MAXLEN argument must be >= 0."
    # Approximate trimming removes whole nodes only (100 entries each by default).
    r.delete("big")
    for i in range(1, 251):
        r.xadd("big", {"v": "x"}, id=f"{i}-0")
    assert raw(r, "XTRIM", "big", "MAXLEN", "~", "120") == 100
    assert r.xlen("big") == 150
    assert raw(r, "XTRIM", "big", "MAXLEN", "~", "0", "LIMIT", "10") == 0
    assert raw(r, "XTRIM", "big", "MAXLEN", "120") == 30
    assert r.xlen("big") == 120
    with pytest.raises(redis.ResponseError) as e:
        raw(r, "XTRIM", "big", "LIMIT", "3")
    assert "XTRIM must be called with a trimming strategy" in err(e) or "LIMIT cannot be used" in err(e)
    assert raw(r, "XTRIM", "missing", "MAXLEN", "1") == 0


def test_xrange_xrevrange(r):
    for i in range(1, 6):
        r.xadd("s", {"f": str(i)}, id=f"{i}-1")
    assert r.xrange("s", "-", "+", count=2) == [("1-1", {"f": "1"}), ("2-1", {"f": "2"})]
    assert [e[0] for e in r.xrange("s", "(2-1", "(5-1")] == ["3-1", "4-1"]
    assert [e[0] for e in r.xrange("s", "2", "3")] == ["2-1", "3-1"]
    assert [e[0] for e in r.xrevrange("s", "+", "-", count=2)] == ["5-1", "4-1"]
    assert [e[0] for e in r.xrevrange("s", "(5-1", "(1-1")] == ["4-1", "3-1", "2-1"]
    assert raw(r, "XRANGE", "s", "-", "+", "COUNT", "0") is None
    assert r.xrange("missing") == []
    with pytest.raises(redis.ResponseError) as e:
        raw(r, "XRANGE", "s", "(-", "+")
    assert "Invalid stream ID" in err(e)
    with pytest.raises(redis.ResponseError) as e:
        raw(r, "XRANGE", "s", "(18446744073709551615-18446744073709551615", "+")
    assert err(e) == "invalid start ID for the interval"
    with pytest.raises(redis.ResponseError) as e:
        raw(r, "XRANGE", "s", "-", "+", "LIMIT", "1")
    assert err(e) == "syntax error"


def test_xdel_xlen_xsetid(r):
    for i in range(1, 4):
        r.xadd("s", {"f": str(i)}, id=f"{i}-0")
    assert r.xdel("s", "2-0", "9-0") == 1
    assert r.xlen("s") == 2
    assert r.xlen("missing") == 0
    info = r.xinfo_stream("s")
    assert info["max-deleted-entry-id"] == "2-0"
    assert info["entries-added"] == 3
    assert info["recorded-first-entry-id"] == "1-0"
    r.xdel("s", "1-0")
    assert r.xinfo_stream("s")["recorded-first-entry-id"] == "3-0"
    assert raw(r, "XSETID", "s", "10-0", "ENTRIESADDED", "7", "MAXDELETEDID", "5-0") == "OK"
    info = r.xinfo_stream("s")
    assert (info["last-generated-id"], info["entries-added"], info["max-deleted-entry-id"]) == ("10-0", 7, "5-0")
    with pytest.raises(redis.ResponseError) as e:
        raw(r, "XSETID", "s", "1-0")
    assert err(e) == "The ID specified in XSETID is smaller than the target stream top item"
    with pytest.raises(redis.ResponseError) as e:
        raw(r, "XSETID", "missing", "1-0")
    assert err(e) == "no such key"
    with pytest.raises(redis.ResponseError) as e:
        raw(r, "XSETID", "s", "10-0", "ENTRIESADDED", "0")
    assert "entries_added specified in XSETID is smaller than the target stream length" in err(e)
    # An empty stream stays a key.
    r.xdel("s", "3-0")
    assert r.exists("s") == 1 and r.xlen("s") == 0


def test_xread(r):
    r.xadd("a", {"f": "1"}, id="1-0")
    r.xadd("a", {"f": "2"}, id="2-0")
    r.xadd("b", {"g": "1"}, id="5-0")
    got = r.xread({"a": "1-0", "b": "0", "c": "0"})
    if r.proto == 2:
        assert got == [["a", [("2-0", {"f": "2"})]], ["b", [("5-0", {"g": "1"})]]]
    else:
        assert got == {"a": [[("2-0", {"f": "2"})]], "b": [[("5-0", {"g": "1"})]]} or "a" in got
    assert r.xread({"a": "$"}) in ([], {}, None)
    assert r.xread({"a": "0"}, count=1) in ([["a", [("1-0", {"f": "1"})]]], {"a": [[("1-0", {"f": "1"})]]})
    with pytest.raises(redis.ResponseError) as e:
        raw(r, "XREAD", "STREAMS", "a", "b", "0")
    assert "Unbalanced XREAD list of streams" in err(e)
    with pytest.raises(redis.ResponseError) as e:
        raw(r, "XREAD", "STREAMS", "a", ">")
    assert "The > ID can be specified only when calling XREADGROUP" in err(e)
    with pytest.raises(redis.ResponseError) as e:
        raw(r, "XREAD", "BLOCK", "-1", "STREAMS", "a", "0")
    assert err(e) == "timeout is negative"
    assert raw(r, "XREAD", "BLOCK", "50", "STREAMS", "a", "$") in (None, [], {})


def test_blocking_xread_woken_by_xadd(r):
    r.xadd("s", {"old": "1"}, id="1-0")
    other = make_client(r.proto)
    result = {}

    def reader():
        result["got"] = other.xread({"s": "$"}, block=10000)

    t = threading.Thread(target=reader)
    t.start()
    for _ in range(200):
        if r.info("clients")["blocked_clients"] == 1:
            break
        time.sleep(0.01)
    assert r.info("clients")["blocked_clients"] == 1
    r.xadd("s", {"new": "2"}, id="2-0")
    t.join(5)
    got = result["got"]
    assert got in ([["s", [("2-0", {"new": "2"})]]], {"s": [[("2-0", {"new": "2"})]]})
    other.close()


def test_blocking_xreadgroup_woken_and_errors(r):
    r.xgroup_create("s", "g", id="$", mkstream=True)
    other = make_client(r.proto)
    result = {}

    def reader():
        result["got"] = other.xreadgroup("g", "c1", {"s": ">"}, block=10000)

    t = threading.Thread(target=reader)
    t.start()
    for _ in range(200):
        if r.info("clients")["blocked_clients"] == 1:
            break
        time.sleep(0.01)
    r.xadd("s", {"k": "v"}, id="7-0")
    t.join(5)
    assert result["got"] in ([["s", [("7-0", {"k": "v"})]]], {"s": [[("7-0", {"k": "v"})]]})
    assert r.xpending("s", "g")["pending"] == 1

    def reader2():
        try:
            other.xreadgroup("g", "c1", {"s": ">"}, block=10000)
        except redis.ResponseError as e:
            result["err"] = str(e)

    t = threading.Thread(target=reader2)
    t.start()
    for _ in range(200):
        if r.info("clients")["blocked_clients"] == 1:
            break
        time.sleep(0.01)
    r.xgroup_destroy("s", "g")
    t.join(5)
    assert "no longer exists" in result["err"]
    other.close()


def test_groups_read_ack_pending(r):
    for i in range(1, 5):
        r.xadd("s", {"n": str(i)}, id=f"{i}-0")
    assert r.xgroup_create("s", "g", id="0") is True
    with pytest.raises(redis.ResponseError) as e:
        r.xgroup_create("s", "g", id="0")
    assert err(e) == "BUSYGROUP Consumer Group name already exists"
    with pytest.raises(redis.ResponseError) as e:
        r.xgroup_create("missing", "g", id="0")
    assert "requires the key to exist" in err(e)
    got = r.xreadgroup("g", "alice", {"s": ">"}, count=2)
    assert got in ([["s", [("1-0", {"n": "1"}), ("2-0", {"n": "2"})]]], {"s": [[("1-0", {"n": "1"}), ("2-0", {"n": "2"})]]})
    r.xreadgroup("g", "bob", {"s": ">"}, count=1)
    r.xreadgroup("g", "carol", {"s": ">"}, count=1, noack=True)
    summary = r.xpending("s", "g")
    assert summary["pending"] == 3 and summary["min"] == "1-0" and summary["max"] == "3-0"
    assert sorted((c["name"], c["pending"]) for c in summary["consumers"]) == [("alice", 2), ("bob", 1)]
    rows = r.xpending_range("s", "g", "-", "+", 10, consumername="alice")
    assert [x["message_id"] for x in rows] == ["1-0", "2-0"]
    assert all(x["times_delivered"] == 1 for x in rows)
    # History: alice's own pending entries.
    hist = r.xreadgroup("g", "alice", {"s": "0"})
    assert [e[0] for e in (hist[0][1] if r.proto == 2 else hist["s"][0])] == ["1-0", "2-0"]
    assert r.xack("s", "g", "1-0", "9-0") == 1
    assert r.xack("missing", "g", "1-0") == 0
    groups = r.xinfo_groups("s")
    assert groups[0]["name"] == "g" and groups[0]["pending"] == 2 and groups[0]["last-delivered-id"] == "4-0"
    assert groups[0]["entries-read"] == 4 and groups[0]["lag"] == 0
    with pytest.raises(redis.ResponseError) as e:
        r.xreadgroup("nog", "c", {"s": ">"})
    assert "No such key 's' or consumer group 'nog' in XREADGROUP with GROUP option" in err(e)
    with pytest.raises(redis.ResponseError) as e:
        raw(r, "XREADGROUP", "GROUP", "g", "c", "STREAMS", "s", "$")
    assert "The $ ID is meaningless" in err(e)
    assert r.xgroup_createconsumer("s", "g", "dave") == 1
    assert r.xgroup_createconsumer("s", "g", "dave") == 0
    assert r.xgroup_delconsumer("s", "g", "alice") == 1
    assert sorted(c["name"] for c in r.xinfo_consumers("s", "g")) == ["bob", "carol", "dave"]
    assert r.xgroup_setid("s", "g", id="0") is True
    assert r.xinfo_groups("s")[0]["last-delivered-id"] == "0-0"
    assert r.xgroup_destroy("s", "g") == 1
    assert r.xgroup_destroy("s", "g") == 0
    with pytest.raises(redis.ResponseError) as e:
        r.xgroup_setid("s", "g", id="0")
    assert "No such consumer group 'g' for key name 's'" in err(e)


def test_xclaim_xautoclaim(r):
    for i in range(1, 4):
        r.xadd("s", {"n": str(i)}, id=f"{i}-0")
    r.xgroup_create("s", "g", id="0")
    r.xreadgroup("g", "alice", {"s": ">"})
    time.sleep(0.05)
    claimed = r.xclaim("s", "g", "bob", 20, ["1-0", "9-0"])
    assert claimed == [("1-0", {"n": "1"})]
    assert r.xclaim("s", "g", "bob", 100000, ["2-0"]) == []
    ids = r.xclaim("s", "g", "bob", 0, ["2-0"], justid=True)
    assert ids == ["2-0"]
    row = r.xpending_range("s", "g", "2-0", "2-0", 1)[0]
    assert row["consumer"] == "bob" and row["times_delivered"] == 1
    raw(r, "XCLAIM", "s", "g", "carol", "0", "3-0", "RETRYCOUNT", "7", "IDLE", "0")
    assert r.xpending_range("s", "g", "3-0", "3-0", 1)[0]["times_delivered"] == 7
    with pytest.raises(redis.ResponseError) as e:
        raw(r, "XCLAIM", "s", "g", "bob", "0", "1-0", "BOGUS")
    assert err(e) == "Unrecognized XCLAIM option 'BOGUS'"
    r.xdel("s", "3-0")
    got = raw(r, "XAUTOCLAIM", "s", "g", "dave", "0", "0", "COUNT", "1")
    assert got[0] == "2-0" and [e[0] for e in got[1]] == ["1-0"] and got[2] == []
    got = raw(r, "XAUTOCLAIM", "s", "g", "dave", "0", "2-0", "JUSTID")
    assert got[0] == "0-0" and len(got[1]) == 1 and got[2] == ["3-0"]
    with pytest.raises(redis.ResponseError) as e:
        raw(r, "XAUTOCLAIM", "s", "g", "dave", "0", "0", "COUNT", "0")
    assert err(e) == "COUNT must be > 0"
    with pytest.raises(redis.ResponseError) as e:
        raw(r, "XCLAIM", "s", "nog", "bob", "0", "1-0")
    assert "No such key 's' or consumer group 'nog'" in err(e)


def test_xinfo_stream(r):
    assert r.xadd("s", {"a": "1"}, id="1-0")
    r.xadd("s", {"b": "2"}, id="2-0")
    r.xgroup_create("s", "g", id="0")
    r.xreadgroup("g", "c", {"s": ">"}, count=1)
    info = r.xinfo_stream("s")
    assert info["length"] == 2 and info["groups"] == 1
    assert info["first-entry"] == ("1-0", {"a": "1"}) and info["last-entry"] == ("2-0", {"b": "2"})
    full = raw(r, "XINFO", "STREAM", "s", "FULL")
    if r.proto == 2:
        full = dict(zip(full[::2], full[1::2]))
    assert full["length"] == 2 and len(full["entries"]) == 2
    with pytest.raises(redis.ResponseError) as e:
        raw(r, "XINFO", "STREAM", "missing")
    assert err(e) == "no such key"
    with pytest.raises(redis.ResponseError) as e:
        raw(r, "XINFO", "CONSUMERS", "s", "nog")
    assert "No such consumer group 'nog' for key name 's'" in err(e)


def test_streams_as_keys(r):
    r.xadd("s", {"a": "1"}, id="1-0")
    r.xgroup_create("s", "g", id="0")
    r.xreadgroup("g", "c", {"s": ">"})
    assert r.type("s") == "stream"
    assert r.object("encoding", "s") == "stream"
    assert r.scan(0, _type="stream")[1] == ["s"]
    assert r.copy("s", "s2") is True
    assert r.xrange("s2") == [("1-0", {"a": "1"})]
    assert r.xpending("s2", "g")["pending"] == 1
    r.rename("s2", "s3")
    assert r.exists("s2") == 0 and r.xinfo_groups("s3")[0]["pending"] == 1
    assert r.move("s3", 1) is True
    other = make_client(r.proto, db=1)
    assert other.xlen("s3") == 1 and other.xinfo_groups("s3")[0]["consumers"] == 1
    other.flushdb()
    other.close()
    assert r.expire("s", 100) is True
    assert 0 < r.ttl("s") <= 100
    assert r.delete("s") == 1
    r.xadd("s", {"b": "2"}, id="5-0")
    assert r.xinfo_groups("s") == [] and r.xlen("s") == 1


# A stream DUMPed by redis-server 7.0.15 after: XADD st 1-1 a 1; XADD st 2-0
# a 2 b x; XADD st 3-0 a 3; XDEL st 3-0; XGROUP CREATE st g 0; XREADGROUP
# GROUP g alice COUNT 1 STREAMS st >; XGROUP CREATECONSUMER st g bob.
REDIS_7_STREAM_DUMP = bytes.fromhex(
    "130110000000000000000100000000000000013d3d000000180002010101010181610200010201000100010101040100"
    "010101dfff0202018161020201816202817802080103010201dfff0203010401ff0203000101030003010167010181ff"
    "ffffffffffffff0100000000000000010000000000000001719ca533a2010000010205616c696365719ca533a2010000"
    "010000000000000001000000000000000103626f62719ca533a2010000000a00484796a582790c04"
)


def as_map(x):
    """A RESP2 flat list of pairs or a RESP3 map, as a dict."""
    return x if isinstance(x, dict) else dict(zip(x[::2], x[1::2]))


def full_info(r, key):
    return as_map(raw(r, "XINFO", "STREAM", key, "FULL"))


def test_restore_of_a_redis_stream(r):
    assert r.restore("st", 0, REDIS_7_STREAM_DUMP) == "OK"
    info = full_info(r, "st")
    assert info["length"] == 2
    assert info["last-generated-id"] == "3-0"
    assert info["max-deleted-entry-id"] == "3-0"
    assert info["entries-added"] == 3
    assert info["recorded-first-entry-id"] == "1-1"
    assert info["entries"] == [["1-1", ["a", "1"]], ["2-0", ["a", "2", "b", "x"]]]
    group = as_map(info["groups"][0])
    assert group["name"] == "g" and group["last-delivered-id"] == "1-1"
    assert group["pending"] == [["1-1", "alice", 1796162821233, 1]]
    consumers = [as_map(c) for c in group["consumers"]]
    assert [(c["name"], c["seen-time"], c["pel-count"]) for c in consumers] == [
        ("alice", 1796162821233, 1),
        ("bob", 1796162821233, 0),
    ]
    # The restored stream works on: the pending entry is claimed, new
    # entries go past the last ID.
    assert r.xclaim("st", "g", "bob", 0, ["1-1"], justid=True) == ["1-1"]
    assert int(r.xadd("st", {"c": "3"}).split("-")[0]) > 3
    assert r.xpending("st", "g")["consumers"] == [{"name": "bob", "pending": 1}]


def test_dump_restore_of_a_stream_keeps_groups_and_counters(r):
    for i in range(1, 260):
        fields = {"a": str(i)} if i % 3 else {"a": str(i), "b": "x" * (i % 70), "n": str(-i)}
        r.xadd("src", fields, id=f"{i}-{i % 4}")
    r.xdel("src", "7-3", "100-0", "259-3")
    r.xgroup_create("src", "g1", "0")
    r.xgroup_create("src", "g2", "$")
    r.xreadgroup("g1", "alice", {"src": ">"}, count=20)
    r.xreadgroup("g1", "bob", {"src": ">"}, count=5)
    r.xgroup_createconsumer("src", "g1", "carol")
    r.xack("src", "g1", "1-1")
    payload = r.dump("src")
    assert r.restore("dst", 0, payload) == "OK"
    a, b = full_info(r, "src"), full_info(r, "dst")
    for info in (a, b):
        info.pop("radix-tree-nodes")  # an estimate of Redis's tree, by shape
    assert a == b
    # A stream emptied by XDEL keeps its counters through DUMP / RESTORE.
    r.xadd("e", {"a": "1"}, id="5-5")
    r.xdel("e", "5-5")
    assert r.restore("e2", 0, r.dump("e")) == "OK"
    assert as_map(raw(r, "XINFO", "STREAM", "e2"))["length"] == 0
    assert full_info(r, "e2")["last-generated-id"] == "5-5"
    # A stream payload whose first node's listpack says it is a byte longer
    # than it is gets "Bad data format" (with the checksum not checked, as
    # Redis's corrupt-dump tests ask), and nothing is written.
    bad = bytearray(payload)
    header = bad[19] >> 6  # the node's length: 6-bit, 14-bit or 32-bit
    if header == 3:
        return  # an LZF-compressed node (redis-server's DUMP); Tembo writes plain ones
    lp_start = 20 + {0: 0, 1: 1, 2: 4}[header]
    bad[lp_start] += 1
    raw(r, "DEBUG", "SET-SKIP-CHECKSUM-VALIDATION", "1")
    try:
        with pytest.raises(redis.ResponseError) as e:
            r.restore("dst2", 0, bytes(bad))
        assert "Bad data format" in str(e.value)
    finally:
        raw(r, "DEBUG", "SET-SKIP-CHECKSUM-VALIDATION", "0")
    assert r.exists("dst2") == 0


def test_restored_counters_at_their_limits_do_not_break_commands(r):
    """A payload may carry delivery times, seen times and delivery counts
    no command makes (past 2^63 ms, at u64's maximum): the commands that
    compute with them answer (their arithmetic wraps, as Redis's C does)
    instead of failing."""
    r.xadd("s", {"a": "1"}, id="1-0")
    r.xgroup_create("s", "g", "0")
    r.xreadgroup("g", "alice", {"s": ">"})
    r.xclaim("s", "g", "alice", 0, ["1-0"], time=1234567890123, retrycount=77)
    seen = as_map(as_map(full_info(r, "s")["groups"][0])["consumers"][0])["seen-time"]
    payload = bytearray(r.dump("s"))
    for value in (1234567890123, seen):
        at = payload.find(value.to_bytes(8, "little"))
        assert at > 0
        payload[at:at + 8] = b"\xff" * 8
    raw(r, "DEBUG", "SET-SKIP-CHECKSUM-VALIDATION", "1")
    try:
        assert r.restore("t", 0, bytes(payload)) == "OK"
    finally:
        raw(r, "DEBUG", "SET-SKIP-CHECKSUM-VALIDATION", "0")
    assert r.xpending_range("t", "g", "-", "+", 10)[0]["message_id"] == "1-0"
    assert r.xpending_range("t", "g", "-", "+", 10, idle=1000) is not None
    assert r.xinfo_consumers("t", "g")[0]["name"] == "alice"
    assert r.xclaim("t", "g", "bob", 1000, ["1-0"], justid=True) is not None
    assert r.xautoclaim("t", "g", "carol", 1000, "0-0") is not None
    assert full_info(r, "t")["length"] == 1
