#!/usr/bin/env bash
# Run the YCSB core workloads against a Redis-protocol server (`tembo serve`, or a
# real redis-server as the reference) through our binding tembo.ycsb.RedisClient.
#
# usage: bench/ycsb/run.sh --port P [--host H] [--recordcount N] [--operationcount N]
#            [--threads T] [--workloads abcdef] [--out FILE.json] [--label NAME]
#            [--password PW] [--prop KEY=VALUE]...
#
#   --port P            server port (required)
#   --host H            server host (default 127.0.0.1; keep it on loopback)
#   --recordcount N     records loaded before running (default 10000)
#   --operationcount N  operations per workload run (default 10000)
#   --threads T         YCSB client threads, one connection each (default 1)
#   --workloads LIST    which of a..f to run, e.g. "ac" (default abcdef)
#   --out FILE.json     write per-phase results as JSON
#   --label NAME        name recorded in the table and the JSON
#   --password PW       sent with AUTH (redis.password) and used for FLUSHALL
#   --prop KEY=VALUE    extra YCSB property for every phase (e.g. redis.timeout=10000,
#                       fieldcount=5); may be repeated
#
# Environment: JAVA_OPTS (extra JVM flags for YCSB), MVN (maven command, default mvn).
#
# Needs: java (8+), maven (first run only, downloads site.ycsb:core:0.17.0 and
# redis.clients:jedis:2.9.0 from Maven Central), redis-cli (optional: FLUSHALL falls
# back to bash's /dev/tcp).
#
# THE DATABASE IS WIPED: the script sends FLUSHALL before loading, and again before
# workload E. Point it at a dedicated server only.
#
# Order of phases (what the YCSB documentation recommends for running the core
# workloads as a set):
#   FLUSHALL; load; run A, B, C, F, D      (whichever of these were asked for)
#   FLUSHALL; load; run E                  (if E was asked for)
# A, B, C and F only read and overwrite existing records, so they can share one load.
# D inserts new records (keys past recordcount), so it goes last in the first set:
# the others then see exactly recordcount records. E also inserts, starting at the same
# key numbers as D did, and scans the index, so it gets a fresh load of its own instead
# of running over D's extra records.
#
# Each YCSB invocation's output is kept in bench/ycsb/target/runs/<time>-<pid>/.
# Exit status: 0 when every phase completed all its operations with Return=OK;
# 1 when any operation failed or a phase did not complete (the script stops at the
# first such phase); 2 for usage or setup errors.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
YCSB_VERSION=0.17.0
JEDIS_VERSION=2.9.0

HOST=127.0.0.1
PORT=
RECORDS=10000
OPS=10000
THREADS=1
WORKLOADS=abcdef
OUT=
LABEL=
PASSWORD=
PROPS=()

usage() {
  sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed '$d; s/^# \{0,1\}//' >&2
  exit 2
}
die() {
  echo "run.sh: $*" >&2
  exit 2
}
need_arg() {
  [[ $# -ge 2 && -n $2 ]] || die "$1 needs a value"
}

while [[ $# -gt 0 ]]; do
  case $1 in
    --port) need_arg "$@"; PORT=$2; shift 2 ;;
    --host) need_arg "$@"; HOST=$2; shift 2 ;;
    --recordcount) need_arg "$@"; RECORDS=$2; shift 2 ;;
    --operationcount) need_arg "$@"; OPS=$2; shift 2 ;;
    --threads) need_arg "$@"; THREADS=$2; shift 2 ;;
    --workloads) need_arg "$@"; WORKLOADS=$2; shift 2 ;;
    --out) need_arg "$@"; OUT=$2; shift 2 ;;
    --label) need_arg "$@"; LABEL=$2; shift 2 ;;
    --password) need_arg "$@"; PASSWORD=$2; shift 2 ;;
    --prop) need_arg "$@"; [[ $2 == *=* ]] || die "--prop wants KEY=VALUE"; PROPS+=("$2"); shift 2 ;;
    -h|--help) usage ;;
    *) echo "run.sh: unknown argument: $1" >&2; usage ;;
  esac
done

[[ -n $PORT ]] || { echo "run.sh: --port is required" >&2; usage; }
for v in PORT RECORDS OPS THREADS; do
  [[ ${!v} =~ ^[0-9]+$ && ${!v} -gt 0 ]] || die "$v must be a positive integer, got '${!v}'"
done
[[ $WORKLOADS =~ ^[a-fA-F]+$ ]] || die "--workloads takes letters a-f, got '$WORKLOADS'"
WORKLOADS=${WORKLOADS,,}
if [[ -n $OUT ]]; then
  # Resolve now: later steps run from other directories.
  OUT_DIR=$(cd "$(dirname "$OUT")" 2>/dev/null && pwd) || die "--out: no directory $(dirname "$OUT")"
  OUT="$OUT_DIR/$(basename "$OUT")"
fi
command -v java >/dev/null || die "java not found (apt-get install default-jdk-headless)"

# ---- build (once; reused while pom.xml and src/ are unchanged) -----------------------
JAR=$HERE/target/tembo-ycsb.jar
CP="$JAR:$HERE/target/dependency/*"

needs_build() {
  [[ ! -f $JAR || ! -f $HERE/target/dependency/core-$YCSB_VERSION.jar \
     || ! -f $HERE/target/dependency/jedis-$JEDIS_VERSION.jar ]] && return 0
  [[ -n $(find "$HERE/pom.xml" "$HERE/src" -newer "$JAR" -print -quit) ]]
}

