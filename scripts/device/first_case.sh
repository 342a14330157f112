#!/usr/bin/env bash
# The slow first case after a switch between collectives (docs/performance-log.md, next levers; run 52: the 8 B
# rows of all-gather, reduce-scatter, broadcast and reduce at 98-122 us with minima of 17-22 us), in one device call
# of about a minute. Three dfccl sweeps, 8 B - 16 MiB: all-reduce then all-gather (the switch), the same with the
# barrier probe's spin cut to 1 us, and all-gather alone (no switch). Each prints its first sizes and the engine's
# launches and exits (--diagnose true).
#   scripts/device/first_case.sh
cd "$(dirname "$0")/../.."
. scripts/device/env.sh
H=("${MPIRUN[@]}" "$BIN/dfccl-harness" --workload workloads/sweep.toml --end 16M --factor 8 --iters 10 --warmup 3
  --backend dfccl --diagnose true)
step switch 60 "${H[@]}" --collectives all_reduce,all_gather
step switch_probe1us 60 env DFCCL_PROBE_SPIN_NS=1000 "${H[@]}" --collectives all_reduce,all_gather
step alone 60 "${H[@]}" --collectives all_gather
for t in switch switch_probe1us alone; do
  grep -E "^ +all_(reduce|gather) +world +(8|64|512) " "$OUT/$t.log" |
    awk -v t="$t" '{print t, $1, $3, "median", $8, "min", $12, "max", $13}' | tee -a "$OUT/summary.txt"
  grep -E "^# engine" "$OUT/$t.log" | sed "s/^/$t /" | tee -a "$OUT/summary.txt"
done
(cd "$OUT" && tar czf logs.tgz ./*.log && rm -f ./*.log)
