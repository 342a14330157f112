#!/usr/bin/env bash
# What runs 211-212 left open, in one call on the one-GPU machine (docs/lab/gpu-runs.md, runs 211-212, 2026-12-05):
#   stall   sendrecv 1-64 MiB, 2 ranks under MPS, iteration timing, with ring/connection slots of 128, 64, 96 and
#           112 KiB; 96 KiB with DFCCL_STUCK_NS=20 ms, with a 0.5 ms relaunch back-off ceiling, with 64 blocks
#           and with one point-to-point channel: which shapes make point-to-point transfers take milliseconds
#           (run 212: 96 KiB did, 128 KiB at 64 MiB), daemon launches per trial (MPS restarted after a failure);
#   break   mismatch_hosts_cuda_test's agreeing case with the settled word switched off (the stream waits for the
#           completion word alone): it must fail; the source is restored after;
#   slots3  issue 31 item 7's next shape: three 128 KiB slots against four, memory per communicator and the ring's
#           core times at 64 and 256 MiB (A/B, two ranks under MPS).
#   scripts/device/p2p_stall.sh [part...]      (default: stall break slots3)
# Writes under $OUT one tarball, p2p_stall.tgz (a call returns at most 8 files).
set -u
cd "$(dirname "$0")/../.."
FINAL=${OUT:-/tmp/dfccl-out}
export OUT=/tmp/p2p_stall
rm -rf "$OUT"; mkdir -p "$OUT" "$FINAL"
. scripts/device/env.sh
step build 400 make -j16 CMAKE_ARGS="-DDFCCL_DEPS_PREFIX=$PWD/.deps -DCMAKE_CUDA_ARCHITECTURES=90"
BIN=build/bin
M="mpirun --allow-run-as-root --bind-to none --oversubscribe -np 2"
for part in ${*:-stall break slots3}; do
  case $part in
    stall)
      H="-b 1M -e 64M -f 4 --iters 20 --warmup 5 --collectives sendrecv --backend dfccl --quiet"
      ( mps_start
        for cfg in "s128k:" "s64k:-x DFCCL_SLOT_BYTES=65536" "s96k:-x DFCCL_SLOT_BYTES=98304" \
                   "s112k:-x DFCCL_SLOT_BYTES=114688" "s96k-stuck20ms:-x DFCCL_SLOT_BYTES=98304 -x DFCCL_STUCK_NS=20000000" \
                   "s96k-rmax500us:-x DFCCL_SLOT_BYTES=98304 -x DFCCL_RELAUNCH_MAX_NS=500000" \
                   "s96k-b64:-x DFCCL_SLOT_BYTES=98304 -x DFCCL_BLOCKS=64" \
                   "s96k-ch1:-x DFCCL_SLOT_BYTES=98304 -x DFCCL_P2P_CHANNELS=1"; do
          name=${cfg%%:*}
          step "stall-$name" 40 $M -x DFCCL_DEBUG=INFO ${cfg#*:} $BIN/dfccl-harness $H --out "$OUT/stall-$name.h5"
          grep -E "^ +[0-9]" "$OUT/stall-$name.log" | awk '{print "  ", $1, "B", $6, "us, core", $20}'
          tail -1 "$OUT/summary.txt" | grep -q "rc=0 " || mps_restart
        done )
      python3 - "$OUT"/stall-*.h5 <<'PY' 2>&1 | tee "$OUT/launches.txt"
import sys, h5py
for f in sys.argv[1:]:
    t = h5py.File(f)['backends']['dfccl']['trials']
    print(f.split('/')[-1], 'launches', list(t['daemon_launches'][:]), 'preemptions', list(t['preemptions'][:]))
PY
      ;;
    break)
      cp lib/src/engine/engine.cpp /tmp/engine.orig
      sed -i 's|r->settles ? &h_->settled\[r->slot\] : nullptr|nullptr|' lib/src/engine/engine.cpp
      if grep -q 'settled\[r->slot\] : nullptr' lib/src/engine/engine.cpp; then
        echo "break: the pattern no longer matches lib/src/engine/engine.cpp" | tee -a "$OUT/summary.txt"
      else
        (cd build && make -j16 mismatch_hosts_cuda_test > /dev/null 2>&1)
        timeout -k 5 60 $BIN/mismatch_hosts_cuda_test --gtest_filter=*Agreeing* > "$OUT/break-settle.log" 2>&1
        echo "== break-settle rc=$? (must be non-zero)" | tee -a "$OUT/summary.txt"
        grep -E "^rank|OK \]|FAILED \]" "$OUT/break-settle.log" | head -6
      fi
      cp /tmp/engine.orig lib/src/engine/engine.cpp
      (cd build && make -j16 mismatch_hosts_cuda_test > /dev/null 2>&1) ;;
    slots3)
      step mem-slots3-arena12m 60 $M -x DFCCL_SLOTS=3 -x DFCCL_P2P_ARENA_BYTES=12582912 $BIN/mp_many_comms 8
      grep "communicators of" "$OUT/mem-slots3-arena12m.log"
      for s in 4 3; do harness_with_env /tmp/slots$s $BIN DFCCL_SLOTS=$s; done
      step ring-slots3 200 env A=/tmp/slots4 B=/tmp/slots3 MPS=1 ROUNDS=3 BEGIN=64M END=256M \
        COLLECTIVES=all_reduce,all_gather,reduce_scatter EXTRA="--timing batch --batch 20" scripts/device/ab.sh
      grep median "$OUT/ring-slots3.log"
      for f in "$OUT"/ab_*.log; do
        awk -v f="$(basename "$f")" '!/^#/ && $14 ~ /^(all_reduce|all_gather|reduce_scatter)$/ {print f, $14, $1, "core", $20}' "$f"
      done ;;
  esac
done
tar czf "$FINAL/p2p_stall.tgz" -C /tmp p2p_stall
steps_status
