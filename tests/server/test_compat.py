"""Real-client tests for the commands added for Redis test-suite
compatibility: bit commands, LCS, SORT, MOVE, MEMORY, DEBUG, FUNCTION,
CLIENT KILL filters, the encoding settings, and the containment of a
command that panics. Expected values are Redis 7.0's (checked against
redis-server 7.0.15 where it has the command).

    TEMBO_PORT=6379 python3 -m pytest -q tests/server/test_compat.py
"""

import socket
import threading
import time

import pytest
import redis

from test_commands import HOST, PASSWORD, PORT, Raw, err, is_reference_redis, make_client, r  # noqa: F401  (r is a fixture)

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


def test_setbit_getbit(r):
    assert r.setbit("b", 7, 1) == 0
    assert r.get("b") == "\x01"
    assert r.setbit("b", 7, 0) == 1
    assert r.setbit("b", 100, 1) == 0
    assert r.strlen("b") == 13
    assert r.getbit("b", 100) == 1
    assert r.getbit("b", 99) == 0
    assert r.getbit("b", 10**6) == 0
    assert r.getbit("missing", 3) == 0
    with pytest.raises(redis.ResponseError) as e:
        r.execute_command("SETBIT", "b", 1, 2)  # redis-py would turn 2 into 1
    assert "bit is not an integer" in err(e)
    with pytest.raises(redis.ResponseError) as e:
        r.setbit("b", -1, 1)
    assert "bit offset is not an integer" in err(e)
    r.lpush("l", "x")
    with pytest.raises(redis.ResponseError) as e:
        r.setbit("l", 0, 1)
    assert "WRONGTYPE" in err(e)


def test_setbit_keeps_ttl(r):
    r.set("k", "a", ex=100)
    r.setbit("k", 0, 1)
    assert 0 < r.ttl("k") <= 100


def test_bitcount_and_bitpos(r):
    r.set("s", "foobar")
    assert r.bitcount("s") == 26
    assert r.bitcount("s", 0, 0) == 4
    assert r.bitcount("s", 1, 1) == 6
    assert r.bitcount("s", -2, -1) == 7
    assert r.bitcount("s", 5, 30, "BIT") == 17
    assert r.bitcount("missing") == 0
    r.set("z", b"\xff\xf0\x00")
    assert r.bitpos("z", 0) == 12
    assert r.bitpos("z", 1, 2, -1) == -1
    assert r.bitpos("z", 0, 2, -1) == 16
    assert r.bitpos("z", 1, 7, 15, "BIT") == 7
    r.set("ones", b"\xff\xff")
    assert r.bitpos("ones", 0) == 16  # padded with zeros on the right
    assert r.bitpos("ones", 0, 0, -1) == -1  # an explicit end: no padding
    assert r.bitpos("missing", 1) == -1
    assert r.bitpos("missing", 0) == 0
    with pytest.raises(redis.ResponseError):
        r.execute_command("BITCOUNT", "s", 0)


def test_bitop(r):
    rb = make_client(r.proto, decode=False)
    r.set("a", b"\x0f\xf0")
    r.set("b", b"\xff")
    assert r.bitop("AND", "d", "a", "b") == 2
    assert rb.get("d") == b"\x0f\x00"
    assert r.bitop("OR", "d", "a", "b") == 2
    assert rb.get("d") == b"\xff\xf0"
    assert r.bitop("XOR", "d", "a", "b") == 2
    assert rb.get("d") == b"\xf0\xf0"
    assert r.bitop("NOT", "d", "b") == 1
    assert rb.get("d") == b"\x00"
    rb.close()
    assert r.bitop("AND", "d", "nope1", "nope2") == 0
    assert r.exists("d") == 0
    with pytest.raises(redis.ResponseError) as e:
        r.bitop("NOT", "d", "a", "b")
    assert "single source key" in err(e)


def test_bitfield(r):
    assert r.execute_command("BITFIELD", "bf", "SET", "u8", 0, 255, "GET", "u8", 0) == [0, 255]
    assert r.execute_command("BITFIELD", "bf", "INCRBY", "u8", 0, 10) == [9]
    assert r.execute_command("BITFIELD", "bf", "OVERFLOW", "SAT", "INCRBY", "u8", 0, 300) == [255]
    assert r.execute_command("BITFIELD", "bf", "OVERFLOW", "FAIL", "INCRBY", "u8", 0, 1) == [None]
    assert r.execute_command("BITFIELD", "bf", "SET", "i8", "#1", -100, "GET", "i8", "#1") == [0, -100]
    assert r.execute_command("BITFIELD", "bf", "INCRBY", "i8", 8, -100) == [56]
    assert r.execute_command("BITFIELD_RO", "bf", "GET", "u4", 0) == [15]
    assert r.execute_command("BITFIELD", "bf") == []
    with pytest.raises(redis.ResponseError) as e:
        r.execute_command("BITFIELD_RO", "bf", "SET", "u8", 0, 1)
    assert "only supports the GET subcommand" in err(e)
    # Types are lower case only (fakeredis's tests, against Redis 7.0).
    for cmd, typ in [("BITFIELD", "u64"), ("BITFIELD", "I8"), ("BITFIELD_RO", "U8")]:
        with pytest.raises(redis.ResponseError) as e:
            r.execute_command(cmd, "bf", "GET", typ, 0)
        assert "Invalid bitfield type" in err(e)
    with pytest.raises(redis.ResponseError) as e:
        r.execute_command("BITFIELD", "bf", "SET", "I8", 0, 1)
    assert "Invalid bitfield type" in err(e)
    with pytest.raises(redis.ResponseError) as e:
        r.execute_command("BITFIELD", "bf", "OVERFLOW", "MAYBE")
    assert "Invalid OVERFLOW type" in err(e)


def test_lcs(r):
    r.mset({"a": "ohmytext", "b": "mynewtext"})
    assert r.execute_command("LCS", "a", "b") == "mytext"
    assert r.execute_command("LCS", "a", "b", "LEN") == 6
    reply = r.execute_command("LCS", "a", "b", "IDX", "MINMATCHLEN", 4, "WITHMATCHLEN")
    if isinstance(reply, list):  # RESP2: a flat map
        reply = dict(zip(reply[::2], reply[1::2]))
    assert reply["len"] == 6
    assert reply["matches"] == [[[4, 7], [5, 8], 4]]
    with pytest.raises(redis.ResponseError) as e:
        r.execute_command("LCS", "a", "b", "LEN", "IDX")
    assert "please just use IDX" in err(e)


def test_sort(r):
    r.rpush("l", 3, 1, 2, 10)
    assert r.sort("l") == ["1", "2", "3", "10"]
    assert r.sort("l", desc=True) == ["10", "3", "2", "1"]
    assert r.sort("l", alpha=True) == ["1", "10", "2", "3"]
    assert r.sort("l", start=1, num=2) == ["2", "3"]
    r.mset({"w_1": 40, "w_2": 30, "w_3": 20, "w_10": 10})
    assert r.sort("l", by="w_*") == ["10", "3", "2", "1"]
    r.hset("h_1", "f", "one")
    assert r.sort("l", by="w_*", get=["#", "h_*->f"]) == ["10", None, "3", None, "2", None, "1", "one"]
    assert r.sort("l", by="nosort") == ["3", "1", "2", "10"]
    assert r.sort("l", store="dst") == 4
    assert r.lrange("dst", 0, -1) == ["1", "2", "3", "10"]
    r.sadd("s", "b", "a", "c")
    assert r.sort("s", alpha=True) == ["a", "b", "c"]
    r.zadd("z", {"x": 3, "y": 1, "w": 2})
    assert r.sort("z", by="nosort") == ["y", "w", "x"]
    assert r.execute_command("SORT_RO", "l") == ["1", "2", "3", "10"]
    r.rpush("bad", "x")
    with pytest.raises(redis.ResponseError) as e:
        r.execute_command("SORT", "bad")
    assert "can't be converted into double" in err(e)
    assert r.sort("missing") == []
    # redis-py post-processes COMMAND replies; a raw connection does not.
    conn = r.connection_pool.get_connection("COMMAND")
    try:
        conn.send_command("COMMAND", "GETKEYS", "SORT", "l", "STORE", "x", "STORE", "y")
        assert conn.read_response() == ["l", "y"]
    finally:
        r.connection_pool.release(conn)


def test_move(r):
    r.set("k", "v", ex=100)
    assert r.move("k", 1) == 1
    assert r.exists("k") == 0
    other = make_client(r.proto, db=1)
    try:
        assert other.get("k") == "v"
        assert 0 < other.ttl("k") <= 100
        other.sadd("s", "a", "b")
        r.sadd("s", "c")
        assert other.move("s", 0) == 0  # the target has it
    finally:
        other.close()
    with pytest.raises(redis.ResponseError) as e:
        r.move("s", 0)
    assert "source and destination objects are the same" in err(e)
    with pytest.raises(redis.ResponseError) as e:
        r.move("s", 99)
    assert "out of range" in err(e)


def test_memory_usage_and_function(r):
    assert r.memory_usage("missing") is None
    r.set("k", "x" * 100)
    assert r.memory_usage("k") > 100
    r.hset("h", mapping={f"f{i}": "v" * 50 for i in range(100)})
    assert r.memory_usage("h", samples=0) > 100 * 50


LIB = """#!lua name=counters
local function bump(keys, args)
  return redis.call('INCRBY', keys[1], args[1])
end
redis.register_function('bump', bump)
redis.register_function{function_name='peek', callback=function(keys) return redis.call('GET', keys[1]) end,
  flags={'no-writes'}, description='reads a counter'}
"""


