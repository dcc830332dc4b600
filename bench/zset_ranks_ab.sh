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
# shellcheck source=bench/ab_lib.sh
. "$(dirname "$0")/ab_lib.sh"
fill=$((M * 8 / 5))
mid=$((M / 2))
for r in $(seq 1 "$ROUNDS"); do
  for BIN in "$@" redis; do
    ab_start "$BIN"
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
    ab_stop
  done
done
rm -rf "$DIR"
ab_medians "$OUT" "$ROUNDS"
rm -f "$OUT"
