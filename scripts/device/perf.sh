#!/usr/bin/env bash
# The performance measurements of docs/performance-log.md in one device call (about 3 minutes): the one-process
# latency split, the burst workload, all-reduce sweeps with dfccl and NCCL in float32 (and dfccl's blocking mode)
# and bfloat16, then the engine
# tests and the dfccl stress, so that a performance change is never measured without its correctness.
# Binaries in $BIN (default .device/bin): dfccl-harness, cuda_engine_test, latency_split (build command in its header).
#   scripts/device/perf.sh
cd "$(dirname "$0")/../.."
. scripts/device/env.sh
H=("${MPIRUN[@]}" "$BIN/dfccl-harness")
step latency_split 60 "$BIN/latency_split" 100
step burst 60 "${H[@]}" --workload workloads/burst.toml --backend dfccl,nccl --out "$OUT/burst.h5"
# float32 also on dfccl-blocking: what the preemption machinery costs on an in-order workload (same build).
step sweep_float32 150 "${H[@]}" --workload workloads/sweep.toml --backend dfccl,dfccl-blocking,nccl \
  --collectives all_reduce --iters 10 --warmup 3 --out "$OUT/sweep_all_reduce_float32.h5"
step sweep_bfloat16 120 "${H[@]}" --workload workloads/sweep.toml --backend dfccl,nccl --collectives all_reduce \
  --dtype bfloat16 --iters 10 --warmup 3 --out "$OUT/sweep_all_reduce_bfloat16.h5"
step engine 80 "$BIN/cuda_engine_test"
step stress 90 "${H[@]}" --workload workloads/stress.toml --tp 2 --backend dfccl --trials 1000 --timeout 5 \
  --diagnose true --out "$OUT/stress_dfccl.h5"
cat "$OUT/latency_split.log" | tee -a "$OUT/summary.txt"
grep -E "PASSED|FAILED" "$OUT/engine.log" | tee -a "$OUT/summary.txt"
grep -E "^# dfccl:" "$OUT/stress.log" | tee -a "$OUT/summary.txt"
for t in float32 bfloat16; do
  grep -E "^ +all_reduce +world +(8|65536|1048576|8388608|134217728|268435456|1073741824) " "$OUT/sweep_$t.log" |
    awk -v t="$t" '{print t, $3, $8, $10}' | tee -a "$OUT/summary.txt"
done
