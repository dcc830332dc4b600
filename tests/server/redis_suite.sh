#!/usr/bin/env bash
# Runs units of Redis's own test suite (Redis 7.0.15, from Debian's source
# package) against `tembo serve`, in the suite's external-server mode.
#
#   tests/server/redis_suite.sh [unit ...]      (default: the list below)
#
# Environment:
#   TEMBO_BIN          the tembo binary (default target/release/tembo)
#   REDIS_SUITE_DIR    where the Redis source is kept (default target/redis-suite)
#   REDIS_SUITE_LANES  how many units run at once, each on its own server (default 3)
#   REDIS_SUITE_LOGS   a directory to keep each unit's whole log in
#   REDIS_SUITE_TAGS   the --tags filter (default: leave out needs:repl)
#
# What is left out, and why, is in tests/server/redis-suite-skips.txt (one
# test name or /regexp per line, with a comment above each group): tests of
# Redis internals Tembo does not have (encodings, DEBUG RELOAD, replication,
# RDB, ACL users) and of commands it does not implement.
# The suite runs with --ignore-encoding and --ignore-digest (its own options
# for servers with other encodings) and without the tag needs:repl (the
# replication stream, which Tembo does not send); the needs:debug,
# needs:save and needs:pfdebug tests run (DEBUG SLEEP, SET-ACTIVE-EXPIRE,
# RELOAD, OBJECT, DIGEST-VALUE, SAVE, BGSAVE and PFDEBUG are implemented).
# Exits non-zero if any test that runs fails.
set -euo pipefail
cd "$(dirname "$0")/../.."
ROOT=$(pwd)
TEMBO_BIN=${TEMBO_BIN:-$ROOT/target/release/tembo}
DIR=${REDIS_SUITE_DIR:-$ROOT/target/redis-suite}
SKIPS=$ROOT/tests/server/redis-suite-skips.txt
UNITS=("$@")
if [ ${#UNITS[@]} -eq 0 ]; then
  # Longest first (times on the 2-core VM), so that the lanes end together.
  UNITS=(unit/hyperloglog unit/type/stream unit/type/list-3 unit/type/zset unit/type/list-2 unit/geo unit/type/string
    unit/scan unit/tembo-obuf-limits unit/type/set unit/sort unit/type/list unit/type/hash unit/lazyfree unit/expire unit/introspection-2
    unit/bitops unit/other unit/scripting unit/querybuf unit/type/stream-cgroups unit/bitfield
    unit/type/incr unit/keyspace unit/dump unit/multi unit/pubsub unit/protocol unit/quit unit/tracking
    unit/info-command unit/functions unit/slowlog unit/tembo-acl unit/tembo-acl-v2 unit/latency-monitor
    unit/pause unit/introspection unit/tembo-info integration/tembo-corrupt-dump integration/redis-cli
    integration/tembo-benchmark unit/tembo-pubsubshard unit/tembo-limits unit/tembo-auth)
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
# Debian's package carries security fixes with tests of their own (Lua's
# unpack bounds, deprecated Lua functions hidden, glob nesting limits, ACL
# selectors, CRLF in error replies, damaged RESTORE payloads): the suite
# runs as Debian ships it, patches applied in the order of their series.
# A tree kept from before (unpatched, or edited by the lines below) is
# extracted again first.
if [ ! -f "$SRC/.tembo-debian-patched" ]; then
  for tool in patch xz; do
    command -v "$tool" >/dev/null 2>&1 && continue
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq patch xz-utils
  done
  debian=$(ls "$DIR"/redis_7.0.15-*.debian.tar.xz 2>/dev/null | head -1 || true)
  if [ -z "$debian" ]; then
    (cd "$DIR" && apt-get source --download-only -qq redis >/dev/null 2>&1) || true
    debian=$(ls "$DIR"/redis_7.0.15-*.debian.tar.xz 2>/dev/null | head -1 || true)
  fi
  [ -n "$debian" ] || { echo "redis_suite: Debian's patches for redis 7.0.15 are missing from $DIR" >&2; exit 1; }
  rm -rf "$SRC" "$DIR/debian"
  tar -xzf "$DIR/redis_7.0.15.orig.tar.gz" -C "$DIR"
  tar -xJf "$debian" -C "$DIR"
  while read -r p; do
    case "$p" in '' | '#'*) continue ;; esac
    (cd "$SRC" && patch -p1 -s --forward <"$DIR/debian/patches/$p") ||
      { echo "redis_suite: Debian's patch $p does not apply to $SRC" >&2; exit 1; }
  done <"$DIR/debian/patches/series"
  basename "$debian" >"$SRC/.tembo-debian-patched"
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
# integration/corrupt-dump (RESTORE of damaged and hostile payloads, most
# found by Redis's fuzzer) is tagged external:skip because each test starts
# a server of its own and reads that server's log. The copy runs against
# the one server and drops the log checks; what it keeps is the error each
# payload gets and a server that is still up for the next test (a lane
# reports a server that died). Tembo checks every payload whole, so
# sanitize-dump-payload no does not let a damaged one in.
sed -e 's/tags {"dump" "corruption" "external:skip"}/tags {"dump" "corruption"}/' \
  -e '/count_log_message\|verify_log_message/d' \
  "$SRC/tests/integration/corrupt-dump.tcl" >"$SRC/tests/integration/tembo-corrupt-dump.tcl"
# unit/pubsubshard's first server block (sharded pub/sub on one server;
# the second sets up replication) and unit/limits (maxclients, applied by
# CONFIG SET in an external run) are tagged external:skip although one
# server is all they need.
sed -n "1,$(grep -n '^}' "$SRC/tests/unit/pubsubshard.tcl" | head -1 | cut -d: -f1)p" "$SRC/tests/unit/pubsubshard.tcl" |
  sed 's/tags {"pubsubshard external:skip"}/tags {"pubsubshard"}/' >"$SRC/tests/unit/tembo-pubsubshard.tcl"
sed 's/tags {"limits network external:skip"}/tags {"limits network"}/' \
  "$SRC/tests/unit/limits.tcl" >"$SRC/tests/unit/tembo-limits.tcl"
# unit/auth's blocks start Redis with a password (or set one and leave
# it): the copy sets it with CONFIG SET, and RESET logs its client out,
# and clears it after each block; the replication block stays out.
awk '
  /^start_server \{tags \{"auth external:skip"\} overrides \{requirepass foobar\}\} \{/ {
    print "start_server {tags {\"auth\"}} {"; print "    r config set requirepass foobar"; print "    r reset"; pw = 1; next }
  /^start_server \{tags \{"auth_binary_password external:skip"\}\} \{/ { print "start_server {tags {\"auth\"}} {"; bin = 1; next }
  /^    start_server \{tags \{"masterauth"\}\} \{/ { skip = 1 }
  skip { if ($0 ~ /^    \}$/) skip = 0; next }
  /^\}$/ && pw { print "    r auth foobar"; print "    r config set requirepass \"\""; pw = 0 }
  /^\}$/ && bin { print "    r config set requirepass \"\""; bin = 0 }
  { sub(/tags \{"auth external:skip"\}/, "tags {\"auth\"}"); print }
' "$SRC/tests/unit/auth.tcl" >"$SRC/tests/unit/tembo-auth.tcl"
# unit/obuf-limits (client-output-buffer-limit for normal and pub/sub
# clients, set with CONFIG SET) needs one server only.
sed 's/tags {"obuf-limits external:skip"}/tags {"obuf-limits"}/' \
  "$SRC/tests/unit/obuf-limits.tcl" >"$SRC/tests/unit/tembo-obuf-limits.tcl"
# integration/redis-benchmark nests a second start_server (one server
# serves both levels here) and is tagged external:skip for that alone.
sed 's/tags {"benchmark network external:skip"}/tags {"benchmark network"}/' \
  "$SRC/tests/integration/redis-benchmark.tcl" >"$SRC/tests/integration/tembo-benchmark.tcl"
# integration/redis-cli and the benchmark unit run the tools from the
# source tree's src/; the suite uses Debian's builds of the same version.
for tool in redis-cli redis-benchmark; do
  command -v "$tool" >/dev/null 2>&1 && ln -sf "$(command -v "$tool")" "$SRC/src/$tool"
done

# --- lanes: each runs units one at a time, each unit on its own server and fresh pool -
# (units change settings and leave keys). Most of a unit's time is waiting on
# round trips and timers: on the 2-core VM one lane took 502 s, two 178 s,
# three 125 s (151 s with a busy loop on one core beside them).
# Lanes take the next unit from one queue; the list above is longest first.
LANES=${REDIS_SUITE_LANES:-3}
WORK=$(mktemp -d /dev/shm/tembo-redis-suite.XXXXXX 2>/dev/null || mktemp -d)
printf '%s\n' "${UNITS[@]}" >"$WORK/queue"
echo 0 >"$WORK/next"
: >"$WORK/failed"
: >"$WORK/passed"
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
next_unit() { # prints the next unit of the queue, or nothing when it is empty
  (
    flock 9
    n=$(cat "$WORK/next")
    echo $((n + 1)) >"$WORK/next"
    sed -n "$((n + 1))p" "$WORK/queue"
  ) 9>"$WORK/lock"
}
run_lane() { # lane number
  local lane=$1 dir=$WORK/lane$1 port server=""
  mkdir -p "$dir"
  port=$(free_port)
  stop() {
    if [ -n "$server" ]; then
      kill "$server" 2>/dev/null || true
      wait "$server" 2>/dev/null || true
      server=""
    fi
    rm -f "$dir"/tembo.pool*
  }
  trap stop EXIT
  while unit=$(next_unit) && [ -n "$unit" ]; do
    stop
    "$TEMBO_BIN" serve --port "$port" --pool "$dir/tembo.pool" --loglevel warn >>"$dir/server.log" 2>&1 &
    server=$!
    local up=0
    for _ in $(seq 1 100); do
      redis-cli -p "$port" ping >/dev/null 2>&1 && { up=1; break; }
      sleep 0.1
    done
    if [ $up -eq 0 ]; then
      echo "redis_suite: the server did not start for $unit; its log:" >&2
      tail -20 "$dir/server.log" >&2
      echo "$unit" >>"$WORK/failed"
      return
    fi
    local out t0 ok
    # The suite's own ports (its test server's, and those its tests probe:
    # each, and each + 10000) lie below the kernel's ephemeral range, where
    # the lanes' servers listen, and apart for each lane.
    out=$WORK/$(echo "$unit" | tr / _).log
    t0=$(date +%s)
    (cd "$SRC" && ./runtest --host 127.0.0.1 --port "$port" --single "$unit" --clients 1 --timeout 300 \
      --ignore-encoding --ignore-digest --skipfile "$SKIPS" \
      --tags "${REDIS_SUITE_TAGS:--needs:repl}" \
      --baseport $((10000 + lane * 1000)) --portcount 900) 2>&1 | sed 's/\x1b\[[0-9;]*m//g' >"$out" || true
    ok=$(grep -c '^\[ok\]' "$out" || true)
    echo "$ok" >>"$WORK/passed"
    if grep -q 'All tests passed without errors' "$out"; then
      printf '%-24s %4d passed  (%ds)\n' "$unit" "$ok" $(($(date +%s) - t0))
    else
      printf '%-24s FAILED (%d passed before)\n' "$unit" "$ok"
      echo "$unit" >>"$WORK/failed"
    fi
    if ! kill -0 "$server" 2>/dev/null; then
      echo "redis_suite: the server died during $unit; its log:" >&2
      tail -40 "$dir/server.log" >&2
      echo "$unit (server died)" >>"$WORK/failed"
      server=""
      return
    fi
  done
}
lanes=()
cleanup() {
  for pid in "${lanes[@]}"; do kill "$pid" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$WORK"
}
trap cleanup EXIT
for lane in $(seq 1 "$LANES"); do
  run_lane "$lane" &
  lanes+=($!)
done
wait "${lanes[@]}" || true

total_ok=$(awk '{s += $1} END {print s + 0}' "$WORK/passed")
if [ -n "${REDIS_SUITE_LOGS:-}" ]; then
  mkdir -p "$REDIS_SUITE_LOGS" && cp "$WORK"/*.log "$REDIS_SUITE_LOGS"/ 2>/dev/null || true
fi
echo "Redis 7.0.15 suite: $total_ok tests passed in ${#UNITS[@]} units ($LANES lanes)"
if [ -s "$WORK/failed" ]; then
  while read -r unit _; do
    log=$WORK/$(echo "$unit" | tr / _).log
    [ -f "$log" ] || continue
    echo "--- $unit" >&2
    grep -E '^\[(err|exception|TIMEOUT)\]' -A6 "$log" | head -40 >&2
  done <"$WORK/failed"
  echo "redis_suite: FAILED units: $(tr '\n' ' ' <"$WORK/failed")" >&2
  exit 1
fi
if [ "$(wc -l <"$WORK/passed")" -ne ${#UNITS[@]} ]; then
  echo "redis_suite: only $(wc -l <"$WORK/passed") of ${#UNITS[@]} units ran" >&2
  exit 1
fi
