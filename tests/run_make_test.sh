#!/usr/bin/env bash
# `make test`'s ctest runs (tests/README.md, "Running them in parallel"):
#   tests/run_make_test.sh <build dir> <jobs>
# 1. the tests that share the machine (neither python, serial nor extra), <jobs> at a time;
# 2. the tests labelled serial, one at a time, and beside them the Python chain (label python, one at a time by its
#    RESOURCE_LOCK). Both mostly wait (for peers, timeouts, watchdogs); beside the first run the Python ranks' polls
#    lose their cores and the chain takes twice as long. The Python run's output follows the serial run's. With
#    <jobs> 1, the Python chain runs after the serial tests instead.
# Exits non-zero if any run failed.
set -uo pipefail
build=$1
jobs=$2
cd "$build" || exit 1
ctest=(ctest --output-on-failure --timeout 900)
"${ctest[@]}" -j "$jobs" -LE 'extra|serial|python'
a=$?
log=Testing/python-chain.log
echo "make test: the tests labelled serial, beside the Python chain (its output: $build/$log, printed at its end)"
python_chain() { "${ctest[@]}" -j 2 -L python -LE 'extra|serial' > "$log" 2>&1; }
if ((jobs > 1)); then
  python_chain &
  py=$!
fi
"${ctest[@]}" -j "$jobs" -L serial -LE extra
b=$?
if ((jobs > 1)); then
  wait "$py"
else
  python_chain
fi
c=$?
cat "$log"
[[ $a$b$c == 000 ]]
