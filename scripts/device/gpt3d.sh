#!/usr/bin/env bash
# The 3D-parallel GPT (workloads/pytorch/gpt_3d.py) on CUDA tensors, ranks time-sliced on the one GPU: dfccl over 20
# steps against the one-process reference, plain and with --disorder, the disorder run repeated, and NCCL on the same
# program (each rank its own NCCL_HOSTID, so that NCCL takes the ranks sharing one GPU for hosts of their own).
# Needs the build of `scripts/device/graphs.sh build torch` (build-dev with the dfccl_torch extension).
#   [STEPS=20 REPS=20 REPS_S=240] scripts/device/gpt3d.sh
# Logs, HDF5 files and summary.txt in $OUT.
cd "$(dirname "$0")/../.."
. scripts/device/env.sh
B=$PWD/build-dev
export PYTHONPATH=$B/python/lib${PYTHONPATH:+:$PYTHONPATH} PYTHONDONTWRITEBYTECODE=1 OMP_NUM_THREADS=1
G=(workloads/pytorch/gpt_3d.py --device cuda --warmup 0 --steps "${STEPS:-20}" --timeout 60)
T=(python3 -m torch.distributed.run --standalone --nproc-per-node)
step gpt3d_dfccl 300 "${T[@]}" 8 "${G[@]}" --check --out "$OUT/gpt3d-dfccl.h5"
step gpt3d_dfccl_disorder 300 "${T[@]}" 8 "${G[@]}" --schedule interleaved --disorder --check \
  --out "$OUT/gpt3d-dfccl-disorder.h5"
grep -h "largest relative difference\|step time" "$OUT"/gpt3d_dfccl*.log | tail -6
# NCCL: one process per rank under mpirun, each with a host id of its own (NCCL refuses two ranks on one GPU of one
# host); the plain run, then the disorder run (expected to hang until the process group's timeout).
N=(mpirun --allow-run-as-root --oversubscribe --bind-to none -np 8 -x NCCL_NVLS_ENABLE=0 -x PYTHONPATH
  -x OMP_NUM_THREADS -x LD_LIBRARY_PATH bash -c 'NCCL_HOSTID=gpt3d-$OMPI_COMM_WORLD_RANK exec python3 "$@"' nccl)
step gpt3d_nccl 300 "${N[@]}" "${G[@]}" --backend nccl --check --out "$OUT/gpt3d-nccl.h5"
step gpt3d_nccl_disorder 150 "${N[@]}" "${G[@]}" --backend nccl --schedule interleaved --disorder --steps 2 \
  --out "$OUT/gpt3d-nccl-disorder.h5"
grep -h "largest relative difference\|Error\|error\|hang\|Watchdog" "$OUT"/gpt3d_nccl*.log | tail -8
# The disorder run repeated (4 ranks: two replicas x two stages, tp 1, 2 steps), within REPS_S seconds.
t0=$SECONDS
for i in $(seq 1 "${REPS:-20}"); do
  ((SECONDS - t0 > ${REPS_S:-240})) && break
  step "gpt3d_disorder_rep$i" 120 "${T[@]}" 4 "${G[@]}" --tp 1 --steps 2 --schedule interleaved --disorder --check \
    --seq 16 --batch 8 --microbatches 2 --out "$OUT/rep.h5"
done
grep -c "gpt3d_disorder_rep.* rc=0 " "$OUT/summary.txt" | sed 's/^/disorder repetitions passed: /'
cat "$OUT/summary.txt"
steps_status
