"""A damaged pool, served: clear errors, never a panic, a crash or a hang.

A pool written by `tembo serve` (every type: strings small and chunked,
hashes, lists, sets, sorted sets, streams, keys with a TTL) is copied, the
copy damaged by flipping bits at random places in the part of the file in
use, and served again. Bad input of this kind must get a clear answer:

- the server refuses to open the pool, exiting non-zero with an error that
  says what is wrong; or
- it serves: every key SCAN finds is read back whole by its type, and
  writes, deletes and FLUSHALL are tried. Each may be answered with an
  error reply, but the connection must stay up (no command panics: the
  log must not say "panicked"), every command must answer within the
  client's time-out, and SHUTDOWN must end the process; a key whose
  metadata does not decode (SCAN stops at it, naming it) must go with DEL;
- and `tembo pool check` on the damaged copy answers (exit 0 or 1) without
  a panic.

Half the seeds damage a pool closed cleanly, half one whose server was
killed (SIGKILL) right after a burst of writes, without a clean shutdown,
so that the damage meets the lazy recovery. A server that listens, then
finds the pool damaged and exits with a `tembo: error:` line (it listens
before it opens the pool) counts as a refusal.
Session 50 found, this way, LRANGE panicking on a leaf whose damaged key
had left its place in key order (a scan returned a key outside its range;
the engine now checks every key a scan returns). Session 51 found SCAN
never ending on seed 20: a read that met damage made the executor rerun
its group, and the rerun SCAN, its cursor already taken, started over.

    TEMBO_BIN=target/release/tembo python3 -m pytest -q tests/server/test_damaged_pool.py
    TEMBO_DAMAGE_SEEDS=200   (seeds to run; default 60; a third for the in-place engines)
    TEMBO_DAMAGE_ENGINES=cdds  (default: every engine)
"""

import itertools
import os
import random
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import time

import pytest
import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

from crash_kill9 import free_port

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")

BINARY = os.environ.get("TEMBO_BIN")
SEEDS = int(os.environ.get("TEMBO_DAMAGE_SEEDS", "60"))
ENGINES = os.environ.get("TEMBO_DAMAGE_ENGINES", "cdds,kamino,kamino-dynamic,undo").split(",")


class Server:
    """`tembo serve` on `pool`, its log in `log`; `port` is None if it
    exited before answering."""

    def __init__(self, pool, log, engine="cdds"):
        self.port = free_port()
        self.log = log
        with open(log, "wb") as out:
            self.proc = subprocess.Popen(
                [BINARY, "serve", "--port", str(self.port), "--pool", pool, "--pool-size", "32M", "--engine", engine,
                 "--loglevel", "warn"],
                stdout=out, stderr=subprocess.STDOUT)
        for _ in range(400):
            if self.proc.poll() is not None:
                self.port = None
                return
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.2).close()
                return
            except OSError:
                time.sleep(0.05)
        self.proc.kill()
        self.proc.wait(10)
        raise AssertionError(f"tembo serve neither answered nor exited on {pool}")

    def client(self):
        # No retries: a connection the server dropped must show.
        return redis.Redis(port=self.port, socket_timeout=30, retry=Retry(NoBackoff(), 0))

    def text(self):
        with open(self.log, "rb") as f:
            return f.read().decode(errors="replace")


def populate(c, rnd, n):
    """Writes `n` keys of every type (and a chunked string)."""
    p = c.pipeline(transaction=False)
    for i in range(n):
        p.set(f"s:{i}", rnd.randbytes(rnd.randrange(1, 300)))
        if i % 3 == 0:
            p.set(f"t:{i}", "ttl", ex=100_000)
        p.hset(f"h:{i % 20}", mapping={f"f{i}": "v" * rnd.randrange(1, 80), f"g{i}": i})
        p.rpush(f"l:{i % 10}", *[f"e{i}-{j}" for j in range(5)])
        p.sadd(f"set:{i % 10}", i, f"m{i}")
        p.zadd(f"z:{i % 10}", {f"m{i}": rnd.random() * 1000, f"n{i}": i})
        if i % 4 == 0:
            p.xadd(f"x:{i % 5}", {"a": i, "b": "x" * (i % 50)})
    p.set("big", rnd.randbytes(300 * 1024))
    # Collections large enough for the random-member commands to draw
    # through the engine.
    p.sadd("bigset", *[f"member:{i}" for i in range(n)])
    p.hset("bighash", mapping={f"field:{i}": i for i in range(n)})
    p.zadd("bigzset", {f"m:{i}": i for i in range(n)})
    p.execute()


