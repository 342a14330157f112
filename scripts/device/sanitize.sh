#!/usr/bin/env bash
# compute-sanitizer over the CUDA daemon, on a GPU machine (docs/lab/gpu-runs.md, runs 136-137):
#   scripts/device/sanitize.sh [tool...]      (default: memcheck racecheck synccheck; initcheck on request)
# Each tool runs, two ranks under mpirun (on one GPU or two: rank r uses GPU r % n):
#   - mp_collectives cuda-shared: every collective x type x operator x count (0, 1, 17, 1009, 262144), in and out
#     of place, then STRESS_TRIALS trials of random orders over three communicators (LL and Simple primitives,
#     preemption);
#   - the harness's stress workload, HARNESS_TRIALS trials (random orders, forced synchronizations, preemption).
# Any report fails its step (--error-exitcode 9); the reports are in $OUT/san-<tool>-<target>.log. racecheck (shared
# memory hazards) is the slow one: about 4 minutes for mp_collectives on one GPU.
#   $BIN: mp_collectives, dfccl-harness (a -lineinfo build names source lines in the reports:
#         cmake -B build-li -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_FLAGS=-lineinfo)
cd "$(dirname "$0")/../.."
. scripts/device/env.sh
CS=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
"$CS" --version | tail -1 | tee -a "$OUT/summary.txt"
M=(mpirun --allow-run-as-root --oversubscribe --bind-to none -np 2)
tools=("$@")
[ ${#tools[@]} -eq 0 ] && tools=(memcheck racecheck synccheck)
for tool in "${tools[@]}"; do
  S=("$CS" --tool "$tool" --error-exitcode 9)
  step "san-$tool-mp" 400 "${M[@]}" "${S[@]}" "$BIN/mp_collectives" cuda-shared "${STRESS_TRIALS:-2}"
  step "san-$tool-stress" 400 "${M[@]}" "${S[@]}" "$BIN/dfccl-harness" --overwrite --workload workloads/stress.toml --tp 2 \
    --backend dfccl --trials "${HARNESS_TRIALS:-5}" --timeout 60 --expect "wrong==0" --expect "failed==0" \
    --out "$OUT/san-$tool-stress.h5"
  grep -hE "ERROR SUMMARY|RACECHECK SUMMARY|^PASSED|^FAILED|^# dfccl:" "$OUT/san-$tool"-*.log | sort | uniq -c |
    tee -a "$OUT/summary.txt"
done

steps_status
