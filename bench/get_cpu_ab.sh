#!/usr/bin/env bash
# Server CPU per GET of two tembo builds, alternated round by round:
#
#   bench/get_cpu_ab.sh BEFORE_BIN AFTER_BIN [ROUNDS]
#
# Each round and build: a fresh pool under /dev/shm, 100,000 keys of 256 B
# written with `redis-benchmark -t set -P 16`, then `redis-benchmark -t get
# -r 100000 -c 50` with -P 16 (600,000 requests) and -P 1 (100,000); prints
# requests/s and the server's CPU time per request (user + system from
# /proc). A narrower, longer check than bench/ab.sh for the read path.
set -euo pipefail
BEFORE=$(realpath "$1"); AFTER=$(realpath "$2"); ROUNDS=${3:-4}
PORT=7470
for r in $(seq 1 "$ROUNDS"); do
  if [ $((r % 2)) -eq 1 ]; then order=("$BEFORE" "$AFTER"); else order=("$AFTER" "$BEFORE"); fi
  for bin in "${order[@]}"; do
    dir=$(mktemp -d /dev/shm/get-cpu-ab.XXXXXX)
    "$bin" serve --port "$PORT" --pool "$dir/p.pool" --loglevel warn >/dev/null 2>&1 &
    pid=$!
    sleep 1
    redis-benchmark -p "$PORT" -t set -n 200000 -r 100000 -d 256 -P 16 -c 50 -q >/dev/null 2>&1
    for p in 16 1; do
      n=$([ "$p" = 16 ] && echo 600000 || echo 100000)
      t0=$(awk '{print $14+$15}' "/proc/$pid/stat")
      rps=$(redis-benchmark -p "$PORT" -t get -n "$n" -r 100000 -d 256 -P "$p" -c 50 -q 2>&1 |
        tr '\r' '\n' | grep '^GET:' | grep -v 'rps=' | awk '{print $2}')
      t1=$(awk '{print $14+$15}' "/proc/$pid/stat")
      us=$(python3 -c "import os; print(round(($t1 - $t0) / os.sysconf('SC_CLK_TCK') * 1e6 / $n, 2))")
      label=$([ "$bin" = "$BEFORE" ] && echo before || echo after)
      echo "round $r $label -P $p: $rps requests/s, server CPU $us us/request"
    done
    kill "$pid"; wait "$pid" 2>/dev/null || true
    rm -rf "$dir"
  done
done
