"""Scripts past busy-reply-threshold, as Redis 7.0 runs them: the script
runs on while every other client is answered (BUSY, or what is allowed
then), SCRIPT KILL / FUNCTION KILL stop a script that has not written,
SHUTDOWN NOSAVE (and SIGTERM) stop any script and discard its writes, and
nothing acknowledged is lost. The first tests run against the shared
server (and pass against redis-server 7.0); the shutdown tests start
servers of their own from $TEMBO_BIN.

    TEMBO_PORT=6379 TEMBO_BIN=target/release/tembo python3 -m pytest -q tests/server/test_busy_script.py
"""

import os
import signal
import threading
import time

import pytest
import redis

from test_bgsave import BINARY, Servers
from test_commands import err, is_reference_redis, make_client, r  # noqa: F401  (r is a fixture)

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")

SPIN = "local a = 0 while true do a = a + 1 end"


@pytest.fixture
def threshold(r):
    old = r.config_get("busy-reply-threshold")["busy-reply-threshold"]
    r.config_set("busy-reply-threshold", 50)
    yield
    # A failed test may leave its script running: stop it.
    for kill in (r.script_kill, r.function_kill):
        try:
            kill()
        except redis.ResponseError:
            pass
    wait_free(r)
    r.config_set("busy-reply-threshold", old)


class Background:
    """A call on a connection of its own, in a thread; its outcome."""

    def __init__(self, fn, client=None):
        self.client = client or make_client(2)
        self.result = self.error = None
        self.thread = threading.Thread(target=self._run, args=(fn,), daemon=True)
        self.thread.start()

    def _run(self, fn):
        try:
            self.result = fn(self.client)
        except redis.RedisError as e:
            self.error = str(e)

    def join(self, timeout=10):
        self.thread.join(timeout)
        assert not self.thread.is_alive(), "the call did not return"
        return self


def wait_busy(c, timeout=5):
    deadline = time.time() + timeout
    while time.time() < deadline:
        try:
            c.ping()
        except redis.ResponseError as e:
            assert str(e).startswith("BUSY"), e
            return str(e)
        time.sleep(0.02)
    raise AssertionError("the script never became busy")


def wait_free(c, timeout=5):
    deadline = time.time() + timeout
    while time.time() < deadline:
        try:
            return c.ping()
        except redis.ResponseError:
            time.sleep(0.02)
    raise AssertionError("the server stayed busy")


def test_script_kill_stops_a_busy_read_only_script(r, threshold):
    assert "NOTBUSY" in err_of(lambda: r.script_kill())
    reference = is_reference_redis()
    bg = Background(lambda c: c.eval(SPIN, 0))
    other = make_client(2)
    assert "SCRIPT KILL or SHUTDOWN NOSAVE" in wait_busy(other)
    # Only the allowed commands run meanwhile: a read is refused, HELLO is not.
    assert err_of(lambda: other.get("x")).startswith("BUSY")
    assert other.execute_command("HELLO", "2")
    if not reference:
        stats = other.execute_command("FUNCTION", "STATS")
        running = dict(zip(stats[1][::2], stats[1][1::2]))
        assert [a.lower() if i == 0 else a for i, a in enumerate(running["command"])] == ["eval", SPIN, "0"]
    # FUNCTION KILL does not stop an EVAL.
    assert err_of(lambda: other.function_kill()).startswith("BUSY")
    assert other.script_kill()
    assert wait_free(other)
    bg.join()
    assert "killed by user" in bg.error


def test_a_pcall_loop_cannot_hold_a_killed_script(r, threshold):
    body = "local f = function() while true do redis.call('ping') end end while true do pcall(f) end"
    bg = Background(lambda c: c.eval(body, 0))
    wait_busy(r)
    assert r.script_kill()
    assert wait_free(r)
    assert "killed by user" in bg.join().error


