#!/bin/bash
# dfccl-info checks the environment as communicator init does: exit 0 with no problem; exit 1, naming each problem on
# stderr, for a value out of range or not a number (marked INVALID in the table), a misspelt DFCCL_* name (with the
# closest known one) and a rule between variables (spin budgets in order); a deprecated name is accepted with a
# warning naming the new one.
# Usage: dfccl_info_test.sh DFCCL_INFO
set -u
info=$1
fail=0
run() {  # run EXPECTED_RC NEEDLE... -- VAR=VALUE...: dfccl-info in an environment of only these variables
  local want=$1 needles=() vars=()
  shift
  while [ "$1" != "--" ]; do needles+=("$1"); shift; done
  shift
  vars=("$@")
  local output rc
  output=$(env -i PATH="$PATH" "${vars[@]}" "$info" 2>&1)
  rc=$?
  if [ "$rc" != "$want" ]; then
    echo "FAIL: ${vars[*]}: exit $rc, want $want"; fail=1
  fi
  for n in "${needles[@]}"; do
    if ! grep -qF -- "$n" <<<"$output"; then echo "FAIL: ${vars[*]}: no '$n' in the output"; fail=1; fi
  done
}
run 0 "DFCCL_IDLE_NS" -- DFCCL_IDLE_NS=1000
run 1 "[set: abc: INVALID]" "DFCCL_IDLE_NS='abc': expected a decimal integer" -- DFCCL_IDLE_NS=abc
run 1 "DFCCL_IDEL_NS is not a DFCCL setting (did you mean DFCCL_IDLE_NS?)" -- DFCCL_IDEL_NS=1000
run 1 "DFCCL_SPIN_MIN_NS and DFCCL_SPIN_INIT_NS <= DFCCL_SPIN_MAX_NS" -- DFCCL_SPIN_MIN_NS=30000000
run 1 "DFCCL_NET_SLOT_BYTES=16392 must be a multiple of 16" -- DFCCL_NET_SLOT_BYTES=16392
run 0 "[set: DFCCL_HOST_SLOTS=4]" "DFCCL_HOST_SLOTS is deprecated: use DFCCL_SLOTS" -- DFCCL_HOST_SLOTS=4
run 1 "DFCCL_HOST_SLOTS='x': expected a decimal integer" -- DFCCL_HOST_SLOTS=x
[ $fail = 0 ] && echo "dfccl-info: every case as expected"
exit $fail
