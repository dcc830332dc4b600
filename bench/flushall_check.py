# Run from the repository root after `cargo build --release -p tembo`.
# FLUSHALL of 200,000 hashes (ten 100-byte fields each) on a release
# `tembo serve`, then SET latency from one client for 20 s while the sweep
# and the reclaimer work in the background.
import subprocess, time, redis, os, shutil, statistics
port = 6390
d = "/dev/shm/tembo-flushall"
shutil.rmtree(d, ignore_errors=True); os.makedirs(d)
srv = subprocess.Popen(["target/release/tembo", "serve", "--port", str(port), "--pool", d + "/p.pool",
                        "--pool-size", "1G", "--pool-max-size", "8G"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
try:
    r = redis.Redis(port=port, protocol=2)
    for _ in range(100):
        try:
            r.ping(); break
        except Exception:
            time.sleep(0.1)
    N = 200_000
    fields = {f"field{i}": "x" * 100 for i in range(10)}
    t = time.time()
    for start in range(0, N, 1000):
        p = r.pipeline(transaction=False)
        for i in range(start, start + 1000):
            p.hset(f"user{i}", mapping=fields)
        p.execute()
    print(f"loaded {N} hashes in {time.time()-t:.1f} s; dbsize {r.dbsize()}")
    t = time.perf_counter(); r.flushall(); ft = time.perf_counter() - t
    print(f"FLUSHALL took {ft*1000:.2f} ms; dbsize after: {r.dbsize()}")
    lat = []
    end = time.time() + 20
    i = 0
    while time.time() < end:
        t = time.perf_counter(); r.set(f"k{i}", "v"); lat.append(time.perf_counter() - t); i += 1
    lat.sort()
    print(f"{len(lat)} SETs in 20 s after FLUSHALL: median {statistics.median(lat)*1e6:.0f} us, p99 {lat[int(len(lat)*0.99)]*1e6:.0f} us, max {lat[-1]*1e3:.1f} ms")
finally:
    srv.terminate(); srv.wait()
    shutil.rmtree(d, ignore_errors=True)
