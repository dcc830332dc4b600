#!/usr/bin/env python3
"""Damaged RESTORE payloads: Tembo's verdict against redis-server's.

    python3 tests/server/restore_differential.py --tembo target/debug/tembo --payloads 4000

What Redis's own `integration/corrupt-dump-fuzzer` does, with a second
server as the oracle: starts a redis-server (debug command enabled,
`sanitize-dump-payload yes`, so Redis checks payloads as deeply as it can)
and a `tembo serve`, both on free loopback ports; builds in Redis the keys
that fuzzer builds (every type in its small encodings, streams with a
consumer group, big ones in their plain encodings), DUMPs each, and sends
seeded damaged copies (one byte replaced, one time in ten two) to both with
the checksum check off (`DEBUG SET-SKIP-CHECKSUM-VALIDATION 1`), as that
fuzzer does. Then:

  - a payload Redis refuses must be refused by Tembo (Tembo taking what
    Redis's deep check finds damaged is the failure this test is for);
  - a payload both take must read back the same (for a sorted set, the
    same members and scores: a damaged listpack can hold its scores out of
    order, which Redis keeps as they are and Tembo sorts);
  - a payload Redis takes and Tembo refuses is counted, not failed: Tembo
    also checks what Redis does not (the whole body consumed, a stream's
    entry IDs ascending and below its last ID, its length counting them);
  - a payload whose damage made its RDB version 11 or 12 (Redis 7.2's and
    7.4's, which Tembo reads and Redis 7.0 refuses) is judged by what Redis
    does with the same payload at version 10: Tembo must refuse it if Redis
    then refuses it, and read it back the same if Redis takes it;
  - both servers must still answer at the end.

Exit status 0 when these hold, 1 otherwise, 2 when a server did not start.
"""

import argparse
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time

import redis

from differential import free_port


def start(argv, port, log):
    proc = subprocess.Popen(argv, stdout=open(log, "ab"), stderr=subprocess.STDOUT)
    c = redis.Redis(port=port)
    deadline = time.time() + 60
    while time.time() < deadline:
        if proc.poll() is not None:
            break
        try:
            if c.ping():
                return proc, c
        except redis.exceptions.ConnectionError:
            time.sleep(0.05)
    proc.kill()
    raise RuntimeError("%s did not start (log: %s)" % (argv[0], log))


def build_keys(r):
    """The keys `generate_types` of corrupt-dump-fuzzer.tcl builds."""
    r.config_set("list-max-ziplist-size", 5)
    r.config_set("hash-max-ziplist-entries", 5)
    r.config_set("zset-max-ziplist-entries", 5)
    r.config_set("stream-node-max-entries", 5)

    def collections(suffix, n):
        for j in range(n):
            val = j if j % 2 == 0 else "_%d" % j
            r.hset("hash" + suffix, j, val)
            r.lpush("list" + suffix, val)
            r.zadd("zset" + suffix, {val: j})
            r.sadd("set" + suffix, val)
            r.xadd("stream" + suffix, {"item": 1, "value": val})

    collections("", 3)
    r.xgroup_create("stream", "mygroup", "0")
    records = r.xreadgroup("mygroup", "Alice", {"stream": ">"}, count=2)
    r.xdel("stream", records[0][1][1][0])
    r.xack("stream", "mygroup", records[0][1][0][0])
    r.incr("int")
    r.set("string", "str")
    collections("big", 10)
    r.xadd("streambig", {"item": 1, "value": 1})
    r.xadd("streambig", {"item": 1, "unique": "value"})
    r.sadd("intset", 1, 2, 300, -70000)


def read(r, key):
    """A key's contents in a form both servers must agree on."""
    t = r.type(key).decode()
    if t == "string":
        return r.get(key)
    if t == "list":
        return r.lrange(key, 0, -1)
    if t == "set":
        return sorted(r.smembers(key))
    if t == "hash":
        return sorted(r.hgetall(key).items())
    if t == "zset":
        return sorted(r.zrange(key, 0, -1, withscores=True))
    if t == "stream":
        info = r.xinfo_stream(key, full=True)
        for estimate in ("radix-tree-nodes", "radix-tree-keys"):
            info.pop(estimate, None)
        return info
    return t


