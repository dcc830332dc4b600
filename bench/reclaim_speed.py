#!/usr/bin/env python3
"""How fast `tembo serve` reclaims a deleted collection in the background.

    bench/reclaim_speed.py PORT ELEMENTS

Fills a hash of ELEMENTS fields, UNLINKs it (O(1) for the client), and
times until INFO persistence's reclaimed_elements has grown by ELEMENTS
(the elements' keys deleted), printing used_memory before and after. Results: docs/results/server.md.
"""
import redis, time, sys
r = redis.Redis(port=int(sys.argv[1]))
n = int(sys.argv[2])
p = r.pipeline(transaction=False)
for i in range(0, n, 1000):
    p.hset("big", mapping={f"f{j}": "v" for j in range(i, min(n, i + 1000))})
p.execute()
used0 = r.info("memory")["used_memory"]
done0 = r.info("persistence")["reclaimed_elements"]
t = time.time()
r.unlink("big")
while True:
    if r.info("persistence")["reclaimed_elements"] - done0 >= n:
        break
    if time.time() - t > 300:
        break
    time.sleep(0.05)
print(f"{n} elements reclaimed in {time.time()-t:.2f} s; used_memory {used0} -> {r.info('memory')['used_memory']}")
