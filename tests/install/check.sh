#!/usr/bin/env bash
# Installs the build in $1 into a temporary prefix, then checks what another project sees there:
#   - libdfccl.so has a versioned SONAME and exports only dfccl* symbols (nm -D);
#   - a consumer builds and runs with find_package(dfccl) and with pkg-config.
#   tests/install/check.sh <build dir>        (ctest: install_consumer)
set -euo pipefail
build=$(cd "$1" && pwd)
here=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
prefix=$work/prefix
cmake --install "$build" --prefix "$prefix" > "$work/install.log"
lib=$(ls "$prefix"/lib*/libdfccl.so | head -1)
libdir=$(dirname "$lib")
soname=$(objdump -p "$lib" | awk '/SONAME/ {print $2}')
[[ "$soname" =~ ^libdfccl\.so\.[0-9]+$ ]] || { echo "FAILED: SONAME is '$soname'"; exit 1; }
others=$(nm -D --defined-only "$lib" | awk '{print $NF}' | grep -v '^dfccl' || true)
[ -z "$others" ] || { echo "FAILED: libdfccl.so exports symbols other than dfccl*:"; echo "$others" | head; exit 1; }
echo "libdfccl.so: SONAME $soname, $(nm -D --defined-only "$lib" | wc -l) symbols, all dfccl*"
cmake -S "$here" -B "$work/cmake" -DCMAKE_PREFIX_PATH="$prefix" -DCMAKE_BUILD_TYPE=Release > "$work/cmake.log"
cmake --build "$work/cmake" > "$work/build.log"
LD_LIBRARY_PATH=$libdir "$work/cmake/consumer"
export PKG_CONFIG_PATH=$libdir/pkgconfig
# shellcheck disable=SC2046
cc "$here/consumer.c" -o "$work/consumer-pc" $(pkg-config --cflags --libs dfccl)
LD_LIBRARY_PATH=$libdir "$work/consumer-pc"
echo "PASSED: find_package(dfccl) and pkg-config consumers of $prefix"
