#!/usr/bin/env bash
# The simulator against real runs (docs/simulator.md, "Validation against the harness"): the harness replays the
# simulator's own scenarios on the host executor (workloads/replay-ring4.toml on 4 ranks, replay-megatron8.toml on
# 8), on host-blocking (the simulator's model a) and on host (preemptive, model d); then scripts/validate_sim.py runs
# the simulator on exactly the same trials and compares them trial by trial.
#
# Usage: scripts/validate_sim.sh [TRIALS]      (default 1000 trials per setting and backend)
# Environment: BUILD (default build), OUT (default results/sim), MPIRUN_FLAGS, and the watchdog's timeouts (run.timeout:
# seconds without progress on any rank before a trial is declared deadlocked):
#   TIMEOUT_BLOCKING (default 1.5 s): every deadlocked host-blocking trial costs it; whole completed trials took at
#                    most 0.47 s on 2 loaded cores (8 ranks), and their silent gaps are shorter still;
#   TIMEOUT_HOST (default 10 s): host never deadlocks, so a long timeout costs nothing (8 preemptive ranks on 2 loaded
#                    cores took up to 0.94 s per trial).
# Writes OUT/validation-<setting>-<backend>.{h5,log} (the harness runs; the .h5 files, a few MB, are not committed)
# and OUT/validation.{md,h5,png} (the comparison). About 25 minutes on 2 cores.
set -euo pipefail
cd "$(dirname "$0")/.."
TRIALS=${1:-1000}
BUILD=${BUILD:-build}
OUT=${OUT:-results/sim}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
mkdir -p "$OUT"
files=()
for setting in ring4:4 megatron8:8; do
  name=${setting%%:*}
  np=${setting##*:}
  for backend in host-blocking host; do
    timeout=${TIMEOUT_HOST:-10}
    [ "$backend" = host-blocking ] && timeout=${TIMEOUT_BLOCKING:-1.5}
    base="$OUT/validation-$name-$backend"
    echo "== replay-$name on $backend: $np ranks, $TRIALS trials, watchdog timeout $timeout s"
    # shellcheck disable=SC2086
    mpirun -np "$np" --oversubscribe --bind-to none ${MPIRUN_FLAGS:-} "$BUILD/bin/dfccl-harness" --overwrite \
      --workload "workloads/replay-$name.toml" --backend "$backend" --trials "$TRIALS" --timeout "$timeout" \
      --out "$base.h5" 2>&1 | tee "$base.log"
    files+=("$base.h5")
  done
done
scripts/python.sh scripts/validate_sim.py "${files[@]}" --sim "$BUILD/bin/dfccl-sim" \
  --report "$OUT/validation.md" --h5 "$OUT/validation.h5" --plot "$OUT/validation.png"
