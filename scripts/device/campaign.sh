#!/usr/bin/env bash
# The GPU campaign whose results are committed under results/gpu/ (docs/lab/gpu-runs.md): GPU engine tests, the sweep
# with dfccl and NCCL in the same run, the stress on dfccl (1000 trials) and on NCCL (deadlocks expected).
cd "$(dirname "$0")/../.."
. scripts/device/env.sh
H=("${MPIRUN[@]}" "$BIN/dfccl-harness" --overwrite)
step engine 80 "$BIN/cuda_engine_test"
step sweep 180 "${H[@]}" --workload workloads/sweep.toml --backend dfccl,nccl --iters 10 --warmup 3 --out "$OUT/sweep.h5"
step stress_dfccl 170 "${H[@]}" --workload workloads/stress.toml --backend dfccl --trials 1000 --iters 1 --tp 2 \
  --out "$OUT/stress_dfccl.h5"
step stress_nccl 100 "${H[@]}" --workload workloads/stress.toml --backend nccl --trials 5 --iters 1 --timeout 3 --tp 2 \
  --out "$OUT/stress_nccl.h5"
grep -E "gpu   |PASSED|FAILED" "$OUT/engine.log" | tee -a "$OUT/summary.txt"
for f in sweep stress_dfccl stress_nccl; do grep -E "^# (dfccl|nccl)( |:)|trials:" "$OUT/$f.log" | tail -3 | tee -a "$OUT/summary.txt"; done
steps_status
