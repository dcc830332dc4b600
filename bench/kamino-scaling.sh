#!/usr/bin/env bash
# Kamino-Tx writer scaling on a many-core machine (issue 6): YCSB A, B, C,
# D, F at 1-16 writer threads on kamino, kamino-dynamic, undo and cdds
# (pmemobj at one thread), then the worst case (one object per thread
# updated over and over).
#
# Usage: bench/kamino-scaling.sh OUTDIR [TEMBO_BINARY]
#   THREADS, RECORDS, OPS, RUNS, WORKLOADS, BUDGET_S (seconds for the whole
#   run) override the defaults below.
# The pools go to a RAM filesystem: /dev/shm when it has room, else a
# tmpfs mounted for the run (needs root), else the script stops.
set -euo pipefail
out=${1:?give an output directory}
tembo=${2:-./target/release/tembo}
threads=${THREADS:-1,2,4,8,16}
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

# One invocation per workload, each under what is left of the time budget,
# so that a slow machine still returns the workloads it finished.
budget=${BUDGET_S:-480}
start=$(date +%s)
left() { echo $((budget - ($(date +%s) - start))); }
for w in ${WORKLOADS:-a b c d f}; do
    [ "$(left)" -gt 20 ] || { echo "time budget spent before workload $w" >&2; break; }
    timeout "$(left)" "$tembo" bench kamino \
        --engines kamino,kamino-dynamic,undo,cdds,pmemobj --workloads "$w" \
        --threads "$threads" --records "$records" --ops "$ops" --runs "$runs" \
        --worst-updates 0 --dir "$pooldir" \
        --json "$out/kamino-scaling-$w.json" 2>&1 | tee "$out/kamino-scaling-$w.txt" || true
done

[ "$(left)" -gt 20 ] || { echo "time budget spent before the worst case" >&2; exit 0; }
timeout "$(left)" "$tembo" bench kamino \
    --engines kamino,kamino-dynamic,undo,cdds --workloads a \
    --threads "${WORST_THREADS:-1,4,16}" --records 1000 --ops 1000 --runs "$runs" \
    --worst-updates "${WORST_UPDATES:-10000}" --worst-sizes 256,1024 --dir "$pooldir" \
    --json "$out/kamino-scaling-worst.json" 2>&1 | tee "$out/kamino-scaling-worst.txt" || true
