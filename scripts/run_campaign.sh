#!/usr/bin/env bash
# The standard campaign (`make run`): runs the shipped workloads on what this machine has and plots the results.
#   GPUs present: every workload on dfccl and nccl, one rank per GPU (the sweep with batch timing).
#   no GPU:       the host executor (host, host-blocking): sweep and stress, CI-sized; DFCCL_CAMPAIGN=full adds the
#                 model workloads.
# Usage: scripts/run_campaign.sh [results dir]   (default results/campaign-<UTC time>)
# Environment: NP (ranks), MPIRUN_FLAGS (extra mpirun flags), DFCCL_CAMPAIGN=quick|full, HARNESS (the binary).
set -euo pipefail
cd "$(dirname "$0")/.."

out=${1:-results/campaign-$(date -u +%Y%m%dT%H%M%SZ)}
harness=${HARNESS:-build/bin/dfccl-harness}
campaign=${DFCCL_CAMPAIGN:-quick}
if [ ! -x "$harness" ]; then
  echo "run_campaign: $harness not built (run make)" >&2
  exit 1
fi
mkdir -p "$out"

ngpu=0
if command -v nvidia-smi >/dev/null 2>&1; then
  ngpu=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU' || true)
fi

flags=(--bind-to none)
[ "$(id -u)" = 0 ] && flags+=(--allow-run-as-root)
if [ "$ngpu" -gt 0 ]; then
  np=${NP:-$ngpu}
  backends=dfccl,nccl
else
  np=${NP:-4}
  backends=host,host-blocking
  flags+=(--oversubscribe)
fi
# shellcheck disable=SC2206
flags+=(${MPIRUN_FLAGS:-})
tp=1
[ $((np % 2)) -eq 0 ] && tp=2

failed=()  # workloads whose harness exited non-zero (3: wrong elements, 1: an expectation, 2: bad input)
run() {  # run <workload> [overrides...]: goes on after a failure, which the campaign's exit status reports
  local name=$1
  shift
  echo "== $name: mpirun -np $np $harness --workload workloads/$name.toml --backend $backends $*"
  mpirun -np "$np" "${flags[@]}" "$harness" --overwrite --workload "workloads/$name.toml" --backend "$backends" \
    --out "$out/$name.h5" "$@" 2>&1 | tee "$out/$name.log"
  local rc=${PIPESTATUS[0]}
  if [ "$rc" -ne 0 ]; then
    echo "run_campaign: $name exited with status $rc (see $out/$name.log)"
    failed+=("$name:$rc")
  fi
}

echo "run_campaign: $np ranks, $ngpu GPUs, backends $backends, campaign $campaign, results in $out"
if [ "$ngpu" -gt 0 ]; then
  # Timed as nccl-tests does (events around batches of 20 iterations), as docs/results.md's tables: an event per
  # iteration inflates small sizes, NCCL's more than dfccl's (docs/harness.md, "Timing").
  run sweep --timing batch --batch 20 --iters 40 --warmup 20
  run stress --tp "$tp"
  run resnet50-dp
  pp=1
  [ $((np % 4)) -eq 0 ] && pp=2
  run gpt2-3d --tp "$tp" --pp "$pp"
else
  run sweep --end 1M --iters 5 --warmup 1
  run stress --tp "$tp" --trials 20 --timeout 3
  if [ "$campaign" = full ]; then
    run resnet50-dp --iters 3 --warmup 1 --compute.duration_us 0
    pp=1
    [ $((np % 4)) -eq 0 ] && pp=2
    run gpt2-3d --tp "$tp" --pp "$pp" --iters 2 --warmup 0 --compute.duration_us 0
  fi
fi

if scripts/python.sh scripts/plot_harness.py "$out"/*.h5 --out "$out/plots"; then
  echo "run_campaign: plots in $out/plots"
else
  echo "run_campaign: plotting failed (scripts/python.sh needs python3 with h5py, numpy, pandas and matplotlib)"
fi
echo "run_campaign: results (HDF5, logs) in $out"
if ((${#failed[@]} > 0)); then
  echo "run_campaign: FAILED: ${failed[*]}"
  exit 1
fi
