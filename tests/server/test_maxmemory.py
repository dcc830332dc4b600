"""maxmemory through a real client, on a server of its own: the limit is
honoured under every eviction policy while new keys keep coming (the check
of Redis's own unit/maxmemory, which its suite runs only on a server it
starts itself), volatile policies keep keys without a TTL, noeviction
refuses writes with Redis's OOM error, evicted keys send their keyspace
event, and the settings come from the command line.

    TEMBO_BIN=target/release/tembo python3 -m pytest -q tests/server/test_maxmemory.py
"""

import random
import time

import pytest
import redis

from test_acl import own_server  # noqa: F401  (a fixture)

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")

POLICIES = ["allkeys-random", "allkeys-lru", "allkeys-lfu", "volatile-lru", "volatile-lfu", "volatile-random",
            "volatile-ttl"]

# How far over the limit the pool may be once the writes stop: Redis's test
# allows 4 KiB.
SLACK = 4096
# ... and right after any write: what one command adds before the next one
# evicts, plus the tree nodes that deletions replace until the GC frees them.
WRITE_SLACK = 16384


def used(c):
    return c.info("memory")["used_memory"]


def start_client(own_server, *args):
    start, _ = own_server
    _, port = start(*args)
    assert port, "the server did not start"
    return redis.Redis(port=port)


def fill_to(c, limit, volatile_every=1):
    """SETs keys (every `volatile_every`-th with a TTL) until the pool is
    within 4 KiB of `limit`; returns how many, and the keys without a TTL."""
    n, plain = 0, []
    while used(c) + 4096 <= limit:
        key = f"key:{n}"
        if n % volatile_every == 0:
            c.setex(key, 10000, "x")
        else:
            c.set(key, "x")
            plain.append(key)
        n += 1
    assert n > 10
    return n, plain


@pytest.mark.parametrize("policy", POLICIES)
def test_the_limit_is_honoured_while_keys_keep_coming(own_server, policy):
    c = start_client(own_server)
    limit = used(c) + 100 * 1024
    c.config_set("maxmemory", limit)
    c.config_set("maxmemory-policy", policy)
    n, _ = fill_to(c, limit)
    worst = 0
    for _ in range(n):
        c.setex(f"more:{random.randrange(10**9)}", 10000, "x")
        worst = max(worst, used(c) - limit)
    assert worst < WRITE_SLACK, f"{policy}: {worst} bytes over the limit"
    time.sleep(0.5)
    assert used(c) < limit + SLACK
    assert c.info("stats")["evicted_keys"] > 0
    # Room was made for about as many keys as were added, no more: most of
    # the keys that fit are still there.
    assert c.dbsize() > n // 2


@pytest.mark.parametrize("policy", ["volatile-lru", "volatile-random", "volatile-ttl"])
def test_volatile_policies_keep_keys_without_a_ttl(own_server, policy):
    c = start_client(own_server)
    limit = used(c) + 100 * 1024
    c.config_set("maxmemory", limit)
    c.config_set("maxmemory-policy", policy)
    n, plain = fill_to(c, limit, volatile_every=2)
    for j in range(n):
        try:
            c.setex(f"foo:{j}", 10000, "x")
        except redis.exceptions.OutOfMemoryError:
            pass
    time.sleep(0.5)
    assert used(c) < limit + SLACK
    assert all(c.exists(k) for k in plain)


def test_noeviction_refuses_writes_and_keeps_every_key(own_server):
    c = start_client(own_server, "--maxmemory-policy", "noeviction")
    limit = used(c) + 50 * 1024
    c.config_set("maxmemory", limit)
    n, _ = fill_to(c, limit)
    with pytest.raises(redis.exceptions.OutOfMemoryError, match="used memory > 'maxmemory'"):
        for j in range(n):
            c.set(f"over:{j}", "x" * 100)
    assert c.dbsize() >= n
    assert c.get("key:0") == b"x"
    assert c.delete("key:0") == 1
    assert c.info("stats")["evicted_keys"] == 0


def test_settings_from_the_command_line_and_the_evicted_event(own_server):
    c = start_client(own_server, "--maxmemory", "64M", "--maxmemory-policy", "allkeys-lru")
    assert c.config_get("maxmemory") == {"maxmemory": str(64 << 20)}
    assert c.info("memory")["maxmemory_policy"] == "allkeys-lru"
    c.config_set("notify-keyspace-events", "Ee")
    p = c.pubsub()
    p.psubscribe("__keyevent@*__:evicted")
    assert p.get_message(timeout=2)["type"] == "psubscribe"
    c.set("foo", "bar")
    c.config_set("maxmemory", 1)
    msg = None
    deadline = time.time() + 5
    while msg is None and time.time() < deadline:
        msg = p.get_message(timeout=1)
    assert msg and msg["channel"] == b"__keyevent@0__:evicted" and msg["data"] == b"foo"
    c.config_set("maxmemory", 0)
    p.close()


def test_a_bad_policy_on_the_command_line_is_refused(own_server):
    start, _ = own_server
    proc, port = start("--maxmemory-policy", "sometimes")
    assert port is None
    out = proc.stdout.read().decode()
    assert "maxmemory_policy" in out and "allkeys-lru" in out
