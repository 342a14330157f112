#!/usr/bin/env bash
# The graph path on one GPU in one call (docs/lab/gpu-runs.md, runs 261-262): the one-GPU captured-call tests, the
# torch graph tests, two ranks replaying, the graph path's phases and an A/B of the graph node, the latency sweeps,
# the break check of the forked-stream wait. Everything is built on the CPU machine and carried packed (carry.sh).
#   [AB_BASE=<commit>] scripts/device/graph_ab.sh prepare
#                                        (CPU machine, about 20 minutes) builds build-dev's test binaries, the profile
#                                        build (build-prof), one graph_latency per patch of docs/lab/patches named
#                                        below (build-ab-<patch>, from a worktree of HEAD) and, with AB_BASE, one at
#                                        that commit (build-ab-base), the break check's cuda_one_gpu_test
#                                        (build-ab-graph_wait_break), and the torch extension; packs
#   [T=480] scripts/device/graph_ab.sh run   (GPU machine; carry .deps and build-dev/pack) runs the steps in priority
#                                        order, each only while T seconds allow; logs in $OUT
set -euo pipefail
cd "$(dirname "$0")/../.."
root=$PWD
ab_patches="graph_node_one_block graph_node_others_leave"
cmake_args=(-DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 -DDFCCL_BUILD_PROBES=ON
  -DDFCCL_DEPS_PREFIX="$root/.deps")

# build_at <name> <commit> <patch or -> <target>: builds <target> from <commit>, with docs/lab/patches/<patch>.patch
# applied unless -, into build-ab-<name>.
build_at() {
  local wt=/tmp/dfccl-ab-$1
  git worktree remove --force "$wt" 2> /dev/null || true
  git worktree add -q --detach "$wt" "$2"
  if [ "$3" != - ]; then git -C "$wt" apply "$root/docs/lab/patches/$3.patch"; fi
  cmake -S "$wt" -B "build-ab-$1" "${cmake_args[@]}" > /dev/null
  cmake --build "build-ab-$1" -j2 --target "$4"
  git worktree remove --force "$wt"
}

if [ "${1:-}" = prepare ]; then
  cmake -S . -B build-dev "${cmake_args[@]}" > /dev/null
  cmake --build build-dev -j2 --target cuda_one_gpu_test mp_graph graph_latency dfccl-harness
  cmake -S . -B build-prof "${cmake_args[@]}" -DCMAKE_CUDA_FLAGS=-DDFCCL_PROFILE=1 \
    -DCMAKE_CXX_FLAGS=-DDFCCL_PROFILE=1 > /dev/null
  cmake --build build-prof -j2 --target graph_latency
  for p in $ab_patches; do build_at "$p" HEAD "$p" graph_latency; done
  build_at graph_wait_break HEAD graph_wait_break cuda_one_gpu_test
  dirs=(build-dev build-prof)
  for p in $ab_patches graph_wait_break; do dirs+=("build-ab-$p"); done
  if [ -n "${AB_BASE:-}" ]; then
    build_at base "$AB_BASE" - graph_latency
    dirs+=(build-ab-base)
  fi
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
# 1. The one-GPU tests of captured calls, then the torch graph tests three times (torch's CUDA-graph trees once found
# a tensor of a waited work still alive: run 250, 36d16ec).
step cuda_one_gpu_test $((T / 3 < 120 ? T / 3 : 120)) build-dev/bin/cuda_one_gpu_test
left 60 && step_torch_graphs 3 $((T / 3 < 150 ? T / 3 : 150))
# 2. Two ranks replaying 1000 times: the forms without a request (one node per call: joined, p2p), then deferred
# waits and forked streams; the blocking mode must hang on the same program.
left 100 && OUT=$O/mp REPLAYS=1000 MP_S=30 MODES="joined p2p deferred forked" timeout 100 scripts/device/graphs.sh mp
# 3. The phases of one node per call and of two, then the A/B of graph_latency: HEAD against build-ab-base (three
# pairs, when built), then each measurement patch once (the patched nodes cannot stand in: the daemon stays,
# DFCCL_IDLE_NS, and the probe's full mode starts it with its eager part first).
left 40 && OUT=$O/phases timeout 60 scripts/device/graphs.sh phases
rows="build-dev"
[ -x build-ab-base/bin/graph_latency ] && rows="build-ab-base build-dev build-ab-base build-dev build-ab-base build-dev"
for p in $ab_patches; do rows+=" build-ab-$p"; done
for run in $rows; do
  left 25 || break
  echo "== $run" >> "$O/ab.log"
  DFCCL_IDLE_NS=10000000000 timeout 25 "$run/bin/graph_latency" 50 20 >> "$O/ab.log" 2>&1
done
# 4. The latency sweep beside NCCL (8 B to 1 MiB, one rank), then two ranks under MPS, eager against in a graph.
left 150 && OUT=$O/harness timeout 240 scripts/device/graphs.sh harness_sweeps
# 5. The break check: without the start-node dependency and with every wait standing in, the forked-stream test
# must fail or hang (then killed after 30 s).
if left 40; then
  t0=$SECONDS
  timeout 30 build-ab-graph_wait_break/bin/cuda_one_gpu_test --gtest_filter='*CapturedWaitsOnAForkedStream*' \
    --gtest_repeat=3 > "$O/break_check.log" 2>&1
  echo "== break check: rc=$? after $((SECONDS - t0)) s (124: killed, hung)" >> "$O/ab.log"
  grep -E "RUN|OK \]|FAILED|Failure|pending" "$O/break_check.log" | head -8 >> "$O/ab.log"
fi
cat "$O/ab.log"
echo "graph_ab.sh: $SECONDS s"
# At most 8 files come back from a call: everything but ab.log and the steps' summary.txt in one archive.
(cd "$O" && find . -type f ! -name ab.log ! -path ./summary.txt ! -path ./all.tgz -print0 |
  tar czf all.tgz --null -T - --remove-files)
