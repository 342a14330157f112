#!/usr/bin/env bash
# The GPU stress campaign for docs/lab/gpu-runs.md and results/gpu/: engine tests, mp_collectives (CUDA IPC), the harness's
# stress workload on dfccl (TRIALS, default 1000; run.diagnose on) and on NCCL (NCCL_TRIALS, default 20: deadlocks
# expected, recovered by ncclCommAbort). Logs, HDF5 files and a summary go to $OUT.
#   scripts/device/stress.sh
cd "$(dirname "$0")/../.."
. scripts/device/env.sh
H=("${MPIRUN[@]}" "$BIN/dfccl-harness" --overwrite --workload workloads/stress.toml --tp 2)
step engine 80 "$BIN/cuda_engine_test"
step mp 60 "${MPIRUN[@]}" "$BIN/mp_collectives" cuda 500
step stress_dfccl "${DFCCL_S:-300}" "${H[@]}" --backend dfccl --trials "${TRIALS:-1000}" --timeout 5 --diagnose true \
  --out "$OUT/stress_dfccl.h5"
step stress_nccl "${NCCL_S:-150}" "${H[@]}" --backend nccl --trials "${NCCL_TRIALS:-20}" --timeout 3 --diagnose true \
  --out "$OUT/stress_nccl.h5"
grep -E "gpu   |PASSED|FAILED" "$OUT/engine.log" | tee -a "$OUT/summary.txt"
tail -1 "$OUT/mp.log" | tee -a "$OUT/summary.txt"
for f in stress_dfccl stress_nccl; do
  grep -E "trials:|^# diagnose" "$OUT/$f.log" | head -6 | cut -c1-300 | tee -a "$OUT/summary.txt"
  grep -E "^# (dfccl|nccl) " "$OUT/$f.log" | tail -1 | tee -a "$OUT/summary.txt"
done

steps_status
