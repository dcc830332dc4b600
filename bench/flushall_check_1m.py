# Run from the repository root after `cargo build --release -p tembo`.
# FLUSHALL of 1,000,000 hashes (ten 100-byte fields each), then 8 clients
# writing ten-field hashes for 90 s while the flush sweep and the reclaimer
# work in the background: the scenario that stalled YCSB at 1M records in
# session 6. Prints latency percentiles and when the worst one happened.
import subprocess, time, redis, os, shutil, statistics, threading
port = 6391
d = "/dev/shm/tembo-flushall1m"
shutil.rmtree(d, ignore_errors=True); os.makedirs(d)
srv = subprocess.Popen(["target/release/tembo", "serve", "--port", str(port), "--pool", d + "/p.pool",
                        "--pool-size", "2G", "--pool-max-size", "16G"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
try:
    r = redis.Redis(port=port, protocol=2)
    for _ in range(100):
        try:
            r.ping(); break
        except Exception:
            time.sleep(0.1)
    N = 1_000_000
    fields = {f"field{i}": "x" * 100 for i in range(10)}
    t = time.time()
    for start in range(0, N, 1000):
        p = r.pipeline(transaction=False)
        for i in range(start, start + 1000):
            p.hset(f"user{i}", mapping=fields)
        p.execute()
    print(f"loaded {N} hashes in {time.time()-t:.1f} s; dbsize {r.dbsize()}", flush=True)
    t = time.perf_counter(); r.flushall(); ft = time.perf_counter() - t
    print(f"FLUSHALL took {ft*1000:.2f} ms", flush=True)
    res = []
    t0 = time.time()
    def worker(w):
        c = redis.Redis(port=port, protocol=2)
        lat = []; worst = (0, 0)
        end = time.time() + 90; i = 0
        while time.time() < end:
            t = time.perf_counter(); c.hset(f"n{w}:{i}", mapping=fields); dt = time.perf_counter() - t
            lat.append(dt); i += 1
            if dt > worst[0]: worst = (dt, time.time() - t0)
        res.append((lat, worst))
    ths = [threading.Thread(target=worker, args=(w,)) for w in range(8)]
    [x.start() for x in ths]; [x.join() for x in ths]
    lat = sorted(l for ls, _ in res for l in ls)
    worst = max(w for _, w in res)
    print(f"{len(lat)} HSETs (10 fields) from 8 clients in 90 s after FLUSHALL: median {statistics.median(lat)*1e6:.0f} us, p99 {lat[int(len(lat)*0.99)]*1e3:.1f} ms, p99.9 {lat[int(len(lat)*0.999)]*1e3:.1f} ms, max {worst[0]*1e3:.1f} ms at {worst[1]:.0f} s")
    print(r.info('persistence').get('recovery_in_progress'), r.dbsize())
finally:
    srv.terminate(); srv.wait()
    shutil.rmtree(d, ignore_errors=True)
