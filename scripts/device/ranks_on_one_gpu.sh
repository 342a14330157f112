#!/usr/bin/env bash
# Several ranks on ONE GPU: the multi-rank GPU checks for when only the one-GPU kind is lent (docs/lab/gpu-runs.md,
# runs 99-107, 2026-12-01). All NP processes run on GPU 0 (the harness and `mp_collectives cuda-shared` put rank r on GPU r % n),
# their buffers mapped into each other through CUDA IPC as between GPUs; each process has its own CUDA context, and
# the GPU time-slices the contexts, so every exchange between ranks waits for a time slice: slow, but each context
# keeps the semantics it has on a GPU of its own (its implicit synchronizations hold only its own work).
# MPS=1 runs the processes under MPS instead (started here with private pipe and log folders, stopped on exit): the
# daemons are then resident together and it is much faster, but MPS couples the clients' stream waits, which
# separate GPUs never do: with DFCCL_MPS_WAIT=stream the stress workload deadlocks there in a few trials per thousand
# (runs 100-116, 227); by default dfcclWait then waits on the host and it completes (run 228; docs/design.md,
# "Several processes on one GPU"). Time-sliced runs keep each rank's stream waits as on a GPU of its own.
# What this covers: the ring and its protocol with real peers (NP = 2, 4 or 8: rings of more than two ranks on the
# CUDA executor), the scheduler and the prefetcher, preemption under the stress workload's disorder and implicit
# synchronizations, exactness at sizes that are not multiples of 16 B (float32, bfloat16), the gpt2-3d layout with
# NP = 4 or 8. What it does not: NVLink, memory ordering between GPUs (all ranks share one L2), any figure of speed;
# NCCL refuses two ranks on one GPU, so there is no NCCL beside it.
#   NP=4 scripts/device/ranks_on_one_gpu.sh     ($BIN: dfccl-harness, mp_collectives; logs and HDF5 files in $OUT)
# TRIALS (stress, default 1000), MATRIX_TRIALS (mp_collectives' stress, 200), ODD_END (100M), SWEEP_END (256M).
# With NP > 2 each daemon gets 128 / NP blocks (DFCCL_BLOCKS). DFCCL_P2P_DISABLE=1 runs everything over the host
# path (connection regions in shared host memory; run 117).
cd "$(dirname "$0")/../.."
. scripts/device/env.sh
NP=${NP:-2}
[ "$NP" -gt 2 ] && export DFCCL_BLOCKS=$((128 / NP))
M=(mpirun --allow-run-as-root --oversubscribe --bind-to none -np "$NP" -x DFCCL_BLOCKS)
tag=${NP}ranks-1gpu
if [ "${DFCCL_P2P_DISABLE:-0}" = 1 ]; then
  export DFCCL_P2P_DISABLE
  M+=(-x DFCCL_P2P_DISABLE)
  tag=$tag-hostpath
fi
H=("${M[@]}" "$BIN/dfccl-harness" --overwrite)
X=(--expect "wrong==0" --expect "skipped==0" --expect "deadlocked==0" --expect "failed==0")
if [ "${MPS:-0}" = 1 ]; then
  tag=$tag-mps
  mps_start
fi
step "$tag-matrix" 300 "${M[@]}" "$BIN/mp_collectives" cuda-shared "${MATRIX_TRIALS:-200}"
step "$tag-stress" 600 "${H[@]}" --workload workloads/stress.toml --tp 2 --backend dfccl --trials "${TRIALS:-1000}" \
  --timeout 5 --diagnose true "${X[@]}" --out "$OUT/stress-$tag.h5"
if [ "$NP" -ge 4 ]; then
  pp=$((NP >= 8 ? 2 : 1))
  step "$tag-gpt2" 300 "${H[@]}" --workload workloads/gpt2-3d.toml --backend dfccl --tp 2 --pp "$pp" "${X[@]}" \
    --out "$OUT/gpt2-3d-$tag.h5"
fi
for t in float32 bfloat16; do
  # 12 B x 3^k: no size a multiple of 16 B; every collective, each size checked once
  step "$tag-odd-$t" 300 "${H[@]}" --workload workloads/sweep.toml --backend dfccl --dtype "$t" --begin 12 \
    --factor 3 --end "${ODD_END:-100M}" --iters 3 --warmup 1 "${X[@]}" --out "$OUT/odd-$t-$tag.h5"
done
step "$tag-sweep" 300 "${H[@]}" --workload workloads/sweep.toml --backend dfccl --end "${SWEEP_END:-256M}" --iters 5 \
  --warmup 2 "${X[@]}" --out "$OUT/sweep-$tag.h5"
tail -qn1 "$OUT/$tag-matrix.log" | tee -a "$OUT/summary.txt"
grep -hE "^# (dfccl-harness|dfccl:|engine|Expectations)|xpectation" "$OUT/$tag"-*.log | tee -a "$OUT/summary.txt"
steps_status
