#!/bin/bash
# A run that does not reach its end still leaves its file (docs/harness.md, "Interrupted runs"; docs/hdf5-layout.md,
# "When the file is written"). Starts a long host-executor run of 2 ranks, waits until the file holds 3 finished
# trials, then, by MODE:
#   kill9    kill -9 every rank: the file is readable, status running, and keeps the finished trials;
#   kill9-busy  the same with trials of 20 iterations, so that the writer is often inside a checkpoint, killed
#            after a random 0-300 ms more (the CMake test runs it 10 times);
#   kill9-rank  kill -9 of rank 1 only: mpirun ends the job (SIGTERM to rank 0): readable, exit non-zero;
#   sigint   SIGINT to every rank (Ctrl-C in a terminal): status "interrupted (SIGINT)", exit non-zero;
#   sigterm  SIGTERM to mpirun (which passes SIGTERM on to the ranks): status "interrupted (SIGTERM)", exit non-zero;
#   sigstop  SIGSTOP to rank 1 for good: within run.timeout (2 s) plus a few seconds the run ends, its trial recorded
#            as stalled naming rank 1 (file and console), exit non-zero.
# Usage: interrupt_test.sh MODE MPIEXEC HARNESS H5CHECK WORKLOADS_DIR OUT_DIR
set -u
mode=$1 mpiexec=$2 harness=$3 h5check=$4 workloads=$5 out=$6
file=$out/interrupt_$mode.h5
log=$out/interrupt_$mode.log
rm -f "$file" "$log"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
# kill9, kill9-busy: every rank is killed, none is left for mpirun to give time after its SIGTERM; it kills at once
# instead of waiting a second after each of its signals (Open MPI's default, which the other modes need: the ranks
# that survive write their file's status).
case $mode in kill9 | kill9-busy) export OMPI_MCA_odls_base_sigkill_timeout=0 ;; esac

fail() {
  echo "FAIL ($mode): $*"
  echo "--- harness output"; tail -30 "$log"
  [ -f "$file" ] && "$h5check" "$file"
  kill -KILL "${ranks[@]}" "$launcher" 2>/dev/null
  exit 1
}

iters=20
"$mpiexec" -np 2 --oversubscribe --bind-to none "$harness" --workload "$workloads/sweep.toml" --backend host \
  --collectives all_reduce --begin 1K --end 1K --iters "$iters" --warmup 0 --trials 100000 --timeout 2 \
  --out "$file" >"$log" 2>&1 &
launcher=$!
ranks=()

# The rank processes are mpirun's children; their world rank is in their environment.
rank_pid() {
  for p in $(pgrep -P "$launcher"); do
    if tr '\0' '\n' <"/proc/$p/environ" 2>/dev/null | grep -qx "OMPI_COMM_WORLD_RANK=$1"; then echo "$p"; return; fi
  done
}

for _ in $(seq 1 300); do  # up to 60 s for 3 finished trials
  sleep 0.2
  kill -0 "$launcher" 2>/dev/null || fail "the run ended before it was interrupted"
  [ -f "$file" ] && "$h5check" "$file" "completed>=3" >/dev/null 2>&1 && break
done
ranks=($(rank_pid 0) $(rank_pid 1))
[ ${#ranks[@]} -eq 2 ] || fail "rank processes not found"

start=$(date +%s)
case $mode in
  kill9) kill -KILL "${ranks[@]}" ;;
  kill9-busy) sleep "0.$(printf %03d $((RANDOM % 300)))"; kill -KILL "${ranks[@]}" ;;
  kill9-rank) kill -KILL "${ranks[1]}" ;;
  sigint) kill -INT "${ranks[@]}" ;;
  sigterm) kill -TERM "$launcher" ;;
  sigstop) kill -STOP "${ranks[1]}" ;;
  *) fail "unknown mode" ;;
esac
for _ in $(seq 1 150); do  # up to 30 s for the run to end
  kill -0 "$launcher" 2>/dev/null || break
  sleep 0.2
done
kill -0 "$launcher" 2>/dev/null && fail "the run did not end within 30 s"
wait "$launcher"
rc=$?
took=$(($(date +%s) - start))
kill -CONT "${ranks[1]}" 2>/dev/null

report=$("$h5check" "$file" "completed>=3") || fail "the file is not readable with its finished trials"
status=$(echo "$report" | sed -n 's/.* status: //p')
echo "$report"
echo "exit code $rc, status '$status', ended $took s after the $mode"
case $mode in
  kill9 | kill9-busy) [ "$status" = running ] || fail "status '$status', expected running" ;;
  kill9-rank) [[ "$status" == running || "$status" == "interrupted (SIGTERM)" ]] || fail "status '$status'" ;;
  sigint) [ "$status" = "interrupted (SIGINT)" ] || fail "status '$status'" ;;
  sigterm) [ "$status" = "interrupted (SIGTERM)" ] || fail "status '$status'" ;;
  sigstop)
    [[ "$status" == "stalled: rank 1 stopped responding"* ]] || fail "status '$status'"
    "$h5check" "$file" "stalled==1" >/dev/null || fail "no trial recorded as stalled"
    grep -q "stalled after .*: rank 1 stopped responding" "$log" || fail "no console line names rank 1"
    [ "$took" -le 12 ] || fail "the stall took $took s to end the run" ;;
esac
[[ "$mode" == kill9* && "$mode" != kill9-rank ]] || [ "$rc" -ne 0 ] || fail "exit code 0"
echo "PASS ($mode)"
