# Sourced by the device scripts: NCCL from PyTorch's package, NVLink multicast off, mpirun flags for root.
export NCCL_NVLS_ENABLE=0
nccl_dir=$(python3 -c "import nvidia.nccl as m; print(list(m.__path__)[0])" 2>/dev/null || true)
[ -n "$nccl_dir" ] && export LD_LIBRARY_PATH="$nccl_dir/lib:${LD_LIBRARY_PATH:-}"
MPIRUN=(mpirun --allow-run-as-root --bind-to none -np "${NP:-2}")
BIN=${BIN:-.device/bin}
OUT=${OUT:-/tmp/dfccl-out}
mkdir -p "$OUT"
# step <name> <timeout s> <command...>: runs a command into $OUT/<name>.log and appends its status to summary.txt;
# a status other than 0 and 77 (skipped) is counted in step_failures, which the scripts turn into their exit status
# (steps_status).
step_failures=0
step() {  # step <name> <timeout s> <command...>
  local name=$1 t=$2
  shift 2
  local t0=$SECONDS
  timeout -k 10 "$t" "$@" > "$OUT/$name.log" 2>&1
  local rc=$?
  echo "== $name rc=$rc $((SECONDS - t0)) s" | tee -a "$OUT/summary.txt"
  if [ "$rc" -ne 0 ] && [ "$rc" -ne 77 ]; then step_failures=$((step_failures + 1)); fi
}
# step_torch_graphs <runs> <timeout s>: step "torch": the torch graph tests (python/tests/test_cuda_graphs.py) <runs>
# times in a row, stopping at the first failure, with the build-dev extension that carry.sh built for this machine's
# Python.
step_torch_graphs() {
  LD_LIBRARY_PATH=$PWD/build-dev/lib:${LD_LIBRARY_PATH:-} DFCCL_TORCH_PYTHON=$(command -v python3) step torch "$2" \
    bash -c 'for i in $(seq "$0"); do
      bash tests/python/run_pytest.sh build-dev --device cuda "$PWD/python/tests/test_cuda_graphs.py" -rA || exit
    done' "$1"
}
# steps_status: the exit status of a script made of steps (1 if any failed), once the steps' logs are packed into
# $OUT/logs.tgz (at most 8 files come back from a device call).
steps_status() {
  (cd "$OUT" && ls ./*.log > /dev/null 2>&1 && tar czf logs.tgz ./*.log && rm -f ./*.log)
  [ "$step_failures" -eq 0 ] || { echo "FAILED: $step_failures step(s)" | tee -a "$OUT/summary.txt"; return 1; }
}
# mps_start: runs the following processes of this script under MPS (private pipe and log folders, so that nothing
# of the machine's is touched), and stops it when the script exits. For several ranks on one GPU
# (ab.sh, mps.sh; under MPS dfcclWait waits on the host unless DFCCL_MPS_WAIT=stream: docs/design.md, "Several
# processes on one GPU").
mps_start() {
  export CUDA_MPS_PIPE_DIRECTORY=/tmp/dfccl-mps-pipe CUDA_MPS_LOG_DIRECTORY=/tmp/dfccl-mps-log
  mkdir -p "$CUDA_MPS_PIPE_DIRECTORY" "$CUDA_MPS_LOG_DIRECTORY"
  nvidia-cuda-mps-control -d || { echo "MPS did not start" | tee -a "$OUT/summary.txt"; exit 1; }
  trap 'echo quit | nvidia-cuda-mps-control' EXIT
}
# mps_restart: after a step that hung under MPS (the server then refuses new clients: "busy or unavailable"),
# stops the server and its leftover clients and starts it again.
mps_restart() {
  echo quit | nvidia-cuda-mps-control
  sleep 2
  pkill -9 -x dfccl-harness; pkill -9 -f '^[^ ]*nvidia-cuda-mps-server'
  sleep 1
  nvidia-cuda-mps-control -d || echo "MPS did not restart" | tee -a "$OUT/summary.txt"
}
# harness_with_env <dir> <binary folder> <VAR=value>...: makes <dir>/dfccl-harness, which runs the harness of
# <binary folder> with those variables set: one side of scripts/device/ab.sh's A/B (A=<dir> or B=<dir>).
harness_with_env() {
  local dir=$1 bin
  bin=$(cd "$2" && pwd)
  shift 2
  mkdir -p "$dir"
  printf '#!/bin/sh\nexec env %s %s/dfccl-harness "$@"\n' "$*" "$bin" > "$dir/dfccl-harness"
  chmod +x "$dir/dfccl-harness"
}
# UCX for the network transport: the machine's, else the copy that scripts/device/pack_ucx.sh put into .deps/ucx.
if ! pkg-config --exists ucx 2>/dev/null && [ -d .deps/ucx ]; then
  export PKG_CONFIG_PATH="$PWD/.deps/ucx/lib/pkgconfig:${PKG_CONFIG_PATH:-}"
  export LD_LIBRARY_PATH="$PWD/.deps/ucx/lib:${LD_LIBRARY_PATH:-}"
fi
