#!/usr/bin/env python3
"""A/B of two tembo builds on one big commit: SADD of 1,000,000 new members.

    bench/batch_sadd_ab.py BEFORE_BIN AFTER_BIN [ROUNDS]

Each round starts each binary in turn (alternated) as `tembo serve` on a
fresh pool under /dev/shm. A first SADD into a set that is then deleted
(and reclaimed) touches the pool's pages, whose first-touch zeroing by the
kernel would otherwise be a third of the time; then three measured SADDs
into three new sets: each is one command, so one `WriteBatch` of a million
inserts. Prints the server's CPU time per command (user + system from
/proc, which leaves out the client's time to build and send the request)
and the wall time, then the medians. Needs redis-py.
"""

import os
import shutil
import statistics
import subprocess
import sys
import time

import redis

PORT = 7420
MEMBERS = [b"member:%d" % i for i in range(1_000_000)]


def cpu_ms(pid):
    fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) * 1000 // os.sysconf("SC_CLK_TCK")


def one_round(binary, name):
    d = f"/dev/shm/tembo-batch-ab-{name}"
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(d)
    p = subprocess.Popen([binary, "serve", "--port", str(PORT), "--pool", f"{d}/p.pool", "--loglevel", "warn"])
    try:
        r = redis.Redis(port=PORT)
        for _ in range(100):
            try:
                r.ping()
                break
            except redis.ConnectionError:
                time.sleep(0.1)
        assert r.sadd("warm", *MEMBERS) == len(MEMBERS)
        r.delete("warm")
        while int(r.info("memory").get("lazyfree_pending_objects", 0)) > 0:
            time.sleep(0.2)
        out = []
        for k in range(3):
            before, start = cpu_ms(p.pid), time.time()
            assert r.sadd(f"set{k}", *MEMBERS) == len(MEMBERS)
            out.append((cpu_ms(p.pid) - before, time.time() - start))
        return out
    finally:
        p.terminate()
        p.wait()
        shutil.rmtree(d, ignore_errors=True)


def main():
    before, after = sys.argv[1], sys.argv[2]
    rounds = int(sys.argv[3]) if len(sys.argv) > 3 else 3
    cpu = {"before": [], "after": []}
    for i in range(rounds):
        order = [("before", before), ("after", after)]
        if i % 2:
            order.reverse()
        for name, binary in order:
            res = one_round(binary, name)
            cpu[name] += [c for c, _ in res]
            print(name, i + 1, "  ".join(f"cpu {c} ms, wall {w:.2f} s" for c, w in res), flush=True)
    for name in ("before", "after"):
        print(f"{name}: server CPU per 1M-member SADD, median {statistics.median(cpu[name]):.0f} ms "
              f"(range {min(cpu[name])}-{max(cpu[name])})")


if __name__ == "__main__":
    main()
