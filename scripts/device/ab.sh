#!/usr/bin/env bash
# A/B of two builds on the same machine in one call: rounds in the order A B, B A, A B, ... (an order effect, e.g.
# the machine warming up, falls on both sides alike), the dfccl sweep (stream completion unless EXTRA says
# otherwise) per round, then per collective and size the medians over the rounds, B - A, and the spread of the
# rounds' own B - A (min .. max, and in how many rounds B was faster): a sign that holds in every round is a result,
# a median inside the spread is not (run 112: A against itself moved medians by up to 1.3 us on the one-GPU proxy).
# $A and $B are binary folders holding a dfccl-harness each (default .device/bin/a and .device/bin/b); BEGIN, END,
# ITERS, WARMUP and COLLECTIVES change the sweep (defaults 16, 64M, 20, 5, all_reduce; COLLECTIVES is a comma
# list); EXTRA adds harness options (e.g. "--timing batch --batch 25"), EXTRA_A and EXTRA_B options of one side
# only (A = B = one build, EXTRA_B="--order host": an option's effect). With MPS=1 the ranks run under MPS: on a
# machine with one GPU both ranks share it (the harness puts rank r on GPU r % n), which compares the builds'
# protocol and fixed costs between two processes, not NVLink.
#   ROUNDS=4 scripts/device/ab.sh
cd "$(dirname "$0")/../.."
. scripts/device/env.sh
[ "${MPS:-0}" = 1 ] && mps_start
A=${A:-.device/bin/a}
B=${B:-.device/bin/b}
for round in $(seq 1 "${ROUNDS:-3}"); do
  sides="A B"
  [ $((round % 2)) = 0 ] && sides="B A"
  for side in $sides; do
    dir=${!side}
    side_extra=EXTRA_$side
    timeout 120 "${MPIRUN[@]}" "$dir/dfccl-harness" --overwrite --workload workloads/sweep.toml --collectives "${COLLECTIVES:-all_reduce}" \
      --begin "${BEGIN:-16}" --end "${END:-64M}" --factor 4 --iters "${ITERS:-20}" --warmup "${WARMUP:-5}" \
      --backend dfccl ${EXTRA:-} ${!side_extra:-} > "$OUT/ab_${side}_$round.log" 2>&1
    echo "== $side round $round rc=$?"
    awk '!/^#/ && $14 ~ /^(all_reduce|all_gather|reduce_scatter|broadcast|reduce)$/ {
      printf "  %-14s %10s B  %9s us  cv %5s %%\n", $14, $1, $6, $18}' "$OUT/ab_${side}_$round.log"
  done
done
# Per collective and size: medians over the rounds, B - A, and the rounds' own B - A.
for side in A B; do
  for round in $(seq 1 "${ROUNDS:-3}"); do
    awk -v s="$side" -v r="$round" '!/^#/ && $14 ~ /^(all_reduce|all_gather|reduce_scatter|broadcast|reduce)$/ {
      print s, $14, $1, r, $6}' "$OUT/ab_${side}_$round.log"
  done
done | sort -k2,2 -k3,3n -k1,1 -k5,5g | awk '
  function med(side,   n) {
    n = cnt[side]
    return n % 2 ? v[side, (n + 1) / 2] : (v[side, n / 2] + v[side, n / 2 + 1]) / 2
  }
  function flush(   r, d, lo, hi, faster, n) {
    if (key == "") return
    n = 0; faster = 0
    for (r in at)
      if ((r, "A") in t && (r, "B") in t) {
        d = t[r, "B"] - t[r, "A"]
        if (n == 0 || d < lo) lo = d
        if (n == 0 || d > hi) hi = d
        faster += d < 0; n++
      }
    printf "  median %-14s %10s B  A %9.2f  B %9.2f us  B-A %+7.2f  rounds %+6.2f .. %+6.2f, B faster in %d of %d\n", \
      c, sz, med("A"), med("B"), med("B") - med("A"), lo, hi, faster, n
  }
  { k = $2 " " $3
    if (k != key) { flush(); key = k; c = $2; sz = $3; cnt["A"] = cnt["B"] = 0; delete t; delete at }
    v[$1, ++cnt[$1]] = $5; t[$4, $1] = $5; at[$4] = 1 }
  END { flush() }'
