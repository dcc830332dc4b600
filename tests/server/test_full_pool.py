"""A server whose pool reaches its maximum size, through a real client.

A write that cannot be stored gets an error reply that says the pool is
full and what to do; everything acknowledged before it reads back intact;
deleting every key (strings and hash fields, in random order) succeeds at
the full pool; and the room comes back: as many keys fit again. And a
server killed (SIGKILL) at a full pool restarts with every acknowledged
write. Every engine.

    TEMBO_BIN=target/debug/tembo python3 -m pytest -q tests/server/test_full_pool.py
"""

import random

import pytest
import redis

from test_acl import own_server  # noqa: F401  (a fixture)

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")

VALUE = 2000


def fill(c, prefix):
    """SETs (and HSETs, every fourth) until the pool refuses one; returns
    the acknowledged string keys and hash fields, and the refusal."""
    strings, fields = {}, {}
    i = 0
    while True:
        v = bytes([i % 251]) * (VALUE - i % 97)
        try:
            if i % 4 == 3:
                c.hset(f"{prefix}:h", f"f{i}", v)
                fields[f"f{i}"] = v
            else:
                c.set(f"{prefix}:{i}", v)
                strings[f"{prefix}:{i}"] = v
        except redis.ResponseError as e:
            return strings, fields, str(e)
        i += 1
        assert i < 100_000, "a 16 MiB pool never filled"


def assert_all_there(c, strings, fields):
    """Every acknowledged string key and hash field reads back its value."""
    keys = list(strings)
    for n in range(0, len(keys), 500):
        chunk = keys[n:n + 500]
        assert c.mget(chunk) == [strings[k] for k in chunk]
    assert c.hgetall("a:h") == {k.encode(): v for k, v in fields.items()}


@pytest.fixture(params=["cdds", "kamino", "kamino-dynamic", "undo"])
def full(own_server, request):
    """A server of its own on a 16 MiB pool that may not grow, filled by
    `fill`: (start, its process, a client, strings, fields, the refusal)."""
    start, _ = own_server
    p, port = start("--pool-size", "16M", "--pool-max-size", "16M", "--engine", request.param)
    assert port, "tembo serve did not start"
    c = redis.Redis(port=port)
    return (start, p, c) + fill(c, "a")


def test_full_pool_refuses_writes_loses_nothing_and_deletes_make_room(full):
    _, _, c, strings, fields, refusal = full
    assert "pool is full" in refusal and "tembo pool grow" in refusal, refusal
    assert len(strings) > 1000, len(strings)
    # A second refused write changes nothing either.
    with pytest.raises(redis.ResponseError):
        c.set("one-more", b"x" * VALUE)
    assert c.get("one-more") is None
    # Everything acknowledged is there.
    assert_all_there(c, strings, fields)
    keys = list(strings)
    # Deleting at the full pool succeeds, every time.
    order = [("s", k) for k in keys] + [("h", f) for f in fields]
    random.Random(7).shuffle(order)
    for kind, k in order:
        if kind == "s":
            assert c.delete(k) == 1, k
        else:
            assert c.hdel("a:h", k) == 1, k
    assert c.dbsize() == 0
    # The room comes back.
    again, again_fields, _ = fill(c, "b")
    assert len(again) + len(again_fields) >= 0.9 * (len(strings) + len(fields)), (len(again), len(strings))
    assert c.execute_command("PING") in (True, b"PONG")
    c.close()


def test_kill9_at_a_full_pool_loses_no_acknowledged_write(full):
    start, p, c, strings, fields, _ = full
    # Keep knocking on the full pool, then kill the server outright.
    for i in range(50):
        with pytest.raises(redis.ResponseError):
            c.set(f"late:{i}", b"y" * VALUE)
    c.close()
    p.kill()
    p.wait(10)
    _, port = start()
    assert port, "tembo serve did not restart on the full pool"
    c = redis.Redis(port=port)
    assert_all_there(c, strings, fields)
    keys = list(strings)
    assert c.exists(*[f"late:{i}" for i in range(50)]) == 0
    # And it still frees room.
    assert c.delete(*keys[:500]) == 500
    assert c.set("after", b"z" * VALUE)
    c.close()
