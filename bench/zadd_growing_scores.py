#!/usr/bin/env python3
"""Server CPU per ZADD whose scores only grow (timestamps: every insert
lands in the set's last index block) on a big sorted set, with and
without a rank index, for each tembo build given:

    bench/zadd_growing_scores.py MEMBERS ADDS BIN [BIN...]
    bench/zadd_growing_scores.py 1000000 200000 target/release/tembo

For each build and case ("plain", "indexed": one ZRANK first builds the
set's index): a fresh pool under /dev/shm, MEMBERS members with scores
0..MEMBERS (pipelined ZADDs of 1,000), then ADDS more with growing
scores in pipelines of 100 single-member ZADDs; prints the server's CPU
time per ZADD of that last phase (user + system from /proc). Port 7472.
"""
import os
import shutil
import subprocess
import sys
import tempfile
import time

import redis

PORT = 7472


def cpu(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def run(binary, members, adds, indexed):
    d = tempfile.mkdtemp(dir="/dev/shm")
    p = subprocess.Popen([binary, "serve", "--port", str(PORT), "--pool", f"{d}/p.pool", "--pool-size", "1G",
                          "--loglevel", "warning"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        c = redis.Redis(port=PORT, protocol=2)
        for _ in range(100):
            try:
                c.ping()
                break
            except redis.ConnectionError:
                time.sleep(0.1)
        for start in range(0, members, 1000):
            c.zadd("z", {f"m{i:09}": i for i in range(start, min(start + 1000, members))})
        if indexed:
            c.zrank("z", f"m{members // 2:09}")
        t0 = cpu(p.pid)
        pipe = c.pipeline(transaction=False)
        for i in range(members, members + adds):
            pipe.zadd("z", {f"m{i:09}": i})
            if i % 100 == 99:
                pipe.execute()
        pipe.execute()
        us = (cpu(p.pid) - t0) * 1e6 / adds
        info = c.info("memory").get("rank_index_bytes", "-")
        c.shutdown(nosave=True)
    except redis.ConnectionError:
        pass
    finally:
        p.wait()
        shutil.rmtree(d, ignore_errors=True)
    return us, info


def main():
    if len(sys.argv) < 4:
        print(__doc__)
        sys.exit(2)
    members, adds = int(sys.argv[1]), int(sys.argv[2])
    for binary in sys.argv[3:]:
        for indexed in (False, True):
            us, info = run(binary, members, adds, indexed)
            case = "indexed" if indexed else "plain"
            print(f"{os.path.basename(binary):16} {case:8} {us:6.2f} us/ZADD  rank_index_bytes {info}", flush=True)


if __name__ == "__main__":
    main()
