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
  env "$@" timeout 120 "${MPIRUN[@]}" "$bin/dfccl-harness" --overwrite "${sweep[@]}" --backend "$backend" --out "$OUT/ar_$name.h5" \
    > "$OUT/ar_$name.log" 2>&1
  echo "== $name ($backend $*) rc=$?"
  awk '!/^#/ && $10 == "all_reduce" {printf "  %12s bytes  %9s us  busbw %7s GB/s\n", $1, $6, $8}' "$OUT/ar_$name.log"
}
# Runs 57-59 (2026-11-30), all-reduce at 128 blocks x 256 threads: NCCL, then dfccl with one variable at each value.
ar_sweep() {  # ar_sweep <begin> <end> <factor> <warm-up iterations>
  sweep=(--workload workloads/sweep.toml --collectives all_reduce --begin "$1" --end "$2" --factor "$3" --iters 20
    --warmup "$4")
}
one_var() {  # one_var <VAR> <name prefix> <value...>
  local var=$1 prefix=$2 v
  shift 2
  run nccl "$BIN" nccl
  for v in "$@"; do run "$prefix$v" "$BIN" dfccl "$var=$v"; done
}
case "${SET:-29}" in
  57)  # how many channels carry 1-64 MiB (DFCCL_MIN_CHAN_BYTES)
    ar_sweep 1M 64M 2 5
    one_var DFCCL_MIN_CHAN_BYTES minchan 32768 65536 131072 262144 16384
    exit 0 ;;
  58)  # slots per lane and lanes (run 52's defaults: 4 slots, 4 lanes)
    ar_sweep 4M 1G 4 10
    run nccl "$BIN" nccl
    run slots4 "$BIN" dfccl
    run slots8 "$BIN" dfccl DFCCL_SLOTS=8
    run slots8_lanes2 "$BIN" dfccl DFCCL_SLOTS=8 DFCCL_LANES=2
    run slots6 "$BIN" dfccl DFCCL_SLOTS=6
    run slots4_again "$BIN" dfccl
    exit 0 ;;
  59)  # slot size (run 52's default: 128 KiB)
    ar_sweep 16M 1G 4 10
    one_var DFCCL_SLOT_BYTES slot 131072 65536 98304 196608 131072
    exit 0 ;;
esac
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
