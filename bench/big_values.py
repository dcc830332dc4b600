#!/usr/bin/env python3
"""Big strings through `tembo serve` against Redis with AOF (fsync always).

    bench/big_values.py [--rounds N] [--tembo NAME=BINARY ...] [--no-redis]

Each round starts every server on a fresh directory under /dev/shm, in
turn (alternated order from round to round), and measures:

- `redis-benchmark -t set,get -c 4 -r 100 -d SIZE` for SIZE 100 kB, 1 MB
  and 10 MB: requests per second and the server's CPU time per request
  (user + system from /proc, all its threads), each test run twice and
  the second run kept: the first fills 100 keys and grows the pool or the
  AOF file, the second overwrites them (steady state);
- one client sending `SET` then `GET` of a 100 MB value over a plain
  socket, to two keys in turn, six times: the server's CPU time for each
  (a SET's includes the half second after its reply, when the old value
  is freed in the background). The first two SETs grow the pool (or the
  AOF file) and are reported apart from the last four, which overwrite.

- edits of a 1 MB string by one client, one request at a time over a
  plain socket, 2,000 of each: SETBIT, GETBIT, BITFIELD SET, SETRANGE of
  3 bytes and APPEND of 100 bytes (the string grows by 200 kB), at random
  offsets; the server's CPU time per request.

It prints one table of medians over the rounds, with every round's figures
beside them. `--parts` picks the sections (sizes, huge, edits; default
all). Needs redis-server and redis-benchmark on the PATH.
"""

import argparse
import os
import random
import shutil
import socket
import statistics
import subprocess
import tempfile
import time

SIZES = [(100_000, 3000), (1_000_000, 600), (10_000_000, 60)]
HUGE = 100_000_000


def cpu_s(pid):
    fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def wait_port(port):
    for _ in range(200):
        try:
            socket.create_connection(("127.0.0.1", port)).close()
            return
        except OSError:
            time.sleep(0.05)
    raise SystemExit(f"nothing listens on port {port}")


def start(kind, binary, port, where):
    if kind == "redis-aof":
        cmd = ["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "",
               "--appendonly", "yes", "--appendfsync", "always", "--dir", where]
    else:
        cmd = [binary, "serve", "--port", str(port), "--pool", os.path.join(where, "p.pool")]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wait_port(port)
    return proc


def bench(port, pid, size, n):
    """{test: (requests/s, server CPU µs per request)} of one redis-benchmark run."""
    c0 = cpu_s(pid)
    out = subprocess.run(
        ["redis-benchmark", "-p", str(port), "-t", "set,get", "-n", str(n), "-d", str(size),
         "-r", "100", "-c", "4", "-q"], capture_output=True, text=True, check=True).stdout
    cpu_us = (cpu_s(pid) - c0) * 1e6 / (2 * n)
    rps = {}
    for line in out.replace("\r", "\n").splitlines():
        for test in ("SET", "GET"):
            if line.startswith(f"{test}: ") and "rps=" not in line:
                rps[test] = float(line.split()[1])
    # One CPU figure for the run's two tests together: they share the window.
    return rps, cpu_us


def resp(*args):
    out = [b"*%d\r\n" % len(args)]
    for a in args:
        out.append(b"$%d\r\n" % len(a) + a + b"\r\n")
    return b"".join(out)


def huge(port, pid):
    """Server CPU seconds of six SETs and GETs of a 100 MB value (two keys in turn)."""
    s = socket.create_connection(("127.0.0.1", port))
    f = s.makefile("rb")
    val = os.urandom(1 << 20) * (HUGE >> 20) + b"x" * (HUGE % (1 << 20))
    sets, gets = [], []
    for i in range(6):
        req = resp(b"SET", b"huge%d" % (i % 2), val)
        c0 = cpu_s(pid)
        s.sendall(req)
        assert f.readline() == b"+OK\r\n"
        time.sleep(0.5)
        c1 = cpu_s(pid)
        s.sendall(resp(b"GET", b"huge%d" % (i % 2)))
        n = int(f.readline()[1:])
        got = f.read(n + 2)
        c2 = cpu_s(pid)
        assert got[:-2] == val, "GET returned other bytes"
        sets.append(c1 - c0)
        gets.append(c2 - c1)
    s.close()
    return sets, gets