@pytest.mark.parametrize("body", [
    # (The kill raises inside the coroutine, which resume hands back; the
    # script's next line raises again, as in Redis.)
    "local co = coroutine.create(function() while true do end end)\ncoroutine.resume(co)\nreturn 1",
    "return coroutine.wrap(function() while true do end end)()",
    # A killed coroutine's error comes back to the script, which loops on:
    # the script itself is stopped on its next line.
    "while true do coroutine.resume(coroutine.create(function() while true do end end)) end",
    # A resume that raises itself (too many results to move) still gives
    # the watch back to the script (it stayed with the coroutine, and the
    # loop after it could not be stopped).
    "local t = {} for i = 1, 7997 do t[i] = i end "
    "local co = coroutine.create(function() return 1, 2, 3, unpack(t, 1, 7997) end) "
    "pcall(coroutine.resume, co) while true do end",
    # Nested coroutines, and one that yields between loops.
    "local co = coroutine.wrap(function() local inner = coroutine.wrap(function() while true do "
    "coroutine.yield(1) end end) while true do inner() end end) return co()",
])
def test_a_loop_inside_a_coroutine_becomes_busy_and_is_killed(r, threshold, body):
    """The hook that makes a long script busy (others get BUSY, SCRIPT KILL
    stops it) watches coroutines too: unwatched, such a loop held the
    whole server for ever."""
    bg = Background(lambda c: c.eval(body, 0))
    wait_busy(r)
    assert r.script_kill()
    assert wait_free(r)
    assert "killed by user" in bg.join().error
    # Coroutines still work as in Redis afterwards.
    body = ("local co = coroutine.create(function(a) local b = coroutine.yield(a + 1) return b * 2 end) "
            "local _, x = coroutine.resume(co, 1) local _, y = coroutine.resume(co, 10) "
            "local ok, e = coroutine.resume(co) return {x, y, tostring(ok), coroutine.status(co)}")
    assert r.eval(body, 0) == [2, 20, "false", "dead"]
    assert r.eval("return coroutine.wrap(function(...) return select('#', ...) end)(1, nil, 3)", 0) == 3
    with pytest.raises(redis.ResponseError) as e:
        r.eval("return coroutine.wrap(function() error('inner') end)()", 0)
    assert "inner" in str(e.value)


def test_function_kill_stops_a_busy_function(r, threshold):
    r.function_load(f"#!lua name=busylib\nredis.register_function('spin', function() {SPIN} end)", replace=True)
    try:
        bg = Background(lambda c: c.fcall("spin", 0))
        msg = wait_busy(r)
        assert "FUNCTION KILL or SHUTDOWN NOSAVE" in msg
        assert err_of(lambda: r.script_kill()).startswith("BUSY")
        assert r.function_kill()
        assert wait_free(r)
        assert "killed by user" in bg.join().error
    finally:
        wait_free(r)
        r.function_delete("busylib")


def test_after_the_kill_is_acknowledged_nothing_gets_busy(r, threshold):
    """A client that has read SCRIPT KILL's or FUNCTION KILL's OK and sends
    on (go-redis's own suite: FUNCTION KILL, then a new client's FLUSHDB)
    is served after the script has stopped, never answered BUSY; so is
    whatever reaches the server from then on. Redis leaves a short window
    where it is (the killed script unwinds after the OK is written)."""
    if is_reference_redis():
        pytest.skip("Redis answers BUSY in that window now and then")
    r.function_load(f"#!lua name=busylib\nredis.register_function('spin', function() {SPIN} end)", replace=True)
    try:
        for kill in ("SCRIPT", "FUNCTION") * 5:
            bg = Background(lambda c: c.eval(SPIN, 0) if kill == "SCRIPT" else c.fcall("spin", 0))
            wait_busy(r)
            assert r.execute_command(kill, "KILL")
            fresh = make_client(2)
            assert fresh.flushdb() and r.ping()
            fresh.close()
            assert "killed by user" in bg.join().error
    finally:
        wait_free(r)
        r.function_delete("busylib")


def test_a_busy_script_that_wrote_runs_to_its_end(r, threshold):
    # About a second of work past the threshold: it may not be killed, and
    # when it ends its reply and its writes are there.
    body = "redis.call('set', KEYS[1], 'v') local n = 0 for i = 1, tonumber(ARGV[1]) do n = n + 1 end return n"
    bg = Background(lambda c: c.eval(body, 1, "wrote", 100_000_000))
    wait_busy(r, timeout=10)
    assert err_of(lambda: r.script_kill()).startswith("UNKILLABLE")
    assert err_of(lambda: r.set("other", 1)).startswith("BUSY")
    bg.join(timeout=60)
    assert bg.error is None and bg.result == 100_000_000
    assert r.get("wrote") == "v"
    assert r.exists("other") == 0


