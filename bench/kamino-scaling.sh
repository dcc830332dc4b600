#!/usr/bin/env bash
# Kamino-Tx writer scaling on a many-core machine (issue 6):
#   1. optional A/B: YCSB A with a baseline binary and this one, same machine;
#   2. writers on disjoint keys (each thread its own key range);
#   3. the worst case (one object per thread updated over and over);
#   4. YCSB A, F, B, D, C at 1-16 writer threads on kamino, kamino-dynamic,
#      undo and cdds (pmemobj at one thread).
#
# Usage: bench/kamino-scaling.sh OUTDIR [TEMBO_BINARY [BASELINE_BINARY]]
#   THREADS, RECORDS, OPS, RUNS, WORKLOADS, AB_THREADS, BUDGET_S (seconds
#   for the whole run) override the defaults below.
# Each step runs under what is left of the time budget, so a slow machine
# still returns the steps it finished. The pools go to a RAM filesystem:
# /dev/shm when it has room, else a tmpfs mounted for the run (needs root).
set -euo pipefail
out=${1:?give an output directory}
tembo=${2:-./target/release/tembo}
baseline=${3:-}
threads=${THREADS:-1,4,8,16}
records=${RECORDS:-100000}
ops=${OPS:-400000}
runs=${RUNS:-3}
mkdir -p "$out"

pooldir=/dev/shm/tembo-kamino-scaling
need_mb=4096
free_mb=$(df -Pm /dev/shm 2>/dev/null | awk 'NR==2{print $4}')
if [ "${free_mb:-0}" -lt "$need_mb" ]; then
    mount -o remount,size=16g /dev/shm 2>/dev/null || true
    free_mb=$(df -Pm /dev/shm 2>/dev/null | awk 'NR==2{print $4}')
fi
if [ "${free_mb:-0}" -lt "$need_mb" ]; then
    pooldir=/mnt/tembo-kamino-scaling
    mkdir -p "$pooldir"
    mount -t tmpfs -o size=16g tmpfs "$pooldir" ||
        { echo "no RAM filesystem with ${need_mb} MiB free for the pools" >&2; exit 1; }
fi
mkdir -p "$pooldir"
{
    echo "date: $(date -u +%FT%TZ)"
    echo "cpus: $(nproc)"
    grep -m1 'model name' /proc/cpuinfo || true
    grep -m1 -o -w clwb /proc/cpuinfo || echo "no clwb"
    echo "kernel: $(uname -r)"
    free -g | head -2
    df -h "$pooldir" | tail -1
} | tee "$out/machine.txt"

budget=${BUDGET_S:-480}
start=$(date +%s)
left() { echo $((budget - ($(date +%s) - start))); }
# step NAME ARGS...: one `bench kamino` run into NAME.json / NAME.txt.
step() {
    local name=$1 bin=$2
    shift 2
    [ "$(left)" -gt 20 ] || { echo "time budget spent before $name" >&2; return 0; }
    timeout "$(left)" "$bin" bench kamino --dir "$pooldir" --runs "$runs" "$@" \
        --json "$out/$name.json" 2>&1 | tee "$out/$name.txt" || true
}

if [ -n "$baseline" ]; then
    ab=(--engines kamino,undo,cdds --workloads a --threads "${AB_THREADS:-1,8,16}"
        --records "$records" --ops "$ops" --worst-updates 0)
    step ab-before "$baseline" "${ab[@]}"
    step ab-after "$tembo" "${ab[@]}" --disjoint-updates 0
fi

step disjoint "$tembo" --engines kamino,kamino-dynamic,undo,cdds --workloads a \
    --threads "1,2,4,8,16" --records "$records" --ops 0 --worst-updates 0 \
    --disjoint-updates "${DISJOINT_UPDATES:-20000}"

step worst "$tembo" --engines kamino,kamino-dynamic,undo,cdds --workloads a \
    --threads "${WORST_THREADS:-1,4,16}" --records 1000 --ops 0 --disjoint-updates 0 \
    --worst-updates "${WORST_UPDATES:-10000}" --worst-sizes 256,1024

for w in ${WORKLOADS:-a f b d c}; do
    step "ycsb-$w" "$tembo" --engines kamino,kamino-dynamic,undo,cdds,pmemobj --workloads "$w" \
        --threads "$threads" --records "$records" --ops "$ops" --worst-updates 0 --disjoint-updates 0
done
