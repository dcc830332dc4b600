#!/usr/bin/env bash
# What a sorted set's rank index costs its writers: server CPU per ZADD
# on a big sorted set without and with a rank index, and on a build from
# before rank indexes, alternated round by round:
#
#   bench/zadd_index_cpu.sh BEFORE_BIN AFTER_BIN [ROUNDS]
#
# Each round and case: a fresh pool under /dev/shm, a sorted set filled
# with 400,000 draws (`redis-benchmark -r 400000 -P 16`, about 250,000
# members), then — for the case "indexed" — one ZCOUNT, which builds the
# index; then 300,000 more ZADDs (-c 50 -P 16, members and scores drawn
# from the same range: about 40% new members, the rest score changes).
# Prints requests/s and the server's CPU time per ZADD (user + system
# from /proc). Port 7471 on loopback.
set -euo pipefail
BEFORE=$(realpath "$1"); AFTER=$(realpath "$2"); ROUNDS=${3:-3}
PORT=7471
for r in $(seq 1 "$ROUNDS"); do
  for c in before:"$BEFORE":plain after:"$AFTER":plain after:"$AFTER":indexed; do
    label=${c%%:*}; rest=${c#*:}; bin=${rest%:*}; kind=${rest##*:}
    dir=$(mktemp -d /dev/shm/zadd-cpu.XXXXXX)
    "$bin" serve --port "$PORT" --pool "$dir/p.pool" --pool-size 1G --loglevel warning >/dev/null 2>&1 &
    pid=$!
    for _ in $(seq 100); do redis-cli -p $PORT ping >/dev/null 2>&1 && break; sleep 0.1; done
    redis-benchmark -p $PORT -c 50 -P 16 -q -n 400000 -r 400000 zadd z __rand_int__ member:__rand_int__ >/dev/null 2>&1
    [ "$kind" = indexed ] && redis-cli -p $PORT zcount z 1000 2000 >/dev/null
    n=300000
    t0=$(awk '{print $14+$15}' "/proc/$pid/stat")
    rps=$(redis-benchmark -p $PORT -c 50 -P 16 -q -n $n -r 400000 zadd z __rand_int__ member:__rand_int__ 2>&1 |
      tr '\r' '\n' | grep "per second" | tail -1 | sed 's/.*: \([0-9.]*\) requests per second.*/\1/')
    t1=$(awk '{print $14+$15}' "/proc/$pid/stat")
    us=$(python3 -c "import os; print(round(($t1 - $t0) / os.sysconf('SC_CLK_TCK') * 1e6 / $n, 2))")
    idx=$(redis-cli -p $PORT info memory | tr -d '\r' | grep rank_index_bytes || echo "rank_index_bytes:-")
    echo "round $r $label $kind: $rps requests/s, server CPU $us us/ZADD, $idx"
    redis-cli -p $PORT shutdown nosave >/dev/null 2>&1 || true
    wait "$pid" 2>/dev/null || true
    rm -rf "$dir"
  done
done
