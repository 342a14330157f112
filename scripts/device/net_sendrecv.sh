#!/usr/bin/env bash
# Why point-to-point transfers over the network path are slow at 1-4 MiB (run 209: 3-8 ms each, and 2.5x the
# all-reduce's daemon launches per trial): sendrecv on the GPU (MPS, two "hosts") with 1 and 4 proxies, with
# DFCCL_STUCK_NS=20 ms (are stuck exits and their relaunch back-off the cost?), with stream memory waits instead of
# waiting kernels (do the waiters and two daemons under MPS crowd the SMs?) and with one point-to-point channel; and
# the host executor with 8 channels and 4 proxies on the 16 cores (is it the CUDA side at all?). One tarball back
# (a call returns at most 8 files).
# gpu-t4-host: host completion, no stream waits (on one host the stalls under MPS follow the stream waits: run 214).
#   scripts/device/net_sendrecv.sh [step...]   (default: host-t4 gpu-t1 gpu-t4 gpu-t4-host gpu-t4-stuck20ms gpu-t4-p2p1;
#   named only: vs-nccl, beside NCCL's sockets; vs-nccl-host, the same with host completion; every-host, every
#   collective so; gpu-t4-waitmem, which under MPS hung in run 210 and left MPS refusing the next step)
set -u
FINAL=$OUT
export OUT=/tmp/net_sendrecv
rm -rf $OUT; mkdir -p $OUT
. scripts/device/env.sh
step build 400 make -j16 CMAKE_ARGS="-DDFCCL_DEPS_PREFIX=$PWD/.deps -DCMAKE_CUDA_ARCHITECTURES=90"
B=build/bin
export UCX_TLS=tcp UCX_NET_DEVICES=lo DFCCL_SOCKET_IFNAME=lo
HOSTEACH='export DFCCL_HOSTID=node$OMPI_COMM_WORLD_RANK; exec "$0" "$@"'
MX="mpirun --allow-run-as-root --bind-to none --oversubscribe -x LD_LIBRARY_PATH -x UCX_TLS -x UCX_NET_DEVICES -x DFCCL_SOCKET_IFNAME"
H="--iters 20 --warmup 5 --quiet"
steps=" ${*:-host-t4 gpu-t1 gpu-t4 gpu-t4-host gpu-t4-stuck20ms gpu-t4-p2p1} "
want() { [[ "$steps" == *" $1 "* ]]; }
want host-t4 && step host-t4 120 $MX -x DFCCL_BLOCKS=8 -x DFCCL_P2P_CHANNELS=8 -x DFCCL_NET_THREADS=4 -x DFCCL_SLOT_BYTES=524288 -np 2 /bin/sh -c "$HOSTEACH" $B/dfccl-harness --backend host -b 1M -e 16M -f 4 $H --collectives sendrecv,all_reduce,broadcast --out $OUT/host-t4.h5
mps_start
for t in 1 4; do
  want "gpu-t$t" && step "gpu-t$t" 120 $MX -x DFCCL_NET_THREADS=$t -np 2 /bin/sh -c "$HOSTEACH" $B/dfccl-harness --backend dfccl -b 1M -e 16M -f 4 $H --collectives sendrecv,all_reduce --out $OUT/gpu-t$t.h5
