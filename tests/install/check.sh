#!/usr/bin/env bash
# Installs the build in $1 into a temporary prefix, then checks what another project and a user see there:
#   - the LICENSE; libdfccl.so has a versioned SONAME, exports only dfccl* symbols (nm -D) and needs no libfmt;
#   - a consumer builds and runs with find_package(dfccl) (no LD_LIBRARY_PATH: CMake's rpath), with pkg-config and
#     the documented rpath, and statically with pkg-config --static against libdfccl.a;
#   tests/install/check.sh <build dir>        (ctest: install_consumer)
set -euo pipefail
build=$(cd "$1" && pwd)
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
