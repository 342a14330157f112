#!/usr/bin/env bash
# Two ranks on ONE GPU: the two-rank GPU checks for when only the one-GPU kind is lent (docs/gpu-runs.md, session 11).
# Both processes run on GPU 0 (the harness and `mp_collectives cuda-shared` put rank r on GPU r % n), their buffers
# mapped into each other through CUDA IPC as between two GPUs. Under MPS (started here with private pipe and log
# folders, stopped on exit) both daemons are resident at once, as on two GPUs; without it the GPU time-slices the two
# processes, and every exchange waits for a slice (the first step measures whether that still completes).
# What this covers: the two-rank protocol, the scheduler and the prefetcher with a real peer, preemption, exactness
# (odd element counts, float32 and bfloat16). What it does not: NVLink, another GPU's memory ordering (both ranks
# share one L2), any figure of speed; NCCL refuses two ranks on one GPU, so there is no NCCL beside it.
#   scripts/device/two_ranks_one_gpu.sh          ($BIN: dfccl-harness, mp_collectives; logs and HDF5 files in $OUT)
cd "$(dirname "$0")/../.."
. scripts/device/env.sh
M2=(mpirun --allow-run-as-root --bind-to none -np 2)
H=("${M2[@]}" "$BIN/dfccl-harness")
TRIALS=${TRIALS:-1000}
step timesliced_matrix 120 "${M2[@]}" "$BIN/mp_collectives" cuda-shared 20
if ! command -v nvidia-cuda-mps-control > /dev/null; then
  echo "no nvidia-cuda-mps-control: only the time-sliced step ran" | tee -a "$OUT/summary.txt"
  exit 0
fi
export CUDA_MPS_PIPE_DIRECTORY=/tmp/dfccl-mps-pipe CUDA_MPS_LOG_DIRECTORY=/tmp/dfccl-mps-log
mkdir -p "$CUDA_MPS_PIPE_DIRECTORY" "$CUDA_MPS_LOG_DIRECTORY"
nvidia-cuda-mps-control -d || { echo "MPS did not start" | tee -a "$OUT/summary.txt"; exit 1; }
trap 'echo quit | nvidia-cuda-mps-control' EXIT
step mps_matrix 300 "${M2[@]}" "$BIN/mp_collectives" cuda-shared 500
step mps_stress 300 "${H[@]}" --workload workloads/stress.toml --tp 2 --backend dfccl --trials "$TRIALS" --timeout 5 \
  --diagnose true --expect "deadlocked==0" --expect "wrong==0" --expect "skipped==0" --out "$OUT/stress-2ranks-1gpu.h5"
for t in float32 bfloat16; do
  # 12 B x 3^k, 12 B to 57 MiB: no size a multiple of 16 B; every collective, each size checked once
  step "mps_odd_$t" 300 "${H[@]}" --workload workloads/sweep.toml --backend dfccl --dtype "$t" --begin 12 \
    --factor 3 --end 100M --iters 3 --warmup 1 --expect "wrong==0" --expect "skipped==0" --out "$OUT/odd-$t-2ranks-1gpu.h5"
done
step mps_sweep 300 "${H[@]}" --workload workloads/sweep.toml --backend dfccl --end 256M --iters 5 --warmup 2 \
  --expect "wrong==0" --expect "skipped==0" --out "$OUT/sweep-2ranks-1gpu.h5"
for s in timesliced_matrix mps_matrix; do tail -1 "$OUT/$s.log" | tee -a "$OUT/summary.txt"; done
grep -hE "^# (dfccl|engine|Expectations)|expectation" "$OUT"/mps_*.log | tee -a "$OUT/summary.txt"
