#!/usr/bin/env python3
"""Write latency while a fresh `tembo serve` pool grows.

    bench/growth_latency.py BINARY [BINARY ...]

For each build, in the order given: starts `BINARY serve` on a fresh pool
under /dev/shm (default 256 MiB, max 8 GiB), writes 25,000 new 100 kB
strings with single SETs over one socket, timing each, and prints the wall
time, p50, p99.9, the largest SETs over 100 ms and the pool's final size.
The SETs that wait for a growth of the pool are the ones over 100 ms.
"""
import socket, time, sys, os, subprocess, tempfile, shutil
def run(binary, n=25000, size=100_000):
    d = tempfile.mkdtemp(dir="/dev/shm", prefix="glat-")
    p = subprocess.Popen([binary, "serve", "--port", "7491", "--pool", d + "/p.pool", "--pool-max-size", "8G", "--loglevel", "warn"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    for _ in range(100):
        try:
            s = socket.create_connection(("127.0.0.1", 7491)); break
        except OSError: time.sleep(0.05)
    f = s.makefile("rb")
    val = os.urandom(size)
    lats = []
    t0 = time.time()
    for i in range(n):
        k = b"key:%d" % i
        req = b"*3\r\n$3\r\nSET\r\n$%d\r\n%s\r\n$%d\r\n%s\r\n" % (len(k), k, size, val)
        a = time.perf_counter(); s.sendall(req); assert f.readline() == b"+OK\r\n"; lats.append(time.perf_counter() - a)
    total = time.time() - t0
    lats.sort()
    pool = os.path.getsize(d + "/p.pool")
    p.terminate(); p.wait(); shutil.rmtree(d)
    big = [round(x * 1000) for x in lats if x > 0.1]
    print(f"{os.path.basename(binary)}: {n} SETs in {total:.1f} s, p50 {lats[n//2]*1000:.2f} ms, p99.9 {lats[int(n*0.999)]*1000:.1f} ms, max {lats[-1]*1000:.0f} ms, over 100 ms: {big[-8:]} (pool {pool >> 20} MiB)")
for b in sys.argv[1:]:
    run(b)
