#!/usr/bin/env python3
"""A cache under maxmemory: Tembo against Redis, same machine, same clients.

Each server gets `maxmemory` = --limit and `maxmemory-policy` = --policy,
then redis-benchmark SETs --requests random keys out of --keyspace (far more
than fit) with --size byte values, so that evictions run all along. Servers,
interleaved over --runs rounds:
  tembo           `tembo serve`, pool on --dir (tmpfs: mode emulated; every
                  write durable before its reply)
  tembo-nolimit   the same without maxmemory (what evicting costs Tembo)
  redis-aof       redis-server --appendonly yes --appendfsync always
  redis-mem       redis-server with persistence off (reference only)
Reports, as medians over the rounds: SET requests per second, the memory in
use at the end against the limit (each server's own used_memory), and the
keys left and evicted. Redis counts its heap, Tembo its pool: the same limit
holds a different number of keys in each.

  bench/eviction_bench.py --runs 3 --out docs/results/eviction
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from server_bench import ROOT, free_port, start, stop  # noqa: E402

SERVERS = ["tembo", "tembo-nolimit", "redis-aof", "redis-mem"]


def cli(port, *args):
    return subprocess.run(["redis-cli", "-p", str(port), *args], capture_output=True, text=True).stdout.strip()


def info(port, field):
    for line in cli(port, "INFO").splitlines():
        if line.startswith(field + ":"):
            return int(line.split(":", 1)[1])
    raise SystemExit(f"no {field} in INFO")


def one(kind, args, base):
    port = free_port()
    proc = start("tembo" if kind.startswith("tembo") else kind, port, base, args.tembo)
    try:
        if kind != "tembo-nolimit":
            cli(port, "CONFIG", "SET", "maxmemory", str(args.limit))
            cli(port, "CONFIG", "SET", "maxmemory-policy", args.policy)
        cmd = ["redis-benchmark", "-p", str(port), "-t", "set", "-n", str(args.requests), "-r", str(args.keyspace),
               "-d", str(args.size), "-c", str(args.clients), "--csv"]
        r = subprocess.run(cmd, capture_output=True, text=True)
        if r.returncode != 0 or "ERR" in r.stdout or "OOM" in r.stdout:
            raise SystemExit(f"redis-benchmark failed on {kind}:\n{r.stdout}\n{r.stderr}")
        rows = [line.split('","') for line in r.stdout.splitlines() if line.startswith('"SET')]
        rps = float(rows[0][1].strip('"'))
        time.sleep(1)  # let background collection settle before reading memory
        return {"set_rps": rps, "used_memory": info(port, "used_memory"), "keys": int(cli(port, "DBSIZE")),
                "evicted_keys": info(port, "evicted_keys")}
    finally:
        stop(proc, port)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--limit", type=int, default=32 << 20, help="maxmemory in bytes")
    ap.add_argument("--policy", default="allkeys-lru")
    ap.add_argument("--requests", type=int, default=400_000)
    ap.add_argument("--keyspace", type=int, default=1_000_000)
    ap.add_argument("--size", type=int, default=256)
    ap.add_argument("--clients", type=int, default=50)
    ap.add_argument("--servers", default=",".join(SERVERS))
    ap.add_argument("--dir", default="/dev/shm/tembo-eviction-bench")
    ap.add_argument("--tembo", default=os.path.join(ROOT, "target/release/tembo"))
    ap.add_argument("--out", default=None, help="write OUT.json and OUT.md")
    args = ap.parse_args()
    servers = args.servers.split(",")
    os.makedirs(args.dir, exist_ok=True)
    runs = {s: [] for s in servers}
    for i in range(args.runs):
        for s in servers:
            res = one(s, args, args.dir)
            runs[s].append(res)
            print(f"round {i + 1} {s}: {res}", flush=True)
    subprocess.run(["rm", "-rf", args.dir])
    med = {s: {k: statistics.median(r[k] for r in runs[s]) for k in runs[s][0]} for s in servers}
    lines = [f"maxmemory {args.limit} bytes, {args.policy}; redis-benchmark -t set -n {args.requests} "
             f"-r {args.keyspace} -d {args.size} -c {args.clients}; medians of {args.runs} interleaved rounds", "",
             "| server | SET/s | used at the end / limit | keys left | evicted |", "|---|---:|---:|---:|---:|"]
    for s in servers:
        m = med[s]
        ratio = f"{m['used_memory'] / args.limit:.2f}" if s != "tembo-nolimit" else "(no limit)"
        lines.append(f"| {s} | {m['set_rps']:,.0f} | {ratio} | {m['keys']:,.0f} | {m['evicted_keys']:,.0f} |")
    if "tembo" in med:
        lines.append("")
        for s in servers:
            if s != "tembo":
                lines.append(f"tembo / {s} (SET/s): {med['tembo']['set_rps'] / med[s]['set_rps']:.2f}x")
    print("\n".join(lines))
    if args.out:
        with open(args.out + ".json", "w") as f:
            json.dump({"args": vars(args), "runs": runs, "medians": med}, f, indent=1)
        with open(args.out + ".md", "w") as f:
            f.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