def make_pools(base, engine):
    """Two undamaged pools of `engine` under `base`: `clean.pool` (SHUTDOWN)
    and `killed.pool` (SIGKILL while writing)."""
    work = os.path.join(base, "work.pool")
    s = Server(work, os.path.join(base, "base.log"), engine)
    assert s.port, s.text()
    c = s.client()
    populate(c, random.Random(1), 400)
    c.shutdown(nosave=True)
    s.proc.wait(30)
    shutil.copy(work, os.path.join(base, "clean.pool"))
    s = Server(work, os.path.join(base, "base2.log"), engine)
    assert s.port, s.text()
    c = s.client()
    populate(c, random.Random(2), 150)
    c.delete(*[f"s:{i}" for i in range(0, 400, 7)])
    s.proc.send_signal(signal.SIGKILL)
    s.proc.wait(30)
    shutil.copy(work, os.path.join(base, "killed.pool"))


def in_use_end(path):
    """The end of the last 4 KiB page of the file holding a non-zero byte."""
    page = 4096
    end = 0
    with open(path, "rb") as f:
        at = 0
        while True:
            b = f.read(1 << 20)
            if not b:
                break
            for off in range(0, len(b), page):
                if b[off:off + page].count(0) != len(b[off:off + page]):
                    end = at + off + page
            at += len(b)
    return end


@pytest.fixture(scope="module")
def pools():
    """The undamaged pools' directory of each engine, made when first asked."""
    if not BINARY:
        pytest.skip("needs TEMBO_BIN (a tembo binary)")
    made = {}

    def of(engine):
        if engine not in made:
            # The cases come engine by engine: the last one's pools can go.
            for e in list(made):
                shutil.rmtree(made.pop(e), ignore_errors=True)
            made[engine] = tempfile.mkdtemp(dir="/dev/shm" if os.path.isdir("/dev/shm") else None)
            make_pools(made[engine], engine)
        return made[engine]

    yield of
    for d in made.values():
        shutil.rmtree(d, ignore_errors=True)


