"""BGSAVE on `tembo serve`: a consistent backup written while the server
serves, which another `tembo serve` then serves with the same contents.

Starts servers of its own from $TEMBO_BIN (skipped without it):

    TEMBO_BIN=target/release/tembo python3 -m pytest -q tests/server/test_bgsave.py
"""

import os
import shutil
import socket
import subprocess
import tempfile
import threading
import time

import pytest
import redis

from crash_kill9 import free_port

BINARY = os.environ.get("TEMBO_BIN")
pytestmark = pytest.mark.skipif(not BINARY, reason="needs TEMBO_BIN (a tembo binary)")


class Servers:
    def __init__(self):
        base = "/dev/shm" if os.path.isdir("/dev/shm") else None
        self.dir = tempfile.mkdtemp(prefix="tembo-bgsave-", dir=base)
        self.procs = []

    def start(self, pool, *args):
        port = free_port()
        p = subprocess.Popen([BINARY, "serve", "--port", str(port), "--pool", pool, "--loglevel", "info", *args],
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        self.procs.append(p)
        for _ in range(200):
            assert p.poll() is None, p.stdout.read().decode(errors="replace")
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                return p, redis.Redis(port=port, decode_responses=True, socket_timeout=60)
            except OSError:
                time.sleep(0.05)
        raise AssertionError("server did not start")

    def close(self):
        for p in self.procs:
            if p.poll() is None:
                p.terminate()
                p.wait(20)
        shutil.rmtree(self.dir, ignore_errors=True)


@pytest.fixture
def servers():
    s = Servers()
    yield s
    s.close()


def wait_for_bgsave(c, timeout=60):
    deadline = time.time() + timeout
    while time.time() < deadline:
        info = c.info("persistence")
        if info["rdb_bgsave_in_progress"] == 0:
            return info
        time.sleep(0.05)
    raise AssertionError("BGSAVE did not finish")


def dump_all(c):
    """Every key of every database with its type, value and TTL flag."""
    out = {}
    for db in range(16):
        c.execute_command("SELECT", db)
        for k in c.scan_iter(count=1000):
            t = c.type(k)
            if t == "string":
                v = c.get(k)
            elif t == "hash":
                v = c.hgetall(k)
            elif t == "list":
                v = c.lrange(k, 0, -1)
            elif t == "set":
                v = sorted(c.smembers(k))
            elif t == "zset":
                v = c.zrange(k, 0, -1, withscores=True)
            else:
                v = None
            out[(db, k)] = (t, v, c.ttl(k) > 0)
    c.execute_command("SELECT", 0)
    return out


def fill(c, n=3000):
    p = c.pipeline(transaction=False)
    for i in range(n):
        p.set(f"s{i}", f"value-{i}" * (1 + i % 7))
    for i in range(200):
        p.hset("h", f"f{i}", i)
        p.rpush("l", i)
        p.sadd("set", f"m{i}")
        p.zadd("z", {f"m{i}": i / 3})
    p.set("ttl", "x", ex=3600)
    p.execute()
    c.execute_command("SELECT", 3)
    c.set("in-db-3", "y")
    c.execute_command("SELECT", 0)


def test_bgsave_writes_a_backup_that_serves_the_same_data(servers):
    pool = f"{servers.dir}/main.pool"
    _, c = servers.start(pool)
    fill(c)
    want = dump_all(c)
    before = c.lastsave()  # writes do not move it; a finished backup does
    time.sleep(1.1)
    assert c.bgsave()
    info = wait_for_bgsave(c)
    assert c.lastsave() > before
    assert info["rdb_last_bgsave_status"] == "ok"
    assert info["rdb_saves"] == 1
    backup = info["backup_path"]
    assert backup == f"{servers.dir}/main-backup.pool"
    assert c.config_get("backup-path")["backup-path"] == backup
    # Writes after the backup are not in it.
    c.set("after", "1")
    copy_path = f"{servers.dir}/served-copy.pool"
    shutil.copyfile(backup, copy_path)
    _, b = servers.start(copy_path)
    assert dump_all(b) == want
    assert b.get("after") is None


def test_bgsave_under_writes_and_its_errors(servers):
    pool = f"{servers.dir}/main.pool"
    _, c = servers.start(pool, "--backup-path", f"{servers.dir}/elsewhere.pool")
    fill(c, 20000)
    stop = threading.Event()
    done = []

    def writer():
        w = redis.Redis(port=c.connection_pool.connection_kwargs["port"], decode_responses=True)
        i = 0
        while not stop.is_set():
            w.mset({"g0": i, "g1": i, "g2": i})  # one command: one version
            i += 1
        done.append(i)

    t = threading.Thread(target=writer)
    t.start()
    try:
        while c.get("g0") is None:
            time.sleep(0.01)
        raw = redis.Redis(port=c.connection_pool.connection_kwargs["port"], decode_responses=True)
        raw.set_response_callback("BGSAVE", lambda r, **kw: r)
        assert raw.execute_command("BGSAVE") == "Background saving started"
        # A second one while it runs (it takes far longer than a round trip).
        with pytest.raises(redis.ResponseError) as e:
            raw.execute_command("BGSAVE")
        assert "Background save already in progress" in str(e.value)
        assert raw.execute_command("BGSAVE", "SCHEDULE") == "Background saving scheduled"
        with pytest.raises(redis.ResponseError):
            c.execute_command("BGSAVE", "NOW")
        wait_for_bgsave(c)
        time.sleep(0.3)  # a scheduled backup starts at the next cron tick
        info = wait_for_bgsave(c)
    finally:
        stop.set()
        t.join()
    assert info["rdb_last_bgsave_status"] == "ok"
    assert info["rdb_saves"] >= 2
    assert done and done[0] > 0
    _, b = servers.start(f"{servers.dir}/elsewhere.pool")
    g = [b.get(f"g{k}") for k in range(3)]
    assert g[0] is not None and g[0] == g[1] == g[2], g
    assert b.dbsize() == 20000 + 5 + 3
    # CONFIG SET moves the next backup.
    c.config_set("backup-path", f"{servers.dir}/moved.pool")
    assert c.bgsave()
    assert wait_for_bgsave(c)["rdb_last_bgsave_status"] == "ok"
    assert os.path.exists(f"{servers.dir}/moved.pool")


def test_shutdown_during_bgsave_closes_cleanly(servers):
    pool = f"{servers.dir}/main.pool"
    p, c = servers.start(pool)
    fill(c, 30000)
    assert c.bgsave()
    try:
        c.shutdown(nosave=True)
    except redis.ConnectionError:
        pass
    assert p.wait(30) == 0
    log = p.stdout.read().decode(errors="replace")
    assert "pool closed cleanly" in log, log
    assert not os.path.exists(f"{servers.dir}/main-backup.pool.partial")
    # The pool reopens clean, with everything.
    _, c2 = servers.start(pool)
    assert c2.dbsize() == 30000 + 5


def test_bgsave_in_a_pipeline_that_is_rerun_applies_nothing_twice(servers):
    """BGSAVE and DEBUG POPULATE commit midway. In the middle of a commit
    group whose rerun a later command forces (here a contained panic), the
    rerun used to apply the writes before them a second time. Their backup
    still holds exactly what ran before them."""
    pool = f"{servers.dir}/main.pool"
    _, c = servers.start(pool)
    for rounds in range(1, 4):
        p = c.pipeline(transaction=False)
        p.incr("x").bgsave().execute_command("DEBUG", "PANIC").incr("x")
        out = p.execute(raise_on_error=False)
        assert out[0] == 2 * rounds - 1 and out[3] == 2 * rounds, out
        assert out[1] is True and isinstance(out[2], redis.ResponseError), out
        assert wait_for_bgsave(c)["rdb_last_bgsave_status"] == "ok"
        assert int(c.get("x")) == 2 * rounds
        copy_path = f"{servers.dir}/copy-{rounds}.pool"
        shutil.copyfile(f"{servers.dir}/main-backup.pool", copy_path)
        _, b = servers.start(copy_path)
        assert int(b.get("x")) == 2 * rounds - 1  # the INCR before BGSAVE, not the one after
        b.close()
    # An EXEC holding BGSAVE: the backup has what came before the
    # transaction, in the same pipeline, and not the transaction.
    p = c.pipeline(transaction=False)
    p.set("before-tx", 1).execute_command("MULTI").set("in-tx", 1).bgsave().execute_command("EXEC")
    p.execute_command("DEBUG", "PANIC")
    out = p.execute(raise_on_error=False)
    assert out[4] == ["OK", "Background saving started"] and isinstance(out[5], redis.ResponseError), out
    assert wait_for_bgsave(c)["rdb_last_bgsave_status"] == "ok"
    shutil.copyfile(f"{servers.dir}/main-backup.pool", f"{servers.dir}/copy-tx.pool")
    _, b = servers.start(f"{servers.dir}/copy-tx.pool")
    assert (b.get("before-tx"), b.get("in-tx")) == ("1", None)
    assert c.get("in-tx") == "1"
    p = c.pipeline(transaction=False)
    p.incr("y").execute_command("DEBUG", "POPULATE", 25000, "pop").execute_command("DEBUG", "PANIC").incr("y")
    out = p.execute(raise_on_error=False)
    assert out[0] == 1 and out[1] == "OK" and out[3] == 2, out
    assert c.get("y") == "2" and c.get("pop:24999") == "value:24999"
    # Inside a transaction nothing commits midway: it is applied whole.
    t = c.pipeline(transaction=True)
    t.incr("y").execute_command("DEBUG", "POPULATE", 21000, "tx").incr("y")
    assert t.execute() == [3, "OK", 4]
    assert c.get("tx:20999") == "value:20999"


def test_a_rerun_group_counts_each_command_once(servers):
    """INFO's command and error statistics after a group that BGSAVE made
    run again one command per commit: each command counted once (the
    first run's counts used to stay, so everything before BGSAVE counted
    twice)."""
    _, c = servers.start(f"{servers.dir}/main.pool")
    c.set("s", "text")
    c.config_set("slowlog-log-slower-than", 0)
    c.slowlog_reset()
    c.config_resetstat()
    p = c.pipeline(transaction=False)
    p.incr("x").incr("s").get("x").bgsave().incr("x").incr("s")  # INCRBY, as redis-py sends them
    out = p.execute(raise_on_error=False)
    assert out[0] == 1 and out[2] == "1" and out[4] == 2, out
    assert isinstance(out[1], redis.ResponseError) and isinstance(out[5], redis.ResponseError), out
    wait_for_bgsave(c)
    stats = c.info("commandstats")
    assert stats["cmdstat_incrby"]["calls"] == 4 and stats["cmdstat_incrby"]["failed_calls"] == 2, stats
    assert stats["cmdstat_get"]["calls"] == 1 and stats["cmdstat_bgsave"]["calls"] == 1, stats
    assert c.info("errorstats")["errorstat_ERR"]["count"] == 2
    info = c.info("stats")
    assert info["total_error_replies"] == 2 and info["keyspace_hits"] == 1, info
    # Every command is slow at threshold 0: each logged once.
    logged = [e["command"] for e in c.slowlog_get(128)]
    assert sum(1 for cmd in logged if cmd.startswith(b"INCRBY")) == 4, logged


def test_a_shutdown_in_a_rerun_group_keeps_what_ran_before_it(servers):
    """A SHUTDOWN in a commit group that is rerun one command per commit
    stops the rerun where it stopped the first run: what ran before it is
    applied (the rerun used to run nothing)."""
    pool = f"{servers.dir}/main.pool"
    p, c = servers.start(pool)
    conn = socket.create_connection(("127.0.0.1", c.connection_pool.connection_kwargs["port"]))
    conn.sendall(b"SET a 1\r\nBGSAVE\r\nDEBUG PANIC\r\nSET b 2\r\nSHUTDOWN NOSAVE\r\nSET c 3\r\n")
    while conn.recv(4096):  # as from Redis, no reply: the server exits
        pass
    conn.close()
    assert p.wait(30) == 0
    _, c2 = servers.start(pool)
    assert (c2.get("a"), c2.get("b"), c2.get("c")) == ("1", "2", None)
