#!/usr/bin/env bash
# All-reduce bandwidth of dfccl under several transport settings (environment variables) and build variants
# (binaries built with -DDFCCL_COPY_UNROLL=8 or -DDFCCL_MAX_THREADS=1024, in $BIN/unroll8 and $BIN/threads1024 when
# present), NCCL beside them. Results in $OUT/ar_<config>.h5 and .log; a table on stdout.
#   SET=28|29|57|58|59 scripts/device/allreduce_configs.sh (GPU machine; SET picks the list, default 29)
cd "$(dirname "$0")/../.."
. scripts/device/env.sh
sweep=(--workload workloads/sweep.toml --collectives all_reduce --begin 1M --end 1G --factor 4 --iters 10 --warmup 3)
run() {  # run <name> <binary dir> <backend> [VAR=value ...]
  local name=$1 bin=$2 backend=$3
  shift 3
  [ -x "$bin/dfccl-harness" ] || { echo "== $name: no $bin/dfccl-harness"; return; }
  env "$@" timeout 120 "${MPIRUN[@]}" "$bin/dfccl-harness" "${sweep[@]}" --backend "$backend" --out "$OUT/ar_$name.h5" \
    > "$OUT/ar_$name.log" 2>&1
  echo "== $name ($backend $*) rc=$?"
  grep -E "^ +all_reduce" "$OUT/ar_$name.log" | awk '{printf "  %12s bytes  %9s us  busbw %7s GB/s\n", $3, $8, $10}'
}
# SET=57: how many channels carry an all-reduce of 1-64 MiB (DFCCL_MIN_CHAN_BYTES; 128 blocks, the defaults).
if [ "${SET:-29}" = 57 ]; then
  sweep=(--workload workloads/sweep.toml --collectives all_reduce --begin 1M --end 64M --factor 2 --iters 20 --warmup 5)
  run nccl "$BIN" nccl
  for m in 32768 65536 131072 262144 16384; do run "minchan$m" "$BIN" dfccl DFCCL_MIN_CHAN_BYTES=$m; done
  exit 0
fi
# SET=58: slots per lane and lanes at 128 blocks x 128 KiB (run 52's defaults: 4 slots, 4 lanes).
if [ "${SET:-29}" = 58 ]; then
  sweep=(--workload workloads/sweep.toml --collectives all_reduce --begin 4M --end 1G --factor 4 --iters 20 --warmup 10)
  run nccl "$BIN" nccl
  run slots4 "$BIN" dfccl
  run slots8 "$BIN" dfccl DFCCL_SLOTS=8
  run slots8_lanes2 "$BIN" dfccl DFCCL_SLOTS=8 DFCCL_LANES=2
  run slots6 "$BIN" dfccl DFCCL_SLOTS=6
  run slots4_again "$BIN" dfccl
  exit 0
fi
# SET=59: slot size at 128 blocks x 4 slots (run 52's default: 128 KiB).
if [ "${SET:-29}" = 59 ]; then
  sweep=(--workload workloads/sweep.toml --collectives all_reduce --begin 16M --end 1G --factor 4 --iters 20 --warmup 10)
  run nccl "$BIN" nccl
  for b in 131072 65536 98304 196608 131072; do run "slot$b" "$BIN" dfccl DFCCL_SLOT_BYTES=$b; done
  exit 0
fi
# Run 28: transport shapes (slot size, slots, blocks) and two build variants; run 29: the shapes near the best.
if [ "${SET:-29}" = 28 ]; then
  run nccl "$BIN" nccl
  run b32_s128k_n8 "$BIN" dfccl DFCCL_BLOCKS=32 DFCCL_SLOT_BYTES=131072 DFCCL_SLOTS=8
  run b32_s256k_n8 "$BIN" dfccl DFCCL_BLOCKS=32 DFCCL_SLOT_BYTES=262144 DFCCL_SLOTS=8
  run b32_s512k_n4 "$BIN" dfccl DFCCL_BLOCKS=32 DFCCL_SLOT_BYTES=524288 DFCCL_SLOTS=4
  run b32_s512k_n8 "$BIN" dfccl DFCCL_BLOCKS=32 DFCCL_SLOT_BYTES=524288 DFCCL_SLOTS=8
  run b64_s128k_n8 "$BIN" dfccl DFCCL_BLOCKS=64 DFCCL_SLOT_BYTES=131072 DFCCL_SLOTS=8
  run b64_s256k_n4 "$BIN" dfccl DFCCL_BLOCKS=64 DFCCL_SLOT_BYTES=262144 DFCCL_SLOTS=4
  run b16_s512k_n8 "$BIN" dfccl DFCCL_BLOCKS=16 DFCCL_SLOT_BYTES=524288 DFCCL_SLOTS=8
  run u8_b32_s128k_n8 "$BIN/unroll8" dfccl DFCCL_BLOCKS=32 DFCCL_SLOT_BYTES=131072 DFCCL_SLOTS=8
  run u8_b32_s256k_n8 "$BIN/unroll8" dfccl DFCCL_BLOCKS=32 DFCCL_SLOT_BYTES=262144 DFCCL_SLOTS=8
  run t1k_b32_s128k_n8 "$BIN/threads1024" dfccl DFCCL_THREADS=1024 DFCCL_BLOCKS=32 DFCCL_SLOT_BYTES=131072 DFCCL_SLOTS=8
  run t1k_b32_s256k_n8 "$BIN/threads1024" dfccl DFCCL_THREADS=1024 DFCCL_BLOCKS=32 DFCCL_SLOT_BYTES=262144 DFCCL_SLOTS=8
  run t1k_b16_s256k_n8 "$BIN/threads1024" dfccl DFCCL_THREADS=1024 DFCCL_BLOCKS=16 DFCCL_SLOT_BYTES=262144 DFCCL_SLOTS=8
else
  run nccl "$BIN" nccl
  run b32_s128k_n8 "$BIN" dfccl DFCCL_BLOCKS=32 DFCCL_SLOT_BYTES=131072 DFCCL_SLOTS=8
  run b32_s256k_n4 "$BIN" dfccl DFCCL_BLOCKS=32 DFCCL_SLOT_BYTES=262144 DFCCL_SLOTS=4
  run b48_s256k_n4 "$BIN" dfccl DFCCL_BLOCKS=48 DFCCL_SLOT_BYTES=262144 DFCCL_SLOTS=4
  run b64_s128k_n8 "$BIN" dfccl DFCCL_BLOCKS=64 DFCCL_SLOT_BYTES=131072 DFCCL_SLOTS=8
  run b64_s256k_n4 "$BIN" dfccl DFCCL_BLOCKS=64 DFCCL_SLOT_BYTES=262144 DFCCL_SLOTS=4
  run b64_s512k_n4 "$BIN" dfccl DFCCL_BLOCKS=64 DFCCL_SLOT_BYTES=524288 DFCCL_SLOTS=4
fi
