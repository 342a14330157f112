#!/usr/bin/env bash
# Collectives captured into CUDA graphs (docs/design.md, "CUDA graphs") on the one-GPU machine, two ranks
# time-sliced: builds the graph tests into build-dev, then runs them each under a short timeout (a hang costs its
# timeout, not the call), then the latency probe.
#   [REPLAYS=1000 REPEAT=20 MODES=... CUDA_MODULE_LOADING=... TAG=...] scripts/device/graphs.sh [steps...]
#   steps: build unit mp engine latency phases harness harness_sweeps hostlat waits peers torch shrink (default: build
#   unit mp latency peers); phases builds graph_latency with -DDFCCL_PROFILE=1 into build-prof and prints the graph
#   path's phases
# Logs and summary.txt in $OUT.
cd "$(dirname "$0")/../.."
. scripts/device/env.sh
B=build-dev
BIN=$B/bin
steps=${*:-build unit mp latency peers}
has() { [[ " $steps " == *" $1 "* ]]; }
M=(mpirun --allow-run-as-root --oversubscribe --bind-to none -np 2 -x DFCCL_GRAPHS=1)
[ -n "${CUDA_MODULE_LOADING:-}" ] && M+=(-x CUDA_MODULE_LOADING)
tag=${TAG:+_$TAG}  # TAG: a suffix for the mp steps' logs (several settings in one call)
# The latency sweep: all-reduce 8 B to 1 MiB, one rank unless run under mpirun, nccl-tests' batch timing.
H=(--workload workloads/sweep.toml --collectives all_reduce -b 8 -e 1M -f 8 --timing batch --batch 20 --iters 100
  --warmup 20 --quiet --overwrite)
if has build; then
  targets="graph_start_test mp_graph cuda_one_gpu_test graph_latency peer_death_cuda_test mismatch_hosts_cuda_test"
  targets+=" device_fault_cuda_test dfccl-harness dfccl_shared cuda_engine_test mp_abort shrink_test"
  targets+=" transport_test persistent_test core_exit_test"
  step configure 120 cmake -S . -B $B -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 \
    -DDFCCL_BUILD_PROBES=ON -DDFCCL_DEPS_PREFIX="$PWD/.deps"
  # shellcheck disable=SC2086
  step build 400 cmake --build $B -j16 --target $targets
  tail -5 "$OUT/build.log"
fi
if has unit; then
  step graph_start_test 60 "$BIN/graph_start_test"
  step core_exit_test 30 "$BIN/core_exit_test"
  step cuda_one_gpu_test 120 "$BIN/cuda_one_gpu_test"
  # eager collectives waited for on a replay's stream, each followed by a cudaFree (a stand-in owning the engine then)
  step transfers_x20 240 "$BIN/cuda_one_gpu_test" --gtest_filter='*Transfers*:*EagerSelf*:*EagerWait*' \
    --gtest_repeat="${REPEAT:-20}"
  step transport_test 60 "$BIN/transport_test"
fi
if has mp; then
  for mode in ${MODES:-deferred forked joined p2p}; do
    step "mp_graph_$mode$tag" "${MP_S:-90}" "${M[@]}" "$BIN/mp_graph" "$mode" "${REPLAYS:-1000}"
    grep -E "PASSED|FAIL|dumping|replays exact" "$OUT/mp_graph_$mode$tag.log" | tail -3
  done
  step "mp_graph_blocking$tag" 60 "${M[@]}" "$BIN/mp_graph" blocking
  grep -E "PASSED|FAIL" "$OUT/mp_graph_blocking$tag.log" | tail -2
fi
if has engine; then  # the eager paths beside the graphs' (the same scheduler ownership: owner.h)
  step cuda_engine_test 240 "$BIN/cuda_engine_test"
  step mp_abort 120 "${M[@]}" "$BIN/mp_abort"
fi
if has latency; then
  step graph_latency 120 "$BIN/graph_latency" "${ITERS:-100}" "${BATCH:-20}"
  cat "$OUT/graph_latency.log"
