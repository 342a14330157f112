#!/usr/bin/env bash
# A short check of the graph path across builds on the one-GPU machine (binaries built on the CPU machine and carried
# packed: carry.sh pack <build dirs>, carry.sh torch): the torch graph tests three times, then for each build of
# BUILDS in turn, ROUNDS times, two ranks replaying mp_graph p2p and the harness's dfccl-graph backend at its first
# sizes (one rank), the latter once per entry of SETTINGS (VAR=VALUE[,VAR=VALUE...] set for the run; - none). A
# profile build among BUILDS (build-prof, its harness built) with DFCCL_DEBUG=INFO,DFCCL_DEBUG_SUBSYS=ENGINE in
# SETTINGS prints the slow captured instances' timelines. Then, for each entry of BLOCKS, the graph_latency of each
# build of LATENCY_BUILDS (default build-dev) with that many daemon blocks (the daemon kept), and the phases of each
# profile build of PROF_BUILDS (default build-prof). First, for each build of CHECK_BUILDS, the correctness checks of
# captured calls (mp_graph's four forms, cuda_one_gpu_test); last, for each build of MPS_BUILDS, two ranks under MPS
# on dfccl and dfccl-graph (8 B to 64 KiB). Logs and summary.txt in $OUT.
#   [BUILDS="build-ab-base build-dev" ROUNDS=2 REPLAYS=300 TORCH_RUNS=3 P2P=1 SETTINGS=- BLOCKS= LATENCY_BUILDS=
#   PROF_BUILDS= CHECK_BUILDS= MPS_BUILDS=] graph_check.sh
set +e
cd "$(dirname "$0")/../.."
scripts/device/carry.sh unpack
. scripts/device/env.sh
builds=${BUILDS:-build-ab-base build-dev}
M=(mpirun --allow-run-as-root --oversubscribe --bind-to none -np 2 -x DFCCL_GRAPHS=1)
H=(--workload workloads/sweep.toml --collectives all_reduce -b 8 -e 64 -f 8 --timing batch --batch 20 --iters 100
  --warmup 20 --quiet --overwrite --backend dfccl-graph --diagnose)
for b in ${CHECK_BUILDS:-}; do
  for mode in joined p2p deferred forked; do
    step "mp_${mode}_$b" 45 "${M[@]}" "$b/bin/mp_graph" "$mode" "${REPLAYS:-300}"
    grep -hE "PASSED|FAIL|exact" "$OUT/mp_${mode}_$b.log" | tail -2
  done
  step "one_gpu_$b" 120 "$b/bin/cuda_one_gpu_test"
  tail -3 "$OUT/one_gpu_$b.log"
done
step_torch_graphs "${TORCH_RUNS:-3}" 150
grep -E "^(PASSED|FAILED)|passed|failed" "$OUT/torch.log" | tail -8
for round in $(seq "${ROUNDS:-2}"); do
  for b in $builds; do
    if [ "${P2P:-1}" = 1 ] && [ -x "$b/bin/mp_graph" ]; then
      step "p2p_${b}_$round" 60 "${M[@]}" "$b/bin/mp_graph" p2p "${REPLAYS:-300}"
      grep -h "PASSED" "$OUT/p2p_${b}_$round.log" | head -1
    fi
    [ -x "$b/bin/dfccl-harness" ] || continue
    for setting in ${SETTINGS:--}; do
      name=harness_${b}_${setting//[^A-Za-z0-9]/_}_$round
      echo "== $name"
      vars=()
      [ "$setting" = - ] || IFS=, read -ra vars <<< "$setting"
      step "$name" 60 env "${vars[@]}" "$b/bin/dfccl-harness" "${H[@]}" --out "$OUT/$name.h5"
      grep -E "^ +[0-9]|^# engine|^# graph launch" "$OUT/$name.log"
      grep -h "slow captured" "$OUT/$name.log" | cut -c1-5000
    done
  done
done
for blocks in ${BLOCKS:-}; do
  name=latency_blocks_${blocks}
  for lb in ${LATENCY_BUILDS:-build-dev}; do
    echo "== $lb"
    step "${name}_$lb" 60 env DFCCL_BLOCKS="$blocks" DFCCL_IDLE_NS=10000000000 "$lb/bin/graph_latency" 50 20
    tail -4 "$OUT/${name}_$lb.log"
  done
  for pb in ${PROF_BUILDS:-build-prof}; do  # and its phases (the core's apart from the node's shape)
    [ -x "$pb/bin/graph_latency" ] || continue
    echo "== $pb"
    step "phases_${name}_$pb" 60 env DFCCL_BLOCKS="$blocks" DFCCL_IDLE_NS=10000000000 DFCCL_DEBUG=INFO \
      DFCCL_DEBUG_SUBSYS=ENGINE "$pb/bin/graph_latency" 100 20 one
    grep -h "graph path" "$OUT/phases_${name}_$pb.log" | cut -c1-700
  done
done
if [ -n "${MPS_BUILDS:-}" ]; then
  mps_start
  for b in $MPS_BUILDS; do
    step "mps_$b" 120 "${M[@]}" "$b/bin/dfccl-harness" --workload workloads/sweep.toml --collectives all_reduce \
      -b 8 -e 64K -f 8 --timing batch --batch 20 --iters 50 --warmup 10 --quiet --overwrite \
      --backend dfccl,dfccl-graph --diagnose --out "$OUT/mps_$b.h5"
    grep -E "^ +[0-9]|^# engine" "$OUT/mps_$b.log"
  done
fi
rm -f "$OUT"/*.h5
steps_status
