#!/usr/bin/env python3
"""Tembo's server against Redis, same machine, same clients, same tmpfs.

Starts, one at a time and interleaved over --runs rounds:
  tembo      `tembo serve` with its pool on --dir (tmpfs: mode "emulated")
  redis-aof       redis-server --appendonly yes --appendfsync always, files on --dir
  redis-everysec  redis-server --appendonly yes --appendfsync everysec (not durable per write)
  redis-mem       redis-server with persistence off (reference only)
and runs against each
  redis-benchmark -t set,get,incr,lpush,hset,zadd -n N -r N -d 256 -c 50, with -P 1 and -P 16
  YCSB workloads A-F through bench/ycsb/run.sh (unless --no-ycsb)
Reports medians over the rounds, and Tembo's ratio to each Redis, as JSON
and a Markdown table.

Example (what docs/results/server.md was measured with):
  bench/server_bench.py --runs 3 --requests 200000 --ycsb-records 100000 \
      --ycsb-ops 100000 --out docs/results/server
"""

import argparse
import json
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TESTS = ["set", "get", "incr", "lpush", "hset", "zadd"]


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_ready(port, proc, timeout=60):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"server exited with {proc.returncode} before answering")
        r = subprocess.run(["redis-cli", "-p", str(port), "PING"], capture_output=True, text=True)
        if r.stdout.strip() == "PONG":
            return
        time.sleep(0.1)
    raise SystemExit("server did not answer PING")


def start(kind, port, base, tembo):
    d = os.path.join(base, kind)
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(d)
    if kind == "tembo":
        cmd = [tembo, "serve", "--port", str(port), "--pool", os.path.join(d, "tembo.pool"),
               "--pool-size", "1G", "--pool-max-size", "8G", "--loglevel", "warn"]
    elif kind in ("redis-aof", "redis-everysec"):
        fsync = "always" if kind == "redis-aof" else "everysec"
        cmd = ["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--dir", d, "--save", "",
               "--appendonly", "yes", "--appendfsync", fsync, "--loglevel", "warning"]
    else:
        cmd = ["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--dir", d, "--save", "",
               "--appendonly", "no", "--loglevel", "warning"]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=open(os.path.join(base, kind + ".log"), "w"),
                            start_new_session=True)
    wait_ready(port, proc)
    return proc


def stop(proc, port):
    subprocess.run(["redis-cli", "-p", str(port), "SHUTDOWN", "NOSAVE"], capture_output=True)
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


def redis_benchmark(port, n, pipeline, clients, size):
    cmd = ["redis-benchmark", "-p", str(port), "-t", ",".join(TESTS), "-n", str(n), "-r", str(n),
           "-d", str(size), "-c", str(clients), "-P", str(pipeline), "--csv"]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0 or "ERR" in r.stdout:
        raise SystemExit(f"redis-benchmark failed:\n{r.stdout}\n{r.stderr}")
    out = {}
    for line in r.stdout.splitlines():
        cells = [c.strip('"') for c in line.split('","')]
        if len(cells) < 2 or cells[0] == "test":
            continue
        name = cells[0].split()[0].lower()
        name = {"lpush": "lpush", "hset": "hset", "zadd": "zadd"}.get(name, name)
        out[name] = {"rps": float(cells[1]), "p50_ms": float(cells[4]) if len(cells) > 4 else None,
                     "p99_ms": float(cells[6]) if len(cells) > 6 else None}
    return out


