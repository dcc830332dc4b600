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
bench() { redis-benchmark -p $PORT -c 50 -P 16 -q "$@" 2>&1 | tr '\r' '\n' | grep "per second" | sed 's/.*: \([0-9.]*\) requests per second.*/\1/' | tail -1; }
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
    redis-cli -p $PORT shutdown nosave >/dev/null 2>&1 || true
    wait $SP || true
  done
done
rm -rf "$DIR"
echo "medians of $ROUNDS rounds (requests/s):"
awk '{print $3, $4}' "$OUT" | sort -u | while read -r name t; do
  med=$(awk -v n="$name" -v t="$t" '$3 == n && $4 == t {print $5}' "$OUT" | sort -n | awk '{a[NR] = $1} END {print a[int((NR + 1) / 2)]}')
  printf '%-12s %-20s %s\n' "$name" "$t" "$med"
done
rm -f "$OUT"
