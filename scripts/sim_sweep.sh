#!/usr/bin/env bash
# The reproduction sweep of the deadlock-risk simulator: runs dfccl-sim on scripts/sim_sweep.toml, writes
# results/sim/sweep.h5 and the console log results/sim/sweep.log, then plots results/sim/deadlock_rate*.png and
# writes the tables of docs/simulator.md to results/sim/tables.md.
# Usage: scripts/sim_sweep.sh [extra dfccl-sim options, e.g. --threads 2 or --trials 100 for a quick look]
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
SIM=${DFCCL_SIM:-$BUILD/bin/dfccl-sim}
[ -x "$SIM" ] || { echo "sim_sweep.sh: $SIM not built (make)" >&2; exit 1; }
mkdir -p results/sim
start=$(date +%s)
"$SIM" --plan scripts/sim_sweep.toml --out results/sim/sweep.h5 "$@" | tee results/sim/sweep.log
echo "sim_sweep.sh: $(( $(date +%s) - start )) s wall" | tee -a results/sim/sweep.log
scripts/python.sh scripts/plot_sim.py results/sim/sweep.h5 --out results/sim --markdown results/sim/tables.md
