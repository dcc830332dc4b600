#!/usr/bin/env bash
# Runs units of Redis's own test suite (Redis 7.0.15, from Debian's source
# package) against `tembo serve`, in the suite's external-server mode.
#
#   tests/server/redis_suite.sh [unit ...]      (default: the list below)
#
# Environment:
#   TEMBO_BIN          the tembo binary (default target/release/tembo)
#   REDIS_SUITE_DIR    where the Redis source is kept (default target/redis-suite)
#
# What is left out, and why, is in tests/server/redis-suite-skips.txt (one
# test name or /regexp per line, with a comment above each group): tests of
# Redis internals Tembo does not have (encodings, DEBUG RELOAD, replication,
# RDB, maxmemory eviction, ACL users) and of commands it does not implement.
# The suite runs with --ignore-encoding and --ignore-digest (its own options
# for servers with other encodings) and without the tags needs:repl,
# needs:debug, needs:save and needs:config-maxmemory.
# Exits non-zero if any test that runs fails.
set -euo pipefail
cd "$(dirname "$0")/../.."
ROOT=$(pwd)
TEMBO_BIN=${TEMBO_BIN:-$ROOT/target/release/tembo}
DIR=${REDIS_SUITE_DIR:-$ROOT/target/redis-suite}
SKIPS=$ROOT/tests/server/redis-suite-skips.txt
UNITS=("$@")
if [ ${#UNITS[@]} -eq 0 ]; then
  UNITS=(unit/type/string unit/type/incr unit/type/hash unit/type/list unit/type/list-2 unit/type/list-3 unit/type/set unit/type/zset
    unit/type/stream unit/type/stream-cgroups
    unit/expire unit/keyspace unit/dump unit/scan unit/bitops unit/bitfield unit/sort unit/multi unit/pubsub
    unit/protocol unit/quit unit/tracking unit/info-command unit/scripting unit/functions unit/hyperloglog unit/geo unit/slowlog
    unit/other unit/tembo-acl unit/tembo-acl-v2 unit/latency-monitor unit/pause unit/introspection unit/introspection-2 unit/lazyfree unit/tembo-info
    unit/querybuf)
fi
SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"

# --- the suite's source and its interpreter -----------------------------------------
if ! command -v tclsh >/dev/null 2>&1; then
  echo "installing tcl"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq tcl
fi
SRC=$DIR/redis-7.0.15
if [ ! -f "$SRC/tests/test_helper.tcl" ]; then
  mkdir -p "$DIR"
  if ! grep -rqs '^Types:.*deb-src' /etc/apt/sources.list.d/ && ! grep -qs '^deb-src' /etc/apt/sources.list; then
    # Debian's source packages come from the same archive as its binaries.
    for f in /etc/apt/sources.list.d/*.sources; do
      [ -f "$f" ] || continue
      sed 's/^Types: deb$/Types: deb-src/' "$f" | $SUDO tee "/etc/apt/sources.list.d/tembo-src-$(basename "$f")" >/dev/null
    done
    if [ -f /etc/apt/sources.list ]; then
      sed -n 's/^deb /deb-src /p' /etc/apt/sources.list | $SUDO tee /etc/apt/sources.list.d/tembo-src.list >/dev/null
    fi
    $SUDO apt-get update -qq
  fi
  (cd "$DIR" && apt-get source --download-only -qq redis >/dev/null 2>&1) ||
    { echo "redis_suite: could not download Debian's redis source package (apt-get source redis)" >&2; exit 1; }
  tarball=$(ls "$DIR"/redis_7.0.15.orig.tar.gz 2>/dev/null || true)
  [ -n "$tarball" ] || { echo "redis_suite: expected redis 7.0.15 sources in $DIR, found: $(ls "$DIR")" >&2; exit 1; }
  tar -xzf "$tarball" -C "$DIR"
fi
# Earlier versions of this script ran scripting.tcl's EVAL half only: undo
# that edit in a kept source tree.
sed -i 's/^foreach is_eval {1} {/foreach is_eval {0 1} {/' "$SRC/tests/unit/scripting.tcl"

# Redis tags its ACL units external:skip, though their first server block
# needs nothing an external server lacks. Copies of that block run here
# as unit/tembo-acl and unit/tembo-acl-v2, with the tag removed; the
# later blocks restart Redis with config files and stay out.
acl_copy() { # source, last line of its first server block, copy
  sed -n "1,${2}p" "$SRC/tests/unit/$1" | sed 's/tags {"acl external:skip"}/tags {"acl"}/' \
    >"$SRC/tests/unit/$3"
}
acl_copy acl.tcl "$(grep -n '^}' "$SRC/tests/unit/acl.tcl" | head -1 | cut -d: -f1)" tembo-acl.tcl
acl_copy acl-v2.tcl "$(grep -n '^}' "$SRC/tests/unit/acl-v2.tcl" | head -1 | cut -d: -f1)" tembo-acl-v2.tcl
# unit/info (INFO latencystats and errorstats) is tagged external:skip only
# because it nests a second start_server, which an external run shares.
sed 's/tags {"info" "external:skip"}/tags {"info"}/' "$SRC/tests/unit/info.tcl" >"$SRC/tests/unit/tembo-info.tcl"

# --- a server on a fresh pool per unit (units change settings and leave keys) -------
POOLDIR=$(mktemp -d /dev/shm/tembo-redis-suite.XXXXXX 2>/dev/null || mktemp -d)
PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
SERVER=""
stop_server() {
  if [ -n "$SERVER" ]; then
    kill "$SERVER" 2>/dev/null || true
    wait "$SERVER" 2>/dev/null || true
    SERVER=""
  fi
  rm -f "$POOLDIR"/tembo.pool*
}
start_server() {
  stop_server
  "$TEMBO_BIN" serve --port "$PORT" --pool "$POOLDIR/tembo.pool" --loglevel warn >>"$POOLDIR/server.log" 2>&1 &
  SERVER=$!
  for _ in $(seq 1 100); do
    redis-cli -p "$PORT" ping >/dev/null 2>&1 && return 0
    sleep 0.1
  done
  echo "redis_suite: the server did not start; its log:" >&2
  tail -20 "$POOLDIR/server.log" >&2
  exit 1
}
cleanup() { stop_server; rm -rf "$POOLDIR"; }
trap cleanup EXIT

# --- the units --------------------------------------------------------------------------
failed=()
total_ok=0
for unit in "${UNITS[@]}"; do
  start_server
  out=$POOLDIR/$(echo "$unit" | tr / _).log
  t0=$(date +%s)
  set +e
  (cd "$SRC" && ./runtest --host 127.0.0.1 --port "$PORT" --single "$unit" --clients 1 --timeout 300 \
    --ignore-encoding --ignore-digest --skipfile "$SKIPS" \
    --tags "-needs:repl -needs:debug -needs:save -needs:config-maxmemory -needs:pfdebug" \
    --baseport $((PORT % 20000 + 30000))) 2>&1 | sed 's/\x1b\[[0-9;]*m//g' >"$out"
  set -e
  ok=$(grep -c '^\[ok\]' "$out" || true)
  total_ok=$((total_ok + ok))
  if grep -q 'All tests passed without errors' "$out"; then
    printf '%-24s %4d passed  (%ds)\n' "$unit" "$ok" $(($(date +%s) - t0))
  else
    printf '%-24s FAILED (%d passed before)\n' "$unit" "$ok"
    grep -E '^\[(err|exception|TIMEOUT)\]' -A6 "$out" | head -40
    failed+=("$unit")
  fi
  if ! kill -0 "$SERVER" 2>/dev/null; then
    echo "redis_suite: the server died during $unit; its log:" >&2
    tail -40 "$POOLDIR/server.log" >&2
    exit 1
  fi
done
echo "Redis 7.0.15 suite: $total_ok tests passed in ${#UNITS[@]} units"
if [ ${#failed[@]} -gt 0 ]; then
  echo "redis_suite: FAILED units: ${failed[*]}" >&2
  exit 1
fi
