# Fake hosts on one machine (sourced by the tests of tests/netns/): network namespaces on a bridge, one veth pair
# each, addresses in a private /24 chosen here so that it clashes with no route of this machine, and, per rank, a
# private host name (UTS), IPC namespace and /dev/shm (a tmpfs in a private mount namespace).
#   netns_require          exits 77 (ctest: skipped), saying why, unless we are root with ip netns and unshare
#   netns_setup N          makes namespaces ${NETNS_PREFIX}0..N-1 with addresses ${NETNS_NET}.1..N on bridge
#                          $NETNS_BRIDGE (${NETNS_NET}.254) and installs a trap that removes everything on exit
#   netns_exec I CMD...    runs CMD as fake host fakenode$I: in namespace I, with its own UTS, IPC and /dev/shm
#                          (netns_exec.sh, which other programs can run too)
#   netns_cleanup          kills what still runs in the namespaces and deletes them, their veths and the bridge
# Design study: ../shared/reference/multinode-design.md, section 4.1.

NETNS_DIR=$(cd "$(dirname "${BASH_SOURCE[0]:-$0}")" && pwd)

netns_require() {
  if [ "$(id -u)" != 0 ]; then echo "SKIP: network namespaces need root"; exit 77; fi
  for tool in ip unshare mount; do
    command -v "$tool" >/dev/null 2>&1 || { echo "SKIP: '$tool' is not installed"; exit 77; }
  done
  ip netns list >/dev/null 2>&1 || { echo "SKIP: 'ip netns' does not work here"; exit 77; }
  unshare --mount --ipc --uts true 2>/dev/null || { echo "SKIP: unshare --mount --ipc --uts is not permitted"; exit 77; }
}

# A 10.X.Y.0/24 that no interface or route of this machine uses.
netns_pick_net() {
  local i x y
  for i in $(seq 0 200); do
    x=$((200 + ($$ + i) % 50)); y=$(( ($$ / 50 + i * 7) % 250 ))
    if ! ip -4 route show | grep -q "^10\.$x\.$y\." && ! ip -4 addr show | grep -q "inet 10\.$x\.$y\."; then
      echo "10.$x.$y"; return 0
    fi
  done
  return 1
}

netns_cleanup() {
  local i pid
  for i in $(seq 0 $((NETNS_N - 1))); do
    for pid in $(ip netns pids "${NETNS_PREFIX}$i" 2>/dev/null); do kill -9 "$pid" 2>/dev/null; done
    ip netns del "${NETNS_PREFIX}$i" 2>/dev/null
    ip link del "${NETNS_VETH}h$i" 2>/dev/null
  done
  ip link del "$NETNS_BRIDGE" 2>/dev/null
  return 0
}

netns_setup() {
  NETNS_N=$1
  local id=$(( $$ % 100000 )) i
  NETNS_PREFIX="dfcclns${id}-"
  NETNS_BRIDGE="dfb${id}"
  NETNS_VETH="dfv${id}"
  NETNS_NET=$(netns_pick_net) || { echo "FAIL: no free 10.x.y.0/24 for the test"; exit 1; }
  export NETNS_N NETNS_PREFIX NETNS_BRIDGE NETNS_VETH NETNS_NET
  trap 'netns_cleanup' EXIT
  trap 'exit 130' INT TERM
  ip link add "$NETNS_BRIDGE" type bridge || exit 1
  ip addr add "$NETNS_NET.254/24" dev "$NETNS_BRIDGE" && ip link set "$NETNS_BRIDGE" up || exit 1
  for i in $(seq 0 $((NETNS_N - 1))); do
    ip netns add "${NETNS_PREFIX}$i" || exit 1
    ip link add "${NETNS_VETH}h$i" type veth peer name "${NETNS_VETH}n$i" || exit 1
    ip link set "${NETNS_VETH}n$i" netns "${NETNS_PREFIX}$i" || exit 1
    ip link set "${NETNS_VETH}h$i" master "$NETNS_BRIDGE" && ip link set "${NETNS_VETH}h$i" up || exit 1
    ip -n "${NETNS_PREFIX}$i" addr add "$NETNS_NET.$((i + 1))/24" dev "${NETNS_VETH}n$i" || exit 1
    ip -n "${NETNS_PREFIX}$i" link set "${NETNS_VETH}n$i" up && ip -n "${NETNS_PREFIX}$i" link set lo up || exit 1
  done
}

netns_exec() { "$NETNS_DIR/netns_exec.sh" "$@"; }
