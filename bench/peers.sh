#!/usr/bin/env bash
# The bench issue's full runs: Tembo against the embedded peers (PMDK
# libpmemobj, LMDB, RocksDB, SQLite, Berkeley DB, redb) and std BTreeMap, all
# with their files on /dev/shm, in one process per workload, and over
# loopback tembo serve against redis-server (AOF always / everysec / off). Installs the
# peers' Debian libraries and redis-server, builds `tembo` with the `peers` feature, and
# writes JSON + SVG + PNG to docs/results/ (or $OUT). Takes about an hour on
# a 2-core machine; `SCALE=small bench/peers.sh` takes a few minutes.
#
#   bench/peers.sh                 # everything, medians of 3 runs
#   SCALE=small bench/peers.sh     # 100k keys, 1 run: a quick look
set -euo pipefail
cd "$(dirname "$0")/.."
OUT="${OUT:-docs/results}"
SCALE="${SCALE:-full}"
DIR="${DIR:-/dev/shm}"

pkgs=()
for pkg in liblmdb-dev librocksdb-dev libdb-dev libpmemobj-dev libsqlite3-dev fonts-dejavu-core redis-server; do
  dpkg -s "$pkg" >/dev/null 2>&1 || pkgs+=("$pkg")
done
if [ ${#pkgs[@]} -gt 0 ]; then
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${pkgs[@]}"
fi
cargo build --release --locked -p tembo --features peers
T=target/release/tembo
mkdir -p "$OUT"

if [ "$SCALE" = small ]; then
  KEYS=100000; KEYS2K=20000; RUNS=1; YREC=20000; YOPS=20000; OKEYS=20000; NKEYS=10000
else
  KEYS=1000000; KEYS2K=200000; RUNS=3; YREC=100000; YOPS=100000; OKEYS=100000; NKEYS=100000
fi
# redb's Durability::None keeps every non-durable commit's pages until a
# durable one (redb's documented behaviour), so it slows down as it grows:
# 5k puts/s at 20k keys. It runs in the small workloads only.
ALL=cdds,cdds-full,cdds-none,btreemap,pmemobj,lmdb,lmdb-nosync,rocksdb,rocksdb-nowal,sqlite,sqlite-nosync,bdb,bdb-nosync,redb

set -x
"$T" bench micro --keys "$KEYS" --value-bytes 256 --runs "$RUNS" --dir "$DIR" --targets "$ALL" \
  --json "$OUT/micro-1m-256.json" --plot "$OUT/micro-1m-256"
"$T" bench micro --keys "$KEYS2K" --value-bytes 2048 --runs "$RUNS" --dir "$DIR" --targets "$ALL" \
  --json "$OUT/micro-200k-2k.json" --plot "$OUT/micro-200k-2k"
"$T" bench ycsb --records "$YREC" --ops "$YOPS" --runs 1 --dir "$DIR" --targets "$ALL" \
  --json "$OUT/ycsb.json" --plot "$OUT/ycsb"
# Over loopback, one connection (a request's round trip dominates: fewer keys).
"$T" bench micro --keys "$NKEYS" --value-bytes 256 --runs "$RUNS" --dir "$DIR" --targets cdds,btreemap,network \
  --json "$OUT/net-micro.json" --plot "$OUT/net-micro"
"$T" bench ycsb --records "$NKEYS" --ops "$NKEYS" --runs 1 --dir "$DIR" --targets cdds,network \
  --json "$OUT/net-ycsb.json" --plot "$OUT/net-ycsb"
"$T" bench heatmap --keys "$OKEYS" --dir "$DIR" --json "$OUT/heatmap.json" --plot "$OUT/heatmap"
"$T" bench ordering --keys "$OKEYS" --ops "$OKEYS" --runs "$RUNS" --dir "$DIR" \
  --json "$OUT/ordering.json" --plot "$OUT/ordering"