build() {
  local mvn=${MVN:-mvn}
  command -v "$mvn" >/dev/null || die "maven not found (apt-get install maven)"
  echo "run.sh: building $JAR" >&2
  if ! (cd "$HERE" && "$mvn" -q -B -Dstyle.color=never package) >"$HERE/target/build.log" 2>&1; then
    tail -n 30 "$HERE/target/build.log" >&2
    die "maven build failed (log: $HERE/target/build.log)"
  fi
}

mkdir -p "$HERE/target"
if needs_build; then
  if command -v flock >/dev/null; then
    # Serialise concurrent run.sh invocations; the second one rechecks after waiting.
    exec 9>"$HERE/target/.build.lock"
    flock 9
    if needs_build; then build; fi
    flock -u 9
  else
    build
  fi
fi

# ---- helpers --------------------------------------------------------------------------
flushall() {
  local reply
  if command -v redis-cli >/dev/null; then
    if [[ -n $PASSWORD ]]; then
      reply=$(REDISCLI_AUTH=$PASSWORD redis-cli -h "$HOST" -p "$PORT" FLUSHALL 2>&1) || true
    else
      reply=$(redis-cli -h "$HOST" -p "$PORT" FLUSHALL 2>&1) || true
    fi
  else
    # RESP by hand: [AUTH pw] FLUSHALL, read the last reply line.
    reply=$(
      exec 3<>"/dev/tcp/$HOST/$PORT" || exit 1
      if [[ -n $PASSWORD ]]; then
        printf '*2\r\n$4\r\nAUTH\r\n$%d\r\n%s\r\n' "${#PASSWORD}" "$PASSWORD" >&3
        IFS= read -r -t 10 line <&3
      fi
      printf '*1\r\n$8\r\nFLUSHALL\r\n' >&3
      IFS= read -r -t 30 line <&3
      printf '%s' "${line%$'\r'}"
    ) || true
    reply=${reply#+}
  fi
  [[ $reply == OK ]] || die "FLUSHALL on $HOST:$PORT failed: ${reply:-no reply}"
}

RUN_DIR=$HERE/target/runs/$(date +%Y%m%d-%H%M%S)-$$
mkdir -p "$RUN_DIR"
SPECS=()
FAILED=
START=$SECONDS
STARTED=$(date -u +%Y-%m-%dT%H:%M:%SZ)

# ycsb load|run WORKLOAD
ycsb() {
  local phase=$1 w=$2 flag expected
  if [[ $phase == load ]]; then flag=-load; expected=$RECORDS; else flag=-t; expected=$OPS; fi
  local out=$RUN_DIR/$phase-$w.txt log=$RUN_DIR/$phase-$w.log
  local args=(-db tembo.ycsb.RedisClient -P "$HERE/workloads/workload$w"
    -p "redis.host=$HOST" -p "redis.port=$PORT"
    -p "recordcount=$RECORDS" -p "operationcount=$OPS" -threads "$THREADS" -s)
  [[ -n $PASSWORD ]] && args+=(-p "redis.password=$PASSWORD")
  local p
  for p in ${PROPS[@]+"${PROPS[@]}"}; do args+=(-p "$p"); done
  local t0=$SECONDS rc=0
  # shellcheck disable=SC2086
  java ${JAVA_OPTS:-} -cp "$CP" site.ycsb.Client "$flag" "${args[@]}" >"$out" 2>"$log" || rc=$?
  SPECS+=("$phase:$w:$expected:$out")
  local bad=
  if [[ $rc -ne 0 ]]; then
    bad="java exited $rc"
  elif ! grep -q '^\[OVERALL\], Throughput' "$out"; then
    bad="no results"
  elif grep -E '^\[[A-Z-]+\], Return=' "$out" | grep -vq 'Return=OK,'; then
    bad="operations failed"
  elif grep -q -- '-FAILED\], Operations' "$out"; then
    bad="operations failed"
  fi
  printf 'run.sh: %-7s %3ds %s\n' "$phase-$w" $((SECONDS - t0)) "${bad:-ok}" >&2
  if [[ -n $bad ]]; then
    echo "run.sh: see $out and $log" >&2
    tail -n 5 "$log" | sed 's/^/  | /' >&2
    FAILED=1
    return 1
  fi
}

# ---- phases ---------------------------------------------------------------------------
SET1=()
for w in a b c f d; do [[ $WORKLOADS == *$w* ]] && SET1+=("$w"); done

run_all() {
  if [[ ${#SET1[@]} -gt 0 ]]; then
    flushall
    ycsb load "${SET1[0]}" || return 0
    for w in "${SET1[@]}"; do ycsb run "$w" || return 0; done
  fi
  if [[ $WORKLOADS == *e* ]]; then
    flushall
    ycsb load e || return 0
    ycsb run e || return 0
  fi
}
run_all

# ---- summary --------------------------------------------------------------------------
SUMMARY_ARGS=(--meta "host=$HOST" --meta "port=$PORT" --meta "recordcount=$RECORDS"
  --meta "operationcount=$OPS" --meta "threads=$THREADS" --meta "workloads=$WORKLOADS"
  --meta "ycsb_version=$YCSB_VERSION" --meta "jedis_version=$JEDIS_VERSION"
  --meta "started=$STARTED"
  --meta "elapsed_s=$((SECONDS - START))" --meta "logs=$RUN_DIR")
[[ -n $LABEL ]] && SUMMARY_ARGS+=(--label "$LABEL")
[[ -n $OUT ]] && SUMMARY_ARGS+=(--out "$OUT")
rc=0
java -cp "$CP" tembo.ycsb.Summary "${SUMMARY_ARGS[@]}" "${SPECS[@]}" || rc=$?
echo "run.sh: $((SECONDS - START))s in all; logs in $RUN_DIR" >&2
[[ -n $FAILED ]] && exit 1
exit "$rc"
