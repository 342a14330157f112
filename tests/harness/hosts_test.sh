#!/usr/bin/env bash
# The harness across hosts (docs/harness.md, "Across hosts"): a small exact sweep on the host executor, then
# hosts_check.py reads the file and the -J document: each rank's host, nhosts, and every ring hop's transport
# (network exactly between two hosts, else shared memory).
#   one-host   3 ranks on this machine: 1 host, every hop shared memory
#   two-hosts  4 ranks, DFCCL_HOSTID node0 for ranks 0-1 and node1 for ranks 2-3: 2 hosts, hops 1->2 and 3->0 on
#              the network; with a library built without the network transport, the run is refused before
#              anything runs (exit 2, the reason on stderr, no file)
#   netns      3 ranks on 3 fake hosts (tests/netns: a network namespace each, own host name and /dev/shm), their
#              host names as hosts: every hop on the network. Root only: exits 77 (skipped) with a message without
#              root, namespaces or a network transport.
# Usage: hosts_test.sh MODE MPIEXEC HARNESS OUT_DIR
set -u
mode=$1 mpiexec=$2 harness=$3 out=$4
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
h5="$out/hosts_$mode.h5" js="$out/hosts_$mode.json"
rm -f "$h5" "$js"
sweep=(--backend host --collectives all_reduce,all_gather -b 1K -e 64K -f 4 -n 3 -w 1 --in_place off --timeout 30
       --out "$h5" -J "$js" --expect completed==8 --expect failed==0 --expect wrong==0 --expect rows==8)
network=0
"$(dirname "$harness")/dfccl-info" | grep -q "^Build features: network transport UCX" && network=1
log=$(mktemp)
trap 'rm -f "$log"' EXIT
t0=$SECONDS

run() {  # run NP CMD...: mpirun, output in $log; sets rc
  "$mpiexec" -np "$1" --oversubscribe --bind-to none "${@:2}" > "$log" 2>&1
  rc=$?
}

case $mode in
  one-host)
    run 3 "$harness" "${sweep[@]}"
    expected="*,*,*" ;;
  two-hosts)
    run 4 /bin/sh -c 'DFCCL_HOSTID=node$((OMPI_COMM_WORLD_RANK / 2)) exec "$0" "$@"' "$harness" "${sweep[@]}"
    expected="node0,node0,node1,node1"
    if [ "$network" = 0 ]; then
      grep "^dfccl-harness" "$log"
      [ "$rc" = 2 ] || { echo "FAIL: exit code $rc, expected 2 (refused)"; tail -20 "$log"; exit 1; }
      grep -q "^dfccl-harness: the ranks run on 2 hosts (node0, node1), but this dfccl library was built without the network transport" "$log" ||
        { echo "FAIL: no refusal naming the hosts and the missing transport"; exit 1; }
      [ ! -e "$h5" ] || { echo "FAIL: $h5 was written"; exit 1; }
      echo "PASS: refused before anything ran (this library has no network transport)"
      exit 0
    fi ;;
  netns)
    [ "$network" = 1 ] || { echo "SKIP: dfccl was built without the network transport (UCX)"; exit 77; }
    . "$root/tests/netns/netns_lib.sh"
    netns_require
    netns_setup 3
    timeout -k 10 300 "$NETNS_DIR/mpirun_netns.sh" 3 "$harness" "${sweep[@]}" > "$log" 2>&1
    rc=$?
    expected="fakenode0,fakenode1,fakenode2" ;;
  *) echo "unknown mode $mode"; exit 2 ;;
esac
grep -E "^# [0-9]+ hosts?:|^# ring hops|^# Results|^# Expectations|^dfccl-harness" "$log"
echo "mpirun exit code $rc after $((SECONDS - t0)) s"
[ "$rc" = 0 ] || { echo "FAIL: exit code $rc"; tail -30 "$log"; exit 1; }
grep -q "^# ring hops: world: " "$log" || { echo "FAIL: the console shows no ring hops"; exit 1; }
"$root/scripts/python.sh" "$here/hosts_check.py" "$h5" "$js" "$expected" || exit 1
echo PASS
