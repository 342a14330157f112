#!/usr/bin/env bash
# Several processes on one GPU under MPS (docs/design.md, "Several processes on one GPU"):
#   mps_coupling time-sliced, then under MPS: does a spinning kernel of one process hold another process's
#   synchronizations?
#   then the stress workload with 2 ranks under MPS, TRIALS trials (default 1000) for each completion mode of
#   COMPLETIONS (default "stream host"), the MPS server restarted after each. PROBES="" skips the probe; the
#   variables of the environment (DFCCL_MPS_WAIT) reach the ranks.
#   scripts/device/mps.sh     ($BIN: mps_coupling, dfccl-harness; logs and HDF5 files in $OUT)
cd "$(dirname "$0")/../.."
. scripts/device/env.sh
for hold in ${PROBES-spin}; do
  step "mps_coupling_timesliced_$hold" 60 "$BIN/mps_coupling" "${HOLD_MS:-2000}" "$hold"
  tee -a "$OUT/summary.txt" < "$OUT/mps_coupling_timesliced_$hold.log"
done
mps_start
for hold in ${PROBES-spin}; do
  step "mps_coupling_mps_$hold" 60 "$BIN/mps_coupling" "${HOLD_MS:-2000}" "$hold"
  tee -a "$OUT/summary.txt" < "$OUT/mps_coupling_mps_$hold.log"
done
for completion in ${COMPLETIONS:-stream host}; do
  step "mps_stress_$completion" "${STRESS_S:-400}" "${MPIRUN[@]}" --oversubscribe -x DFCCL_MPS_WAIT "$BIN/dfccl-harness" --overwrite \
    --workload workloads/stress.toml --tp 2 --backend dfccl --trials "${TRIALS:-1000}" --timeout 5 --diagnose true \
    --completion "$completion" --out "$OUT/mps-stress-$completion.h5"
  grep -E "trials:|deadlock|^# dfccl " "$OUT/mps_stress_$completion.log" | head -6 | cut -c1-300 | tee -a "$OUT/summary.txt"
  mps_restart
done
steps_status