def test_function_load_and_fcall(r):
    r.function_flush()
    assert r.function_load(LIB) == "counters"
    assert r.fcall("bump", 1, "c", 5) == 5
    assert r.fcall("BUMP", 1, "c", 2) == 7  # function names ignore case
    assert r.fcall_ro("peek", 1, "c") == "7"
    with pytest.raises(redis.ResponseError) as e:
        r.fcall_ro("bump", 1, "c", 1)
    assert "Can not execute a script with write flag using *_ro command" in err(e)
    with pytest.raises(redis.ResponseError) as e:
        r.function_load(LIB)
    assert "Library 'counters' already exists" in err(e)
    assert r.function_load(LIB.replace("'INCRBY', keys[1], args[1]", "'INCRBY', keys[1], 100"), replace=True)
    assert r.fcall("bump", 1, "c", 1) == 107
    [lib] = r.function_list()
    if r.proto == 2:
        lib = dict(zip(lib[::2], lib[1::2]))
    assert lib["library_name"] == "counters" and lib["engine"] == "LUA"
    names = sorted(f["name"] if isinstance(f, dict) else f[1] for f in lib["functions"])
    assert names == ["bump", "peek"]
    with pytest.raises(redis.ResponseError) as e:
        r.fcall("nope", 0)
    assert "Function not found" in err(e)
    # FLUSHALL leaves libraries alone.
    r.flushall()
    assert r.fcall("bump", 1, "c", 1) == 100


def test_function_load_errors_keep_the_loaded_set(r):
    r.function_flush()
    r.function_load(LIB)
    bad = [
        ("return 1", "Missing library metadata"),
        ("#!lua name=x\nreturn 1", "No functions registered"),
        ("#!lua name=x\nredis.register_function('bump', function() return 1 end)", "Function bump already exists"),
        ("#!lua name=x\nredis.call('set', 'a', 1)", "nonexistent global variable 'call'"),
        ("#!lua name=x\nx = 1", "Attempt to modify a readonly table"),
        ("#!lua name=x\nwhile true do end", "FUNCTION LOAD timeout"),
        ("#!lua name=x\nthis is not lua", "Error compiling function"),
        ("#!js name=x\n", "Engine 'js' not found"),
    ]
    for code, want in bad:
        with pytest.raises(redis.ResponseError) as e:
            r.function_load(code)
        assert want in err(e), (code, err(e))
    stats = r.function_stats()
    engines = stats["engines"] if isinstance(stats, dict) else stats[3]
    lua = engines["LUA"] if isinstance(engines, dict) else engines[1]
    counts = lua if isinstance(lua, dict) else dict(zip(lua[::2], lua[1::2]))
    assert counts == {"libraries_count": 1, "functions_count": 2}


def test_function_changes_of_an_aborted_transaction_are_undone(r):
    if is_reference_redis():
        pytest.skip("DEBUG PANIC crashes a real redis-server by design")
    r.function_flush()
    r.function_load(LIB)
    t = r.pipeline(transaction=True)
    t.function_delete("counters")
    t.function_load(LIB.replace("counters", "other").replace("'bump'", "'bump2'").replace("'peek'", "'peek2'"))
    t.execute_command("DEBUG", "PANIC")
    with pytest.raises(redis.exceptions.ExecAbortError):
        t.execute()
    # Neither the delete nor the load happened, in the store or in the interpreter.
    assert r.fcall("bump", 1, "c", 2) == 2
    with pytest.raises(redis.ResponseError) as e:
        r.fcall("bump2", 1, "c", 2)
    assert "Function not found" in err(e)
    assert [lib["library_name"] if isinstance(lib, dict) else lib[1] for lib in r.function_list()] == ["counters"]


def test_function_dump_restore_and_delete(r):
    r.function_flush()
    r.function_load(LIB)
    payload = r.function_dump()
    r.function_delete("counters")
    with pytest.raises(redis.ResponseError) as e:
        r.fcall("bump", 1, "c", 1)
    assert "Function not found" in err(e)
    with pytest.raises(redis.ResponseError) as e:
        r.function_delete("counters")
    assert "Library not found" in err(e)
    assert r.function_restore(payload)
    assert r.fcall("bump", 1, "c", 3) == 3
    with pytest.raises(redis.ResponseError) as e:
        r.function_restore(payload)  # APPEND: the library is there
    assert "already exists" in err(e)
    assert r.function_restore(payload, "REPLACE")
    assert r.function_restore(payload, "FLUSH")
    with pytest.raises(redis.ResponseError) as e:
        r.function_restore(payload[:-1] + bytes([payload[-1] ^ 1]))
    assert "payload version or checksum are wrong" in err(e)
    assert r.fcall("bump", 1, "c", 1) == 4


def test_function_dump_payload_from_redis_7_restores():
    """A FUNCTION DUMP payload as Redis 7.0.15 writes it (library code
    LZF-compressed, RDB version 10, CRC-64) restores here."""
    c = make_client(decode=False)
    try:
        c.function_flush()
        code = b"#!lua name=mylib\nredis.register_function('myfunc', function(keys, args) return args[1] end)"
        if is_reference_redis():
            pytest.skip("checks Tembo against a payload captured from Redis")
        c.function_load(code.decode())
        ours = c.function_dump()
        c.function_flush()
        assert c.function_restore(REDIS_7_PAYLOAD)
        assert c.fcall("myfunc", 0, "hi") == b"hi"
        assert c.function_dump() == ours  # same library, Tembo writes it uncompressed
    finally:
        c.close()


# FUNCTION DUMP of the library above, written by redis-server 7.0.15.
REDIS_7_PAYLOAD = bytes.fromhex(
    "f5c34056405b1f23216c7561206e616d653d6d796c69620a72656469732e72656769737465725f0b66756e6374696f6e28276d7940"
    "0b02272c2040066012116b6579732c2061726773292072657475726e600c075b315d20656e64290a008d5936adc6e707da"
)


def test_encoding_settings(r):
    old = r.config_get("hash-max-listpack-entries")["hash-max-listpack-entries"]
    try:
        r.config_set("hash-max-ziplist-entries", 2)
        assert r.config_get("hash-max-listpack-entries")["hash-max-listpack-entries"] == "2"
        r.hset("h", mapping={"a": 1, "b": 2})
        assert r.object("encoding", "h") == "listpack"
        r.hset("h", "c", 3)
        assert r.object("encoding", "h") == "hashtable"
    finally:
        r.config_set("hash-max-listpack-entries", old)


def test_debug_object_and_protocol(r):
    if is_reference_redis():
        pytest.skip("redis-server refuses DEBUG unless enable-debug-command is set")
    r.set("k", "12345")
    assert "encoding:int" in str(r.execute_command("DEBUG", "OBJECT", "k"))
    with pytest.raises(redis.ResponseError):
        r.execute_command("DEBUG", "OBJECT", "missing")
    assert r.execute_command("DEBUG", "PROTOCOL", "integer") == 12345


def test_debug_populate(r):
    """DEBUG POPULATE as redis-server 7.0.15 does it (checked against it)."""
    if is_reference_redis():
        pytest.skip("redis-server refuses DEBUG unless enable-debug-command is set")
    r.set("key:3", "mine")
    assert r.execute_command("DEBUG", "POPULATE", "10") in (True, "OK")
    assert r.dbsize() == 10
    assert r.get("key:3") == "mine"  # an existing key is left alone
    assert r.get("key:9") == "value:9"
    assert r.execute_command("DEBUG", "POPULATE", "3", "p", "12") in (True, "OK")
    raw = make_client(r.proto, decode=False)
    assert raw.get("p:1") == b"value:1\x00\x00\x00\x00\x00"  # padded with zero bytes
    r.execute_command("DEBUG", "POPULATE", "2", "q", "3")
    assert r.get("q:1") == "val"  # cut to the size
    r.execute_command("DEBUG", "POPULATE", "1", "x" * 200)
    assert r.keys("xx*") == ["x" * 127]  # the name cut at 127 bytes, as Redis's buffer cuts it
    for bad in (["-1"], ["abc"], ["2", "p", "-3"]):
        with pytest.raises(redis.ResponseError) as e:
            r.execute_command("DEBUG", "POPULATE", *bad)
        assert err(e) == "value is out of range, must be positive"
    # Past one commit step (10,000 keys): every key is there.
    r.flushall()
    r.execute_command("DEBUG", "POPULATE", "25000", "big")
    assert r.dbsize() == 25000
    assert r.get("big:24999") == "value:24999"


def test_debug_reload_options(r):
    """DEBUG RELOAD's options as Redis 7.0 takes them: the saved data is the
    dataset here, so NOFLUSH without MERGE fails while it holds anything
    (Redis refuses a key or library loaded twice), with MERGE it does not."""
    if is_reference_redis():
        pytest.skip("redis-server refuses DEBUG unless enable-debug-command is set")
    r.function_flush()  # libraries other tests loaded count as data too
    assert r.execute_command("DEBUG", "RELOAD", "NOFLUSH") in (True, "OK")  # nothing there
    r.set("k", "v")
    with pytest.raises(redis.ResponseError) as e:
        r.execute_command("DEBUG", "RELOAD", "NOFLUSH")
    assert err(e) == "Error trying to load the RDB dump, check server logs."
    for opts in ([], ["NOSAVE"], ["NOFLUSH", "MERGE"], ["nosave", "noflush", "merge"]):
        assert r.execute_command("DEBUG", "RELOAD", *opts) in (True, "OK")
    assert r.get("k") == "v"
    with pytest.raises(redis.ResponseError) as e:
        r.execute_command("DEBUG", "RELOAD", "FAST")
    assert err(e) == "DEBUG RELOAD only supports the MERGE, NOFLUSH and NOSAVE options."


