#!/usr/bin/env bash
# GPU test suite, run on the GPU machine through the device tool (docs/lab/gpu-runs.md):
#   scripts/device/gpu_tests.sh [filter]     (filter: all (default), engine, matrix, mp or abort)
# Uses prebuilt binaries from $BIN (default .device/bin, copied there from build/bin), else builds. Each step runs
# under a timeout; logs go to $OUT (the device tool's result folder); a summary line per step is printed.
set -u
cd "$(dirname "$0")/../.."
OUT=${OUT:-/tmp/dfccl-out}
mkdir -p "$OUT"
BIN=${BIN:-.device/bin}
. scripts/device/env.sh
{
  date -u
  nvidia-smi --query-gpu=index,name,driver_version,memory.total --format=csv
  nvidia-smi topo -m
} > "$OUT/machine.txt" 2>&1
head -4 "$OUT/machine.txt"

step() {  # step <name> <timeout s> <command...>
  local name=$1 t=$2
  shift 2
  local t0=$(date +%s%N)
  timeout -k 10 "$t" "$@" > "$OUT/$name.log" 2>&1
  local rc=$?
  local ms=$((($(date +%s%N) - t0) / 1000000))
  printf '== %-28s rc=%-3s %4d.%01d s\n' "$name" "$rc" $((ms / 1000)) $((ms % 1000 / 100))
  if [ "$rc" -ne 0 ] && [ "$rc" -ne 77 ]; then step_failures=$((step_failures + 1)); fi
  grep -E '^\[ (gpu|stress) |FAILED|Failure|PASSED|passed|wrong|skipped|rror' "$OUT/$name.log" | head -40
}

filter=${1:-all}
mpi=(mpirun --allow-run-as-root --bind-to none -np 2)
case "$filter" in
  all | engine) step cuda_engine_test 300 "$BIN/cuda_engine_test"
    step cuda_one_gpu_test 120 "$BIN/cuda_one_gpu_test" ;;&
  all | matrix) step cuda_collectives_test 300 "$BIN/cuda_collectives_test" ;;&
  all | mp) step mp_collectives_cuda 240 "${mpi[@]}" "$BIN/mp_collectives" cuda 500 ;;&
  all | abort) step mp_abort 120 "${mpi[@]}" "$BIN/mp_abort"
    step mp_abort_memory_wait 120 "${mpi[@]}" -x DFCCL_WAIT_KERNEL=0 "$BIN/mp_abort"
    for k in free lazy devsync mallochost; do step "mp_abort_blocking_$k" 90 "${mpi[@]}" "$BIN/mp_abort_blocking" "$k"; done
    step mp_serialized 120 "${mpi[@]}" "$BIN/mp_serialized" 50 30
    step mp_serialized_launch_blocking 90 "${mpi[@]}" -x CUDA_LAUNCH_BLOCKING=1 "$BIN/mp_serialized" 20 15 ;;&
  *) ;;
esac
steps_status