EDIT_BYTES = 1_000_000
EDITS = 2000


def edits(port, pid):
    """{edit: server CPU µs per request} of one client editing a 1 MB string."""
    s = socket.create_connection(("127.0.0.1", port))
    f = s.makefile("rb")
    rnd = random.Random(7)

    def call(*args):
        s.sendall(resp(*args))
        line = f.readline()
        assert line[:1] in (b":", b"+", b"*"), line
        if line[:1] == b"*":
            for _ in range(int(line[1:])):
                f.readline()

    bits = EDIT_BYTES * 8
    kinds = {
        "SETBIT": lambda: (b"SETBIT", b"bits", b"%d" % rnd.randrange(bits), b"1"),
        "GETBIT": lambda: (b"GETBIT", b"bits", b"%d" % rnd.randrange(bits)),
        "BITFIELD SET u8": lambda: (b"BITFIELD", b"bits", b"SET", b"u8", b"%d" % rnd.randrange(bits - 8), b"7"),
        "SETRANGE 3 B": lambda: (b"SETRANGE", b"bits", b"%d" % rnd.randrange(EDIT_BYTES), b"abc"),
        "APPEND 100 B": lambda: (b"APPEND", b"log", b"y" * 100),
    }
    call(b"SET", b"bits", b"\0" * EDIT_BYTES)
    call(b"SET", b"log", b"x" * EDIT_BYTES)
    out = {}
    for name, make in kinds.items():
        c0 = cpu_s(pid)
        for _ in range(EDITS):
            call(*make())
        out[name] = (cpu_s(pid) - c0) * 1e6 / EDITS
    s.close()
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--tembo", action="append", default=[], help="NAME=BINARY (repeatable)")
    ap.add_argument("--no-redis", action="store_true")
    ap.add_argument("--parts", default="sizes,huge,edits", help="sections, comma-separated: sizes, huge, edits")
    o = ap.parse_args()
    parts = set(o.parts.split(","))
    targets = [(name, "tembo", path) for name, path in (t.split("=", 1) for t in o.tembo)]
    if not targets:
        targets = [("tembo", "tembo", "target/release/tembo")]
    if not o.no_redis:
        targets.append(("redis-aof", "redis-aof", None))
    results = {}
    for rnd in range(o.rounds):
        order = targets if rnd % 2 == 0 else targets[::-1]
        for port, (name, kind, binary) in enumerate(order, start=7460):
            where = tempfile.mkdtemp(dir="/dev/shm", prefix="bigvals-")
            proc = start(kind, binary, port, where)
            try:
                row = results.setdefault(name, {})
                for size, n in SIZES if "sizes" in parts else []:
                    bench(port, proc.pid, size, n)
                    rps, cpu_us = bench(port, proc.pid, size, n)
                    for test, v in rps.items():
                        row.setdefault(f"{test} {size // 1000:,} kB /s", []).append(v)
                    row.setdefault(f"SET+GET {size // 1000:,} kB, server CPU µs/request", []).append(cpu_us)
                if "huge" in parts:
                    sets, gets = huge(port, proc.pid)
                    row.setdefault("SET 100 MB growing the pool/AOF, server CPU s", []).append(statistics.median(sets[:2]))
                    row.setdefault("SET 100 MB overwriting, server CPU s", []).append(statistics.median(sets[2:]))
                    row.setdefault("GET 100 MB, server CPU s", []).append(statistics.median(gets))
                if "edits" in parts:
                    for edit, us in edits(port, proc.pid).items():
                        row.setdefault(f"{edit} on 1 MB, server CPU µs/request", []).append(us)
            finally:
                proc.terminate()
                proc.wait()
                shutil.rmtree(where, ignore_errors=True)
            print(f"round {rnd + 1}: {name} done", flush=True)
    names = [t[0] for t in targets]
    rows = list(next(iter(results.values())).keys())
    print("| test | " + " | ".join(names) + " |")
    print("|---|" + "---:|" * len(names))
    for r in rows:
        cells = []
        for n in names:
            vals = results[n][r]
            med = statistics.median(vals)
            fmt = (lambda x: f"{x:.2f}") if "CPU s" in r else (lambda x: f"{x:,.0f}")
            cells.append(f"{fmt(med)} ({', '.join(fmt(v) for v in vals)})")
        print(f"| {r} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
