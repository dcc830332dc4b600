#!/usr/bin/env python3
"""Differential test of positions in a big sorted set: Tembo's replies
against a real redis-server's.

    python3 tests/server/zset_ranks_differential.py --tembo target/release/tembo --seeds 2

The differential test (differential.py) keeps its key and member spaces
small, so its sorted sets never reach the size at which Tembo answers
ranks from a rank index (crates/tembo-server/src/ranks.rs: 1,024
members, after a walk of 2,048 entries has not answered). This one fills
one sorted set with 20,000 members (integer and fractional scores, many
ties), then sends both servers the same seeded random mix: ZADD, ZREM,
ZRANK, ZREVRANK, ZRANGE and ZREVRANGE by (negative) index, ZCOUNT and
ZLEXCOUNT, LIMIT pages of ZRANGEBYSCORE, ZREVRANGEBYSCORE and ZRANGE
BYSCORE REV (far offsets included), ZREMRANGEBYRANK, narrow
ZREMRANGEBYSCORE, ZPOPMIN/ZPOPMAX, and MULTI blocks that mix writes with
rank reads (pending writes of the group). Every reply must be equal; at
the end `DEBUG CHECK-RANK-INDEXES` must pass and the index must have
been built. Exit status: 0 when nothing differed, 1 on a mismatch.
"""

import argparse
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

import redis

MEMBERS = 20_000


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def connect(port):
    c = redis.Redis(port=port, protocol=2)
    for _ in range(200):
        try:
            c.ping()
            return c
        except redis.ConnectionError:
            time.sleep(0.05)
    raise SystemExit(f"zset_ranks_differential: no server on port {port}")


class Mismatch(Exception):
    pass


def run_seed(tembo, redis_c, seed, steps):
    rnd = random.Random(seed)
    for c in (tembo, redis_c):
        c.flushall()
    builds_before = tembo.info("stats")["rank_index_builds"]

    def both(*args):
        a, b = tembo.execute_command(*args), redis_c.execute_command(*args)
        if a != b:
            raise Mismatch(f"seed {seed}: {args}: tembo {str(a)[:300]} redis {str(b)[:300]}")
        return a

    def score():
        return rnd.choice([str(rnd.randint(-5, 305)), f"({rnd.randint(0, 300)}", "-inf", "+inf",
                           repr(rnd.random() * 300)])

    def member():
        return f"m{rnd.randrange(MEMBERS * 2)}"

    for start in range(0, MEMBERS, 1000):
        args = []
        for i in range(start, start + 1000):
            args += [rnd.choice([rnd.randint(0, 300), rnd.random() * 300]), f"m{i}"]
        both("ZADD", "z", *args)
    for _ in range(steps):
        op = rnd.random()
        card = max(both("ZCARD", "z"), 1)
        if op < 0.15:
            both("ZADD", "z", rnd.randint(0, 300), member())
        elif op < 0.2:
            both("ZREM", "z", member(), member())
        elif op < 0.35:
            both("ZRANK", "z", member())
            both("ZREVRANK", "z", member())
        elif op < 0.5:
            a = rnd.randrange(-card - 5, card + 5)
            b = a + rnd.randrange(-3, 15)
            both("ZRANGE", "z", a, b, *(["WITHSCORES"] if rnd.random() < 0.3 else []))
            both("ZREVRANGE", "z", a, b)
        elif op < 0.65:
            lo, hi = score(), score()
            both("ZCOUNT", "z", lo, hi)
            off = rnd.choice([0, rnd.randrange(card + 10), rnd.randrange(5000), 2**63 - 1, -rnd.randrange(1, 5000)])
            n = rnd.choice([-1, 0, 1, 5])
            if n != -1 or off < 300:
                both("ZRANGEBYSCORE", "z", lo, hi, "LIMIT", off, n)
                both("ZREVRANGEBYSCORE", "z", hi, lo, "LIMIT", off, n)
                both("ZRANGE", "z", hi, lo, "BYSCORE", "REV", "LIMIT", off, n)
        elif op < 0.68:
            a = rnd.randrange(card)
            both("ZREMRANGEBYRANK", "z", a, a + rnd.randrange(50))
        elif op < 0.7:
            lo = rnd.randint(0, 300)
            both("ZREMRANGEBYSCORE", "z", lo, lo + 1)
        elif op < 0.8:
            cmds = []
            for _ in range(rnd.randrange(1, 30)):
                k = rnd.random()
                if k < 0.4:
                    cmds.append(("ZADD", "z", rnd.randint(0, 300), member()))
                elif k < 0.6:
                    cmds.append(("ZREM", "z", member()))
                elif k < 0.75:
                    cmds.append(("ZRANK", "z", member()))
                elif k < 0.9:
                    a = rnd.randrange(card)
                    cmds.append(("ZRANGE", "z", a, a + 3))
                else:
                    cmds.append(("ZCOUNT", "z", score(), score()))
            replies = []
            for c in (tembo, redis_c):
                p = c.pipeline(transaction=True)
                for cmd in cmds:
                    p.execute_command(*cmd)
                replies.append(p.execute())
            if replies[0] != replies[1]:
                raise Mismatch(f"seed {seed}: MULTI {cmds}: tembo {replies[0]} redis {replies[1]}")
        elif op < 0.82:
            both("ZLEXCOUNT", "z", "-", "+")
        else:
            both("ZPOPMIN", "z")
            both("ZPOPMAX", "z")
    check = tembo.execute_command("DEBUG", "CHECK-RANK-INDEXES")
    builds = tembo.info("stats")["rank_index_builds"] - builds_before
    if builds < 1:
        raise Mismatch(f"seed {seed}: no rank index was built: the test did not test it")
    return tembo.zcard("z"), builds, check


def main():
    # Started in the background by scripts/test-server, SIGINT comes in
    # ignored, and SIGTERM would end the process before its `finally`
    # stops the servers it started: both end it through SystemExit.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    signal.signal(signal.SIGINT, lambda *_: sys.exit(130))
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tembo", required=True, help="the tembo binary")
    ap.add_argument("--seeds", type=int, default=2)
    ap.add_argument("--first-seed", type=int, default=1)
    ap.add_argument("--steps", type=int, default=1500, help="random steps per seed")
    args = ap.parse_args()
    base = "/dev/shm" if os.access("/dev/shm", os.W_OK) else None
    work = tempfile.mkdtemp(prefix="tembo-zranks-diff.", dir=base)
    tport, rport = free_port(), free_port()
    procs = []
    try:
        procs.append(subprocess.Popen(
            [args.tembo, "serve", "--port", str(tport), "--pool", f"{work}/p.pool", "--pool-size", "512M",
             "--loglevel", "warning"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        procs.append(subprocess.Popen(
            ["redis-server", "--port", str(rport), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
             "--dir", work], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        tembo, redis_c = connect(tport), connect(rport)
        for seed in range(args.first_seed, args.first_seed + args.seeds):
            t0 = time.time()
            try:
                card, builds, _ = run_seed(tembo, redis_c, seed, args.steps)
            except Mismatch as e:
                print(f"zset_ranks_differential: MISMATCH {e}")
                return 1
            print(f"zset_ranks_differential: seed {seed}: {args.steps} steps agree "
                  f"({card} members at the end, {builds} index builds, {time.time() - t0:.0f} s)", flush=True)
        return 0
    finally:
        for p in procs:
            p.kill()
            p.wait()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
