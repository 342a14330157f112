#!/bin/bash
# rendezvous_netns_test.sh BIN_DIR: the network rendezvous (lib/src/bootstrap/rendezvous.h) between three fake hosts on
# this machine (netns_lib.sh: namespaces on a bridge, own host names and /dev/shm). Checks, each bounded by timeout:
#   1. the fake hosts are separate: distinct host names, a file in one's /dev/shm is seen by no other nor by us;
#   2. ranks launched directly into namespaces 0, 1, 2 rendezvous through a root service in namespace 0, which
#      listens on its veth (not loopback): 20 rounds exact, host ids fakenode0..2, the service ends by itself;
#   3. the same three ranks launched by mpirun through rank_wrap.sh (mpirun_netns.sh);
#   4. a rank killed with SIGKILL in namespace 2 fails the two others within 5 s, naming it;
#   5. 300 idle connections from namespace 2 (rendezvous_guard.py) while the three ranks register: they finish, the
#      root closes every idle connection within 8 s, and a sniffer on namespace 0's link sees rendezvous frames but
#      neither the id's token nor its secret;
#   6. the network transport (UCX, UCX_TLS=tcp) between namespaces 0 and 1: net_netns_driver and
#      net_transport_peer exchange messages of 0 bytes to 6 MiB both ways (skipped in a build without UCX).
# Exit 77 (skipped) without root, ip netns or unshare.
set -u
bin=${1:?usage: rendezvous_netns_test.sh BIN_DIR}
here=$(cd "$(dirname "$0")" && pwd)
. "$here/netns_lib.sh"
netns_require
peer="$bin/rendezvous_peer"
[ -x "$peer" ] || { echo "FAIL: $peer is missing"; exit 1; }
work=$(mktemp -d /tmp/dfccl-netns.XXXXXX)
netns_setup 3
trap 'netns_cleanup; rm -rf "$work"' EXIT
failed=0
fail() { echo "FAIL: $*"; failed=1; }

echo "== fake hosts on $NETNS_NET.0/24, bridge $NETNS_BRIDGE"
probe=dfccl-netns-probe-$$
names=$(for i in 0 1 2; do netns_exec $i timeout 10 sh -c "touch /dev/shm/$probe; hostname; ls /dev/shm | wc -l"; done)
echo "$names" | tr '\n' ' '; echo
[ "$(echo "$names" | grep -c '^fakenode[012]$')" = 3 ] || fail "host names are not fakenode0..2: $names"
[ "$(echo "$names" | grep -cx 1)" = 3 ] || fail "a fake host's /dev/shm is not private (it sees the others' files)"
[ ! -e "/dev/shm/$probe" ] || { fail "the fake hosts' /dev/shm is this machine's"; rm -f "/dev/shm/$probe"; }

# start_root NAME: a root service in namespace 0; its id goes to $work/NAME.id, its output to $work/NAME.root.
start_root() {
  netns_exec 0 timeout 60 "$peer" serve --id-file "$work/$1.id" >"$work/$1.root" 2>&1 &
  root_pid=$!
}
check_root() {
  local name=$1 rc
  wait "$root_pid"; rc=$?
  cat "$work/$name.root"
  grep -q "^ROOT $NETNS_NET\.1:[0-9]* ${NETNS_VETH}n0$" "$work/$name.root" || fail "$name: root not on ns 0's veth"
  [ "$rc" = 0 ] || fail "$name: the root service did not end by itself once every rank left (exit $rc)"
}
check_ranks() {
  local name=$1 out=$2 i
  for i in 0 1 2; do
    grep -q "^rank $i ok hosts=fakenode0,fakenode1,fakenode2$" "$out" || fail "$name: rank $i did not finish right"
  done
}

echo "== direct launches"
start_root direct
pids=()
for i in 0 1 2; do
  netns_exec $i timeout 60 "$peer" rank --id-file "$work/direct.id" --rank $i --nranks 3 --rounds 20 \
    >"$work/direct.$i" 2>&1 &
  pids+=($!)
done
for i in 0 1 2; do wait "${pids[$i]}" || fail "direct: rank $i exited $?"; cat "$work/direct.$i"; done
cat "$work"/direct.[012] >"$work/direct.all"
check_ranks direct "$work/direct.all"
check_root direct

echo "== mpirun through rank_wrap.sh"
start_root mpi
timeout 120 "$here/mpirun_netns.sh" 3 "$peer" rank --id-file "$work/mpi.id" --nranks 3 --rounds 20 \
  >"$work/mpi.out" 2>&1 || fail "mpirun exited $?"
