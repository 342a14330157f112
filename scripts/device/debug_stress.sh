#!/usr/bin/env bash
# Diagnoses the harness's stress workload on the GPUs (docs/lab/gpu-runs.md): runs it in the background with
# run.diagnose (each rank prints where its worker is and its engine's state when the watchdog stops a trial); if it is
# still running after $WAIT seconds, kills it, after dumping every thread's host backtrace of each rank with cuda-gdb
# when BT=1 (cuda-gdb attaches to running processes on the GPU machine; slow: minutes). Output: $OUT/stress_<backend>.log, $OUT/bt_<pid>.txt.
#   scripts/device/debug_stress.sh [backend] [extra harness flags...]
cd "$(dirname "$0")/../.."
. scripts/device/env.sh
backend=${1:-dfccl}
shift || true
WAIT=${WAIT:-30}
log="$OUT/stress_$backend.log"
"${MPIRUN[@]}" stdbuf -oL "$BIN/dfccl-harness" --overwrite --workload workloads/stress.toml --backend "$backend" --trials 50 \
  --tp 2 --timeout 3 --diagnose true --out "/tmp/stress_debug_$backend.h5" "$@" > "$log" 2>&1 &
run=$!
for ((s = 0; s < WAIT; ++s)); do
  kill -0 "$run" 2>/dev/null || break
  sleep 1
done
if kill -0 "$run" 2>/dev/null; then
  echo "== still running after $WAIT s"
  for pid in $([ "${BT:-0}" = 1 ] && pgrep -x dfccl-harness); do
    timeout 60 cuda-gdb -p "$pid" -batch -ex "set pagination off" -ex "thread apply all bt 25" > "$OUT/bt_$pid.txt" 2>&1
    echo "== pid $pid: $(grep -c '^Thread' "$OUT/bt_$pid.txt") threads"
    grep -E "^#[0-9]+ .* in (dfccl|cuda|cu[A-Z]|dfh_)" "$OUT/bt_$pid.txt" | sed 's/(.*//' | sort | uniq -c | sort -rn | head -15
  done
  kill "$run" 2>/dev/null
  sleep 2
  pkill -9 -x dfccl-harness 2>/dev/null
fi
wait "$run" 2>/dev/null
grep -E -A12 "^# diagnose" "$log" | cut -c1-600 | head -${DIAG_LINES:-60}
tail -4 "$log"
