#!/usr/bin/env bash
# The harness's command line as nccl-tests users meet it, through real mpirun launches on the host executor
# (docs/harness.md, "Command line"). One case per ctest test:
#   cli_test.sh <mpiexec> <dfccl-harness> <work dir> <case>
# Cases: sweep (no --workload: nccl-tests' table, footer, -J JSON that parses), help (--help lists every setting of
# --list-keys, --version), gate (--expect busbw_mean and NCCL_TESTS_MIN_BW pass and fail), out (--out refused when
# it exists or its folder does not, --overwrite replaces), degenerate (bad sweeps and options refused fast, naming
# the option: a folder as --workload, a backend twice, a malformed --expect, a negative --progress, an unknown
# --section.key with the --list-keys hint, a sweep larger than the host's memory),
# progress (case k/N and an ETA on stderr, none with --quiet), inplace (run.in_place: every collective exact in place,
# nccl-tests' 13 leading fields; off and only).
set -u
mpiexec=$1 harness=$2 dir=$3 case=$4
# Every run here ends by itself (nothing is signalled): when a rank exits non-zero, mpirun kills the others at once
# instead of waiting a second after each of its signals (Open MPI's default), so that a refusal takes what the
# harness takes.
export OMPI_MCA_odls_base_sigkill_timeout=0
mkdir -p "$dir"
cd "$dir" || exit 1
run() {  # run <np> args...: the harness under mpirun on the host executor, stdout in out.txt, stderr in err.txt
  local np=$1
  shift
  timeout 120 "$mpiexec" -np "$np" --oversubscribe --bind-to none "$harness" "$@" > out.txt 2> err.txt
}
fail() {
  echo "FAILED: $*"
  echo "--- stdout"; cat out.txt 2>/dev/null
  echo "--- stderr"; cat err.txt 2>/dev/null
  exit 1
}
small=(--backend host -b 8 -e 64K -f 8 -n 3 -w 1)

case $case in
  sweep)
    rm -f sweep.h5 sweep.json
    run 2 "${small[@]}" --out sweep.h5 -J sweep.json || fail "exit status $?"
    grep -qxF "# Out of bounds values : 0 OK" out.txt || fail "no nccl-tests 'Out of bounds values' footer"
    grep -qE "^# Avg bus bandwidth    : [0-9.e+-]+ $" out.txt || fail "no nccl-tests 'Avg bus bandwidth' footer"
    grep -q "time: the median" out.txt || fail "the header does not name the time statistic"
    grep -q "Out-of-place, then in-place" out.txt || fail "the header does not name the two measurements"
    # nccl-tests' data lines: size count type redop root, out-of-place and in-place time algbw busbw #wrong
    rows=$(awk '!/^#/ && $3 == "float32" && $4 == "sum" && $9 == "0" && $13 == "0" && $14 == "all_reduce"' out.txt | wc -l)
    [ "$rows" -eq 5 ] || fail "expected 5 table rows (8 B to 64K by 8) in nccl-tests' columns, saw $rows"
    [ -s sweep.h5 ] || fail "no HDF5 file"
    python3 -m json.tool sweep.json > /dev/null || fail "-J output does not parse"
    python3 - sweep.json << 'EOF' || fail "-J content"
