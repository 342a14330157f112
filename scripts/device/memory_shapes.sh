#!/usr/bin/env bash
# What issue 31 item 7 needs to choose the connection shapes (a communicator of 2-8 ranks at most 64 MiB of GPU
# memory without losing bandwidth), on the one-GPU machine, in parts that each fit one call:
#   memory  mp_many_comms at 2, 4 and 8 ranks: the defaults, and the candidate (ring slots of 96 KiB, a 12 MiB
#           point-to-point arena), GPU memory per communicator against the formula;
#   p2p-2ranks, p2p-8ranks
#           sendrecv and all_to_all, 2 or 8 ranks under MPS: the arena's shares (defaults, candidate), and fixed
#           channels x slot size with an arena that holds them all (the GPU's own memory, not NVLink: what one
#           channel can move, i.e. how many a connection needs);
#   ring    the all-reduce, all-gather and reduce-scatter sweeps with 128 KiB against 96 KiB slots, A/B rounds
#           (scripts/device/ab.sh), one rank and two ranks under MPS.
# Writes under $OUT and one tarball, memory_shapes.tgz (a call returns at most 8 files).
#   scripts/device/memory_shapes.sh memory p2p-2ranks      (default: all four; each takes several minutes)
# MEM_RANKS and MEM_CONFIGS (name:slot bytes:arena bytes) narrow the memory part, P2P_CONFIGS (name:slot bytes:arena
# bytes[:channels], space-separated; arena "big" is 1 GiB) the p2p parts; ROUNDS sets the ring part's A/B rounds
# of two ranks (default 2), RING_1RANK=0 skips its one-rank rounds.
set -u
cd "$(dirname "$0")/../.."
FINAL=$OUT
export OUT=/tmp/memory_shapes
rm -rf $OUT; mkdir -p $OUT
. scripts/device/env.sh
{ date -u; nvidia-smi --query-gpu=name,driver_version --format=csv; git log --oneline -1; } > "$OUT/machine.txt"
step build 400 make -j16 CMAKE_ARGS="-DDFCCL_DEPS_PREFIX=$PWD/.deps -DCMAKE_CUDA_ARCHITECTURES=90"
B=$PWD/build/bin
M="mpirun --allow-run-as-root --bind-to none --oversubscribe"
parts=${*:-memory p2p-2ranks p2p-8ranks ring}
for part in $parts; do
  case $part in
    memory)
      for np in ${MEM_RANKS:-2 4 8}; do
        for cfg in ${MEM_CONFIGS:-defaults:: slot96k-arena12m:98304:12582912}; do
          IFS=: read -r name sb arena <<< "$cfg"
          X=""
          [ -n "$sb" ] && X="$X -x DFCCL_SLOT_BYTES=$sb"
          [ -n "$arena" ] && X="$X -x DFCCL_P2P_ARENA_BYTES=$arena"
          step "mem-np$np-$name" 200 $M -np $np $X $B/mp_many_comms 8
        done
      done
      grep -h "communicators of" $OUT/mem-*.log ;;
    p2p-2ranks|p2p-8ranks)
      np=${part#p2p-}; np=${np%ranks}
      # name: the point-to-point settings (channels of a full connection, slot bytes, arena bytes). c<k>: every
      # connection gets k channels (an arena large enough for all); "default" and "cand": the arena's shares.
      ( mps_start
        T="--timing batch --batch 20 --iters 60 --warmup 10"
        big=1073741824
        for cfg in ${P2P_CONFIGS:-"default::" "cand:98304:12582912" "c8s131072:131072:$big:8" "c8s98304:98304:$big:8" \
                     "c4s98304:98304:$big:4" "c2s98304:98304:$big:2" "c1s98304:98304:$big:1" \
                     "c8s32768:32768:$big:8" "c4s32768:32768:$big:4"}; do
            IFS=: read -r name sb arena ch <<< "$cfg"
            [ "$arena" = big ] && arena=$big
            X=""
            [ -n "$sb" ] && X="$X -x DFCCL_SLOT_BYTES=$sb"
            [ -n "$arena" ] && X="$X -x DFCCL_P2P_ARENA_BYTES=$arena"
            [ -n "${ch:-}" ] && X="$X -x DFCCL_P2P_CHANNELS=$ch"
            step "p2p-np$np-$name" 120 $M -np $np $X $B/dfccl-harness -b 1M -e 64M -f 4 $T \
              --collectives sendrecv,all_to_all --backend dfccl --out "$OUT/p2p-np$np-$name.h5"
        done )
      for f in $OUT/p2p-*.log; do echo "## $(basename $f)"; grep -E "^ +[0-9]" $f | awk '{print $1, $6, $8, $14}'; done ;;
    ring)
      for s in 131072 98304; do harness_with_env /tmp/slot$s $B DFCCL_SLOT_BYTES=$s; done
      export A=/tmp/slot131072 B=/tmp/slot98304 BEGIN=1M END=256M COLLECTIVES=all_reduce,all_gather,reduce_scatter
      EXTRA="--timing batch --batch 20"
      step ring-2ranks-mps 280 env MPS=1 EXTRA="$EXTRA" ROUNDS=${ROUNDS:-2} scripts/device/ab.sh
      [ "${RING_1RANK:-1}" = 1 ] && step ring-1rank 280 env NP=1 EXTRA="$EXTRA" ROUNDS=2 scripts/device/ab.sh
      tail -30 $OUT/ring-*.log ;;
  esac
done
tar czf "$FINAL/memory_shapes.tgz" -C /tmp memory_shapes
# The p2p part's steps ran in a subshell (MPS ends with it): count every step from the summary.
! grep -vE "rc=(0|77) " "$OUT/summary.txt" | grep -q "^== "
