#!/usr/bin/env bash
# Random members of large collections — SRANDMEMBER (one, and 10 distinct),
# SPOP, HRANDFIELD, ZRANDMEMBER — on `tembo serve` builds against
# redis-server with appendfsync always, interleaved, pools and AOF on /dev/shm:
#
#   bench/random_members_ab.sh ROUNDS MEMBERS REQUESTS BIN [BIN...]
#   bench/random_members_ab.sh 3 250000 200000 target/release/tembo
#
# For each round and each BIN and then Redis, on a fresh pool (or AOF):
# fills a set, a hash and a sorted set with about MEMBERS random members
# each (`redis-benchmark -r`, pipelined), then runs each test with
# `redis-benchmark -n REQUESTS -c 50 -P 16` and prints one line: round,
# server, test, requests/s, and the collection's size after the test. At
# the end, the median of the rounds for each server and test. SPOP runs
# last, with REQUESTS/4 pops so that the set stays large. Port 7031 on
# loopback. What it measured is in docs/results/random-members-s52.md.
set -euo pipefail
if [ $# -lt 4 ]; then
  sed -n 2,16p "$0"
  exit 2
fi
ROUNDS=$1 M=$2 N=$3
shift 3
PORT=7031
DIR=/dev/shm/tembo-random-ab
OUT=$(mktemp)
# shellcheck source=bench/ab_lib.sh
. "$(dirname "$0")/ab_lib.sh"
for r in $(seq 1 "$ROUNDS"); do
  for BIN in "$@" redis; do
    ab_start "$BIN"
    fill=$((M * 8 / 5))
    bench -n $fill -r $fill sadd s member:__rand_int__ >/dev/null
    bench -n $fill -r $fill hset h field:__rand_int__ value-__rand_int__ >/dev/null
    bench -n $fill -r $fill zadd z __rand_int__ member:__rand_int__ >/dev/null
    for t in "srandmember s" "srandmember s 10" "hrandfield h" "zrandmember z" "spop s"; do
      n=$N
      [ "$t" = "spop s" ] && n=$((N / 4))
      # shellcheck disable=SC2086
      rps=$(bench -n "$n" $t)
      key=${t#* }
      key=${key%% *}
      size=$(redis-cli -p $PORT eval "local t = redis.call('type', KEYS[1]).ok; if t == 'set' then return redis.call('scard', KEYS[1]) elseif t == 'hash' then return redis.call('hlen', KEYS[1]) else return redis.call('zcard', KEYS[1]) end" 1 "$key")
      echo "round $r $name ${t// /_} $rps size $size" | tee -a "$OUT"
    done
    ab_stop
  done
done
rm -rf "$DIR"
ab_medians "$OUT" "$ROUNDS"
rm -f "$OUT"
