#!/usr/bin/env bash
# Whether the hierarchical all-reduce pays across hosts (issue 35): measures, on fake hosts of this machine
# (network namespaces, tests/netns/netns_lib.sh) with each host's outgoing link shaped to RATE, the flat ring
# all-reduce of the world against the hierarchical one (DFCCL_HIERARCHY=1, lib/src/comm/comm_submit.h) and against its three
# stages timed apart: reduce-scatter inside each host (tp), all-reduce of each 1/L share between hosts (dp: the ranks
# of equal local rank), all-gather inside each host.
# The host executor, the real net proxy over UCX tcp; one harness run per group, then scripts/plot_hierarchy.py.
# Needs root (namespaces, tc). RATE `hostid`: no namespaces and no shaping, the hosts told apart by DFCCL_HOSTID
# alone (UCX over loopback: the network path against shared memory on one machine, without root). Usage:
#   scripts/hierarchy_study.sh OUT_DIR [RATE=1gbit] [HOSTS=2] [PER_HOST=2] [BEGIN=256K] [END=64M]
# Environment: ITERS (default 5), WARMUP (2), HARNESS (build/bin/dfccl-harness).
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:?usage: scripts/hierarchy_study.sh OUT_DIR [RATE] [HOSTS] [PER_HOST] [BEGIN] [END]}
rate=${2:-1gbit} hosts=${3:-2} per=${4:-2} begin=${5:-256K} end=${6:-64M}
harness=$(realpath "${HARNESS:-build/bin/dfccl-harness}")
[ -x "$harness" ] || { echo "hierarchy_study: $harness not built (run make)" >&2; exit 1; }
mkdir -p "$out"
out=$(realpath "$out")

np=$((hosts * per))
if [ "$rate" = hostid ]; then
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 UCX_TLS="${UCX_TLS:-tcp}"
  launch() {  # launch CMD...: np ranks, rank r on host node<r / per>
    mpirun --oversubscribe --bind-to none -np "$np" -x UCX_TLS /bin/sh -c \
      "export DFCCL_HOSTID=node\$((OMPI_COMM_WORLD_RANK / $per)); exec \"\$0\" \"\$@\"" "$@"
  }
else
  . tests/netns/netns_lib.sh
  netns_require
  netns_setup "$hosts"
  for i in $(seq 0 $((hosts - 1))); do  # each host's egress: its "NIC"
    if [ "$rate" != none ]; then
      ip netns exec "${NETNS_PREFIX}$i" tc qdisc add dev "${NETNS_VETH}n$i" root tbf rate "$rate" burst 1mb latency 400ms
    fi
  done
  export NETNS_RANKS_PER_HOST=$per NETNS_SHARED_SHM=1
  launch() { tests/netns/mpirun_netns.sh "$np" "$@"; }
fi
common=(--backend host -e "$end" -f 2 --iters "${ITERS:-5}" --warmup "${WARMUP:-2}" --in_place off
        --tp "$per" --quiet --overwrite)
run() {  # run NAME GROUP COLLECTIVES BEGIN
  echo "== $1: $3 over $2 ($np ranks, $hosts hosts, egress $rate)"
  launch "$harness" "${common[@]}" -b "$4" --sweep.group "$2" --collectives "$3" \
    --out "$out/$1.h5" 2>&1 | grep -v '^#' | tail -n 24
}
b=$(numfmt --from=iec "$begin")
run flat world all_reduce "$b"
(export DFCCL_HIERARCHY=1 && run hier world all_reduce "$b")
run rail dp all_reduce $((b / per))  # the share S / L of each size S
run local tp reduce_scatter,all_gather "$b"
echo "rate=$rate hosts=$hosts per_host=$per begin=$begin end=$end" >"$out/study.txt"
scripts/python.sh scripts/plot_hierarchy.py "$out" --per-host "$per" --label "$hosts hosts x $per ranks, egress $rate"