def test_a_blocked_client_is_not_served_in_the_middle_of_a_busy_script(r, threshold):
    # What the script pushes is its own until it ends, whoever is answered
    # meanwhile: the blocked BLPOP must not take it.
    blocked = Background(lambda c: c.blpop("q", 0))
    deadline = time.time() + 5
    while r.info("clients")["blocked_clients"] < 1:
        assert time.time() < deadline, "BLPOP did not block"
        time.sleep(0.01)
    body = "redis.call('rpush', 'q', 'x') local n = 0 for i = 1, tonumber(ARGV[1]) do n = n + 1 end " \
        "return redis.call('lpop', 'q')"
    bg = Background(lambda c: c.eval(body, 0, 60_000_000))
    wait_busy(r, timeout=10)
    assert err_of(lambda: r.ping()).startswith("BUSY")
    assert bg.join(timeout=60).result == "x"
    r.rpush("q", "y")
    assert list(blocked.join().result) == ["q", "y"]


def test_a_transaction_sent_during_a_busy_script_fails_whole(r, threshold):
    r.set("xx", 1)
    bg = Background(lambda c: c.eval(SPIN, 0))
    t = make_client(2)
    wait_busy(t)
    assert t.execute_command("MULTI") == "OK"
    assert err_of(lambda: t.execute_command("INCR", "xx")).startswith("BUSY")
    r.script_kill()
    wait_free(r)
    assert t.execute_command("INCR", "xx") == "QUEUED"
    assert "previous errors" in err_of(lambda: t.execute_command("EXEC"))
    assert r.get("xx") == "1"
    bg.join()


def test_many_clients_are_answered_while_a_script_is_busy(r, threshold):
    r.set("acked", "before")
    bg = Background(lambda c: c.eval(SPIN, 0))
    wait_busy(r)
    answers = []

    def client(i):
        c = make_client(2)
        try:
            c.set(f"k{i}", i)
        except redis.ResponseError as e:
            answers.append(str(e)[:4])

    threads = [threading.Thread(target=client, args=(i,)) for i in range(20)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    assert answers == ["BUSY"] * 20
    r.script_kill()
    wait_free(r)
    bg.join()
    assert r.get("acked") == "before"
    assert r.exists(*[f"k{i}" for i in range(20)]) == 0


def err_of(fn):
    try:
        fn()
    except redis.ResponseError as e:
        return str(e)
    raise AssertionError("no error")


# --- shutdown during a busy script (servers of its own) ------------------------------

needs_binary = pytest.mark.skipif(not BINARY, reason="needs TEMBO_BIN (a tembo binary)")


@pytest.fixture
def servers():
    s = Servers()
    yield s
    s.close()


def busy_writer(c):
    c.config_set("busy-reply-threshold", 50)
    c.set("acked", "yes")
    return Background(lambda b: b.eval("redis.call('set', 'unacked', 1) " + SPIN, 0), make_client_for(c))


def make_client_for(c):
    kw = c.connection_pool.connection_kwargs
    return redis.Redis(port=kw["port"], decode_responses=True, socket_timeout=30)


@needs_binary
@pytest.mark.parametrize("stop", ["shutdown-nosave", "sigterm"])
def test_shutdown_stops_a_busy_script_and_discards_its_writes(servers, stop):
    pool = os.path.join(servers.dir, "busy.pool")
    p, c = servers.start(pool)
    bg = busy_writer(c)
    wait_busy(c)
    if stop == "sigterm":
        p.send_signal(signal.SIGTERM)
    else:
        # Plain SHUTDOWN is refused while the script runs, as in Redis.
        assert err_of(lambda: c.shutdown()).startswith("BUSY")
        with pytest.raises(redis.ConnectionError):
            c.execute_command("SHUTDOWN", "NOSAVE")
    assert p.wait(30) == 0
    assert b"pool closed cleanly" in p.stdout.read()
    bg.join()
    _, c = servers.start(pool)
    assert c.get("acked") == "yes"
    assert c.exists("unacked") == 0
