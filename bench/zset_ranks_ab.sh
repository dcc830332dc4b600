#!/usr/bin/env bash
# Rank queries on a big sorted set — ZRANK, ZREVRANK, ZCOUNT, ZRANGE by
# rank from the middle, ZRANGEBYSCORE with a far LIMIT offset, and ZADD
# while the set has a rank index — on `tembo serve` builds against
# redis-server with appendfsync always, interleaved, pools and AOF on /dev/shm:
#
#   bench/zset_ranks_ab.sh ROUNDS MEMBERS REQUESTS BIN [BIN...]
#   bench/zset_ranks_ab.sh 3 250000 100000 target/release/tembo
#
# For each round and each BIN and then Redis, on a fresh pool (or AOF):
# fills a sorted set with about MEMBERS random members (scores and members
# drawn from 0..1.6 MEMBERS, `redis-benchmark -r`, pipelined; about 63%
# of the draws are distinct members), then runs each test with
# `redis-benchmark -n REQUESTS -c 50 -P 16` and prints one line: round,
# server, test, requests/s. Members named by __rand_int__ are present
# about 63% of the time, as in the fill. ZRANGEBYSCORE runs REQUESTS/100
# (at least 200): Redis walks its LIMIT offset. A build whose rank
# queries walk the set is slow: give it a small REQUESTS.
# At the end, the median of the rounds for each server and test. Port
# 7032 on loopback. What it measured is in docs/results/zset-ranks-s53.md.
set -euo pipefail
if [ $# -lt 4 ]; then
  sed -n 2,19p "$0"
  exit 2
fi
ROUNDS=$1 M=$2 N=$3
shift 3
PORT=7032
DIR=/dev/shm/tembo-zrank-ab
OUT=$(mktemp)
bench() { redis-benchmark -p $PORT -c 50 -P 16 -q "$@" 2>&1 | tr '\r' '\n' | grep "per second" | sed 's/.*: \([0-9.]*\) requests per second.*/\1/' | tail -1; }
fill=$((M * 8 / 5))
mid=$((M / 2))
for r in $(seq 1 "$ROUNDS"); do
  for BIN in "$@" redis; do
    rm -rf "$DIR" && mkdir -p "$DIR"
    if [ "$BIN" = redis ]; then
      redis-server --port $PORT --bind 127.0.0.1 --dir "$DIR" --appendonly yes --appendfsync always --save '' >"$DIR/log" 2>&1 &
      name=redis-aof
    else
      "$BIN" serve --port $PORT --pool "$DIR/p.pool" --pool-size 1G --pool-max-size 8G --loglevel warning >"$DIR/log" 2>&1 &
      name=$(basename "$BIN")
    fi
    SP=$!
    for _ in $(seq 100); do redis-cli -p $PORT ping >/dev/null 2>&1 && break; sleep 0.1; done
    bench -n $fill -r $fill zadd z __rand_int__ member:__rand_int__ >/dev/null
    for t in "zrank z member:__rand_int__" "zrevrank z member:__rand_int__" "zcount z $((fill / 4)) __rand_int__" \
      "zrange z $mid $((mid + 9))" "zrangebyscore z $((fill / 10)) +inf limit $mid 10" \
      "zadd z __rand_int__ member:__rand_int__"; do
      n=$N
      # Redis walks a LIMIT offset (O(offset)): fewer requests, so that its round ends.
      case $t in zrangebyscore*) n=$((N / 100 > 200 ? N / 100 : 200)) ;; esac
      # shellcheck disable=SC2086
      rps=$(bench -r $fill -n "$n" $t)
      echo "round $r $name $(echo "$t" | cut -d' ' -f1) $rps" | tee -a "$OUT"
    done
    redis-cli -p $PORT shutdown nosave >/dev/null 2>&1 || true
    wait $SP || true
  done
done
rm -rf "$DIR"
echo "medians of $ROUNDS rounds (requests/s):"
awk '{print $3, $4}' "$OUT" | sort -u | while read -r name t; do
  med=$(awk -v n="$name" -v t="$t" '$3 == n && $4 == t {print $5}' "$OUT" | sort -n | awk '{a[NR] = $1} END {print a[int((NR + 1) / 2)]}')
  printf '%-14s %-16s %s\n' "$name" "$t" "$med"
done
rm -f "$OUT"