fi
if has phases; then  # the graph path's phases (engine_debug.cpp, log_graph_trace): one node per call, then two
  if [ ! -x build-prof/bin/graph_latency ]; then  # else carried, built on the CPU machine
    step configure_prof 120 cmake -S . -B build-prof -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 \
      -DDFCCL_BUILD_PROBES=ON -DDFCCL_DEPS_PREFIX="$PWD/.deps" -DCMAKE_CUDA_FLAGS=-DDFCCL_PROFILE=1 \
      -DCMAKE_CXX_FLAGS=-DDFCCL_PROFILE=1
    step build_prof 400 cmake --build build-prof -j16 --target graph_latency
  fi
  for form in one two; do
    step "graph_phases_$form" 60 env DFCCL_DEBUG=INFO DFCCL_DEBUG_SUBSYS=ENGINE build-prof/bin/graph_latency \
      "${ITERS:-100}" "${BATCH:-20}" $form
    grep -E "graph path|dfccl graph" "$OUT/graph_phases_$form.log"
  done
fi
# harness: the latency sweep (dfccl eager and in graphs beside NCCL's two, one rank), the harness's GPU ctests, then
# two ranks under MPS; harness_sweeps: the two sweeps only.
if has harness || has harness_sweeps; then
  step harness_1rank 240 "$BIN/dfccl-harness" "${H[@]}" --backend dfccl,dfccl-graph,nccl,nccl-graph \
    --out "$OUT/graphs-1rank.h5"
  grep -E "^ +[0-9]|dfccl|nccl" "$OUT/harness_1rank.log" | head -40
  if has harness; then
    step ctest_harness 400 ctest --test-dir $B -R "harness_gpu_sweep|harness_gpu_graph_p2p" --timeout 280 \
      --output-on-failure
  fi
  mps_start
  step harness_2ranks_mps 300 "${M[@]}" "$BIN/dfccl-harness" "${H[@]}" --backend dfccl,dfccl-graph \
    --out "$OUT/graphs-2ranks-mps.h5"
  grep -E "^ +[0-9]" "$OUT/harness_2ranks_mps.log" | head -30
fi
if has waits; then  # dfcclWait by a polling kernel (1) and by a wait that stands in (2), twice each, beside NCCL eager
  for round in a b; do
    for wk in 1 2; do
      step "harness_wait$wk$round" 240 env DFCCL_WAIT_KERNEL=$wk "$BIN/dfccl-harness" "${H[@]}" --backend dfccl,nccl \
        --out "$OUT/wait$wk$round-1rank.h5"
      grep -E "^ +[0-9]|dfccl|nccl" "$OUT/harness_wait$wk$round.log" | head -16
    done
  done
fi
if has hostlat; then  # host completion (dfcclSynchronize) of host-ordered submissions beside NCCL eager, one rank
  step harness_hostlat 240 "$BIN/dfccl-harness" "${H[@]}" --backend dfccl,nccl --run.completion host --run.order host \
    --out "$OUT/hostlat-1rank.h5"
  grep -E "^ +[0-9]|dfccl|nccl" "$OUT/harness_hostlat.log" | head -40
fi
if has peers; then
  step ctest_peers 300 ctest --test-dir $B -R "peer_death_cuda|mismatch_hosts_cuda|device_fault_cuda" \
    --timeout 120 --output-on-failure
  grep -E "tests passed|Passed|Failed|\*\*\*" "$OUT/ctest_peers.log" | tail -12
fi
if has torch; then
  export DFCCL_TORCH_PYTHON=${DFCCL_TORCH_PYTHON:-$(command -v python3)} MAX_JOBS=16
  step ctest_torch 420 ctest --test-dir $B -R "${TORCH_TESTS:-python_build|python_gpt_3d_cuda|python_cuda_graphs}" \
    --timeout 400 --output-on-failure
  grep -E "tests passed|Passed|Failed|passed|failed" "$OUT/ctest_torch.log" | tail -12
fi
if has shrink; then  # dfcclCommShrink on the CUDA executor: forked ranks on GPU 0, one killed (shrink_test.*_cuda)
  step ctest_shrink 240 ctest --test-dir $B -R "shrink_test.*_cuda" --timeout 120 --output-on-failure
  grep -E "tests passed|Passed|Failed|\*\*\*" "$OUT/ctest_shrink.log" | tail -8
fi
cat "$OUT/summary.txt"
steps_status