def test_debug_object_serialized_length_is_redis_rdb_length(r):
    """serializedlength is the value's length in an RDB file, as Redis
    7.0.15 answers (go-redis's own suite checks "bar"): an integer in its
    encoded form, a long repetitive string LZF-compressed."""
    if is_reference_redis():
        pytest.skip("redis-server refuses DEBUG unless enable-debug-command is set")
    for value, length in (("bar", 4), ("12345", 3), ("x" * 50, 12)):
        r.set("k", value)
        assert "serializedlength:%d " % length in str(r.execute_command("DEBUG", "OBJECT", "k")), value


def test_debug_object_shows_an_expired_key_and_leaves_it(r):
    """DEBUG OBJECT looks at the key as stored (Redis reads its dict): a key
    past its expiry, not yet removed, is shown and stays until a lookup."""
    if is_reference_redis():
        pytest.skip("redis-server refuses DEBUG unless enable-debug-command is set")
    r.execute_command("DEBUG", "SET-ACTIVE-EXPIRE", "0")
    try:
        r.set("k", "value", px=1)
        time.sleep(0.01)
        assert "encoding:embstr" in str(r.execute_command("DEBUG", "OBJECT", "k"))
        # Redis's RDB length: a length byte and the five bytes.
        assert "serializedlength:6" in str(r.execute_command("DEBUG", "OBJECT", "k"))
        assert r.exists("k") == 0
        with pytest.raises(redis.ResponseError):
            r.execute_command("DEBUG", "OBJECT", "k")
    finally:
        r.execute_command("DEBUG", "SET-ACTIVE-EXPIRE", "1")


def test_debug_pause_cron_stops_active_expiry(r):
    if is_reference_redis():
        pytest.skip("redis-server refuses DEBUG unless enable-debug-command is set")
    expired = r.info("stats")["expired_keys"]
    r.execute_command("DEBUG", "PAUSE-CRON", "1")
    try:
        r.set("k", "v", px=1)
        time.sleep(0.5)  # five cron windows: the active cycle would have removed it
        assert r.dbsize() == 1  # DBSIZE counts a key not yet removed, as Redis's does
        assert r.info("stats")["expired_keys"] == expired
    finally:
        r.execute_command("DEBUG", "PAUSE-CRON", "0")
    deadline = time.time() + 5
    while r.dbsize() and time.time() < deadline:
        time.sleep(0.05)
    assert r.dbsize() == 0  # the cron runs again and expires it


@pytest.mark.parametrize(
    "db0, db1, kept",
    [
        # db0's x, db1's x: (None = no key, "stale" = expired not removed,
        # "live"); the WATCH is on db 1's x, taken before the swap.
        ("stale", None, True),  # a missing key replaced by an expired one: no change
        ("stale", "stale", True),  # an expired key replaced by another: no change
        (None, "stale", True),  # an expired key gone: no change
        ("live", None, False),
        (None, "live", False),
        ("stale", "live", False),
        ("live", "stale", False),
    ],
)
def test_swapdb_breaks_only_a_watch_whose_key_changed(r, db0, db1, kept):
    """SWAPDB and WATCH as redis-server 7.0.15 decides them (unit/multi's
    stale-key cases, and their mirror images)."""
    if is_reference_redis():
        pytest.skip("DEBUG SET-ACTIVE-EXPIRE needs enable-debug-command")
    r.execute_command("DEBUG", "SET-ACTIVE-EXPIRE", "0")
    one = make_client(r.proto, db=1)
    try:
        for client, what in ((r, db0), (one, db1)):
            if what == "stale":
                client.set("x", "old", px=1)
            elif what == "live":
                client.set("x", "new")
        time.sleep(0.01)
        with one.pipeline() as p:
            p.watch("x")
            r.swapdb(0, 1)
            p.multi()
            p.ping()
            if kept:
                assert p.execute() == [True]
            else:
                with pytest.raises(redis.WatchError):
                    p.execute()
    finally:
        one.close()
        r.execute_command("DEBUG", "SET-ACTIVE-EXPIRE", "1")


def test_debug_digest_is_redis_s(r):
    """DEBUG DIGEST and DIGEST-VALUE give redis-server 7.0.15's digests for
    the same keys (the values below are what it returned)."""
    if is_reference_redis():
        pytest.skip("redis-server refuses DEBUG unless enable-debug-command is set")
    assert r.execute_command("DEBUG", "DIGEST") == "0" * 40
    r.set("str", "hello")
    r.set("int", "12345")
    r.rpush("l", "a", "b", "1")
    r.sadd("s", "x", "10")
    r.hset("h", mapping={"f": "v", "n": "12"})
    r.zadd("z", {"m": 1.5, "n": -3, "o": 1e300, "p": float("inf")})
    r.xadd("st", {"a": "1"}, id="1-1")
    r.xadd("st", {"b": "2", "c": "3"}, id="2-5")
    r.set("e", "v", ex=100000)
    other = make_client(r.proto, db=5)
    other.set("other", "db")
    assert r.execute_command("DEBUG", "DIGEST") == "fa3adcdb74baa3840ce682d8d829f9fc04aeb151"
    assert r.execute_command("DEBUG", "DIGEST-VALUE", "z", "st", "e", "nope") == [
        "cc88fb4e35b79802c6caef85ec65ea3cb80d87b9",
        "0733f267402ebe567ad8d0f89b4e8b53bbbfa37c",
        "311b17018163335616e089f6b951c82c477335ac",
        "0" * 40,
    ]
    # The order keys were written in does not count; their contents do.
    r.delete("l")
    r.rpush("l", "a", "b", "1")
    assert r.execute_command("DEBUG", "DIGEST") == "fa3adcdb74baa3840ce682d8d829f9fc04aeb151"
    r.rpush("l", "2")
    assert r.execute_command("DEBUG", "DIGEST") != "fa3adcdb74baa3840ce682d8d829f9fc04aeb151"
    other.flushdb()


def test_exec_fails_when_a_watched_key_expires(r):
    """Redis 7.0: a key alive when watched that expires before EXEC fails
    the transaction; one already expired when watched does not."""
    r.set("wk", "1", px=100)
    with r.pipeline() as p:
        p.watch("wk")
        time.sleep(0.15)
        p.multi()
        p.incr("wk")
        with pytest.raises(redis.WatchError):
            p.execute()
    r.set("stale", "1", px=1)
    time.sleep(0.01)
    with r.pipeline() as p:
        p.watch("stale")
        p.multi()
        p.ping()
        assert p.execute() == [True]


def test_slowlog_logs_the_commands_exec_ran_not_exec(r):
    old = r.config_get("slowlog-log-slower-than")["slowlog-log-slower-than"]
    try:
        r.config_set("slowlog-log-slower-than", 0)
        r.slowlog_reset()
        with r.pipeline(transaction=True) as p:
            p.set("slow-a", "1")
            p.incr("slow-b")
            p.execute()
        raw = make_client(r.proto)
        entries = raw.execute_command("SLOWLOG", "GET", "10")
        raw.close()
        names = [str(e[3][0]).lower() for e in entries]
        assert "set" in names and "incrby" in names  # redis-py sends INCR as INCRBY
        assert "exec" not in names
    finally:
        r.config_set("slowlog-log-slower-than", old)


def test_client_kill_filters(r):
    victim = make_client(r.proto)
    victim.ping()
    vid = victim.client_id()
    with pytest.raises(redis.ResponseError) as e:
        r.execute_command("CLIENT", "KILL", "ID", "10", "junk")
    assert "syntax error" in err(e)
    with pytest.raises(redis.ResponseError) as e:
        r.execute_command("CLIENT", "KILL", "ID", "0")
    assert "greater than 0" in err(e)
    with pytest.raises(redis.ResponseError) as e:
        r.execute_command("CLIENT", "KILL", "TYPE", "nonsense")
    assert "Unknown client type" in err(e)
    assert r.execute_command("CLIENT", "KILL", "ID", vid, "SKIPME", "yes") == 1
    victim.close()
    assert r.ping()
    assert "cmd=client|list" in str(r.execute_command("CLIENT", "LIST"))


def test_a_panicking_command_is_contained(r):
    if is_reference_redis():
        pytest.skip("DEBUG PANIC crashes a real redis-server by design")
    with pytest.raises(redis.ResponseError) as e:
        r.execute_command("DEBUG", "PANIC")
    assert "internal error" in err(e)
    # In a pipeline: the commands around it are applied, it is not.
    p = r.pipeline(transaction=False)
    p.set("before", 1)
    p.execute_command("DEBUG", "PANIC")
    p.set("after", 2)
    out = p.execute(raise_on_error=False)
    assert out[0] is True and out[2] is True
    assert isinstance(out[1], redis.ResponseError)
    assert r.mget("before", "after") == ["1", "2"]
    # In a transaction: nothing is applied.
    t = r.pipeline(transaction=True)
    t.set("tx", 1)
    t.execute_command("DEBUG", "PANIC")
    with pytest.raises(redis.exceptions.ExecAbortError) as e:
        t.execute()
    assert "internal error" in err(e)
    assert r.get("tx") is None
    assert r.ping()


