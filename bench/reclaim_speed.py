#!/usr/bin/env python3
"""How fast `tembo serve` reclaims a deleted collection in the background,
and what a client meanwhile sees.

    bench/reclaim_speed.py PORT ELEMENTS [--probe]

Fills a hash of ELEMENTS fields, UNLINKs it (O(1) for the client), and
times until INFO persistence's reclaimed_elements has grown by ELEMENTS
(the elements' keys deleted), printing used_memory before and after. With
--probe, one client sends GETs back to back (one at a time, as a
request-reply client does) for the whole reclaim, and the script prints
their rate and latency percentiles: the server is then never idle for
long, which is when it reclaims at full speed. Results: docs/results/server.md.
"""
import argparse
import time

import redis

from probe import Probe

ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
ap.add_argument("port", type=int)
ap.add_argument("elements", type=int)
ap.add_argument("--probe", action="store_true", help="time a client's GETs during the reclaim")
args = ap.parse_args()
r = redis.Redis(port=args.port)
n = args.elements
p = r.pipeline(transaction=False)
for i in range(0, n, 1000):
    p.hset("big", mapping={f"f{j}": "v" for j in range(i, min(n, i + 1000))})
p.execute()
r.set("probe", "x")
used0 = r.info("memory")["used_memory"]
done0 = r.info("persistence")["reclaimed_elements"]

t = time.time()
r.unlink("big")
prober = Probe(args.port).start() if args.probe else None
while r.info("persistence")["reclaimed_elements"] - done0 < n and time.time() - t < 300:
    time.sleep(0.05)
took = time.time() - t
if prober:
    prober.stop()
print(f"{n} elements reclaimed in {took:.2f} s; used_memory {used0} -> {r.info('memory')['used_memory']}")
if prober:
    print(prober.report(took))
