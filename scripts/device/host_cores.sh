#!/usr/bin/env bash
# CPU ranks that outnumber the cores (issue: spin, then block): on the GPU machine's quiet CPUs, 8 torch ranks pinned
# to CORES (2 cores by default, as CI's machine) on CPU tensors: workloads/pytorch/small_allreduce.py and gpt_3d.py on
# dfccl (the host executor), on dfccl with DFCCL_HOST_SLEEP_NS=3600000000000 (its waits spin, as before spin-then-
# block) and on gloo, ROUNDS rounds alternating. Builds libdfccl and the dfccl_torch extension into build-dev first.
#   [CORES=0,1 ROUNDS=2 STEPS=10] scripts/device/host_cores.sh
# Logs, HDF5 files and summary.txt in $OUT.
cd "$(dirname "$0")/../.."
. scripts/device/env.sh
B=$PWD/build-dev
step configure 120 cmake -S . -B "$B" -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 \
  -DDFCCL_DEPS_PREFIX="$PWD/.deps"
step build 400 cmake --build "$B" -j16 --target dfccl_shared
export DFCCL_TORCH_PYTHON=${DFCCL_TORCH_PYTHON:-$(command -v python3)} MAX_JOBS=16
step python_build 300 tests/python/run_pytest.sh "$B" build
export PYTHONPATH=$B/python/lib:$PWD/workloads/pytorch PYTHONDONTWRITEBYTECODE=1 OMP_NUM_THREADS=1
T=(taskset -c "${CORES:-0,1}" python3 -m torch.distributed.run --standalone --nproc-per-node 8)
spin=DFCCL_HOST_SLEEP_NS=3600000000000
for r in $(seq 1 "${ROUNDS:-2}"); do
  for cfg in dfccl gloo spin; do
    b=$cfg e=()
    [ "$cfg" = spin ] && b=dfccl e=("$spin")
    step "small_${cfg}_$r" 240 env "${e[@]}" "${T[@]}" workloads/pytorch/small_allreduce.py --device cpu --backend "$b" \
      --steps "${STEPS:-10}" --warmup 2 --out "$OUT/small-$cfg-$r.h5"
    grep -h "us per all_reduce" "$OUT/small_${cfg}_$r.log"
  done
done
for cfg in dfccl gloo spin; do
  b=$cfg e=()
  [ "$cfg" = spin ] && b=dfccl e=("$spin")
  step "gpt3d_${cfg}" 300 env "${e[@]}" "${T[@]}" workloads/pytorch/gpt_3d.py --device cpu --backend "$b" --steps 5 \
    --warmup 1 --out "$OUT/gpt3d-cpu-$cfg.h5"
  grep -h "step time median" "$OUT/gpt3d_${cfg}.log"
done
cat "$OUT/summary.txt"
steps_status
