#!/usr/bin/env bash
# `tembo serve` with its pool on an ordinary disk (msync mode) against
# redis-server with appendfsync always on the same disk, interleaved:
#
#   bench/disk_server_ab.sh ROUNDS REQUESTS TESTS DIR BIN [BIN...]
#   bench/disk_server_ab.sh 3 5000 set,incr,lpush,hset,zadd /var/tmp/ab /tmp/tembo-old target/release/tembo
#
# For each round, each BIN and then Redis, on a fresh pool (or AOF) under
# DIR, runs `redis-benchmark -t TEST -n REQUESTS -r 100000 -d 256 -c 50`
# per test and prints one line: round, server, test, requests/s, group
# commits and msync calls during the test (from INFO persistence:
# `commits`, `pool_msyncs`; Redis reports neither). DIR must be on the
# disk to measure (not a tmpfs, where the pool would be in emulated mode);
# the script refuses a tmpfs. Ports: 7021 on loopback. What it measured is
# in docs/results/disk.md.
set -euo pipefail
if [ $# -lt 5 ]; then
  sed -n 2,15p "$0"
  exit 2
fi
ROUNDS=$1 N=$2 TESTS=$3 DIR=$4
shift 4
mkdir -p "$DIR"
if [ "$(stat -f -c %T "$DIR")" = tmpfs ]; then
  echo "disk_server_ab.sh: $DIR is on a tmpfs; give a directory on the disk to measure" >&2
  exit 2
fi
PORT=7021
persist() { redis-cli -p $PORT info persistence | tr -d '\r' | grep -E "^(commits|pool_msyncs):" | cut -d: -f2 | tr '\n' ' '; }
for r in $(seq 1 "$ROUNDS"); do
  for BIN in "$@" redis; do
    D=$(mktemp -d "$DIR/ab.XXXXXX")
    if [ "$BIN" = redis ]; then
      redis-server --port $PORT --bind 127.0.0.1 --dir "$D" --appendonly yes --appendfsync always --save '' >"$D/log" 2>&1 &
      name=redis-aof
    else
      "$BIN" serve --port $PORT --pool "$D/p.pool" >"$D/log" 2>&1 &
      name=$BIN
    fi
    SP=$!
    for _ in $(seq 50); do redis-cli -p $PORT ping >/dev/null 2>&1 && break; sleep 0.1; done
    for t in ${TESTS//,/ }; do
      read -r c0 m0 _ <<<"$(persist) 0 0"
      rps=$(redis-benchmark -p $PORT -t "$t" -n "$N" -r 100000 -d 256 -c 50 -q 2>&1 | tr '\r' '\n' | grep "per second" | awk '{print $2}')
      read -r c1 m1 _ <<<"$(persist) 0 0"
      echo "round $r $name $t $rps commits $((c1 - c0)) msyncs $((m1 - m0))"
    done
    redis-cli -p $PORT shutdown nosave >/dev/null 2>&1 || true
    wait $SP || true
    rm -rf "$D"
  done
done