def ycsb(port, records, ops, threads, tag, base):
    out = os.path.join(base, f"ycsb-{tag}.json")
    cmd = [os.path.join(ROOT, "bench/ycsb/run.sh"), "--port", str(port), "--recordcount", str(records),
           "--operationcount", str(ops), "--threads", str(threads), "--out", out, "--label", tag]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        raise SystemExit(f"YCSB failed on {tag}:\n{r.stdout[-3000:]}\n{r.stderr[-3000:]}")
    with open(out) as f:
        data = json.load(f)
    res = {}
    for ph in data["phases"]:
        res[f"{ph['phase']}-{ph['workload']}"] = ph["throughput_ops_sec"]
    return res


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=3, help="interleaved rounds; medians are reported")
    ap.add_argument("--requests", type=int, default=1_000_000, help="redis-benchmark -n and -r")
    ap.add_argument("--clients", type=int, default=50)
    ap.add_argument("--size", type=int, default=256, help="redis-benchmark -d")
    ap.add_argument("--ycsb-records", type=int, default=1_000_000)
    ap.add_argument("--ycsb-ops", type=int, default=1_000_000)
    ap.add_argument("--ycsb-threads", type=int, default=8)
    ap.add_argument("--no-ycsb", action="store_true")
    ap.add_argument("--servers", default="tembo,redis-aof,redis-everysec,redis-mem",
                    help="comma list of tembo, redis-aof, redis-everysec, redis-mem")
    ap.add_argument("--dir", default="/dev/shm/tembo-server-bench", help="where pools and AOF files go (tmpfs)")
    ap.add_argument("--tembo", default=os.path.join(ROOT, "target/release/tembo"))
    ap.add_argument("--out", default=None, help="write OUT.json and OUT.md")
    a = ap.parse_args()

    servers = a.servers.split(",")
    os.makedirs(a.dir, exist_ok=True)
    runs = {s: [] for s in servers}
    for rnd in range(a.runs):
        for s in servers:
            port = free_port()
            print(f"[round {rnd + 1}/{a.runs}] {s}", file=sys.stderr, flush=True)
            proc = start(s, port, a.dir, a.tembo)
            try:
                r = {}
                for p in (1, 16):
                    t0 = time.time()
                    r[f"P{p}"] = redis_benchmark(port, a.requests, p, a.clients, a.size)
                    print(f"  -P {p}: " + ", ".join(f"{k} {v['rps']:.0f}/s" for k, v in r[f'P{p}'].items())
                          + f" ({time.time() - t0:.0f} s)", file=sys.stderr, flush=True)
                if not a.no_ycsb:
                    t0 = time.time()
                    r["ycsb"] = ycsb(port, a.ycsb_records, a.ycsb_ops, a.ycsb_threads, f"{s}-{rnd}", a.dir)
                    print(f"  ycsb: {r['ycsb']} ({time.time() - t0:.0f} s)", file=sys.stderr, flush=True)
            finally:
                stop(proc, port)
            runs[s].append(r)

    def med(s, group, test, field="rps"):
        vals = []
        for r in runs[s]:
            v = r.get(group, {}).get(test)
            if isinstance(v, dict):
                v = v.get(field)
            if v is not None:
                vals.append(v)
        return statistics.median(vals) if vals else None

    rows = []
    for group in ("P1", "P16"):
        for t in TESTS:
            rows.append((f"{t.upper()} -P {group[1:]}", group, t))
    if not a.no_ycsb:
        ph = sorted({k for s in servers for r in runs[s] for k in r.get("ycsb", {})})
        rows += [(f"YCSB {p}", "ycsb", p) for p in ph]
    table = []
    for label, group, t in rows:
        row = {"test": label}
        for s in servers:
            row[s] = med(s, group, t)
        if "tembo" in servers:
            for s in servers:
                if s != "tembo" and row.get(s) and row.get("tembo"):
                    row[f"tembo/{s}"] = row["tembo"] / row[s]
        table.append(row)

    cols = ["test"] + servers + [f"tembo/{s}" for s in servers if s != "tembo" and "tembo" in servers]
    md = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    for row in table:
        cells = []
        for c in cols:
            v = row.get(c)
            if c == "test":
                cells.append(v)
            elif v is None:
                cells.append("–")
            elif c.startswith("tembo/"):
                cells.append(f"{v:.2f}x")
            else:
                cells.append(f"{v:,.0f}")
        md.append("| " + " | ".join(cells) + " |")
    text = "\n".join(md)
    print(text)
    if a.out:
        meta = {"args": vars(a), "runs": runs, "medians": table, "host_cpus": os.cpu_count(),
                "command": " ".join(sys.argv)}
        with open(a.out + ".json", "w") as f:
            json.dump(meta, f, indent=1)
        with open(a.out + ".md", "w") as f:
            f.write(f"<!-- {' '.join(sys.argv)} -->\n{text}\n")


if __name__ == "__main__":
    main()
