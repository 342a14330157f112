#!/usr/bin/env bash
# All-reduce bandwidth of dfccl under several transport settings (environment variables), NCCL beside it:
#   scripts/device/allreduce_configs.sh          (GPU machine; results in $OUT/ar_<config>.h5 and .log)
cd "$(dirname "$0")/../.."
. scripts/device/env.sh
sweep=(--workload workloads/sweep.toml --collectives all_reduce --begin 1M --end 256M --factor 4 --iters 10 --warmup 3)
run() {  # run <name> <backend> [VAR=value ...]
  local name=$1 backend=$2
  shift 2
  env "$@" timeout 120 "${MPIRUN[@]}" "$BIN/dfccl-harness" "${sweep[@]}" --backend "$backend" --out "$OUT/ar_$name.h5" \
    > "$OUT/ar_$name.log" 2>&1
  echo "== $name ($backend $*) rc=$?"
  grep -E "^ +all_reduce" "$OUT/ar_$name.log" | awk '{printf "  %12s bytes  %9s us  busbw %7s GB/s\n", $3, $8, $10}'
}
run nccl nccl
run b16_s64k_n8 dfccl DFCCL_BLOCKS=16 DFCCL_SLOT_BYTES=65536 DFCCL_SLOTS=8
run b32_s64k_n8 dfccl DFCCL_BLOCKS=32 DFCCL_SLOT_BYTES=65536 DFCCL_SLOTS=8
run b16_s128k_n8 dfccl DFCCL_BLOCKS=16 DFCCL_SLOT_BYTES=131072 DFCCL_SLOTS=8
run b32_s128k_n8 dfccl DFCCL_BLOCKS=32 DFCCL_SLOT_BYTES=131072 DFCCL_SLOTS=8
run b16_s64k_n4 dfccl DFCCL_BLOCKS=16 DFCCL_SLOT_BYTES=65536 DFCCL_SLOTS=4
