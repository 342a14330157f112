#!/usr/bin/env bash
# The slow first case of a collective's sweep (docs/lab/performance-log.md, 12; run 52: the 8 B rows at 74-122 us
# median, 17-22 us minimum), in one device call of about a minute. Run 55 ruled out the barrier probe and the
# switch between collectives (all-gather alone shows it too). What is left: a warm-up transient of the GPUs (clocks
# ramping up after the idle set-up of the case) or of the engine. Three all-gather sweeps, 8 B - 16 MiB, each in a
# fresh process: dfccl and NCCL with 3 warm-up iterations (per-iteration times in $OUT/*.h5, SM clocks sampled every
# 20 ms into clocks.csv), and dfccl with 300 warm-up iterations (a few ms of load before the timed ones).
#   scripts/device/first_case.sh
cd "$(dirname "$0")/../.."
. scripts/device/env.sh
H=("${MPIRUN[@]}" "$BIN/dfccl-harness" --overwrite --workload workloads/sweep.toml --end 16M --factor 8 --iters 10
  --collectives all_gather)
nvidia-smi --query-gpu=timestamp,index,clocks.sm,clocks.mem,power.draw --format=csv,noheader -lms 20 \
  > "$OUT/clocks.csv" 2>&1 &
smi=$!
date -u +"start %H:%M:%S.%N" >> "$OUT/clocks.csv"
step fc_dfccl 60 "${H[@]}" --warmup 3 --backend dfccl --out "$OUT/fc_dfccl.h5"
date -u +"dfccl done %H:%M:%S.%N" >> "$OUT/clocks.csv"
step fc_nccl 60 "${H[@]}" --warmup 3 --backend nccl --out "$OUT/fc_nccl.h5"
date -u +"nccl done %H:%M:%S.%N" >> "$OUT/clocks.csv"
step fc_dfccl_warm300 60 "${H[@]}" --warmup 300 --backend dfccl --out /tmp/fc_warm.h5
kill $smi
for t in fc_dfccl fc_nccl fc_dfccl_warm300; do
  awk -v t="$t" '!/^#/ && $10 == "all_gather" && $11 == "world" && ($1 == 8 || $1 == 64 || $1 == 512) {
    print t, $10, $1, "median", $6, "min", $12, "max", $13}' "$OUT/$t.log" | tee -a "$OUT/summary.txt"
done

steps_status
