#!/usr/bin/env python3
"""How fast a server's active expiry deletes keys that all expire at once,
and what a client meanwhile sees.

    bench/expire_speed.py PORT N [--probe]

SETs N keys, gives them all the same PEXPIREAT (a moment after the
commands are in), and times from that moment until DBSIZE is 0. With
--probe, one client sends GETs of a key without expiry back to back (one
at a time, as a request-reply client does) over the same period, and the
script prints their rate and latency percentiles. Works against
redis-server too. Results: docs/results/server.md.
"""
import argparse
import time

import redis

from probe import Probe

ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
ap.add_argument("port", type=int)
ap.add_argument("keys", type=int)
ap.add_argument("--probe", action="store_true", help="time a client's GETs during the expiry")
args = ap.parse_args()
r = redis.Redis(port=args.port)
r.flushall()
n = args.keys
began = time.time()
p = r.pipeline(transaction=False)
for i in range(n):
    p.set(f"k{i}", "v" * 50)
p.execute()
fill = time.time() - began
r.set("probe", "x")
# Far enough ahead that every PEXPIREAT is in before the moment comes.
at = int((time.time() + 2 * fill + 1.0) * 1000)
p = r.pipeline(transaction=False)
for i in range(n):
    p.pexpireat(f"k{i}", at)
p.execute()

while time.time() * 1000 < at:
    time.sleep(0.001)
t = time.time()
prober = Probe(args.port).start() if args.probe else None
while r.dbsize() > 1 and time.time() - t < 300:
    time.sleep(0.02)
took = time.time() - t
if prober:
    prober.stop()
print(f"{n} keys expired at one moment: gone after {took:.2f} s; left {r.dbsize() - 1}")
if prober:
    print(prober.report(took))