import json, sys
d = json.load(open(sys.argv[1]))
b = d["backends"][0]
assert d["status"] == "complete" and b["backend"] == "host", d["status"]
assert [r["size"] for r in b["results"]] == [8, 64, 512, 4096, 32768], [r["size"] for r in b["results"]]
assert d["in_place"] == "both", d["in_place"]
assert all(r["out_of_place"]["nwrong"] == 0 and r["in_place"]["nwrong"] == 0 for r in b["results"])
assert b["out_of_bounds"] == {"count": 0, "okay": True}
assert b["average_bus_bandwidth"]["okay"] == "unchecked"
EOF
    ;;
  inplace)
    # nccl-tests' in-place measurement (run.in_place): every collective exact in place on 2 ranks, in nccl-tests' 13
    # leading fields; the HDF5 rows say which measurement; off and only change the table as documented.
    colls=all_reduce,all_gather,reduce_scatter,broadcast,reduce
    rm -f ip.h5 ip.json
    run 2 --backend host -b 8 -e 64K -f 8 -n 2 -w 1 --collectives $colls --op max --out ip.h5 -J ip.json \
      --expect rows==50 --expect wrong==0 --expect completed==50 || fail "exit status $?"
    grep -qxF "# Out of bounds values : 0 OK" out.txt || fail "no nccl-tests 'Out of bounds values' footer"
    for c in ${colls//,/ }; do
      n=$(awk -v c="$c" '!/^#/ && NF == 20 && $9 == "0" && $13 == "0" && $6 + 0 > 0 && $10 + 0 > 0 && $14 == c' out.txt | wc -l)
      [ "$n" -eq 5 ] || fail "$c: expected 5 exact rows with both measurements in fields 6-13, saw $n"
    done
    python3 - ip.json << 'EOF' || fail "-J content"
import json, sys
d = json.load(open(sys.argv[1]))
rs = d["backends"][0]["results"]
assert len(rs) == 25, len(rs)
assert all(r[k]["nwrong"] == 0 and r[k]["time"] > 0 for r in rs for k in ("out_of_place", "in_place")), rs
EOF
    run 2 --backend host -b 1K -e 1K --collectives $colls -n 1 -w 0 --in_place only --out ip.h5 --overwrite \
      --expect rows==5 --expect wrong==0 || fail "only: exit status $?"
    grep -q "In-place only" out.txt || fail "only: the header does not say so"
    n=$(awk '!/^#/ && NF == 16 && $9 == "0" && substr($0, 49, 36) ~ /^ *$/' out.txt | wc -l)
    [ "$n" -eq 5 ] || fail "only: expected 5 rows with blank out-of-place fields and in-place #wrong 0, saw $n"
    run 2 --backend host -b 1K -e 1K --collectives $colls -n 1 -w 0 --in_place off --out ip.h5 --overwrite \
      --expect rows==5 || fail "off: exit status $?"
    grep -q "Out-of-place only" out.txt || fail "off: the header does not say so"
    n=$(awk '!/^#/ && NF == 16 && $9 == "0" && $10 ~ /^[a-z_]+$/' out.txt | wc -l)
    [ "$n" -eq 5 ] || fail "off: expected 5 rows of nccl-tests' 9 fields, then the harness's, saw $n"
    ;;
  help)
    "$harness" --help > out.txt 2> err.txt || fail "--help exit status"
    keys=$("$harness" --list-keys | awk '/^  [a-z_.]+ / && !/^    / {print $1}')
    n=0
    for k in $keys; do
      grep -qE -- "--$k( |,|$)" out.txt || fail "--help does not list --$k"
      n=$((n + 1))
    done
    [ "$n" -ge 50 ] || fail "only $n keys from --list-keys"
    for opt in -b -e -f -i -n -w -c -o -d -r -T -J -g -t -a --version --workload --out --overwrite; do
      grep -qE -- "(^|[ ,])$opt( |,)" out.txt || fail "--help does not list $opt"
    done
    "$harness" --version > out.txt 2> err.txt || fail "--version exit status"
    grep -qE "^dfccl-harness [0-9]+\.[0-9]+\.[0-9]+ \(git [0-9a-f]+" out.txt || fail "--version: no version and revision"
    ;;
  gate)
    rm -f gate.h5
    run 2 "${small[@]}" --out gate.h5 --overwrite --expect "busbw_mean>0" --expect "all_reduce:busbw_mean>=1e-9" \
      --expect "host:all_reduce:busbw_mean>0" || fail "a bandwidth gate that holds failed"
    run 2 "${small[@]}" --out gate.h5 --overwrite --expect "all_reduce:busbw_mean>=1e9"
    rc=$?
    [ "$rc" -eq 1 ] || fail "busbw_mean>=1e9 should fail with exit status 1, got $rc"
    grep -q "expectation 'all_reduce:busbw_mean>=1e9' does not hold: busbw_mean is" err.txt || fail "no message"
    NCCL_TESTS_MIN_BW=1e9 run 2 "${small[@]}" --out gate.h5 --overwrite
    rc=$?
    [ "$rc" -eq 1 ] || fail "NCCL_TESTS_MIN_BW=1e9 should fail with exit status 1, got $rc"
    grep -qE "^# Avg bus bandwidth    : [0-9.e+-]+ FAILED$" out.txt || fail "footer does not say FAILED"
    NCCL_TESTS_MIN_BW=1e-9 run 2 "${small[@]}" --out gate.h5 --overwrite || fail "NCCL_TESTS_MIN_BW=1e-9 failed"
    grep -qE "^# Avg bus bandwidth    : [0-9.e+-]+ OK$" out.txt || fail "footer does not say OK"
    ;;
  out)
    rm -rf out.h5 sub
    echo keep > out.h5
    run 2 "${small[@]}" --out out.h5
    rc=$?
    [ "$rc" -eq 2 ] || fail "an existing --out should be refused with exit status 2, got $rc"
    grep -q -- "--out out.h5: the file exists (give --overwrite" err.txt || fail "no message naming --out"
    [ "$(cat out.h5)" = keep ] || fail "the existing file was touched"
    run 2 "${small[@]}" --out sub/x.h5
    rc=$?
    [ "$rc" -eq 2 ] || fail "--out in a missing folder should be refused with exit status 2, got $rc"
    grep -q -- "--out sub/x.h5: the folder sub does not exist" err.txt || fail "no message naming --out's folder"
    [ ! -e sub ] || fail "the folder was created"
    run 2 "${small[@]}" --out out.h5 --overwrite --expect rows==10 || fail "--overwrite did not replace the file"
    ;;
  degenerate)
    check() {  # check <text the message must contain> args...
      local want=$1
      shift
      local t0=$SECONDS
      run 2 --backend host "$@"
      local rc=$?
      [ "$rc" -eq 2 ] || fail "'$*': exit status $rc, expected 2"
      grep -qF -- "$want" err.txt || fail "'$*': the message does not contain '$want'"
      [ $((SECONDS - t0)) -lt 30 ] || fail "'$*' took $((SECONDS - t0)) s to be refused"
    }
    check "'sizes.begin': must be at least 1 byte" -b 0
    check "'sizes.begin': 1048576 is larger than sizes.end (1024)" -b 1M -e 1K
    check "'sizes.factor': 1 never grows" -b 8 -e 1M -f 1
    check "'sizes.step': cannot be combined with sizes.factor 4" -b 8 -e 1M -f 4 -i 8
    check "'sizes.step': gives" -b 1 -e 1G -i 1
    check "'run.iterations': -1 is less than 1" -n -1
    check "'run.warmup': -2 is less than 0" -w -2
    check "'run.trials': 0 is less than 1" --trials 0
    check "-g/--ngpus 2: one GPU per process only" -g 2
    check "-t/--nthreads 2: one thread per process only" -t 2
    check "-a/--average 1:" -a 1
    NCCL_TESTS_MIN_BW=abc check "NCCL_TESTS_MIN_BW: 'abc' is not a bandwidth"
    check "--workload: '.' is a folder, not a workload file" --workload .
    check "'run.backend': host is given twice" --backend host,host
    check "--expect 'bogus': no comparison" --expect bogus
    check "--progress -1: the seconds between progress lines must be 0 or more" --progress -1
    check "unknown option --run.bogus (dfccl-harness --list-keys lists the workload keys" --run.bogus 1
    check "all_reduce of 1 TiB in groups of 2, needs at least 2 TiB of host memory per rank" -b 1T -e 1T
    ;;
  progress)
    rm -f p.h5
    run 2 "${small[@]}" --trials 2 --out p.h5 --overwrite --progress 0 || fail "exit status $?"
    n=$(grep -cE "^# \[host 1/1\] case ([1-9]|10)/10: .* elapsed, ETA " err.txt)
    [ "$n" -eq 10 ] || fail "expected 10 progress lines (one per case: 5 sizes, out-of-place and in-place), saw $n"
    grep -q "ETA" out.txt && fail "progress lines on stdout"
    run 2 "${small[@]}" --trials 2 --out p.h5 --overwrite --progress 0 --quiet || fail "exit status $?"
    grep -q "ETA" err.txt && fail "a progress line with --quiet"
    ;;
  *)
    echo "unknown case $case"
    exit 2
    ;;
esac
echo "OK: $case"
