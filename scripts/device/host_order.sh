#!/usr/bin/env bash
# Host-ordered inputs (dfccl.h, DFCCL_NO_STREAM) with several ranks on the one GPU, time-sliced:
#   mp_host_order's four modes at 8 ranks (8 communicators, ROUNDS rounds of a 4 MiB all-reduce on each): unsynced
#   shows the hazard (inputs from a pageable cudaMemcpy alone), checked (DFCCL_CHECK_HOST_ORDER=1), synced and pinned
#   must be exact; then RUNS runs (default 100) of `mp_many_comms 8` at each of NPS (default "2 4 8") ranks, with
#   the ctest's settings, counting the runs that passed.
#   RUNS=100 scripts/device/host_order.sh     ($BIN: mp_host_order, mp_many_comms; logs in $OUT)
cd "$(dirname "$0")/../.."
. scripts/device/env.sh
M=(mpirun --allow-run-as-root --oversubscribe --bind-to none -x DFCCL_BLOCKS=128 -x DFCCL_SLOT_BYTES=65536)
for mode in ${MODES:-unsynced checked synced pinned}; do
  step "host_order_$mode" "${MODE_S:-300}" "${M[@]}" -np 8 "$BIN/mp_host_order" "$mode" "${ROUNDS:-12}"
  grep -E "rank-collectives|FAILED" "$OUT/host_order_$mode.log" | head -3 | tee -a "$OUT/summary.txt"
done
for np in ${NPS:-2 4 8}; do
  passed=0 failed=0 t0=$SECONDS
  for ((i = 1; i <= ${RUNS:-100}; ++i)); do
    if timeout -k 5 120 "${M[@]}" -np "$np" "$BIN/mp_many_comms" 8 >> "$OUT/many_comms_${np}ranks.log" 2>&1; then
      passed=$((passed + 1))
    else
      failed=$((failed + 1))
      echo "== run $i failed" >> "$OUT/many_comms_${np}ranks.log"
    fi
  done
  echo "== mp_many_comms 8 at $np ranks: $passed passed, $failed failed of ${RUNS:-100} runs ($((SECONDS - t0)) s)" |
    tee -a "$OUT/summary.txt"
  [ "$failed" -eq 0 ] || step_failures=$((step_failures + 1))
done
grep -h "wrong element" "$OUT"/many_comms_*.log | sort | uniq -c | head -5 | tee -a "$OUT/summary.txt"
steps_status