def test_a_rerun_group_applies_nothing_twice_and_resumes_scans(r):
    """A panicking command makes the executor rerun its commit group one
    command per commit. What ran before it in the group must not be applied
    twice (SAVE once committed the group so far, and the rerun then counted
    an INCR twice), and a SCAN in the group resumes from its cursor in the
    rerun (its first run had taken the cursor, and it started over)."""
    if is_reference_redis():
        pytest.skip("DEBUG PANIC crashes a real redis-server by design")
    r.mset({f"k{i:02}": i for i in range(30)})
    cursor, seen = r.scan(0, count=5)
    rounds = 0
    while cursor != 0:
        p = r.pipeline(transaction=False)
        p.incr("x").save().scan(cursor, count=5).execute_command("DEBUG", "PANIC")
        out = p.execute(raise_on_error=False)
        rounds += 1
        assert out[0] == rounds and int(r.get("x")) == rounds, (rounds, out)
        assert out[1] is True and isinstance(out[3], redis.ResponseError)
        cursor, keys = out[2]
        seen += keys
    seen = [k for k in seen if k != "x"]
    assert sorted(seen) == [f"k{i:02}" for i in range(30)]


def test_eval_basics(r):
    assert r.eval("return redis.call('set', KEYS[1], ARGV[1])", 1, "k", "v") in (True, "OK")
    assert r.eval("return {1, 'two', {3}, redis.call('get', KEYS[1]), false, 'after'}", 1, "k") == [
        1,
        "two",
        [3],
        "v",
        None,
        "after",
    ]
    assert r.eval("return 3.99", 0) == 3
    assert r.eval("return redis.status_reply('FINE')", 0) in ("FINE", True)
    with pytest.raises(redis.ResponseError) as e:
        r.eval("return redis.error_reply('My Error')", 0)
    assert "My Error" in err(e)
    # pcall hands the error to the script as a table; returned, it is the reply.
    with pytest.raises(redis.ResponseError) as e:
        r.eval("return redis.pcall('incr', KEYS[1])", 1, "k")
    assert "not an integer" in err(e)
    assert r.eval("local e = redis.pcall('incr', KEYS[1]) return type(e.err)", 1, "k") == "string"
    with pytest.raises(redis.ResponseError) as e:
        r.eval("return redis.call('incr', KEYS[1])", 1, "k")
    assert "not an integer" in err(e)
    with pytest.raises(redis.ResponseError) as e:
        r.eval("x = 1", 0)
    assert "Attempt to modify a readonly table" in err(e)
    with pytest.raises(redis.ResponseError) as e:
        r.eval("return y", 0)
    assert "nonexistent global variable 'y'" in err(e)
    with pytest.raises(redis.ResponseError) as e:
        r.eval("return redis.call('multi')", 0)
    assert "not allowed from script" in err(e)
    with pytest.raises(redis.ResponseError) as e:
        r.eval("return 1", 2, "only-one")
    assert "greater than number of args" in err(e)
    with pytest.raises(redis.ResponseError) as e:
        r.eval("this is not lua", 0)
    assert "Error compiling script" in err(e)


def test_eval_libraries(r):
    assert r.eval("return cjson.encode({a = 1})", 0) == '{"a":1}'
    assert r.eval("return cjson.decode(ARGV[1]).b[2]", 0, '{"b": [10, 20]}') == 20
    assert r.eval("return bit.band(0xff, 0x0f)", 0) == 15
    assert r.eval("return bit.tohex(255, 4)", 0) == "00ff"
    assert r.eval("return redis.sha1hex('')", 0) == "da39a3ee5e6b4b0d3255bfef95601890afd80709"


def test_evalsha_and_script_cache(r):
    sha = r.script_load("return ARGV[1] .. KEYS[1]")
    assert r.script_exists(sha, "0" * 40) == [True, False]
    assert r.evalsha(sha, 1, "a", "b") == "ba"
    r.script_flush()
    with pytest.raises(redis.exceptions.NoScriptError):
        r.evalsha(sha, 1, "a", "b")
    s = r.register_script("return redis.call('incrby', KEYS[1], ARGV[1])")
    assert s(keys=["n"], args=[5]) == 5
    assert s(keys=["n"], args=[5]) == 10


def test_read_only_scripts(r):
    with pytest.raises(redis.ResponseError) as e:
        r.execute_command("EVAL_RO", "return redis.call('set', 'a', 1)", 0)
    assert "Write commands are not allowed from read-only scripts" in err(e)
    with pytest.raises(redis.ResponseError) as e:
        r.eval("#!lua flags=no-writes\nreturn redis.call('set', 'a', 1)", 0)
    assert "Write commands are not allowed" in err(e)
    r.set("a", "1")
    assert r.execute_command("EVAL_RO", "return redis.call('get', KEYS[1])", 1, "a") == "1"


def test_redis_py_lock(r):
    lock = r.lock("resource", timeout=5)
    assert lock.acquire(blocking=False)
    assert not r.lock("resource", timeout=5).acquire(blocking=False)
    assert lock.extend(2)
    lock.release()
    assert r.exists("resource") == 0


def _drain(p, n, timeout=2.0):
    import time

    out, end = [], time.time() + timeout
    while len(out) < n and time.time() < end:
        m = p.get_message(timeout=0.1)
        if m and m["type"] in ("message", "pmessage"):
            out.append((m["channel"], m["data"]))
    return out


def test_keyspace_notifications(r):
    old = r.config_get("notify-keyspace-events")["notify-keyspace-events"]
    sub = make_client(2)
    try:
        r.config_set("notify-keyspace-events", "KEA")
        assert r.config_get("notify-keyspace-events")["notify-keyspace-events"] == "AKE"
        p = sub.pubsub()
        p.psubscribe("__key*__:*")
        assert _drain(p, 1, 0.3) == []
        r.set("k", "v")
        r.lpush("l", "a")
        r.lpop("l")
        r.rename("k", "k2")
        r.hset("h", "f", "1")
        r.delete("h")
        got = _drain(p, 14)
        assert got == [
            ("__keyspace@0__:k", "set"),
            ("__keyevent@0__:set", "k"),
            ("__keyspace@0__:l", "lpush"),
            ("__keyevent@0__:lpush", "l"),
            ("__keyspace@0__:l", "lpop"),
            ("__keyevent@0__:lpop", "l"),
            ("__keyspace@0__:l", "del"),
            ("__keyevent@0__:del", "l"),
            ("__keyspace@0__:k", "rename_from"),
            ("__keyevent@0__:rename_from", "k"),
            ("__keyspace@0__:k2", "rename_to"),
            ("__keyevent@0__:rename_to", "k2"),
            ("__keyspace@0__:h", "hset"),
            ("__keyevent@0__:hset", "h"),
        ]
        assert _drain(p, 2) == [("__keyspace@0__:h", "del"), ("__keyevent@0__:del", "h")]
        # Expiry, by the active cycle.
        r.config_set("notify-keyspace-events", "Ex")
        r.set("t", "1", px=50)
        assert _drain(p, 1, 3.0) == [("__keyevent@0__:expired", "t")]
        with pytest.raises(redis.ResponseError) as e:
            r.config_set("notify-keyspace-events", "Kq")
        assert "Invalid event class character" in err(e)
        p.close()
    finally:
        r.config_set("notify-keyspace-events", old)
        sub.close()


def test_slowlog(r):
    old = r.config_get("slowlog-log-slower-than")["slowlog-log-slower-than"]
    try:
        r.slowlog_reset()
        r.config_set("slowlog-log-slower-than", 0)
        r.set("k", "x" * 200)
        r.execute_command("DEBUG", "SLEEP", 0) if not is_reference_redis() else r.ping()
        entries = r.slowlog_get(-1)
        assert r.slowlog_len() >= 2
        cmds = [e["command"] for e in entries]
        cmds = [(c.decode() if isinstance(c, bytes) else c).lower() for c in cmds]
        assert any(c.startswith("set k ") and "... (72 more bytes)" in c for c in cmds), cmds
        r.config_set("slowlog-log-slower-than", -1)
        r.slowlog_reset()
        r.set("k", "y")
        assert r.slowlog_len() == 0
    finally:
        r.config_set("slowlog-log-slower-than", old)


def _crc64_redis(data):
    """CRC-64/Jones, reflected, as Redis checksums DUMP payloads."""
    crc = 0
    for b in data:
        crc ^= b
        for _ in range(8):
            crc = (crc >> 1) ^ (0x95AC9329AC4BC9B5 if crc & 1 else 0)
    return crc


def _sealed(body, version):
    signed = body + version.to_bytes(2, "little")
    return signed + _crc64_redis(signed).to_bytes(8, "little")


def test_restore_reads_redis_7_2_payloads():
    """Payloads of Redis 7.2 (RDB 11) and 7.4 (RDB 12): their older types
    and 7.2's listpack set restore; a version past 12 and 7.4's hash with
    field expiry (type 25) are refused."""
    if is_reference_redis():
        pytest.skip("redis-server 7.0 refuses RDB versions past 10")
    c = make_client(decode=False)
    try:
        # A string (type 0) under version 12.
        assert c.restore("s12", 0, _sealed(b"\x00\x03abc", 12))
        assert c.get("s12") == b"abc"
        # A listpack set (type 20): the integer 7 and "ab".
        lp = bytes([13, 0, 0, 0, 2, 0, 0x07, 0x01, 0x82]) + b"ab" + bytes([0x03, 0xFF])
        assert c.restore("set11", 0, _sealed(bytes([20, len(lp)]) + lp, 11))
        assert c.smembers("set11") == {b"7", b"ab"}
        assert c.type("set11") == b"set"
        # Tembo's own DUMP of it is RDB 10, which Redis 7.0 reads.
        assert c.dump("set11")[-10:-8] == b"\x0a\x00"
        with pytest.raises(redis.ResponseError) as e:
            c.restore("v13", 0, _sealed(b"\x00\x03abc", 13))
        assert "payload version or checksum are wrong" in err(e)
        with pytest.raises(redis.ResponseError) as e:
            c.restore("h25", 0, _sealed(bytes([25, 0]), 12))
        assert "Bad data format" in err(e)
        assert c.exists("v13", "h25") == 0
    finally:
        c.delete("s12", "set11")
        c.close()


