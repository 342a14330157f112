#!/usr/bin/env bash
# The reproduction sweep of the deadlock-risk simulator: runs dfccl-sim on scripts/sim_sweep.toml, writes
# $OUT/sweep.h5 and the console log $OUT/sweep.log, then plots $OUT/deadlock_rate*.png and writes the tables of
# docs/simulator.md to $OUT/tables.md. OUT defaults to results/sim (the committed results).
# Usage: [OUT=dir] scripts/sim_sweep.sh [extra dfccl-sim options]
#   quick look without touching the committed results: OUT=/tmp/sim scripts/sim_sweep.sh --trials 20
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
SIM=${DFCCL_SIM:-$BUILD/bin/dfccl-sim}
OUT=${OUT:-results/sim}
[ -x "$SIM" ] || { echo "sim_sweep.sh: $SIM not built (make)" >&2; exit 1; }
mkdir -p "$OUT"
start=$(date +%s)
"$SIM" --plan scripts/sim_sweep.toml --out "$OUT/sweep.h5" "$@" | tee "$OUT/sweep.log"
echo "sim_sweep.sh: $(( $(date +%s) - start )) s wall" | tee -a "$OUT/sweep.log"
scripts/python.sh scripts/plot_sim.py "$OUT/sweep.h5" --out "$OUT" --markdown "$OUT/tables.md"
