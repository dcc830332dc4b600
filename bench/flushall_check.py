"""FLUSHALL of many hashes on a release `tembo serve`, then writes while the
flush sweep and the reclaimer work in the background: how long FLUSHALL
takes and what latency the writers see meanwhile (the scenario that
stalled YCSB at 1M records in session 6).

Run from the repository root after `cargo build --release -p tembo`:

    python3 bench/flushall_check.py                                   # 200k hashes, 1 client SETting for 20 s
    python3 bench/flushall_check.py --hashes 1000000 --clients 8 --seconds 90 --write hset
"""
import argparse, os, shutil, statistics, subprocess, threading, time

import redis

ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
ap.add_argument("--hashes", type=int, default=200_000, help="hashes of ten 100-byte fields loaded before FLUSHALL")
ap.add_argument("--clients", type=int, default=1, help="writing clients after FLUSHALL")
ap.add_argument("--seconds", type=float, default=20, help="how long they write")
ap.add_argument("--write", choices=["set", "hset"], default="set", help="SET of a short value, or HSET of ten fields")
ap.add_argument("--port", type=int, default=6390)
args = ap.parse_args()

d = "/dev/shm/tembo-flushall"
shutil.rmtree(d, ignore_errors=True)
os.makedirs(d)
srv = subprocess.Popen(["target/release/tembo", "serve", "--port", str(args.port), "--pool", d + "/p.pool",
                        "--pool-size", "2G", "--pool-max-size", "16G"],
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
fields = {f"field{i}": "x" * 100 for i in range(10)}
try:
    r = redis.Redis(port=args.port, protocol=2)
    for _ in range(100):
        try:
            r.ping()
            break
        except Exception:
            time.sleep(0.1)
    t = time.time()
    for start in range(0, args.hashes, 1000):
        p = r.pipeline(transaction=False)
        for i in range(start, min(start + 1000, args.hashes)):
            p.hset(f"user{i}", mapping=fields)
        p.execute()
    print(f"loaded {args.hashes} hashes in {time.time() - t:.1f} s; dbsize {r.dbsize()}", flush=True)
    t = time.perf_counter()
    r.flushall()
    print(f"FLUSHALL took {(time.perf_counter() - t) * 1000:.2f} ms; dbsize after: {r.dbsize()}", flush=True)

    results = []
    t0 = time.time()

    def writer(w):
        c = redis.Redis(port=args.port, protocol=2)
        lat, worst, i = [], (0.0, 0.0), 0
        end = time.time() + args.seconds
        while time.time() < end:
            t = time.perf_counter()
            if args.write == "set":
                c.set(f"k{w}:{i}", "v")
            else:
                c.hset(f"n{w}:{i}", mapping=fields)
            dt = time.perf_counter() - t
            lat.append(dt)
            worst = max(worst, (dt, time.time() - t0))
            i += 1
        results.append((lat, worst))

    threads = [threading.Thread(target=writer, args=(w,)) for w in range(args.clients)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    lat = sorted(x for ls, _ in results for x in ls)
    worst = max(w for _, w in results)
    print(f"{len(lat)} {args.write.upper()}s from {args.clients} client(s) in {args.seconds:g} s after FLUSHALL: "
          f"median {statistics.median(lat) * 1e6:.0f} us, p99 {lat[int(len(lat) * 0.99)] * 1e3:.1f} ms, "
          f"p99.9 {lat[int(len(lat) * 0.999)] * 1e3:.1f} ms, max {worst[0] * 1e3:.1f} ms at {worst[1]:.0f} s")
finally:
    srv.terminate()
    srv.wait()
    shutil.rmtree(d, ignore_errors=True)
