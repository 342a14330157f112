#!/bin/sh
# mpirun_netns.sh NP CMD...: runs CMD as NP ranks, rank i in fake host i / NETNS_RANKS_PER_HOST (default 1;
# namespaces made by netns_setup, whose NETNS_* variables must be exported), through rank_wrap.sh. The PMIx server
# listens on the root namespace's loopback unless told to take remote connections on the bridge: without the
# PMIX_MCA_* settings MPI_Init fails with "OPAL ERROR: Unreachable" (design study section 4.1).
np=${1:?usage: mpirun_netns.sh NP CMD...}; shift
: "${NETNS_BRIDGE:?mpirun_netns.sh: NETNS_BRIDGE is not set (netns_setup sets it)}"
export PMIX_MCA_ptl_tcp_remote_connections=1 PMIX_MCA_ptl_tcp_if_include="$NETNS_BRIDGE"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
exec mpirun --oversubscribe --bind-to none -np "$np" --mca oob_tcp_if_include "$NETNS_BRIDGE" \
  --mca pml ob1 --mca btl tcp,self --mca btl_tcp_if_include "$NETNS_NET.0/24" \
  -x NETNS_PREFIX -x NETNS_VETH -x NETNS_NET -x NETNS_SHARED_SHM -x NETNS_RANKS_PER_HOST "$(dirname "$0")/rank_wrap.sh" "$@"
