#!/usr/bin/env bash
# A/B of two tembo builds on the same machine, interleaved so that the
# machine's drift hits both alike (the order alternates every round):
#
#   bench/ab.sh BEFORE_BIN AFTER_BIN [ROUNDS]
#   AB_PARTS="server" bench/ab.sh ...        (a subset of: ycsb micro server)
#   AB_PIPELINES="1 16" bench/ab.sh ...      (redis-benchmark -P values; default 16)
#   AB_PARTS="multi" bench/ab.sh ...         (ten-element HSET, RPUSH, ZADD, SADD)
#
# Runs, per round and binary: `tembo bench ycsb` (cdds only, 100k records
# of 1,000 B, 100k operations, workloads A-F), `tembo bench micro` (1M
# random 25-byte keys x 256 B) and, when redis-benchmark is installed,
# `redis-benchmark -P 16` against `tembo serve`; with the part `multi`,
# commands that write ten elements of one collection each (a YCSB insert's
# shape). Prints the medians of the rounds and after/before; for the
# server parts also the server's CPU time per request (user + system, from
# /proc): on the shared 2-core VM it moved about half as much from run to
# run as the throughput did (session 31), though a busy neighbour still
# inflates it. How the engine's prefix truncation was measured
# (docs/results/bench.md, "Session 12").
set -euo pipefail
BEFORE=$(realpath "$1"); AFTER=$(realpath "$2"); ROUNDS=${3:-3}
OUT=$(mktemp -d /tmp/tembo-ab.XXXXXX)
# Starts `BIN serve` on a fresh pool and a free loopback port, runs the
# function named by the second argument with the port and OUTFILE, stops.
with_server() { # BIN FUNCTION OUTFILE
  local dir; dir=$(mktemp -d /dev/shm/tembo-ab.XXXXXX)
  local port; port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
  "$1" serve --port "$port" --pool "$dir/p.pool" --loglevel warn >"$dir/log" 2>&1 &
  local pid=$!
  for _ in $(seq 100); do redis-cli -p "$port" ping >/dev/null 2>&1 && break; sleep 0.1; done
  : >"$3"
  SERVER_PID=$pid "$2" "$port" "$3"
  kill "$pid"; wait "$pid" 2>/dev/null || true; rm -rf "$dir"
}
# The server's CPU ticks so far (user + system; SERVER_PID from with_server).
server_ticks() { awk '{ print $14 + $15 }' "/proc/$SERVER_PID/stat"; }
# Runs one redis-benchmark test (NAME, REQUESTS, then its arguments) and
# appends "NAME",requests/s,server CPU us per request to OUTFILE.
bench_one() { # PORT OUTFILE NAME REQUESTS ARGS...
  local port=$1 out=$2 name=$3 n=$4 t0 t1 rps
  shift 4
  t0=$(server_ticks)
  rps=$(redis-benchmark -p "$port" -n "$n" --csv "$@" 2>/dev/null | awk -F, 'NR > 1 { gsub(/"/, "", $2); print $2; exit }')
  t1=$(server_ticks)
  awk -v n="$name" -v r="$rps" -v a="$t0" -v b="$t1" -v c="$n" -v hz="$(getconf CLK_TCK)" \
    'BEGIN { printf "\"%s\",%s,%.3f\n", n, r, (b - a) * 1e6 / hz / c }' >>"$out"
}
default_tests() { # PORT OUTFILE
  local p t
  for p in ${AB_PIPELINES:-16}; do
    for t in set get incr lpush hset zadd; do
      bench_one "$1" "$2" "${t^^} -P $p" 200000 -t "$t" -r 200000 -d 256 -c 50 -P "$p"
    done
  done
}
multi_tests() { # PORT OUTFILE
  local v; v=$(printf 'v%.0s' $(seq 100))
  local name args
  for p in ${AB_PIPELINES:-16}; do
    for name in HSET10 RPUSH10 ZADD10 SADD10; do
      case $name in
        HSET10) args="HSET h:__rand_int__ $(for i in $(seq 10); do printf 'f%s %s ' "$i" "$v"; done)" ;;
        RPUSH10) args="RPUSH l:__rand_int__ $(for i in $(seq 10); do printf '%s%s ' "$i" "$v"; done)" ;;
        ZADD10) args="ZADD z:__rand_int__ $(for i in $(seq 10); do printf '%s m%s ' "$i" "$i"; done)" ;;
        SADD10) args="SADD s:__rand_int__ $(for i in $(seq 10); do printf 'm%s ' "$i"; done)" ;;
      esac
      # shellcheck disable=SC2086
      bench_one "$1" "$2" "$name -P $p" 100000 -r 100000 -c 50 -P "$p" $args
    done
  done
}
PARTS=${AB_PARTS:-ycsb micro server}
one() { # BIN LABEL ROUND
  case " $PARTS " in *" ycsb "*)
    "$1" bench ycsb --records 100000 --ops 100000 --runs 1 --targets cdds --json "$OUT/ycsb-$2-$3.json" >/dev/null 2>&1 ;;
  esac
  case " $PARTS " in *" micro "*)
    "$1" bench micro --keys 1000000 --value-bytes 256 --runs 1 --targets cdds --json "$OUT/micro-$2-$3.json" >/dev/null 2>&1 ;;
  esac
  case " $PARTS " in *" server "*)
    if command -v redis-benchmark >/dev/null; then with_server "$1" default_tests "$OUT/server-$2-$3.csv"; fi ;;
  esac
  case " $PARTS " in *" multi "*)
    if command -v redis-benchmark >/dev/null; then with_server "$1" multi_tests "$OUT/multi-$2-$3.csv"; fi ;;
  esac
}
for r in $(seq "$ROUNDS"); do
  echo "round $r of $ROUNDS" >&2
  if [ $((r % 2)) = 1 ]; then one "$BEFORE" before "$r"; one "$AFTER" after "$r"
  else one "$AFTER" after "$r"; one "$BEFORE" before "$r"; fi
