#!/usr/bin/env bash
# The simulator against real runs (docs/simulator.md, "Validation against the harness"): the harness replays the
# simulator's own scenarios on the host executor (workloads/replay-ring4.toml on 4 ranks, replay-megatron8.toml on
# 8), on host-blocking (the simulator's model a) and host (preemptive, model d); then scripts/validate_sim.py runs the
# simulator on exactly the same trials and compares them trial by trial.
#
# Usage: scripts/validate_sim.sh [TRIALS [TIMEOUT]]      (defaults 1000 trials per setting, watchdog 1 s)
# Environment: BUILD (default build), OUT (default results/sim), MPIRUN_FLAGS.
# Writes OUT/validation-ring4.{h5,log}, OUT/validation-megatron8.{h5,log} (the harness runs) and OUT/validation.{md,h5,png}.
# Cost: a deadlocked trial costs the watchdog's timeout; on 2 cores about 20 minutes for 2 x 1000 trials.
set -euo pipefail
cd "$(dirname "$0")/.."
TRIALS=${1:-1000}
TIMEOUT=${2:-1}
BUILD=${BUILD:-build}
OUT=${OUT:-results/sim}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
mkdir -p "$OUT"
for setting in ring4:4 megatron8:8; do
  name=${setting%%:*}
  np=${setting##*:}
  echo "== replay-$name: $np ranks, $TRIALS trials, timeout $TIMEOUT s"
  # shellcheck disable=SC2086
  mpirun -np "$np" --oversubscribe --bind-to none ${MPIRUN_FLAGS:-} "$BUILD/bin/dfccl-harness" \
    --workload "workloads/replay-$name.toml" --backend host-blocking,host --trials "$TRIALS" --timeout "$TIMEOUT" \
    --out "$OUT/validation-$name.h5" 2>&1 | tee "$OUT/validation-$name.log"
done
scripts/python.sh scripts/validate_sim.py "$OUT/validation-ring4.h5" "$OUT/validation-megatron8.h5" \
  --sim "$BUILD/bin/dfccl-sim" --report "$OUT/validation.md" --h5 "$OUT/validation.h5" --plot "$OUT/validation.png"
