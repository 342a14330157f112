#!/usr/bin/env bash
# collectives_netns_test.sh MP_COLLECTIVES [PROXIES]: 3 ranks of mp_collectives (host executor: the collective matrix, the
# point-to-point matrix, both with rotated types (MP_MATRIX=rotated: the path of the bytes is what is tested here),
# and 30 stress trials) on 3 fake hosts (netns_lib.sh), each in its own network namespace with
# its own host name, so that every connection between them crosses a veth pair and the bridge through the net proxy
# (UCX over tcp on the namespace's veth: rank_wrap.sh). Each host has its own /dev/shm and IPC namespace: the ranks
# meet through the unique id's rendezvous root over the bridge. Checks the exact results and that every rank made
# network hops. With PROXIES, each engine runs that many net proxies (DFCCL_NET_THREADS) and the host executor as
# many blocks, so that every proxy carries a channel; the inits must say so.
# Exits 77 (skipped) without root or namespaces.
set -u
bin=${1:?usage: collectives_netns_test.sh MP_COLLECTIVES [PROXIES]}
proxies=${2:-1}
. "$(dirname "$0")/netns_lib.sh"
netns_require
netns_setup 3
log=$(mktemp)
t0=$SECONDS
timeout -k 10 600 "$NETNS_DIR/mpirun_netns.sh" 3 env DFCCL_DEBUG=INFO DFCCL_DEBUG_SUBSYS=INIT \
  DFCCL_NET_THREADS="$proxies" DFCCL_BLOCKS="$proxies" MP_MATRIX=rotated "$bin" host 30 > "$log" 2>&1
rc=$?
grep -E "matrix|stress|PASSED|FAILED|wrong|rror" "$log" | tail -8
hops=$(grep -c "network hops through $proxies of the engine's proxies" "$log")
hosts=$(grep -o "fakenode[0-9]" "$log" | sort -u | wc -l)
echo "mpirun rc=$rc after $((SECONDS - t0)) s; $hops communicator inits with network hops"
if [ "$rc" != 0 ] || ! grep -q "^PASSED" "$log" || [ "$hops" -lt 3 ]; then
  echo "FAIL: see the log below"; tail -40 "$log"; rm -f "$log"; exit 1
fi
rm -f "$log"
echo "OK: 3 fake hosts, exact over the network path"