def test_dump_and_restore(r):
    r.rpush("l", "a", "b", "12")
    r.hset("h", mapping={"f": "v", "g": "w"})
    r.zadd("z", {"m": 1.5, "n": -2})
    r.sadd("s", "1", "2", "x")
    r.set("str", "hello")
    for key in ("l", "h", "z", "s", "str"):
        payload = r.dump(key)
        assert r.restore(key + ":copy", 0, payload)
        assert r.type(key + ":copy") == r.type(key)
    assert r.lrange("l:copy", 0, -1) == ["a", "b", "12"]
    assert r.hgetall("h:copy") == {"f": "v", "g": "w"}
    assert [tuple(p) for p in r.zrange("z:copy", 0, -1, withscores=True)] == [("n", -2.0), ("m", 1.5)]
    assert r.smembers("s:copy") == {"1", "2", "x"}
    assert r.dump("missing") is None
    payload = r.dump("str")
    with pytest.raises(redis.ResponseError) as e:
        r.restore("str", 0, payload)
    assert err(e).startswith("BUSYKEY")
    r.set("str", "other")
    assert r.restore("str", 0, payload, replace=True) and r.get("str") == "hello"
    assert r.restore("ttl", 5000, payload) and 3000 < r.pttl("ttl") <= 5000
    assert r.restore("past", 1, payload, absttl=True) and r.exists("past") == 0
    with pytest.raises(redis.ResponseError) as e:
        r.restore("neg", -1, payload)
    assert "Invalid TTL value" in err(e)
    with pytest.raises(redis.ResponseError) as e:
        r.restore("bad", 0, payload[:-1] + b"x")
    assert "DUMP payload version or checksum are wrong" in err(e)
    with pytest.raises(redis.ResponseError) as e:
        r.execute_command("RESTORE", "opt", 0, payload, "BOGUS")
    assert "syntax error" in err(e)


def test_client_tracking_invalidations_over_resp3():
    """The push frames a client-side cache reads, byte for byte: a RESP3
    connection with CLIENT TRACKING gets `invalidate [key]` after another
    connection changes a key it read (after the commit, once), and a null
    key list on FLUSHALL. (redis-py's own cache refuses servers older than
    Redis 7.4, so this speaks RESP directly.)"""
    import socket

    s = socket.create_connection(("127.0.0.1", PORT), timeout=5)
    other = make_client()
    try:
        def send(*args):
            s.sendall(b"".join([b"*%d\r\n" % len(args)] + [b"$%d\r\n%s\r\n" % (len(a), a) for a in args]))

        def read_until(marker):
            buf = b""
            deadline = time.time() + 5
            while marker not in buf:
                assert time.time() < deadline, buf
                buf += s.recv(65536)
            return buf

        if PASSWORD:
            send(b"AUTH", PASSWORD.encode())
            read_until(b"+OK\r\n")
        send(b"HELLO", b"3")
        read_until(b"proto")
        send(b"CLIENT", b"TRACKING", b"on")
        read_until(b"+OK\r\n")
        other.set("trk:k", "v1")
        send(b"GET", b"trk:k")
        read_until(b"v1\r\n")
        other.set("trk:k", "v2")
        assert read_until(b"trk:k\r\n") == b">2\r\n$10\r\ninvalidate\r\n*1\r\n$5\r\ntrk:k\r\n"
        other.set("trk:k", "v3")  # not read since: no second message
        send(b"PING")
        assert read_until(b"PONG\r\n") == b"+PONG\r\n"
        send(b"GET", b"trk:k")
        read_until(b"v3\r\n")
        other.flushall()
        assert read_until(b"_\r\n") == b">2\r\n$10\r\ninvalidate\r\n_\r\n"
    finally:
        s.close()
        other.close()


def test_client_tracking_commands(r):
    me = r.client_id()
    assert r.execute_command("CLIENT", "GETREDIR") == -1
    assert r.client_tracking_on(clientid=me, bcast=True, prefix=["user:", "order:"])
    info = r.execute_command("CLIENT", "TRACKINGINFO")
    info = info if isinstance(info, dict) else dict(zip(info[::2], info[1::2]))
    assert "bcast" in info["flags"] and sorted(info["prefixes"]) == ["order:", "user:"]
    with pytest.raises(redis.ResponseError) as e:
        r.execute_command("CLIENT", "TRACKING", "on", "BCAST", "PREFIX", "use")
    assert "overlaps with an existing prefix" in err(e)
    with pytest.raises(redis.ResponseError) as e:
        r.execute_command("CLIENT", "TRACKING", "on")
    assert "switch BCAST mode" in err(e)
    assert r.client_tracking_off()
    with pytest.raises(redis.ResponseError) as e:
        r.execute_command("CLIENT", "CACHING", "yes")
    assert "only when the client is in tracking mode" in err(e)
    with pytest.raises(redis.ResponseError) as e:
        r.execute_command("CLIENT", "TRACKING", "on", "REDIRECT", 999999)
    assert "does not exist" in err(e)
    assert "flags=N" in r.execute_command("CLIENT", "INFO")


def test_sharded_pubsub(r):
    p = r.pubsub()
    try:
        p.ssubscribe("shard:a")
        deadline = time.time() + 5
        msg = None
        while msg is None or msg["type"] != "ssubscribe":
            assert time.time() < deadline
            msg = p.get_sharded_message(timeout=0.1)
        assert r.spublish("shard:a", "hello") == 1
        assert r.publish("shard:a", "not for shard subscribers") == 0
        assert r.execute_command("PUBSUB", "SHARDCHANNELS") == ["shard:a"]
        assert r.execute_command("PUBSUB", "SHARDNUMSUB", "shard:a", "shard:b") == ["shard:a", 1, "shard:b", 0]
        got = None
        while got is None or got["type"] != "smessage":
            assert time.time() < deadline
            got = p.get_sharded_message(timeout=0.1)
        assert got["channel"] == "shard:a" and got["data"] == "hello"
        p.sunsubscribe("shard:a")
    finally:
        p.close()


def test_standalone_answers(r):
    assert r.execute_command("ROLE") == ["master", 0, []]
    assert r.execute_command("WAIT", 0, 100) == 0
    assert r.execute_command("REPLICAOF", "NO", "ONE") in (True, "OK")
    with pytest.raises(redis.ResponseError) as e:
        r.execute_command("CLUSTER", "INFO")
    assert "cluster support disabled" in err(e)
    # Cluster clients send these on connect; they have no subcommand.
    for c in ("READONLY", "READWRITE", "ASKING"):
        with pytest.raises(redis.ResponseError) as e:
            r.execute_command(c)
        assert "cluster support disabled" in err(e)
    r.set("s", "hello")
    assert r.execute_command("SUBSTR", "s", 1, 3) == "ell"


def test_errorstats_and_rejected_calls(r):
    r.config_resetstat()
    r.set("s", "v")
    with pytest.raises(redis.ResponseError):
        r.lpush("s", "x")  # runs and fails: WRONGTYPE, a failed call
    with pytest.raises(redis.ResponseError):
        r.execute_command("NOSUCHCMD")  # unknown: an ERR, no command to charge
    with pytest.raises(redis.ResponseError):
        r.execute_command("GET")  # wrong arity: rejected before it runs
    with pytest.raises(redis.ResponseError):
        r.eval("return redis.call('lpush', KEYS[1], 'x')", 1, "s")  # counted once, for LPUSH
    errors = r.info("errorstats")
    assert errors["errorstat_WRONGTYPE"] == {"count": 2}
    assert errors["errorstat_ERR"] == {"count": 2}
    stats = r.info("commandstats")
    assert stats["cmdstat_lpush"]["failed_calls"] == 2 and stats["cmdstat_lpush"]["rejected_calls"] == 0
    assert stats["cmdstat_get"]["rejected_calls"] == 1 and stats["cmdstat_get"]["calls"] == 0
    assert stats["cmdstat_eval"]["failed_calls"] == 1
    assert r.info("stats")["total_error_replies"] == 4


def test_config_set_is_all_or_nothing(r):
    old = r.config_get("maxclients")["maxclients"]
    old_len = r.config_get("slowlog-max-len")["slowlog-max-len"]
    with pytest.raises(redis.ResponseError) as e:
        r.execute_command("CONFIG", "SET", "maxclients", "1234", "slowlog-max-len", "12", "notify-keyspace-events", "!!")
    assert "notify-keyspace-events" in err(e)
    assert r.config_get("maxclients")["maxclients"] == old
    assert r.config_get("slowlog-max-len")["slowlog-max-len"] == old_len
    with pytest.raises(redis.ResponseError) as e:
        r.execute_command("CONFIG", "SET", "maxclients", "1234", "maxclients", "1235")
    assert "duplicate" in err(e)
    assert r.execute_command("CONFIG", "SET", "maxclients", "1234", "slowlog-max-len", "12")
    assert r.config_get("maxclients")["maxclients"] == "1234"
    r.execute_command("CONFIG", "SET", "maxclients", old, "slowlog-max-len", old_len)


