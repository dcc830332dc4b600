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
import threading
import time

import redis

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

stop = threading.Event()
lat = []


def probe():
    c = redis.Redis(port=args.port)
    while not stop.is_set():
        t0 = time.perf_counter()
        c.get("probe")
        lat.append(time.perf_counter() - t0)


while time.time() * 1000 < at:
    time.sleep(0.001)
t = time.time()
prober = threading.Thread(target=probe) if args.probe else None
if prober:
    prober.start()
while r.dbsize() > 1 and time.time() - t < 300:
    time.sleep(0.02)
took = time.time() - t
stop.set()
if prober:
    prober.join()
print(f"{n} keys expired at one moment: gone after {took:.2f} s; left {r.dbsize() - 1}")
if lat:
    lat.sort()

    def pct(q):
        return lat[min(len(lat) - 1, int(q * len(lat)))] * 1e6

    print(
        f"probe: {len(lat) / took:.0f} GETs/s; latency us p50 {pct(0.5):.0f} p99 {pct(0.99):.0f} "
        f"p99.9 {pct(0.999):.0f} max {lat[-1] * 1e6:.0f}"
    )
