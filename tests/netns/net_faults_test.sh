#!/usr/bin/env bash
# net_faults_test.sh MODE SCENARIO NET_FAULT_PEER: one network fault scenario of net_fault_peer (its header says what
# each rank checks) with 4 ranks, each on its own host, so that every connection goes through the net proxy over UCX
# tcp (DFCCL_NET_FORCE unset). Rank 1 is the victim (rank 0 holds the rendezvous root).
#   MODE netns: each rank in its own network namespace with its own host name and /dev/shm (netns_lib.sh; needs root,
#               exits 77 with a message without it); scenario cut runs `ip link set <veth> down` in rank 1's namespace.
#   MODE plain: the ranks are processes of this machine that differ by DFCCL_HOSTID only (no root needed; no cut);
#               NET_FAULT_RANKS_PER_HOST=2 puts ranks 0-1 and 2-3 on one host each (the hierarchical all-reduce).
# Scenario resume: the victim stops as in stop; once every survivor has named it (D/detected<R>), this script sends it
# SIGCONT, and the victim must not blame the survivors, which keep beating, for the time it was stopped.
# Heartbeats: DFCCL_NET_TIMEOUT_MS=1500 (a stopped rank or cut link must be named within 1500 + 1500 ms; a killed
# or aborting one within 2000 ms); the late rank of scenario late is 1000 ms later than that timeout. Init waits up to
# 3000 ms for the ranks. Exits 0 when every rank passed its checks; prints every rank's line and times.
set -u
mode=${1:?usage: net_faults_test.sh netns|plain SCENARIO NET_FAULT_PEER}
scen=${2:?scenario}
bin=${3:?net_fault_peer binary}
N=4
V=1
timeout_ms=1500
. "$(dirname "$0")/netns_lib.sh"
if [ "$mode" = netns ]; then
  netns_require
  netns_setup "$N"
elif [ "$scen" = cut ]; then
  echo "FAIL: scenario cut needs namespaces (mode netns)"
  exit 1
fi

dir=$(mktemp -d /tmp/dfccl-netfault.XXXXXX)
pids=()
cleanup() {
  touch "$dir/release"
  for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null; done
  [ "$mode" = netns ] && netns_cleanup
  rm -rf "$dir"
}
trap cleanup EXIT

case $scen in
  kill | remote_abort | abort_exit | mismatch) bound=2000 ;;
  *) bound=$((timeout_ms + 1500)) ;;
esac
export DFCCL_NET_TIMEOUT_MS=$timeout_ms DFCCL_NET_HEARTBEAT_MS=100 UCX_TLS=tcp,self
unset DFCCL_NET_FORCE

# Starts rank $1 in the background (its own host) and records its pid.
start_rank() {
  local r=$1
  local args=("$scen" --rank "$r" --nranks "$N" --victim "$V" --dir "$dir" --bound-ms "$bound"
    --init-timeout-ms 3000 --late-ms $((timeout_ms + 1000)))
  if [ "$mode" = netns ]; then
    local cut="ip link set dev ${NETNS_VETH}n$r down"
    UCX_NET_DEVICES=${NETNS_VETH}n$r NET_FAULT_CUT=$cut "$NETNS_DIR/netns_exec.sh" "$r" "$bin" "${args[@]}" > "$dir/out$r" 2>&1 &
  else
    DFCCL_HOSTID=fakehost$((r / ${NET_FAULT_RANKS_PER_HOST:-1})) "$bin" "${args[@]}" > "$dir/out$r" 2>&1 &
  fi
  pids[r]=$!
}

t0=$(date +%s%N)
for r in $(seq 0 $((N - 1))); do
  [ "$scen" = missing ] && [ "$r" = "$V" ] && continue
  start_rank "$r"
done

# Scenario resume: continues the victim once every survivor has detected it (bounded: 60 s).
if [ "$scen" = resume ]; then
  (
    for _ in $(seq 1 600); do
      n=0
      for r in $(seq 0 $((N - 1))); do [ -f "$dir/detected$r" ] && n=$((n + 1)); done
      [ "$n" = $((N - 1)) ] && break
      sleep 0.1
    done
    kill -CONT "${pids[V]}"
  ) &
  pids[N]=$!
fi

# Survivors (every rank but the victim) end by themselves; the victim is released (or killed) afterwards.
fail=0
for r in $(seq 0 $((N - 1))); do
  [ "$r" = "$V" ] && continue
  for _ in $(seq 1 600); do kill -0 "${pids[r]}" 2>/dev/null || break; sleep 0.1; done
  if kill -0 "${pids[r]}" 2>/dev/null; then
    echo "rank $r: FAIL did not end within 60 s"
    fail=1
  elif ! wait "${pids[r]}"; then
    fail=1
  fi
done
touch "$dir/release"
if [ "$scen" != missing ]; then
  case $scen in
    kill | stop) kill -9 "${pids[V]}" 2>/dev/null; wait "${pids[V]}" 2>/dev/null ;;
    *)
      for _ in $(seq 1 100); do kill -0 "${pids[V]}" 2>/dev/null || break; sleep 0.1; done
      kill -9 "${pids[V]}" 2>/dev/null
      wait "${pids[V]}" || { echo "rank $V (the victim) failed"; fail=1; }
      ;;
  esac
fi
for r in $(seq 0 $((N - 1))); do [ -f "$dir/out$r" ] && sed 's/^/  /' "$dir/out$r"; done
if [ "$scen" = abort ] && ! cat "$dir"/out* | grep -q "with a network collective pending"; then
  echo "FAIL: no rank aborted with a network collective pending"
  fail=1
fi
echo "$mode $scen: $(( ($(date +%s%N) - t0) / 1000000 )) ms in all"
if [ "$fail" != 0 ]; then echo "FAIL: $mode $scen"; exit 1; fi
echo "OK: $mode $scen"