def pairs(reply):
    """A RESP3 map as is, a RESP2 flat list of pairs as a dict (nested too)."""
    if isinstance(reply, list):
        return {reply[i]: pairs(reply[i + 1]) for i in range(0, len(reply), 2)}
    if isinstance(reply, dict):
        return {k: pairs(v) for k, v in reply.items()}
    return reply


SPIN_30MS = """
local t0 = redis.call('TIME')
local start = t0[1] * 1000000 + t0[2]
while true do
  local t = redis.call('TIME')
  if t[1] * 1000000 + t[2] - start > 30000 then return 1 end
end
"""


def test_latency_monitor_and_histograms(r):
    r.config_set("latency-monitor-threshold", 10)
    try:
        r.latency_reset()
        r.config_resetstat()
        r.eval(SPIN_30MS, 0)  # one command of ~30 ms: a "command" event
        latest = r.latency_latest()
        assert [e[0] for e in latest] == ["command"]
        assert latest[0][2] >= 25 and latest[0][3] >= latest[0][2]
        assert len(r.latency_history("command")) == 1
        assert r.latency_history("nosuch") == []
        assert len(r.execute_command("LATENCY", "DOCTOR")) > 0
        r.set("a", "1")
        r.set("b", "2")
        r.client_id()
        histo = pairs(r.execute_command("LATENCY", "HISTOGRAM", "set", "client", "nosuch"))
        assert set(histo) == {"set", "client|id"}
        assert histo["set"]["calls"] == 2
        assert sum(1 for _ in histo["set"]["histogram_usec"]) >= 1
        assert max(histo["set"]["histogram_usec"].values()) == 2  # cumulative
        stats = r.info("commandstats")
        assert stats["cmdstat_client|id"]["calls"] == 1 and stats["cmdstat_set"]["calls"] == 2
        assert r.latency_reset() == 1
        assert r.latency_latest() == []
    finally:
        r.config_set("latency-monitor-threshold", 0)


def test_client_pause_write_holds_writers_until_unpause(r):
    r.set("k", "before")
    writer = make_client()
    try:
        assert r.execute_command("CLIENT", "PAUSE", 60000, "WRITE") in (True, "OK")
        # Reads go on while writes wait.
        assert r.get("k") == "before"
        held = threading.Thread(target=writer.set, args=("k", "after"))
        held.start()
        deadline = time.time() + 5
        while int(r.info("clients")["blocked_clients"]) < 1:
            assert time.time() < deadline, "the writer was not held"
            time.sleep(0.02)
        assert r.get("k") == "before"
        assert r.execute_command("CLIENT", "UNPAUSE") in (True, "OK")
        deadline = time.time() + 5
        while r.get("k") != "after":
            assert time.time() < deadline, "the held write never ran"
            time.sleep(0.02)
        held.join(5)
        assert int(r.info("clients")["blocked_clients"]) == 0
    finally:
        r.execute_command("CLIENT", "UNPAUSE")
        writer.close()
    with pytest.raises(redis.ResponseError) as e:
        r.execute_command("CLIENT", "PAUSE", 10, "SOME")
    assert "mode must be WRITE or ALL" in err(e)
    with pytest.raises(redis.ResponseError) as e:
        r.execute_command("CLIENT", "PAUSE", -1)
    assert "timeout is negative" in err(e)


def test_object_idletime_counts_from_the_last_use(r):
    r.set("idle", "v")
    r.restore("aged", 0, r.dump("idle"), idletime=1000)
    # As old as the server at most (the clock starts when it does), and older than a fresh key.
    assert r.object("idletime", "aged") >= r.object("idletime", "idle")
    r.get("aged")
    assert r.object("idletime", "aged") <= 1


def test_command_getkeys_follows_redis(r):
    assert r.command_getkeys("EVAL", "return 1", 0) == []
    assert r.command_getkeys("GEORADIUS", "g", 0, 0, 1, "m", "STORE", "d") == ["g", "d"]
    with pytest.raises(redis.ResponseError) as e:
        r.command_getkeys("SET", "a")
    assert "Invalid number of arguments" in err(e)
    with pytest.raises(redis.ResponseError) as e:
        r.command_getkeys("PING", "x")
    assert "no key arguments" in err(e)
    with pytest.raises(redis.ResponseError) as e:
        r.execute_command("CLUSTER", "NODES")
    assert "cluster support disabled" in err(e)


# Fields monitoring tools (redis_exporter, redis-cli --stat, dashboards) read.
INFO_FIELDS = {
    "server": ["redis_version", "redis_mode", "os", "process_id", "run_id", "tcp_port", "server_time_usec",
               "uptime_in_seconds", "hz", "configured_hz", "lru_clock", "executable"],
    "clients": ["connected_clients", "maxclients", "blocked_clients", "tracking_clients",
                "clients_in_timeout_table"],
    "memory": ["used_memory", "used_memory_human", "used_memory_rss", "used_memory_peak",
               "used_memory_peak_perc", "total_system_memory", "used_memory_lua", "number_of_functions",
               "maxmemory", "maxmemory_policy"],
    "persistence": ["loading", "rdb_last_bgsave_status", "aof_enabled", "aof_last_write_status"],
    "stats": ["total_connections_received", "total_commands_processed", "instantaneous_ops_per_sec",
              "total_net_input_bytes", "total_net_output_bytes", "instantaneous_input_kbps",
              "rejected_connections", "expired_keys", "evicted_keys", "keyspace_hits", "keyspace_misses",
              "pubsubshard_channels", "total_error_replies", "total_reads_processed", "total_writes_processed"],
    "replication": ["role", "connected_slaves", "master_replid", "master_repl_offset", "repl_backlog_size"],
    "cpu": ["used_cpu_sys", "used_cpu_user", "used_cpu_sys_children", "used_cpu_user_main_thread"],
    "cluster": ["cluster_enabled"],
}


def test_info_has_the_fields_redis_tools_read(r):
    plain = make_client()
    plain.set_response_callback("INFO", lambda resp, **kw: resp)
    raw = plain.execute_command("INFO", "everything")
    plain.close()
    titles = [line[2:].strip() for line in raw.splitlines() if line.startswith("# ")]
    assert titles == ["Server", "Clients", "Memory", "Persistence", "Stats", "Replication", "CPU", "Modules",
                      "Commandstats", "Errorstats", "Latencystats", "Cluster", "Keyspace"]
    for section, fields in INFO_FIELDS.items():
        info = r.info(section)
        missing = [f for f in fields if f not in info]
        assert not missing, f"INFO {section} lacks {missing}"
    assert r.info("cluster")["cluster_enabled"] == 0
    before = r.info("stats")
    for i in range(200):
        r.set(f"k{i}", "v")
    after = r.info("stats")
    assert after["total_net_input_bytes"] > before["total_net_input_bytes"]
    assert after["total_net_output_bytes"] > before["total_net_output_bytes"]
    assert after["total_commands_processed"] >= before["total_commands_processed"] + 200


def test_info_latencystats_follows_its_settings(r):
    r.config_set("latency-tracking-info-percentiles", "50 99.9")
    try:
        r.set("k", "v")
        # redis-py reads the line as {"p50": …, "p99.9": …}.
        assert list(r.info("latencystats")["latency_percentiles_usec_set"]) == ["p50", "p99.9"]
        assert r.config_get("latency-tracking-info-percentiles") == {"latency-tracking-info-percentiles": "50 99.9"}
        with pytest.raises(redis.ResponseError) as e:
            r.config_set("latency-tracking-info-percentiles", "50 101")
        assert "between [0.0,100.0]" in err(e)
    finally:
        r.config_set("latency-tracking-info-percentiles", "50 99 99.9")


def test_swapdb_exchanges_databases_durably(r):
    r.set("a", "in0")
    one = make_client(db=1)
    try:
        one.set("a", "in1")
        one.hset("h", "f", "v")
        watcher = make_client()
        p = watcher.pipeline()
        p.watch("a")
        assert r.swapdb(0, 1)
        assert r.get("a") == "in1" and r.hget("h", "f") == "v"
        assert one.get("a") == "in0" and one.exists("h") == 0
        # The watched key changed under the watcher: its EXEC fails.
        p.multi()
        p.set("a", "x")
        with pytest.raises(redis.WatchError):
            p.execute()
        watcher.close()
        keyspace = r.info("keyspace")
        assert keyspace["db0"]["keys"] == 2 and keyspace["db1"]["keys"] == 1
        assert r.swapdb(1, 0) and r.get("a") == "in0"
        with pytest.raises(redis.ResponseError) as e:
            r.swapdb(0, 10000)
        assert "DB index is out of range" in err(e)
        with pytest.raises(redis.ResponseError) as e:
            r.execute_command("SWAPDB", "x", 1)
        assert "invalid first DB index" in err(e)
    finally:
        one.flushdb()
        one.close()


def test_swapdb_serves_a_client_blocked_on_the_other_database(r):
    one = make_client(db=1)
    blocked = make_client()
    try:
        one.rpush("q", "job")
        got = []
        t = threading.Thread(target=lambda: got.append(blocked.blpop("q", timeout=10)))
        t.start()
        deadline = time.time() + 5
        while int(r.info("clients")["blocked_clients"]) < 1:
            assert time.time() < deadline
            time.sleep(0.02)
        r.swapdb(0, 1)
        t.join(10)
        assert got == [("q", "job")]
    finally:
        r.swapdb(0, 1)
        one.flushdb()
        one.close()
        blocked.close()


