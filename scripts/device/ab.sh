#!/usr/bin/env bash
# A/B of two builds on the same machine in one call, alternating A B A B ... so that drift of the machine shows
# up in both: the all-reduce from 16 B to 64 MiB (dfccl, stream completion), median time per size and run.
# $A and $B are binary folders holding a dfccl-harness each (default .device/bin/a and .device/bin/b); BEGIN, END,
# ITERS and WARMUP change the sweep (defaults 16, 64M, 20, 5); EXTRA adds harness options (e.g. "--timing batch
# --batch 25").
#   ROUNDS=3 scripts/device/ab.sh
cd "$(dirname "$0")/../.."
. scripts/device/env.sh
A=${A:-.device/bin/a}
B=${B:-.device/bin/b}
for round in $(seq 1 "${ROUNDS:-3}"); do
  for side in A B; do
    dir=${!side}
    timeout 120 "${MPIRUN[@]}" "$dir/dfccl-harness" --workload workloads/sweep.toml --collectives all_reduce \
      --begin "${BEGIN:-16}" --end "${END:-64M}" --factor 4 --iters "${ITERS:-20}" --warmup "${WARMUP:-5}" \
      --backend dfccl ${EXTRA:-} > "$OUT/ab_${side}_$round.log" 2>&1
    echo "== $side round $round rc=$?"
    grep -E "^ +all_reduce" "$OUT/ab_${side}_$round.log" | awk '{printf "  %10s B  %9s us  cv %5s %%\n", $3, $8, $14}'
  done
done
