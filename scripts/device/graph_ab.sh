#!/usr/bin/env bash
# The graph path on one GPU in one call (docs/lab/gpu-runs.md, 2026-12-07's last section): the one-GPU captured-call
# tests, the graph path's phases and an A/B of the graph node, two ranks replaying, the torch graph tests, the break
# check of the forked-stream wait. Everything is built on the CPU machine and carried packed (carry.sh).
#   scripts/device/graph_ab.sh prepare   (CPU machine, about 20 minutes) builds build-dev's test binaries, the profile
#                                        build (build-prof), one graph_latency per patch of docs/lab/patches named
#                                        below (build-ab-<patch>, from a worktree of HEAD), the break check's
#                                        cuda_one_gpu_test (build-ab-graph_wait_break), and the torch extension; packs
#   [T=480] scripts/device/graph_ab.sh run   (GPU machine; carry .deps and build-dev/pack) runs the steps in priority
#                                        order, each only while T seconds allow; logs in $OUT
set -euo pipefail
cd "$(dirname "$0")/../.."
root=$PWD
ab_patches="graph_node_one_block graph_node_others_leave graph_post_round_trips graph_wait_fence_device"
cmake_args=(-DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 -DDFCCL_BUILD_PROBES=ON
  -DDFCCL_DEPS_PREFIX="$root/.deps")

# build_patched <patch> <target>: builds <target> from HEAD with docs/lab/patches/<patch>.patch applied, into
# build-ab-<patch>.
build_patched() {
  local wt=/tmp/dfccl-ab-$1
  git worktree remove --force "$wt" 2> /dev/null || true
  git worktree add -q --detach "$wt" HEAD
  git -C "$wt" apply "$root/docs/lab/patches/$1.patch"
  cmake -S "$wt" -B "build-ab-$1" "${cmake_args[@]}" > /dev/null
  cmake --build "build-ab-$1" -j2 --target "$2"
  git worktree remove --force "$wt"
}

if [ "${1:-}" = prepare ]; then
  cmake -S . -B build-dev "${cmake_args[@]}" > /dev/null
  cmake --build build-dev -j2 --target cuda_one_gpu_test mp_graph graph_latency
  cmake -S . -B build-prof "${cmake_args[@]}" -DCMAKE_CUDA_FLAGS=-DDFCCL_PROFILE=1 \
    -DCMAKE_CXX_FLAGS=-DDFCCL_PROFILE=1 > /dev/null
  cmake --build build-prof -j2 --target graph_latency
  for p in $ab_patches; do build_patched "$p" graph_latency; done
  build_patched graph_wait_break cuda_one_gpu_test
  dirs=(build-dev build-prof)
  for p in $ab_patches graph_wait_break; do dirs+=("build-ab-$p"); done
  scripts/device/carry.sh pack "${dirs[@]}"
  scripts/device/carry.sh torch
  exit 0
fi
[ "${1:-}" = run ] || { echo "usage: graph_ab.sh prepare | run" >&2; exit 2; }
set +e  # a failed step is recorded and the next one runs

scripts/device/carry.sh unpack
. scripts/device/env.sh
O=$OUT
T=${T:-480}
left() { [ $((T - SECONDS)) -gt "$1" ]; }
nvidia-smi -L | tee "$O/ab.log"
# 1. Every captured call without a request is one node (377b5c3): the one-GPU tests.
step cuda_one_gpu_test $((T / 3 < 120 ? T / 3 : 120)) build-dev/bin/cuda_one_gpu_test
# 2. The phases of one node per call and of two, then the node A/B (the patched nodes cannot stand in: the daemon
# stays, DFCCL_IDLE_NS, and the probe's full mode starts it with its eager part first); last, the node when no
# daemon stays between instances (DFCCL_IDLE_NS=0): each node stands in and runs its own.
left 40 && OUT=$O/phases timeout 60 scripts/device/graphs.sh phases
for run in build-dev:10000000000 $(for p in $ab_patches; do echo "build-ab-$p:10000000000"; done) build-dev:0; do
  left 25 || break
  echo "== ${run%:*} (DFCCL_IDLE_NS=${run#*:})" >> "$O/ab.log"
  DFCCL_IDLE_NS=${run#*:} timeout 25 "${run%:*}/bin/graph_latency" 50 20 >> "$O/ab.log" 2>&1
done
# 3. Two ranks replaying, the forms without a request (one node per call: joined, p2p) first; then the torch graph
# tests, with the extension carry.sh built for this machine's Python.
left 100 && OUT=$O/mp REPLAYS=1000 MP_S=30 MODES="joined p2p deferred forked" timeout 100 scripts/device/graphs.sh mp
left 60 && LD_LIBRARY_PATH=$PWD/build-dev/lib:${LD_LIBRARY_PATH:-} DFCCL_TORCH_PYTHON=$(command -v python3) \
  step torch $((T - SECONDS - 40)) bash tests/python/run_pytest.sh build-dev --device cuda python/tests/test_cuda_graphs.py
# 4. The break check: without the start-node dependency and with every wait standing in, the forked-stream test
# must fail.
if left 20; then
  echo "== break check" >> "$O/ab.log"
  timeout $((T - SECONDS - 5)) build-ab-graph_wait_break/bin/cuda_one_gpu_test \
    --gtest_filter='*CapturedWaitsOnAForkedStream*' --gtest_repeat=3 2>&1 | grep -E "OK \]|FAILED|Failure|pending" |
    head -8 >> "$O/ab.log" || true
fi
cat "$O/ab.log"
echo "graph_ab.sh: $SECONDS s"
# At most 8 files come back from a call: everything but ab.log and the steps' summary.txt in one archive.
(cd "$O" && find . -type f ! -name ab.log ! -path ./summary.txt ! -path ./all.tgz -print0 |
  tar czf all.tgz --null -T - --remove-files)