def test_client_pause_ending_in_a_failed_group_still_answers(r):
    """A held client whose release falls in a group that cannot commit (a
    command in it stops midway) is answered one command per commit, not
    left waiting."""
    if is_reference_redis():
        pytest.skip("DEBUG PANIC crashes Redis itself")
    raw = Raw(timeout=10)
    try:
        r.execute_command("CLIENT", "PAUSE", 300, "WRITE")
        raw.send(Raw.encode("SET", "k", "v") + Raw.encode("DEBUG", "PANIC"))
        assert raw.read() == ("+", "OK")
        kind, _ = raw.read()
        assert kind == "-"
        assert r.get("k") == "v"
    finally:
        r.execute_command("CLIENT", "UNPAUSE")
        raw.close()


def test_client_pause_write_holds_function_load_but_not_help(r):
    r.execute_command("CLIENT", "PAUSE", 60000, "WRITE")
    loader = make_client()
    try:
        assert r.execute_command("FUNCTION", "HELP")
        done = []
        code = "#!lua name=pausedlib\nredis.register_function('pf', function() return 1 end)"
        t = threading.Thread(target=lambda: done.append(loader.function_load(code)))
        t.start()
        deadline = time.time() + 5
        while int(r.info("clients")["blocked_clients"]) < 1:
            assert time.time() < deadline, "FUNCTION LOAD was not held"
            time.sleep(0.02)
        assert not done
        r.execute_command("CLIENT", "UNPAUSE")
        t.join(5)
        assert done == ["pausedlib"]
    finally:
        r.execute_command("CLIENT", "UNPAUSE")
        r.function_delete("pausedlib")
        loader.close()


def test_module_list_is_empty_and_loading_is_refused(r):
    assert r.execute_command("MODULE", "LIST") == []
    with pytest.raises(redis.ResponseError) as e:
        r.execute_command("MODULE", "LOAD", "/nonexistent.so")
    assert "MODULE command not allowed" in err(e)
    with pytest.raises(redis.ResponseError) as e:
        r.execute_command("MODULE", "LIST", "extra")
    assert "wrong number of arguments for 'module|list' command" in err(e)


def test_client_list_by_id_and_type(r):
    others = [make_client() for _ in range(3)]
    try:
        ids = [c.client_id() for c in others]
        listed = r.client_list(client_id=[str(i) for i in reversed(ids)])
        assert [int(c["id"]) for c in listed] == list(reversed(ids))
        assert r.execute_command("CLIENT", "LIST", "ID", str(ids[0]), "999999999").count("\n") == 1
        everyone = [int(c["id"]) for c in r.client_list()]
        assert everyone == sorted(everyone) and set(ids) <= set(everyone)
        assert {int(c["id"]) for c in r.client_list(_type="normal")} == set(everyone)
        assert r.client_list(_type="pubsub") == []
        assert r.client_list(_type="replica") == []
        with pytest.raises(redis.ResponseError) as e:
            r.execute_command("CLIENT", "LIST", "ID", "x")
        assert err(e) == "Invalid client ID"
        with pytest.raises(redis.ResponseError) as e:
            r.execute_command("CLIENT", "LIST", "TYPE", "bogus")
        assert err(e) == "Unknown client type 'bogus'"
        with pytest.raises(redis.ResponseError) as e:
            r.execute_command("CLIENT", "LIST", "FOO")
        assert "syntax error" in err(e)
    finally:
        for c in others:
            c.close()


def test_command_getkeysandflags_and_key_specs(r):
    got = r.command_getkeysandflags("LMOVE", "a", "b", "LEFT", "LEFT")
    assert [[k, sorted(f)] for k, f in got] == [["a", ["RW", "access", "delete"]], ["b", ["RW", "insert"]]]
    got = r.command_getkeysandflags("SET", "k", "v", "GET")
    assert [[k, sorted(f)] for k, f in got] == [["k", ["RW", "access", "update"]]]
    with pytest.raises(redis.ResponseError) as e:
        r.command_getkeysandflags("PING", "x")
    assert err(e) == "The command has no key arguments"
    # COMMAND INFO's key specs and subcommands are compared whole with
    # redis-server's by tests/server/differential.py.


def test_memory_malloc_stats_and_lolwut(r):
    stats = r.execute_command("MEMORY", "MALLOC-STATS")
    assert stats.startswith("___ Begin jemalloc") if is_reference_redis() else (
        stats == "Stats not supported for the current allocator")
    assert "Redis ver." in r.lolwut()


