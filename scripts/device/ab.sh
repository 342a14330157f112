#!/usr/bin/env bash
# A/B of two builds on the same machine in one call, alternating A B A B ... so that drift of the machine shows
# up in both: the all-reduce from 16 B to 64 MiB (dfccl, stream completion), time per size and run, then the medians
# over the rounds and B - A.
# $A and $B are binary folders holding a dfccl-harness each (default .device/bin/a and .device/bin/b); BEGIN, END,
# ITERS, WARMUP and COLLECTIVES change the sweep (defaults 16, 64M, 20, 5, all_reduce); EXTRA adds harness options (e.g. "--timing batch
# --batch 25"). With MPS=1 the ranks run under MPS: on a machine with one GPU both ranks share it (the harness puts
# rank r on GPU r % n), which compares the builds' protocol and fixed costs between two processes, not NVLink.
#   ROUNDS=3 scripts/device/ab.sh
cd "$(dirname "$0")/../.."
. scripts/device/env.sh
[ "${MPS:-0}" = 1 ] && mps_start
A=${A:-.device/bin/a}
B=${B:-.device/bin/b}
for round in $(seq 1 "${ROUNDS:-3}"); do
  for side in A B; do
    dir=${!side}
    timeout 120 "${MPIRUN[@]}" "$dir/dfccl-harness" --workload workloads/sweep.toml --collectives "${COLLECTIVES:-all_reduce}" \
      --begin "${BEGIN:-16}" --end "${END:-64M}" --factor 4 --iters "${ITERS:-20}" --warmup "${WARMUP:-5}" \
      --backend dfccl ${EXTRA:-} > "$OUT/ab_${side}_$round.log" 2>&1
    echo "== $side round $round rc=$?"
    grep -E "^ +(all_reduce|all_gather|reduce_scatter|broadcast|reduce) " "$OUT/ab_${side}_$round.log" |
      awk '{printf "  %-14s %10s B  %9s us  cv %5s %%\n", $1, $3, $8, $14}'
  done
done
# Medians over the rounds, per collective and size: B - A.
for side in A B; do
  for round in $(seq 1 "${ROUNDS:-3}"); do
    grep -E "^ +(all_reduce|all_gather|reduce_scatter|broadcast|reduce) " "$OUT/ab_${side}_$round.log" |
      awk -v s="$side" '{print s, $1, $3, $8}'
  done
done | sort -k2,2 -k3,3n -k1,1 -k4,4g | awk '
  function med(side,   n) {
    n = cnt[side]
    return n % 2 ? v[side, (n + 1) / 2] : (v[side, n / 2] + v[side, n / 2 + 1]) / 2
  }
  function flush() {
    if (key != "")
      printf "  median %-14s %10s B  A %9.2f  B %9.2f us  B-A %+7.2f\n", c, sz, med("A"), med("B"), med("B") - med("A")
  }
  { k = $2 " " $3; if (k != key) { flush(); key = k; c = $2; sz = $3; cnt["A"] = cnt["B"] = 0 } v[$1, ++cnt[$1]] = $4 }
  END { flush() }'

