#!/bin/sh
# netns_exec.sh I CMD...: runs CMD as fake host fakenode<I> (netns_lib.sh): in network namespace ${NETNS_PREFIX}<I>,
# with its own host name (UTS), IPC namespace and /dev/shm (a tmpfs in a private mount namespace). It ends in exec:
# what runs in the namespace is CMD itself. The tmpfs may hold NETNS_SHM_SIZE (default 4g: communicators with
# network connections keep their regions and shadows there on the host executor). NETNS_SHARED_SHM=1 keeps this
# machine's /dev/shm and IPC instead.
i=${1:?usage: netns_exec.sh I CMD...}; shift
: "${NETNS_PREFIX:?netns_exec.sh: NETNS_PREFIX is not set (netns_setup sets it)}"
if [ "${NETNS_SHARED_SHM:-0}" = 1 ]; then
  exec ip netns exec "${NETNS_PREFIX}$i" unshare --uts sh -c 'hostname "$0" && exec "$@"' "fakenode$i" "$@"
fi
exec ip netns exec "${NETNS_PREFIX}$i" unshare --mount --ipc --uts --propagation private \
  sh -c 'mount -t tmpfs -o "size=$1" tmpfs /dev/shm && hostname "$0" && shift && exec "$@"' "fakenode$i" \
  "${NETNS_SHM_SIZE:-4g}" "$@"
