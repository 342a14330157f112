#!/usr/bin/env bash
# Installs the build in $1 into a temporary prefix, then checks what another project and a user see there:
#   - the LICENSE; libdfccl.so has a versioned SONAME, exports only dfccl* symbols (nm -D) and needs no libfmt;
#   - a consumer builds and runs with find_package(dfccl) (no LD_LIBRARY_PATH: CMake's rpath), with pkg-config and
#     the documented rpath, and statically with pkg-config --static against libdfccl.a;
#   - with an mpirun ($2), the installed dfccl-harness runs 2 ranks on the host executor from an empty folder and
#     writes its file there (no --out), which the installed dfccl-harness-h5check and dfccl-results read back.
#   tests/install/check.sh <build dir> [mpirun]        (ctest: install_consumer)
set -euo pipefail
build=$(cd "$1" && pwd)
mpirun=${2:-}
here=$(cd "$(dirname "$0")" && pwd)
source_dir=$(cd "$here/../.." && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() { echo "FAILED: $*"; exit 1; }
prefix=$work/prefix
cmake --install "$build" --prefix "$prefix" > "$work/install.log"
cmp -s "$source_dir/LICENSE" "$prefix/share/doc/dfccl/LICENSE" || fail "no LICENSE in $prefix/share/doc/dfccl"
lib=$(ls "$prefix"/lib*/libdfccl.so | head -1)
libdir=$(dirname "$lib")
soname=$(objdump -p "$lib" | awk '/SONAME/ {print $2}')
[[ "$soname" =~ ^libdfccl\.so\.[0-9]+$ ]] || fail "SONAME is '$soname'"
others=$(nm -D --defined-only "$lib" | awk '{print $NF}' | grep -v '^dfccl' || true)
[ -z "$others" ] || { echo "FAILED: libdfccl.so exports symbols other than dfccl*:"; echo "$others" | head; exit 1; }
needed=$(objdump -p "$lib" | awk '/NEEDED/ {print $2}' | tr '\n' ' ')
[[ "$needed" != *fmt* ]] || fail "libdfccl.so needs libfmt at run time: $needed"
echo "libdfccl.so: SONAME $soname, $(nm -D --defined-only "$lib" | wc -l) symbols, all dfccl*; needs $needed"

cmake -S "$here" -B "$work/cmake" -DCMAKE_PREFIX_PATH="$prefix" -DCMAKE_BUILD_TYPE=Release > "$work/cmake.log"
cmake --build "$work/cmake" > "$work/build.log"
env -u LD_LIBRARY_PATH "$work/cmake/consumer"
export PKG_CONFIG_PATH=$libdir/pkgconfig
pc_libdir=$(pkg-config --variable=libdir dfccl)
# shellcheck disable=SC2046
cc "$here/consumer.c" -o "$work/consumer-pc" $(pkg-config --cflags --libs dfccl) -Wl,-rpath,"$pc_libdir"
env -u LD_LIBRARY_PATH "$work/consumer-pc"
# shellcheck disable=SC2046
cc "$here/consumer.c" -o "$work/consumer-static" $(pkg-config --static --cflags --libs dfccl | sed 's/-ldfccl\b/-l:libdfccl.a/')
! objdump -p "$work/consumer-static" | grep -q 'NEEDED.*libdfccl' || fail "the static consumer needs libdfccl.so"
"$work/consumer-static"
echo "PASSED: find_package(dfccl), pkg-config and pkg-config --static consumers of $prefix"

[ -n "$mpirun" ] || exit 0
for f in bin/dfccl-harness bin/dfccl-harness-h5check bin/dfccl-results share/dfccl/workloads/sweep.toml; do
  [ -e "$prefix/$f" ] || fail "$prefix/$f is not installed"
done
mkdir "$work/run"
cd "$work/run"
OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 "$mpirun" -np 2 --oversubscribe --bind-to none \
  "$prefix/bin/dfccl-harness" --workload "$prefix/share/dfccl/workloads/sweep.toml" --backend host \
  --collectives all_reduce -b 8 -e 2K -f 4 -n 2 -w 1 --quiet --expect rows==10 --expect wrong==0 > harness.log 2>&1 ||
  { cat harness.log; fail "the installed dfccl-harness"; }
files=(*.h5)
[ ${#files[@]} = 1 ] && [[ "${files[0]}" == sweep-*.h5 ]] || fail "no sweep-<date>.h5 in the current folder: ${files[*]}"
"$prefix/bin/dfccl-harness-h5check" "${files[0]}" rows==10 wrong==0
python=python3
python3 -c "import h5py, pandas" 2>/dev/null || python="$source_dir/scripts/python.sh"
[ "$python" = python3 ] && reader=("$prefix/bin/dfccl-results") || reader=("$python" "$prefix/bin/dfccl-results")
rows=$("${reader[@]}" "${files[0]}" --csv | tail -n +2 | grep -c ',all_reduce,' || true)
[ "$rows" = 10 ] || fail "dfccl-results read $rows all_reduce rows of ${files[0]}, expected 10"
echo "PASSED: the installed dfccl-harness wrote ${files[0]} in the current folder; dfccl-harness-h5check and" \
  "dfccl-results read its 10 rows"
