#!/usr/bin/env bash
# The fixed cost per collective (docs/lab/performance-log.md, 7) in one device call, about 3 minutes: correctness on
# the GPUs first (engine tests, the collective matrix), then the one-GPU overhead split (64 and 1 blocks, and the
# phase profile with 1 block when $BIN/overhead_split_prof exists), the two-GPU latency split, and the all-reduce
# sweep from 8 B to 64 MiB with dfccl and NCCL: stream completion, then host completion (dfcclSynchronize).
#   scripts/device/fixed_cost.sh
cd "$(dirname "$0")/../.."
. scripts/device/env.sh
H=("${MPIRUN[@]}" "$BIN/dfccl-harness" --overwrite)
step engine 80 "$BIN/cuda_engine_test"
step matrix 60 "${MPIRUN[@]}" "$BIN/mp_collectives" cuda 100
step overhead_64 60 "$BIN/overhead_split" 600
step overhead_1 60 env DFCCL_BLOCKS=1 "$BIN/overhead_split" 600
[ -x "$BIN/overhead_split_prof" ] && step overhead_prof_1 60 env DFCCL_BLOCKS=1 "$BIN/overhead_split_prof" 600
step latency_split 60 "$BIN/latency_split" 100
step small_stream 120 "${H[@]}" --workload workloads/sweep.toml --backend dfccl,nccl --collectives all_reduce \
  --end 64M --iters 20 --warmup 5 --out "$OUT/small-stream.h5"
step small_host 120 "${H[@]}" --workload workloads/sweep.toml --backend dfccl --collectives all_reduce \
  --end 64M --iters 20 --warmup 5 --completion host --out "$OUT/small-host.h5"
cat "$OUT"/overhead_*.log "$OUT/latency_split.log" | tee -a "$OUT/summary.txt"
grep -E "PASSED|FAILED" "$OUT/engine.log" "$OUT/matrix.log" | tee -a "$OUT/summary.txt"
for t in stream host; do
  awk -v t="$t" '!/^#/ && $10 == "all_reduce" && $11 == "world" {print t, $0}' "$OUT/small_$t.log" |
    tee -a "$OUT/summary.txt"
done
steps_status