# The in-place engines run a third of the seeds.
CASES = [(e, s) for e in ENGINES for s in range(SEEDS if e == "cdds" else max(1, SEEDS // 3))]


def damage(src, dst, rnd):
    """Copies `src` to `dst` and flips 1, 4 or 32 bits past the header's
    first page, in the part of the file in use; returns the offsets."""
    shutil.copy(src, dst)
    end = in_use_end(src)
    offsets = []
    with open(dst, "r+b") as f:
        for _ in range(rnd.choice([1, 4, 32])):
            off = rnd.randrange(4096, end)
            f.seek(off)
            b = f.read(1)[0]
            f.seek(off)
            f.write(bytes([b ^ (1 << rnd.randrange(8))]))
            offsets.append(off)
    return offsets


READERS = {
    b"string": lambda c, k: c.get(k),
    # Random members too: collections of 128 or more are drawn by the
    # engine's random descents (`Db::sample`), the others walked.
    b"hash": lambda c, k: (c.hgetall(k), c.hrandfield(k, -5, withvalues=True)),
    b"list": lambda c, k: c.lrange(k, 0, -1),
    b"set": lambda c, k: (c.smembers(k), c.srandmember(k, 5), c.srandmember(k, -5)),
    # Ranks too: sorted sets of 1,024 or more answer them from a rank
    # index built by a scan of the set (`ranks.rs`), the others walk.
    b"zset": lambda c, k: (
        c.zrange(k, 0, -1, withscores=True),
        c.zrandmember(k, 5),
        c.zrank(k, "m:1500"),
        c.zcount(k, 100, 2000),
        c.zrange(k, 1500, 1510),
        c.zrangebyscore(k, 0, "+inf", start=1400, num=5),
    ),
    b"stream": lambda c, k: c.xrange(k),
}


def exercise(c):
    """Reads every key and tries writes; returns the error replies.
    Anything but an error reply (a dropped connection, a time-out) raises."""
    errors = []

    def attempt(f, *args):
        try:
            return f(*args)
        except redis.ResponseError as e:
            errors.append(str(e))
            return None

    # A key whose metadata does not decode stops SCAN with an error naming
    # it; the key is the user's to delete (the error says so): DEL removes
    # it, unless the write itself fails, and SCAN then goes on past it.
    # A SCAN that goes back (a cursor resumed at the start) never ends: the
    # pools hold about 1,000 keys, so 100,000 is a loop.
    keys = []
    for _ in range(50):
        try:
            keys = list(itertools.islice(c.scan_iter(count=500), 100_000))
            break
        except redis.ResponseError as e:
            errors.append(str(e))
            named = re.search(r'the metadata of key "([^"\\]*)" does not decode', str(e))
            if not named:
                break
            n = attempt(c.delete, named.group(1))
            # 0: the name as printed is not the key's bytes (not UTF-8).
            assert n in (0, 1) or (n is None and "does not decode" not in errors[-1]), (named.group(1), n, errors[-1:])
            if n != 1:
                break
            print(f"deleted undecodable key {named.group(1)!r}")
            assert attempt(c.exists, named.group(1)) == 0, named.group(1)
    assert len(keys) < 100_000, "SCAN did not end"
    for k in keys:
        t = attempt(c.type, k)
        if t in READERS:
            attempt(READERS[t], c, k)
        attempt(c.pttl, k)
        attempt(c.dump, k)
    for name in ["dbsize", "randomkey"]:
        attempt(getattr(c, name))
    attempt(c.info, "all")
    for i in range(100):
        attempt(c.set, f"new:{i}", "v" * 100)
        attempt(c.hset, "h:1", f"new{i}", i)
        attempt(c.rpush, "l:1", i)
        attempt(c.zadd, "z:1", {f"new{i}": i})
        attempt(c.sadd, "set:1", f"new{i}")
        attempt(c.xadd, "x:1", {"new": i})
    attempt(c.delete, *keys[:50]) if keys else None
    attempt(c.flushall)
    attempt(c.set, "after", "1")
    return errors


@pytest.mark.parametrize("engine,seed", CASES)
def test_damaged_pool_gets_clear_errors(pools, engine, seed):
    pools = pools(engine)
    rnd = random.Random(seed)
    src = os.path.join(pools, "clean.pool" if seed % 2 == 0 else "killed.pool")
    pool = os.path.join(pools, f"damaged-{seed}.pool")
    offsets = damage(src, pool, rnd)
    check_copy = pool + ".check"
    shutil.copy(pool, check_copy)  # as damaged, before any recovery
    s = None
    try:
        s = Server(pool, os.path.join(pools, f"damaged-{seed}.log"), engine)
        refused = s.port is None
        if not refused:
            c = s.client()
            try:
                exercise(c)
            except redis.ConnectionError as e:
                # The server listens before it opens the pool (connections
                # wait in the backlog): one that then refuses the pool
                # resets them. Anything else is a crash.
                try:
                    s.proc.wait(20)
                except subprocess.TimeoutExpired:
                    pass
                if s.proc.returncode in (None, 0):
                    raise AssertionError(f"the connection broke (damage at {offsets}): {e}\n{s.text()[-3000:]}")
                refused = True
        if refused:
            # Refused: a clear error, not a panic.
            text = s.text()
            assert s.proc.returncode != 0, text
            assert "tembo: error:" in text and "panicked" not in text, f"damage at {offsets}:\n{text[-3000:]}"
        else:
            try:
                c.shutdown(nosave=True)
            except redis.ConnectionError:
                pass
            try:
                s.proc.wait(20)
            except subprocess.TimeoutExpired:
                s.proc.kill()
                raise AssertionError(f"SHUTDOWN did not end the server (damage at {offsets})")
            text = s.text()
            assert "panicked" not in text, f"damage at {offsets}:\n{text[-3000:]}"
        # `tembo pool check` of the damaged copy answers, without a panic.
        r = subprocess.run([BINARY, "pool", "check", check_copy], capture_output=True, text=True, timeout=120)
        assert r.returncode in (0, 1), (r.returncode, r.stdout[-2000:], r.stderr[-2000:])
        assert "panicked" not in r.stdout + r.stderr, r.stderr[-2000:]
    finally:
        if s is not None and s.proc.poll() is None:
            s.proc.kill()  # a failed check leaves no server behind
            s.proc.wait(10)
        for f in (pool, check_copy):
            if os.path.exists(f):
                os.remove(f)
