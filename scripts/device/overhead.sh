#!/usr/bin/env bash
# Fixed cost per collective and compute beside the engine (docs/performance-log.md, 7), about 3 minutes: a GEMM
# beside an idle engine (exits idle / stays resident), the overhead split of one 8-byte all-reduce on one GPU with
# 64 and with 1 daemon block, then the engine tests. Binaries in $BIN (build commands in the probes' headers).
#   scripts/device/overhead.sh
cd "$(dirname "$0")/../.."
. scripts/device/env.sh
step gemm 90 "$BIN/gemm_beside_engine" 3
step gemm_resident 90 env DFCCL_IDLE_NS=10000000000 "$BIN/gemm_beside_engine" 2
step overhead_64 60 "$BIN/overhead_split" 2000
step overhead_1 60 env DFCCL_BLOCKS=1 "$BIN/overhead_split" 2000
step engine 80 "$BIN/cuda_engine_test"
cat "$OUT"/gemm*.log "$OUT"/overhead_*.log | tee -a "$OUT/summary.txt"
grep -E "PASSED|FAILED" "$OUT/engine.log" | tee -a "$OUT/summary.txt"
(cd "$OUT" && tar czf logs.tgz ./*.log && rm -f ./*.log)
