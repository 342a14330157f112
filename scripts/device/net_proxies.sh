#!/usr/bin/env bash
# Several net proxies per engine (DFCCL_NET_THREADS). Correctness on the GPU with 3 proxies
# (an uneven split of the channels), then the network path's bandwidth by proxies beside NCCL's sockets in one run
# (2 ranks on two "hosts", UCX tcp on loopback, the GPU shared under MPS), ucx_perftest as the ceiling, and the
# threads' CPU use during a 64 MiB all-reduce with 4 proxies.
set -u
OUT=${OUT:-/tmp/dfccl-out}
. scripts/device/env.sh
export UCX_TLS=tcp UCX_NET_DEVICES=lo DFCCL_SOCKET_IFNAME=lo NCCL_SOCKET_IFNAME=lo NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1
{ date -u; nvidia-smi --query-gpu=name,driver_version --format=csv; nproc; } > "$OUT/machine.txt"
step build 400 make -j16 CMAKE_ARGS="-DDFCCL_DEPS_PREFIX=$PWD/.deps -DCMAKE_CUDA_ARCHITECTURES=90"
B=build/bin
HOSTPAIR='export DFCCL_HOSTID=node$((OMPI_COMM_WORLD_RANK / 2)); exec "$0" "$@"'
HOSTEACH='export DFCCL_HOSTID=node$OMPI_COMM_WORLD_RANK NCCL_HOSTID=node$OMPI_COMM_WORLD_RANK; exec "$0" "$@"'
M="mpirun --allow-run-as-root --bind-to none --oversubscribe -x LD_LIBRARY_PATH -x UCX_TLS -x UCX_NET_DEVICES -x DFCCL_SOCKET_IFNAME -x NCCL_SOCKET_IFNAME -x NCCL_P2P_DISABLE -x NCCL_SHM_DISABLE -x NCCL_NVLS_ENABLE"
step two-hosts-4r-t3 300 $M -x DFCCL_NET_THREADS=3 -np 4 /bin/sh -c "$HOSTPAIR" $B/mp_collectives cuda-shared 100
step sweep-t3 200 $M -x DFCCL_NET_THREADS=3 -np 2 /bin/sh -c "$HOSTEACH" $B/dfccl-harness -b 8 -e 64M -f 4 --collectives all_reduce,all_gather,sendrecv --backend dfccl --out $OUT/sweep-t3.h5
mps_start
for t in 1 2 4 8; do
  step "ar-t$t" 150 $M -x DFCCL_NET_THREADS=$t -np 2 /bin/sh -c "$HOSTEACH" $B/dfccl-harness -b 1M -e 64M -f 4 --collectives all_reduce --backend dfccl,nccl --out "$OUT/ar-t$t.h5"
done
for c in broadcast sendrecv; do
  step "$c-t4" 150 $M -x DFCCL_NET_THREADS=4 -np 2 /bin/sh -c "$HOSTEACH" $B/dfccl-harness -b 1M -e 64M -f 4 --collectives $c --backend dfccl,nccl --out "$OUT/$c-t4.h5"
done
( $M -x DFCCL_NET_THREADS=4 -np 2 /bin/sh -c "$HOSTEACH" $B/dfccl-harness -b 64M -e 64M --iters 400 --collectives all_reduce --backend dfccl --out /tmp/top.h5 > "$OUT/top-run.log" 2>&1 & )
sleep 12; top -H -b -n 2 -d 2 | grep -E "dfccl|PID" | head -30 > "$OUT/top.txt"; sleep 20
U=.deps/ucx/bin/ucx_perftest
for s in 1048576 4194304 16777216 67108864; do
  n=$((s >= 16777216 ? 200 : 2000))
  $U -p 13337 -t tag_bw -s $s -n $n > /dev/null 2>&1 &
  sleep 1
  r=$($U 127.0.0.1 -p 13337 -t tag_bw -s $s -n $n -f 2>&1 | tail -1)
  wait
  echo "ucx_perftest tag_bw $s: $r" >> "$OUT/ucx.txt"
done
for f in "$OUT"/*-t*.log; do echo "## $(basename "$f")"; grep -E "^ +[0-9]|wrong|PASSED|FAILED|rror" "$f" | head -40; done
cat "$OUT/top.txt" "$OUT/ucx.txt"
steps_status