def damage(rng, payload):
    p = bytearray(payload)
    for _ in range(2 if rng.random() > 0.9 else 1):
        p[rng.randrange(len(p))] = rng.randrange(256)
    return bytes(p)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tembo", required=True, help="the tembo binary")
    ap.add_argument("--redis-server", default=os.environ.get("REDIS_SERVER", "redis-server"))
    ap.add_argument("--payloads", type=int, default=4000, help="damaged payloads to send (default 4000)")
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()

    work = tempfile.mkdtemp(prefix="tembo-restore-diff-", dir="/dev/shm" if os.access("/dev/shm", os.W_OK) else None)
    procs = []
    try:
        try:
            rport, tport = free_port(), free_port()
            rp, R = start([args.redis_server, "--port", str(rport), "--bind", "127.0.0.1", "--save", "",
                           "--appendonly", "no", "--dir", work, "--enable-debug-command", "yes"],
                          rport, os.path.join(work, "redis.log"))
            procs.append(rp)
            tp, T = start([args.tembo, "serve", "--bind", "127.0.0.1", "--port", str(tport), "--pool",
                           os.path.join(work, "tembo.pool")], tport, os.path.join(work, "tembo.log"))
            procs.append(tp)
        except RuntimeError as e:
            print("restore_differential:", e, file=sys.stderr)
            return 2
        R.config_set("sanitize-dump-payload", "yes")
        for c in (R, T):
            c.execute_command("DEBUG", "SET-SKIP-CHECKSUM-VALIDATION", "1")
        build_keys(R)
        dumps = {k: R.dump(k) for k in sorted(R.keys())}
        for k, d in dumps.items():
            T.restore(k, 0, d)
            if read(R, k) != read(T, k):
                print("restore_differential: %s restores differently from a whole payload" % k.decode())
                return 1
        rng = random.Random(args.seed)
        counts = {"both took": 0, "both refused": 0, "only Redis took": 0}
        failures = []
        keys = list(dumps)
        for _ in range(args.payloads):
            key = rng.choice(keys)
            payload = damage(rng, dumps[key])
            took = []
            for c in (R, T):
                try:
                    c.restore("_restored", 0, payload, replace=True)
                    took.append(True)
                except redis.exceptions.ResponseError:
                    took.append(False)
            version = int.from_bytes(payload[-10:-8], "little")
            if took == [False, True] and version in (11, 12):
                # Redis 7.0 refused the version alone: ask it about the body.
                try:
                    R.restore("_restored", 0, payload[:-10] + b"\x0a\x00" + payload[-8:], replace=True)
                    took[0] = True
                    counts["newer version, judged at 10"] = counts.get("newer version, judged at 10", 0) + 1
                except redis.exceptions.ResponseError:
                    pass
            if took == [True, True]:
                a, b = read(R, "_restored"), read(T, "_restored")
                if a == b:
                    counts["both took"] += 1
                else:
                    failures.append("%s: read back differently: %r / %r" % (payload.hex(), a, b))
            elif took == [False, False]:
                counts["both refused"] += 1
            elif took == [True, False]:
                counts["only Redis took"] += 1
            else:
                failures.append("%s (damaged %s): Tembo took what Redis refused" % (payload.hex(), key.decode()))
            for c in (R, T):
                c.delete("_restored")
        T.ping()
        R.ping()
        print("restore_differential: %d damaged payloads: %s" % (args.payloads, ", ".join(
            "%s %d" % kv for kv in counts.items())))
        for f in failures[:10]:
            print("  " + f)
        return 1 if failures else 0
    finally:
        for p in procs:
            p.terminate()
            try:
                p.wait(10)
            except subprocess.TimeoutExpired:
                p.kill()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
