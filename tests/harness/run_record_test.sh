#!/bin/bash
# The run's record (docs/hdf5-layout.md): /environment holds every rank's DFCCL_*, NCCL_*, CUDA_* and launcher
# variables, and the root attributes name the driver, CUDA driver and engine settings. Runs 2 ranks with two marker
# variables set and reads the file back with h5dump (skipped without it).
# Usage: run_record_test.sh MPIEXEC HARNESS WORKLOADS_DIR OUT_DIR
set -u
mpiexec=$1 harness=$2 workloads=$3 out=$4
command -v h5dump >/dev/null || { echo "h5dump not found: skipped"; exit 77; }
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
export NCCL_HARNESS_RECORD_MARKER=nccl-marker-17 SLURM_JOB_ID=4242 UNRELATED_HARNESS_MARKER=not-recorded
file=$out/run_record.h5
rm -f "$file"
"$mpiexec" -np 2 --oversubscribe --bind-to none "$harness" --workload "$workloads/sweep.toml" --backend host \
  --collectives all_reduce --begin 1K --end 1K --trials 1 --quiet --out "$file" >/dev/null || { echo "FAIL: run"; exit 1; }
fail() { echo "FAIL: $*"; h5dump -g environment "$file" | tail -30; exit 1; }
names=$(h5dump -d environment/name "$file")
values=$(h5dump -d environment/value "$file")
ranks=$(h5dump -d environment/rank "$file")
[ "$(echo "$names" | grep -o '"NCCL_HARNESS_RECORD_MARKER"' | wc -l)" -eq 2 ] || fail "NCCL_ marker not recorded per rank"
[ "$(echo "$names" | grep -o '"SLURM_JOB_ID"' | wc -l)" -eq 2 ] || fail "SLURM_JOB_ID not recorded per rank"
[ "$(echo "$names" | grep -o '"OMPI_COMM_WORLD_RANK"' | wc -l)" -eq 2 ] || fail "OMPI_COMM_WORLD_RANK not recorded"
echo "$values" | grep -q '"nccl-marker-17"' || fail "marker value missing"
echo "$values" | grep -q '"4242"' || fail "SLURM_JOB_ID value missing"
echo "$names" | grep -q UNRELATED_HARNESS_MARKER && fail "an unrelated variable was recorded"
echo "$ranks" | grep -q '1' || fail "no row of rank 1"
for a in driver_version cuda_driver_version engine_settings nccl_version; do
  h5dump -a "$a" "$file" | grep -q '(0):' || fail "root attribute $a missing"
done
# The dfccl host backend's engine settings, from dfcclCommGetInfo (host executor defaults: 1 channel, 8 slots).
h5dump -a backends/host/engine "$file" | grep -q '1 blocks x 1 threads; 8 slots x 32768 B per lane; 4 + 8 persistent lanes; 4.5 MiB.*from rank 1 through POSIX shared memory, to rank 1 through POSIX shared memory' ||
  fail "backends/host/engine does not describe the engine: $(h5dump -a backends/host/engine "$file" | grep '(0)')"
echo PASS
