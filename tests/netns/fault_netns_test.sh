#!/usr/bin/env bash
# fault_netns_test.sh HARNESS WORKLOADS_DIR [TRIALS]: the fault workload (docs/harness.md, "Fault workload") with 4
# ranks on 2 fake hosts, 2 ranks each (ranks 0-1 and 2-3; netns_lib.sh, NETNS_SHARED_SHM=1), every connection between
# the hosts through the net proxy over UCX tcp and the shrink's agreement over TCP. Needs root (exits 77 without it).
# Fails when a trial is not completed (a survivor hung past run.timeout, failed or was not exact), when an element is
# wrong, or when the file does not say 2 hosts; with scripts/python.sh's Python it also reads the file back
# (tests/scripts/fault_file_test.py). Prints the harness's summary line.
set -u
harness=${1:?usage: fault_netns_test.sh HARNESS WORKLOADS_DIR [TRIALS]}
workloads=${2:?workloads dir}
trials=${3:-5}
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
. "$here/netns_lib.sh"
netns_require
command -v mpirun >/dev/null 2>&1 || { echo "SKIP: no mpirun"; exit 77; }
netns_setup 2
dir=$(mktemp -d /tmp/dfccl-fault-netns.XXXXXX)
trap 'netns_cleanup; rm -rf "$dir"' EXIT
export NETNS_RANKS_PER_HOST=2 NETNS_SHARED_SHM=1
unset DFCCL_NET_FORCE

"$here/mpirun_netns.sh" 4 env UCX_TLS=tcp,self "$harness" --workload "$workloads/fault.toml" --backend host \
  --trials "$trials" --quiet --overwrite --out "$dir/fault.h5" --expect "completed==$trials" \
  --expect deadlocked==0 --expect failed==0 --expect skipped==0 --expect wrong==0 > "$dir/out" 2>&1
rc=$?
grep -E "^# fault|expect|FAIL|rror" "$dir/out" | head -20
if [ "$rc" != 0 ]; then
  tail -30 "$dir/out"
  echo "FAIL: the fault workload across 2 fake hosts exited $rc"
  exit 1
fi
if "$root/scripts/python.sh" -c "" 2>/dev/null; then
  PYTHONDONTWRITEBYTECODE=1 "$root/scripts/python.sh" "$root/tests/scripts/fault_file_test.py" "$dir/fault.h5" \
    "$trials" || { echo "FAIL: the file does not read back"; exit 1; }
  PYTHONDONTWRITEBYTECODE=1 "$root/scripts/python.sh" -c "
import sys; sys.path.insert(0, '$root/scripts'); import dfccl_results as dr
df = dr.faults('$dir/fault.h5')
sys.exit(0 if (df.nhosts == 2).all() else 'FAIL: the file says nhosts %s, not 2' % sorted(set(df.nhosts)))" || exit 1
fi
echo "OK: fault workload, $trials trials, 4 ranks on 2 fake hosts"