done
python3 - "$OUT" "$ROUNDS" <<'PY'
import csv, glob, json, os, statistics, sys
out, rounds = sys.argv[1], int(sys.argv[2])
def phases(f):
    return {p["phase"]: p["per_s"] for p in json.load(open(f))["targets"][0]["phases"]}
def server(f):
    return {row[0]: float(row[1]) for row in csv.reader(open(f)) if row[0] != "test"}
def server_cpu(f):
    return {row[0]: float(row[2]) for row in csv.reader(open(f)) if row[0] != "test" and len(row) > 2}
for kind, read, ext in (("ycsb", phases, "json"), ("micro", phases, "json"), ("server", server, "csv"), ("multi", server, "csv"),
                        ("server", server_cpu, "csv"), ("multi", server_cpu, "csv")):
    b = [read(f"{out}/{kind}-before-{r}.{ext}") for r in range(1, rounds + 1) if os.path.exists(f"{out}/{kind}-before-{r}.{ext}")]
    a = [read(f"{out}/{kind}-after-{r}.{ext}") for r in range(1, rounds + 1) if os.path.exists(f"{out}/{kind}-after-{r}.{ext}")]
    if not b or not a or not b[0]:
        continue
    cpu = read is server_cpu
    unit = "server CPU us/request" if cpu else "/s"
    print(f"\n| {kind} | before {unit} | after {unit} | after / before |\n|---|---:|---:|---:|")
    for k in b[0]:
        mb, ma = statistics.median(x[k] for x in b), statistics.median(x[k] for x in a)
        fmt = "{:,.2f}" if cpu else "{:,.0f}"
        print(f"| {k} | {fmt.format(mb)} | {fmt.format(ma)} | {ma / mb:.2f}x |")
print(f"\n(raw runs in {out})")
PY
