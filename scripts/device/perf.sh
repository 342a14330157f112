#!/usr/bin/env bash
# The performance measurements of docs/lab/performance-log.md in one device call (about 6 minutes), each beside its
# correctness: first a GEMM beside an idle engine, then the one-process latency split, the full sweep (every
# collective, float32) with dfccl and NCCL, the all-reduce sweep in blocking mode (what preemption costs on an
# in-order workload, same build), in bfloat16, with host completion (dfcclSynchronize) and with callback completion
# (dfcclRequestSetCallback) up to 64 MiB, then the engine tests, the collective matrix and the dfccl stress.
# The sweeps run 20 warm-up iterations per case: in the first cases of a process both backends, NCCL as well, show
# iterations of about 120 us for up to ten iterations (docs/lab/performance-log.md, 12; scripts/device/first_case.sh).
# They are timed as nccl-tests does (`--timing batch`: events only around batches of 20 iterations; an event between
# small operations costs about 3 us of the GPU's timeline, docs/lab/performance-log.md, 14); the host-completion sweep
# keeps a host clock around every iteration (its latency, no events). `stream_loop` puts both timings side by side
# for dfccl and NCCL at 8 B and 64 KiB. The latency sweep (all-reduce, 8 B – 1 MiB) adds NCCL with CUDA graphs
# (backend nccl-graph: each batch captured and replayed once, nccl-tests -G) beside eager NCCL and dfccl.
# Binaries in $BIN (default .device/bin): dfccl-harness, cuda_engine_test, mp_collectives, latency_split,
# stream_loop and gemm_beside_engine (the last three from a build with -DDFCCL_BUILD_PROBES=ON, scripts/probes/).
# At most 8 files come back: the HDF5 files (six; the callback-completion one goes into logs.tgz), logs.tgz and
# summary.txt.
#   scripts/device/perf.sh
cd "$(dirname "$0")/../.."
. scripts/device/env.sh
H=("${MPIRUN[@]}" "$BIN/dfccl-harness" --overwrite)
T=(--timing batch --batch 20 --iters 40 --warmup 20)
step gemm 60 "$BIN/gemm_beside_engine" 3
step gemm_resident 60 env DFCCL_IDLE_NS=10000000000 "$BIN/gemm_beside_engine" 2
step latency_split 60 "$BIN/latency_split" 100
step stream_loop 60 "$BIN/stream_loop" 2000
step sweep_float32 360 "${H[@]}" --workload workloads/sweep.toml --backend dfccl,nccl "${T[@]}" \
  --out "$OUT/sweep-2xH200.h5"
step sweep_latency 120 "${H[@]}" --workload workloads/sweep.toml --backend dfccl,nccl,nccl-graph \
  --collectives all_reduce --begin 8 --end 1M "${T[@]}" --out "$OUT/sweep-latency-2xH200.h5"
step sweep_blocking 120 "${H[@]}" --workload workloads/sweep.toml --backend dfccl,dfccl-blocking \
  --collectives all_reduce "${T[@]}" --out "$OUT/sweep-blocking-2xH200.h5"
step sweep_bfloat16 120 "${H[@]}" --workload workloads/sweep.toml --backend dfccl,nccl --collectives all_reduce \
  --dtype bfloat16 "${T[@]}" --out "$OUT/sweep-bfloat16-2xH200.h5"
step sweep_host 60 "${H[@]}" --workload workloads/sweep.toml --backend dfccl --collectives all_reduce --end 64M \
  --completion host --iters 20 --warmup 20 --out "$OUT/sweep-host-completion-2xH200.h5"
step sweep_callback 60 "${H[@]}" --workload workloads/sweep.toml --backend dfccl --collectives all_reduce --end 64M \
  --completion callback --iters 20 --warmup 20 --out "$OUT/sweep-callback-completion-2xH200.h5"
step engine 80 "$BIN/cuda_engine_test"
step matrix 60 "${MPIRUN[@]}" "$BIN/mp_collectives" cuda 100
step stress 90 "${H[@]}" --workload workloads/stress.toml --tp 2 --backend dfccl --trials 1000 --timeout 5 \
  --diagnose true --out "$OUT/stress-dfccl-2xH200.h5"
cat "$OUT/gemm.log" "$OUT/gemm_resident.log" "$OUT/latency_split.log" "$OUT/stream_loop.log" | tee -a "$OUT/summary.txt"
grep -E "PASSED|FAILED" "$OUT/engine.log" "$OUT/matrix.log" | tee -a "$OUT/summary.txt"
grep -E "^# (dfccl|engine)" "$OUT/stress.log" | tee -a "$OUT/summary.txt"
for t in float32 latency blocking bfloat16 host callback; do
  awk -v t="$t" '/^# backend /{b = $3}
    !/^#/ && $11 == "world" && $1 ~ /^(8|65536|1048576|8388608|134217728|268435456|1073741824)$/ {
      print t, b, $10, $1, $6, $8}' \
    "$OUT/sweep_$t.log" | tee -a "$OUT/summary.txt"
done
cb=sweep-callback-completion-2xH200.h5
(cd "$OUT" && tar czf logs.tgz ./*.log $(ls $cb 2>/dev/null) && rm -f ./*.log $cb)

steps_status
