#!/usr/bin/env python3
"""RDB files in and out: Tembo against redis-server 7.0 on the same data.

For N keys made by DEBUG POPULATE (N strings of SIZE bytes) in both servers:
  - online snapshot: `redis-cli --rdb` from each server (same client, same
    loopback, both stream the file as they write it);
  - offline: `tembo rdb export` of the stopped server's pool, and `SAVE`
    in redis-server (its fork-less foreground save);
  - load: `tembo rdb import` of the file redis-server saved, into a new pool,
    and redis-server's own load of that file at start (its log's
    "DB loaded from disk" time).
Each figure is the median of ROUNDS runs. Pools and files live in /dev/shm.

    python3 bench/rdb_speed.py [--keys 1000000] [--size 100] [--rounds 3] [--tembo target/release/tembo]
"""

import argparse
import os
import re
import shutil
import socket
import statistics
import subprocess
import tempfile
import time


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def wait_port(port, proc):
    for _ in range(2000):
        if proc.poll() is not None:
            raise SystemExit(f"server exited with {proc.returncode}")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return
        except OSError:
            time.sleep(0.02)
    raise SystemExit("server did not start")


def cli(port, *args):
    return subprocess.run(["redis-cli", "-p", str(port), *args], check=True, capture_output=True, text=True).stdout


def timed(fn):
    t = time.perf_counter()
    fn()
    return time.perf_counter() - t


def stop(port, proc):
    subprocess.run(["redis-cli", "-p", str(port), "shutdown", "nosave"], capture_output=True)
    proc.wait(60)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--keys", type=int, default=1_000_000)
    ap.add_argument("--size", type=int, default=100)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--tembo", default="target/release/tembo")
    a = ap.parse_args()
    d = tempfile.mkdtemp(prefix="tembo-rdb-speed-", dir="/dev/shm")
    res = {k: [] for k in ("tembo --rdb", "redis --rdb", "tembo export", "redis SAVE", "tembo import",
                           "redis load")}
    sizes = {}
    live = []
    try:
        for rnd in range(a.rounds):
            pool = f"{d}/tembo.pool"
            for f in os.listdir(d):
                os.remove(f"{d}/{f}")
            tp = free_port()
            t = subprocess.Popen([a.tembo, "serve", "--port", str(tp), "--pool", pool,
                                  "--loglevel", "warn"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            live.append(t)
            wait_port(tp, t)
            cli(tp, "debug", "populate", str(a.keys), "key", str(a.size))
            rp = free_port()
            r = subprocess.Popen(["redis-server", "--port", str(rp), "--save", "", "--appendonly", "no", "--dir", d,
                                  "--dbfilename", "redis.rdb", "--enable-debug-command", "yes",
                                  # Its default waits 5 s for more replicas before a diskless sync.
                                  "--repl-diskless-sync-delay", "0",
                                  "--logfile", f"{d}/redis.log"])
            live.append(r)
            wait_port(rp, r)
            cli(rp, "debug", "populate", str(a.keys), "key", str(a.size))
            res["tembo --rdb"].append(timed(lambda: cli(tp, "--rdb", f"{d}/from-tembo.rdb")))
            res["redis --rdb"].append(timed(lambda: cli(rp, "--rdb", f"{d}/from-redis.rdb")))
            # The child that served --rdb may still be exiting: SAVE would be refused.
            while "rdb_bgsave_in_progress:0" not in cli(rp, "info", "persistence"):
                time.sleep(0.05)
            out = []
            res["redis SAVE"].append(timed(lambda: out.append(cli(rp, "save"))))
            assert out[0].strip() == "OK", out
            sizes["tembo"] = os.path.getsize(f"{d}/from-tembo.rdb")
            sizes["redis"] = os.path.getsize(f"{d}/redis.rdb")
            stop(tp, t)
            stop(rp, r)
            res["tembo export"].append(timed(lambda: subprocess.run(
                [a.tembo, "rdb", "export", "--pool", pool, f"{d}/exported.rdb"], check=True, capture_output=True)))
            res["tembo import"].append(timed(lambda: subprocess.run(
                [a.tembo, "rdb", "import", f"{d}/redis.rdb", "--pool", f"{d}/imported.pool"],
                check=True, capture_output=True)))
            os.remove(f"{d}/redis.log")
            r = subprocess.Popen(["redis-server", "--port", str(rp), "--save", "", "--appendonly", "no", "--dir", d,
                                  "--dbfilename", "redis.rdb", "--logfile", f"{d}/redis.log"])
            live.append(r)
            wait_port(rp, r)
            # It listens before it loads: its log says when the load is done.
            for _ in range(6000):
                m = re.search(r"DB loaded from disk: ([0-9.]+) seconds", open(f"{d}/redis.log").read())
                if m:
                    break
                time.sleep(0.01)
            res["redis load"].append(float(m.group(1)) if m else float("nan"))
            stop(rp, r)
            print(f"round {rnd + 1}: " + ", ".join(f"{k} {v[-1]:.2f} s" for k, v in res.items()), flush=True)
    finally:
        for p in live:
            if p.poll() is None:
                p.kill()
        shutil.rmtree(d, ignore_errors=True)
    print(f"\n{a.keys} keys x {a.size} B, medians of {a.rounds} (seconds; keys/s)")
    print(f"{'':14} {'tembo':>16} {'redis-server':>16} {'ratio':>7}")
    for what, (tk, rk) in {"redis-cli --rdb": ("tembo --rdb", "redis --rdb"),
                           "offline save": ("tembo export", "redis SAVE"),
                           "load a file": ("tembo import", "redis load")}.items():
        tm, rm = statistics.median(res[tk]), statistics.median(res[rk])
        print(f"{what:14} {tm:7.2f} s {a.keys / tm / 1e3:5.0f}k/s {rm:7.2f} s {a.keys / rm / 1e3:5.0f}k/s "
              f"{rm / tm:6.2f}x")
    print(f"file sizes: tembo {sizes['tembo']} B, redis {sizes['redis']} B")


if __name__ == "__main__":
    main()
