#!/usr/bin/env python3
"""Redis's "is the memory limit honoured?" check (unit/maxmemory), by hand,
against a running server: for each eviction policy, a limit 100 KiB above
the flushed server's use, SETEX of random keys until within 4 KiB of it,
then as many keys again, reading INFO used_memory after every write.
Prints the keys that fit, the bytes over the limit at the end and at the
worst read, and the keys left.

  tembo serve --port 7411 --pool /dev/shm/h.pool &
  bench/maxmemory_honour.py --port 7411
"""

import argparse
import random
import time

import redis

POLICIES = ["allkeys-random", "allkeys-lru", "allkeys-lfu", "volatile-lru", "volatile-lfu", "volatile-random",
            "volatile-ttl"]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--port", type=int, default=6379)
    args = ap.parse_args()
    r = redis.Redis(port=args.port)
    print("| policy | keys that fit | at the end | worst read | keys left |")
    print("|---|---:|---:|---:|---:|")
    for policy in POLICIES:
        r.config_set("maxmemory", 0)
        r.flushall()
        time.sleep(0.5)
        limit = r.info("memory")["used_memory"] + 100 * 1024
        r.config_set("maxmemory", limit)
        r.config_set("maxmemory-policy", policy)
        n = 0
        while r.info("memory")["used_memory"] + 4096 <= limit:
            r.setex(f"key:{random.randrange(10**9)}", 10000, "x")
            n += 1
        worst = 0
        for _ in range(n):
            r.setex(f"key:{random.randrange(10**9)}", 10000, "x")
            worst = max(worst, r.info("memory")["used_memory"] - limit)
        time.sleep(0.5)
        end = r.info("memory")["used_memory"] - limit
        print(f"| {policy} | {n} | {end:,} | {worst:,} | {r.dbsize()} |")
    r.config_set("maxmemory", 0)


if __name__ == "__main__":
    main()