done
want gpu-t4-host && step gpu-t4-host 120 $MX -np 2 /bin/sh -c "$HOSTEACH" $B/dfccl-harness --backend dfccl -b 1M -e 16M -f 4 $H --collectives sendrecv --completion host --out $OUT/gpu-t4-host.h5
want gpu-t4-stuck20ms && step gpu-t4-stuck20ms 120 $MX -x DFCCL_STUCK_NS=20000000 -np 2 /bin/sh -c "$HOSTEACH" $B/dfccl-harness --backend dfccl -b 1M -e 16M -f 4 $H --collectives sendrecv --out $OUT/gpu-t4-stuck20ms.h5
want gpu-t4-waitmem && step gpu-t4-waitmem 120 $MX -x DFCCL_WAIT_KERNEL=0 -np 2 /bin/sh -c "$HOSTEACH" $B/dfccl-harness --backend dfccl -b 1M -e 16M -f 4 $H --collectives sendrecv --out $OUT/gpu-t4-waitmem.h5
want gpu-t4-p2p1 && step gpu-t4-p2p1 120 $MX -x DFCCL_P2P_CHANNELS=1 -np 2 /bin/sh -c "$HOSTEACH" $B/dfccl-harness --backend dfccl -b 1M -e 16M -f 4 $H --collectives sendrecv --out $OUT/gpu-t4-p2p1.h5
# vs-nccl (only when named): sendrecv and all_reduce beside NCCL's sockets in one run, batch timing (as run 209).
NX="-x NCCL_SOCKET_IFNAME=lo -x NCCL_P2P_DISABLE=1 -x NCCL_SHM_DISABLE=1 -x NCCL_NVLS_ENABLE"
HOSTBOTH='export DFCCL_HOSTID=node$OMPI_COMM_WORLD_RANK NCCL_HOSTID=node$OMPI_COMM_WORLD_RANK; exec "$0" "$@"'
# vs-nccl-host (only when named): the same pair at 1 / 2 / 4 MiB with host completion, once per net slot size in
# NET_SLOTS (default "524288 131072"; run 221, results/net/gpu-host-completion/) and proxy spin in NET_SPINS (ns,
# default "1000000"; run 223 compared 0, 200000 and 1000000: results/net/gpu-proxy-spin/).
if want vs-nccl-host; then
  for slot in ${NET_SLOTS:-524288 131072}; do
    for spin in ${NET_SPINS:-1000000}; do
      step "vs-nccl-host-slot$slot-spin$spin" 150 $MX $NX -x DFCCL_NET_SLOT_BYTES=$slot -x DFCCL_NET_SPIN_NS=$spin -np 2 /bin/sh -c "$HOSTBOTH" $B/dfccl-harness --backend dfccl,nccl -b 1M -e 4M -f 2 --timing batch --batch 20 --iters 60 --warmup 10 --quiet --collectives sendrecv,all_reduce --completion host --out $OUT/vs-nccl-host-slot$slot-spin$spin.h5
    done
  done
fi
# every-host (only when named): every collective beside NCCL's sockets at 1 / 4 / 16 MiB with host completion, then
# ucx_perftest tag_bw at those sizes into ucx.txt (run 225, results/net/gpu-every/).
if want every-host; then
  step every-host 200 $MX $NX -np 2 /bin/sh -c "$HOSTBOTH" $B/dfccl-harness --backend dfccl,nccl -b 1M -e 16M -f 4 --timing batch --batch 10 --iters 20 --warmup 3 --quiet --collectives all_reduce,all_gather,reduce_scatter,broadcast,reduce,sendrecv,all_to_all --completion host --out $OUT/every-host.h5
  for s in 1048576 4194304 16777216; do
    .deps/ucx/bin/ucx_perftest -p 13337 -t tag_bw -s $s -n 1000 > /dev/null 2>&1 &
    sleep 1
    echo "ucx_perftest tag_bw $s: $(timeout 60 .deps/ucx/bin/ucx_perftest 127.0.0.1 -p 13337 -t tag_bw -s $s -n 1000 -f 2>&1 | tail -1)" >> $OUT/ucx.txt
    wait
  done
fi
want vs-nccl && step vs-nccl 200 $MX $NX -np 2 /bin/sh -c "$HOSTBOTH" $B/dfccl-harness --backend dfccl,nccl -b 1M -e 64M -f 4 --timing batch --batch 20 --iters 60 --warmup 10 --quiet --collectives sendrecv,all_reduce --out $OUT/vs-nccl.h5
python3 - $OUT/*.h5 > $OUT/launches.txt 2>&1 <<'PY' || true
import sys, h5py
for f in sys.argv[1:]:
    h = h5py.File(f)
    for b in h['backends']:
        t = h['backends'][b]['trials']
        print(f.split('/')[-1], b, 'launches', list(t['daemon_launches'][:]), 'preemptions', list(t['preemptions'][:]))
PY
cat $OUT/launches.txt
for f in $OUT/*.log; do echo "## $(basename $f)"; grep -E "^ +[0-9]" $f | awk '{print $1, $6, $8, $14, $19, $20}'; done
tar czf "$FINAL/net_sendrecv.tgz" -C /tmp net_sendrecv
steps_status
