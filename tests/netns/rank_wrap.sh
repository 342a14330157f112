#!/bin/sh
# mpirun's per-rank wrapper for fake hosts (tests/netns/netns_lib.sh): runs "$@" as rank $OMPI_COMM_WORLD_RANK in
# namespace ${NETNS_PREFIX}<h>, host name fakenode<h>, with its own IPC namespace and /dev/shm, and UCX on tcp over
# that namespace's veth (UCX picks shared memory across namespaces otherwise; design study section 4.1). h is the
# rank divided by NETNS_RANKS_PER_HOST (default 1: a host per rank); ranks that share a host need
# NETNS_SHARED_SHM=1 (netns_exec.sh), so that their shared memory meets. mpirun_netns.sh launches it.
r=${OMPI_COMM_WORLD_RANK:?rank_wrap.sh: OMPI_COMM_WORLD_RANK is not set (run it under mpirun)}
: "${NETNS_PREFIX:?rank_wrap.sh: NETNS_PREFIX is not set (netns_setup sets it)}"
h=$((r / ${NETNS_RANKS_PER_HOST:-1}))
export UCX_TLS="${UCX_TLS:-tcp,self}" UCX_NET_DEVICES="${UCX_NET_DEVICES:-${NETNS_VETH}n$h}"
exec "$(dirname "$0")/netns_exec.sh" "$h" "$@"
