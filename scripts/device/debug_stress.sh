#!/usr/bin/env bash
# Diagnoses a hang of the harness's stress workload on the GPUs (docs/gpu-runs.md, "Open"): runs it in the
# background, and after $WAIT seconds dumps every thread's host backtrace of each rank with cuda-gdb (which attaches
# to running processes on the GPU machine), then kills the run. Output: $OUT/stress.log, $OUT/bt_<pid>.txt.
#   scripts/device/debug_stress.sh [backend] [extra harness flags...]
cd "$(dirname "$0")/../.."
. scripts/device/env.sh
backend=${1:-dfccl}
shift || true
WAIT=${WAIT:-30}
"${MPIRUN[@]}" stdbuf -oL "$BIN/dfccl-harness" --workload workloads/stress.toml --backend "$backend" --trials 50 \
  --iters 1 --tp 2 --timeout 5 --out "$OUT/stress_debug.h5" "$@" > "$OUT/stress.log" 2>&1 &
run=$!
sleep "$WAIT"
for pid in $(pgrep -f "bin/dfccl-harness"); do
  timeout 60 cuda-gdb -p "$pid" -batch -ex "set pagination off" -ex "thread apply all bt 25" > "$OUT/bt_$pid.txt" 2>&1
  echo "== pid $pid: $(grep -c '^Thread' "$OUT/bt_$pid.txt") threads"
  grep -E "^#[0-9]+ .* in (dfccl|cuda|cu[A-Z]|dfh_)" "$OUT/bt_$pid.txt" | sed 's/(.*//' | sort | uniq -c | sort -rn | head -15
done
kill "$run" 2>/dev/null
wait "$run" 2>/dev/null
tail -5 "$OUT/stress.log"