cat "$work/mpi.out"
check_ranks mpi "$work/mpi.out"
check_root mpi

echo "== rank 2 killed with SIGKILL"
start_root kill
pids=()
for i in 0 1 2; do
  extra=(); [ $i = 2 ] && extra=(--hang-after 3)
  netns_exec $i timeout 30 "$peer" rank --id-file "$work/kill.id" --rank $i --nranks 3 --rounds 10 --timeout-ms 30000 \
    "${extra[@]}" >"$work/kill.$i" 2>&1 &
  pids+=($!)
done
for _ in $(seq 200); do grep -q READY "$work/kill.2" && break; sleep 0.1; done
grep -q READY "$work/kill.2" || fail "kill: rank 2 never got ready"
sleep 0.3
ms() { echo $(( $(date +%s%N) / 1000000 )); }
t0=$(ms)
kill -9 $(ip netns pids "${NETNS_PREFIX}2")  # timeout and the rank: all that runs in namespace 2
for i in 0 1; do
  wait "${pids[$i]}"; rc=$?
  t=$(( $(ms) - t0 ))
  echo "rank $i exited $rc ${t} ms after the kill: $(cat "$work/kill.$i")"
  [ "$rc" = 2 ] || fail "kill: rank $i exited $rc, not 2 (a dfccl error)"
  grep -q "error 6: .*rank 2 (host fakenode2, $NETNS_NET\.3:[0-9]*) dropped its connection" "$work/kill.$i" ||
    fail "kill: rank $i's error does not name rank 2 on fakenode2 as dfcclRemoteError"
  [ "$t" -lt 5000 ] || fail "kill: rank $i took $t ms"
done
wait "$root_pid" || fail "kill: the root service did not end once every rank was gone"

echo "== 300 idle connections from fakenode2, a sniffer on fakenode0's link"
guard="$here/rendezvous_guard.py"
start_root guard
for _ in $(seq 200); do grep -q '^ROOT ' "$work/guard.root" 2>/dev/null && break; sleep 0.05; done
read -r root_host root_port < <(sed -n 's/^ROOT \([0-9.]*\):\([0-9]*\) .*/\1 \2/p' "$work/guard.root")
python3 "$guard" sniff "${NETNS_VETH}h0" "$work/guard.pcap" "$work/guard.stop" &
sniff_pid=$!
for _ in $(seq 200); do [ -e "$work/guard.pcap.ready" ] && break; sleep 0.05; done
[ -e "$work/guard.pcap.ready" ] || fail "guard: the sniffer did not start within 10 s"
netns_exec 2 timeout 30 python3 "$guard" flood "$root_host" "$root_port" 300 8 >"$work/guard.flood" 2>&1 &
flood_pid=$!
for _ in $(seq 200); do grep -q '^connected' "$work/guard.flood" && break; sleep 0.05; done
pids=()
for i in 0 1 2; do
  netns_exec $i timeout 30 "$peer" rank --id-file "$work/guard.id" --rank $i --nranks 3 --rounds 5 --timeout-ms 5000 \
    >"$work/guard.$i" 2>&1 &
  pids+=($!)
done
for i in 0 1 2; do wait "${pids[$i]}" || fail "guard: rank $i exited $? beside 300 idle connections"; done
cat "$work"/guard.[012] >"$work/guard.all"
check_ranks guard "$work/guard.all"
wait "$flood_pid"
cat "$work/guard.flood"
grep -q '^closed 300 of 300' "$work/guard.flood" || fail "guard: the root left idle connections open"
touch "$work/guard.stop"
wait "$sniff_pid"
python3 "$guard" secret "$work/guard.id" "$work/guard.pcap" || fail "guard: the id's token or secret crossed the wire"
check_root guard

echo "== UCX transport (tcp) between fakenode0 and fakenode1"
netns_exec 0 env UCX_NET_DEVICES="${NETNS_VETH}n0" timeout 60 "$bin/net_netns_driver" tcp \
  "$here/netns_exec.sh" 1 env UCX_NET_DEVICES="${NETNS_VETH}n1" "$bin/net_transport_peer" exchange tcp \
  >"$work/ucx.out" 2>&1
rc=$?
cat "$work/ucx.out"
if [ "$rc" = 77 ]; then
  echo "(skipped: built without UCX)"
else
  [ "$rc" = 0 ] || fail "UCX: net_netns_driver exited $rc"
fi

[ "$failed" = 0 ] && echo "PASS"
exit "$failed"
