#!/usr/bin/env bash
# shrink_netns_test.sh MODE SCENARIO VICTIM LATE SHRINK_PEER: dfcclCommShrink across hosts (docs/design.md, "Shrink")
# with 4 ranks on 2 fake hosts, 2 ranks each (ranks 0-1 and 2-3), every connection between the hosts through the net
# proxy over UCX tcp. shrink_peer's header says what each rank does and checks; rank 0 makes the unique id (its process
# hosts the rendezvous root). LATE: a survivor that dies during the shrink (-1: none).
#   MODE netns: each host a network namespace with its own host name (netns_lib.sh; needs root, exits 77 without
#               it); /dev/shm is this machine's (NETNS_SHARED_SHM=1: a host's two ranks share it, and the segment
#               names differ by host).
#   MODE plain: the hosts differ by DFCCL_HOSTID only (no root needed).
# Exits 0 when every survivor passed its checks within 30 s; prints every rank's line.
set -u
mode=${1:?usage: shrink_netns_test.sh netns|plain SCENARIO VICTIM LATE SHRINK_PEER}
scen=${2:?scenario}
victim=${3:?victim}
late=${4:?late}
bin=${5:?shrink_peer binary}
N=4
. "$(dirname "$0")/netns_lib.sh"
if [ "$mode" = netns ]; then
  netns_require
  netns_setup 2
fi
dir=$(mktemp -d /tmp/dfccl-shrink.XXXXXX)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null; done
  [ "$mode" = netns ] && netns_cleanup
  rm -rf "$dir"
}
trap cleanup EXIT
export UCX_TLS=tcp,self DFCCL_INIT_TIMEOUT_MS=20000 NETNS_SHARED_SHM=1
unset DFCCL_NET_FORCE

t0=$(date +%s%N)
for r in $(seq 0 $((N - 1))); do
  h=$((r / 2))
  args=("$scen" --rank "$r" --nranks "$N" --victim "$victim" --late "$late" --dir "$dir")
  if [ "$mode" = netns ]; then
    UCX_NET_DEVICES=${NETNS_VETH}n$h "$NETNS_DIR/netns_exec.sh" "$h" "$bin" "${args[@]}" > "$dir/out$r" 2>&1 &
  else
    DFCCL_HOSTID=shrinkhost$h "$bin" "${args[@]}" > "$dir/out$r" 2>&1 &
  fi
  pids[r]=$!
done

fail=0
for r in $(seq 0 $((N - 1))); do
  for _ in $(seq 1 300); do kill -0 "${pids[r]}" 2>/dev/null || break; sleep 0.1; done
  if kill -0 "${pids[r]}" 2>/dev/null; then
    echo "rank $r: FAIL did not end within 30 s (a hang)"
    fail=1
    continue
  fi
  wait "${pids[r]}"
  rc=$?
  dead=0
  [ "$scen" != exclude ] && [ "$r" = "$victim" ] && dead=1
  [ "$r" = "$late" ] && dead=1
  if [ "$dead" = 1 ]; then
    [ "$rc" = 137 ] || { echo "rank $r: FAIL was to die of SIGKILL, exit status $rc"; fail=1; }
  elif [ "$rc" != 0 ]; then
    echo "rank $r: FAIL exit status $rc"
    fail=1
  fi
done
for r in $(seq 0 $((N - 1))); do grep -E "^rank|FAIL|WARN" "$dir/out$r" | sed 's/^/  /' | head -8; done
echo "$mode $scen (victim $victim, late $late): $(( ($(date +%s%N) - t0) / 1000000 )) ms in all"
if [ "$fail" != 0 ]; then echo "FAIL: $mode $scen"; exit 1; fi
echo "OK: $mode $scen"