def _free_port():
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def target_redis(tmp_path):
    """A real redis-server on a free loopback port, as MIGRATE's target."""
    import shutil
    import subprocess

    exe = shutil.which("redis-server")
    if not exe:
        pytest.skip("redis-server is not installed")
    port = _free_port()
    proc = subprocess.Popen(
        [exe, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", str(tmp_path)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    client = redis.Redis(port=port, decode_responses=True, protocol=2)
    for _ in range(100):
        try:
            client.ping()
            break
        except redis.ConnectionError:
            time.sleep(0.05)
    yield port
    client.close()
    proc.terminate()
    proc.wait(timeout=10)


def test_migrate_moves_and_copies_keys_to_another_server(r, target_redis):
    port = target_redis
    t0 = redis.Redis(port=port, decode_responses=True, protocol=2)
    t3 = redis.Redis(port=port, db=3, decode_responses=True, protocol=2)
    r.set("s", "v", px=100000)
    r.hset("h", mapping={"a": "1", "b": "2"})
    r.rpush("l", "x", "y")
    r.zadd("z", {"m": 1.5})
    r.sadd("st", "p")
    assert r.execute_command("MIGRATE", "127.0.0.1", port, "s", 0, 5000) == "OK"
    assert r.exists("s") == 0 and t0.get("s") == "v" and 0 < t0.pttl("s") <= 100000
    reply = r.execute_command("MIGRATE", "127.0.0.1", port, "", 3, 5000, "COPY", "KEYS", "h", "l", "z", "st", "nokey")
    assert reply == "OK"
    assert t3.hgetall("h") == {"a": "1", "b": "2"} and t3.lrange("l", 0, -1) == ["x", "y"]
    assert t3.zscore("z", "m") == 1.5 and t3.smembers("st") == {"p"}
    assert r.exists("h", "l", "z", "st") == 4  # COPY keeps them here
    # Without REPLACE the target refuses a key it has, and the key stays.
    with pytest.raises(redis.ResponseError) as e:
        r.execute_command("MIGRATE", "127.0.0.1", port, "h", 3, 5000)
    assert err(e).startswith("Target instance replied with error: BUSYKEY")
    assert r.exists("h") == 1
    r.hset("h", "c", "3")
    assert r.execute_command("MIGRATE", "127.0.0.1", port, "h", 3, 5000, "REPLACE") == "OK"
    assert t3.hlen("h") == 3 and r.exists("h") == 0
    assert r.execute_command("MIGRATE", "127.0.0.1", port, "nokey", 0, 5000) == "NOKEY"
    with pytest.raises(redis.ResponseError) as e:
        r.execute_command("MIGRATE", "127.0.0.1", port, "l", 0, 5000, "KEYS", "z")
    assert "the key argument must be set to the empty string" in err(e)
    with pytest.raises(redis.ResponseError) as e:
        r.execute_command("MIGRATE", "127.0.0.1", port, "l", 0, 5000, "AUTH", "wrong")
    assert err(e).startswith("Target instance replied with error:")
    with pytest.raises(redis.ResponseError) as e:
        r.execute_command("MIGRATE", "127.0.0.1", _free_port(), "l", 0, 300)
    # Redis 7.0 connects without blocking and reports a refused connection
    # as the write that follows (go-redis's own suite expects these words).
    assert err(e) == "IOERR error or timeout writing to target instance"
    assert r.exists("l") == 1
    # A key named twice moves once (the key count stays right).
    r.set("dup", "1")
    assert r.execute_command("MIGRATE", "127.0.0.1", port, "", 0, 5000, "REPLACE", "KEYS", "dup", "dup") == "OK"
    assert r.exists("dup") == 0 and r.dbsize() == 3 and t0.get("dup") == "1"
    # Passwords are not shown by SLOWLOG (nor MONITOR).
    r.config_set("slowlog-log-slower-than", 0)
    try:
        r.slowlog_reset()
        with pytest.raises(redis.ResponseError):
            r.execute_command("MIGRATE", "127.0.0.1", port, "l", 0, 5000, "AUTH2", "someone", "s3cret")
        logged = []
        for entry in r.slowlog_get(5):
            command = entry["command"]
            logged += (command.decode() if isinstance(command, bytes) else command).split()
        assert "s3cret" not in logged and "someone" not in logged and "(redacted)" in logged
    finally:
        r.config_set("slowlog-log-slower-than", 10000)
    t0.close()
    t3.close()


def test_config_rewrite_without_a_config_file(r):
    """Started without a config file, CONFIG REWRITE fails in Redis's words
    (client test suites match them: rueidis's)."""
    with pytest.raises(redis.ResponseError) as e:
        r.execute_command("CONFIG", "REWRITE")
    assert err(e) == "The server is running without a config file"


def _raw_conn():
    """A plain socket to the server, logged in (no client library between)."""
    s = socket.create_connection((HOST, PORT), timeout=5)
    if PASSWORD:
        s.sendall(f"AUTH {PASSWORD}\r\n".encode())
        assert s.recv(100) == b"+OK\r\n"
    return s


def _read_lines(s, n):
    buf = b""
    while buf.count(b"\r\n") < n:
        chunk = s.recv(4096)
        assert chunk, buf
        buf += chunk
    return buf.split(b"\r\n")[:n]


def test_monitor_answers_ok_before_any_line_and_is_a_replica(r):
    # MONITOR's +OK comes first even when another client's command runs
    # right behind it (ioredis's tests caught a line ahead of it, a few
    # times in a hundred, when both arrived together).
    other = _raw_conn()
    for i in range(300):
        mon = _raw_conn()
        mon.sendall(b"MONITOR\r\n")
        other.sendall(f"SET k{i} v\r\n".encode())
        # (The SET may run before MONITOR, and then shows nowhere.)
        assert _read_lines(mon, 1) == [b"+OK"], i
        assert other.recv(100) == b"+OK\r\n"
        mon.close()
    # Timestamps in microseconds, as Redis's; its own commands show after
    # their replies, and it may not touch the keyspace (Redis marks a
    # monitor a replica).
    mon = _raw_conn()
    mon.sendall(b"MONITOR\r\nPING\r\nGET k1\r\nSET k1 w\r\n")
    lines = _read_lines(mon, 5)
    assert lines[:2] == [b"+OK", b"+PONG"]
    assert lines[2].endswith(b'"PING"'), lines
    assert lines[3:] == [b"-ERR Replica can't interact with the keyspace"] * 2
    stamps = []
    for i in range(20):
        other.sendall(f"GET k{i}\r\n".encode())
        other.recv(100)
        stamps.append(_read_lines(mon, 1)[0].split(b" ")[0])
    assert any(not s.endswith(b"000") for s in stamps), stamps
    # Administrative commands are not shown; the monitor's own QUIT is
    # answered, and nothing follows it (hiredis's test_monitor counts).
    other.sendall(b"CONFIG GET maxmemory\r\nDEBUG SLEEP 0\r\nPING\r\n")
    assert _read_lines(mon, 1)[0].endswith(b'"PING"')
    mon.sendall(b"QUIT\r\n")
    rest = b""
    while chunk := mon.recv(4096):
        rest += chunk
    assert rest == b"+OK\r\n"
    mon.close()
    other.close()
    assert r.get("k1") == "v"


def test_debug_sleep_reads_its_time_as_strtod(r):
    # hiredis's tests probe with "DEBUG SLEEP 0\r\n" (the CRLF inside the
    # argument): Redis reads a bare strtod prefix, garbage as 0.
    for arg in ["0\r\n", "0x", "abc", "", " 0.01", "1e300", "-1", "nan"]:
        assert r.execute_command("DEBUG", "SLEEP", arg) == "OK", arg


def test_object_freq_counts_as_redis_lfu(r):
    before = r.config_get("maxmemory-policy")["maxmemory-policy"]
    try:
        r.config_set("maxmemory-policy", "noeviction")
        r.set("old", "value")
        # After a switch to LFU a key's count starts from nothing: one use
        # makes 1 (redis-rs's own test expects it).
        r.config_set("maxmemory-policy", "allkeys-lfu")
        r.get("old")
        assert r.object("freq", "old") == 1
        # A new key starts at 5 (LFU_INIT), whatever its name saw before;
        # its first use counts one; a write that replaces it counts as its
        # lookup does, once; OBJECT itself does not count.
        r.delete("old")
        r.set("old", "value")
        assert r.object("freq", "old") == 5
        r.set("old", "value2")
        assert r.object("freq", "old") == 6
        r.hset("h", "a", "1")
        assert r.object("freq", "h") == 5
        r.object("freq", "h")
        r.hset("h", "b", "1")
        assert r.object("freq", "h") == 6
        r.flushall()
        r.set("old", "value")
        assert r.object("freq", "old") == 5
    finally:
        r.config_set("maxmemory-policy", before)


def test_integer_sets_come_in_numeric_order(r):
    # Redis walks an intset in numeric order (pottery's and walrus's users
    # see it); a set with another member comes in no promised order.
    # (A plain socket: redis-py turns these replies into Python sets.)
    r.sadd("s", 5, 3, 10, 1, -2)
    r.sadd("s2", 10, 3, 100)
    c = _raw_conn()
    for cmd, want in [("SMEMBERS s", "-2 1 3 5 10"), ("SUNION s s2", "-2 1 3 5 10 100"),
                      ("SINTER s s2", "3 10"), ("SDIFF s s2", "-2 1 5")]:
        c.sendall(cmd.encode() + b"\r\n")
        n = len(want.split())
        lines = _read_lines(c, 1 + 2 * n)
        assert [x.decode() for x in lines[2::2]] == want.split(), cmd
    c.close()


def test_integer_sets_scan_whole_in_numeric_order(r):
    # SSCAN returns an intset whole, in its order, whatever COUNT says.
    r.sadd("s", *range(300, 0, -3))
    cursor, members = r.sscan("s", 0, count=2)
    assert cursor == 0
    assert members == [str(n) for n in range(3, 301, 3)]


def test_small_hashes_keep_insertion_order(r):
    # A hash Redis keeps as a listpack (at most hash-max-listpack-entries
    # fields, none longer than hash-max-listpack-value) reads in the order
    # its fields were first set: an overwrite keeps a field's place, HDEL
    # closes the gap (pottery's dict-like hashes show this order).
    assert r.config_get("hash-max-listpack-entries")["hash-max-listpack-entries"] == "512"
    r.hset("h", mapping={"z": 1, "a": 2, "m": 3})
    r.hset("h", "a", 5)
    r.hincrby("h", "b", 6)
    r.hdel("h", "z")
    r.hsetnx("h", "z", 7)
    order = ["a", "m", "b", "z"]
    assert r.hkeys("h") == order
    assert r.hvals("h") == ["5", "3", "6", "7"]
    assert list(r.hgetall("h")) == order
    assert r.hscan("h", 0, count=1) == (0, {"a": "5", "m": "3", "b": "6", "z": "7"})
    assert list(r.hscan("h", 0, count=1)[1]) == order
    assert r.hrandfield("h", 10) == order
    assert r.object("encoding", "h") == "listpack"
    # COPY, RENAME, MOVE and DUMP/RESTORE keep it.
    r.copy("h", "h2")
    r.rename("h2", "h3")
    r.move("h3", 1)
    r.restore("h4", 0, r.dump("h"))
    assert r.hkeys("h4") == order
    r.select(1)
    try:
        assert r.hkeys("h3") == order
    finally:
        r.select(0)
    # A field longer than hash-max-listpack-value makes it a hash table for
    # good, as in Redis; its fields are all still there.
    r.hset("h", "long", "x" * 65)
    assert r.object("encoding", "h") == "hashtable"
    r.hdel("h", "long")
    assert r.object("encoding", "h") == "hashtable"
    assert sorted(r.hkeys("h")) == sorted(order)
    # So does one field too many.
    try:
        r.config_set("hash-max-listpack-entries", 3)
        r.hset("few", mapping={"c": 1, "b": 2, "a": 3})
        assert r.hkeys("few") == ["c", "b", "a"]
        r.hset("few", "d", 4)
        assert r.object("encoding", "few") == "hashtable"
        assert sorted(r.hkeys("few")) == ["a", "b", "c", "d"]
    finally:
        r.config_set("hash-max-listpack-entries", 512)


def test_script_calls_answer_in_the_scripts_protocol(r):
    # A script's calls are answered in RESP2 unless it calls
    # redis.setresp(3), whatever its caller speaks: ZRANGE WITHSCORES gives
    # the flat array asynq's scripts index (they broke under go-redis's
    # RESP3 before), and setresp(3) gives the pairs.
    r.zadd("z", {"a": 1, "b": 2})
    r.hset("h", "f", "v")
    r.xadd("s", {"k": "v"}, id="1-0")
    flat = "local r = redis.call('ZRANGE', KEYS[1], 0, -1, 'WITHSCORES'); return {#r, type(r[1]), r[1], r[2]}"
    assert r.eval(flat, 1, "z") == [4, "string", "a", "1"]
    nested = "redis.setresp(3); local r = redis.call('ZRANGE', KEYS[1], 0, -1, 'WITHSCORES'); return {#r, type(r[1])}"
    assert r.eval(nested, 1, "z") == [2, "table"]
    for call, want in [("'ZPOPMIN', 'z', 1", 2), ("'ZRANDMEMBER', 'z', 1, 'WITHSCORES'", 2),
                       ("'HRANDFIELD', 'h', 1, 'WITHVALUES'", 2), ("'XREAD', 'STREAMS', 's', '0'", 1)]:
        assert r.eval("return #redis.call(%s)" % call, 0) == want, call


def test_a_scripts_expire_counts_from_the_expire(r):
    # Redis 7.0 takes the time now (mstime) as the base of a relative TTL,
    # even in a script whose key lookups see the time frozen at its start:
    # a script that works a while, then sets EXPIRE 1, gives its key a
    # second from the EXPIRE (limits's moving window pushes a million
    # elements first; its key was gone on return).
    script = "for i = 1, 150000000 do end; redis.call('set', KEYS[1], 'v'); redis.call('expire', KEYS[1], 1); return 1"
    assert r.eval(script, 1, "k") == 1
    assert r.pttl("k") > 900
