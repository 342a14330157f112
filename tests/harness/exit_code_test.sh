#!/bin/bash
# The exit code of a run (docs/harness.md, "Exit codes"): runs 2 ranks and requires the code and the one-line reason.
#   failed       every trial fails (dfcclWait's host wait bounded to 1 ms, DFCCL_HOST_WAIT_TIMEOUT_MS, for a
#                64 MiB all-reduce: dfcclTimeout): exit 4
#   nothing-ran  the only backend is unavailable (dfccl with no visible GPU): exit 5
#   ok           a small exact sweep on the host executor: exit 0
# Usage: exit_code_test.sh MODE MPIEXEC HARNESS WORKLOADS_DIR OUT_DIR
set -u
mode=$1 mpiexec=$2 harness=$3 workloads=$4 out=$5
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
# Every rank exits by itself with the code: mpirun kills what is left at once instead of waiting a second after each
# of its signals (Open MPI's default).
export OMPI_MCA_odls_base_sigkill_timeout=0
common=(--workload "$workloads/sweep.toml" --collectives all_reduce --trials 2 --timeout 10 --quiet
        --out "$out/exit_$mode.h5")
case $mode in
  failed)
    export DFCCL_HOST_WAIT_TIMEOUT_MS=1
    want=4 reason="exit 4: 2 trials failed"
    args=(--backend host --begin 64M --end 64M --in_place off) ;;
  nothing-ran)
    export CUDA_VISIBLE_DEVICES=
    want=5 reason="exit 5: no trial ran"
    args=(--backend dfccl --begin 1K --end 1K) ;;
  ok)
    want=0 reason=""
    args=(--backend host --begin 1K --end 2K) ;;
  *) echo "unknown mode $mode"; exit 2 ;;
esac
rm -f "$out/exit_$mode.h5"
output=$("$mpiexec" -np 2 --oversubscribe --bind-to none "$harness" "${common[@]}" "${args[@]}" 2>&1)
rc=$?
echo "$output" | grep -E "^dfccl-harness|^# Results"
echo "exit code $rc (expected $want)"
[ "$rc" -eq "$want" ] || { echo "FAIL: exit code $rc"; echo "$output" | tail -20; exit 1; }
if [ -n "$reason" ]; then
  echo "$output" | grep -q "^dfccl-harness: $reason" || { echo "FAIL: no line 'dfccl-harness: $reason'"; exit 1; }
fi
echo PASS
