#!/usr/bin/env bash
# The harness on the GPU, as a GPU runner checks it (ctest -L gpu): runs `mpirun -np 2 dfccl-harness ARGS...` with
# the given --expect checks. Without a GPU it is skipped (77), or fails under DFCCL_REQUIRE_GPUS (as gpu_check.h).
#   gpu_smoke.sh <mpiexec> <dfccl-harness> ARGS...
set -u
mpiexec=$1 harness=$2
shift 2
gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU' || true)
if [ "${gpus:-0}" -lt 1 ]; then
  if [ "${DFCCL_REQUIRE_GPUS:-0}" -ge 1 ]; then
    echo "FAILED: DFCCL_REQUIRE_GPUS=$DFCCL_REQUIRE_GPUS but no usable GPU (nvidia-smi -L)"
    exit 1
  fi
  echo "skipped: no GPU"
  exit 77
fi
export NCCL_NVLS_ENABLE=${NCCL_NVLS_ENABLE:-0}
exec "$mpiexec" -np 2 --oversubscribe --bind-to none -x NCCL_NVLS_ENABLE "$harness" "$@"
