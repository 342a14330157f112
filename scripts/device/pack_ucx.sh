#!/usr/bin/env bash
# Copies this machine's UCX (Debian 12: libucx0, libucx-dev; UCX 1.13.1, needs glibc >= 2.34) into .deps/ucx, for
# GPU machines without UCX: carry .deps, and env.sh points pkg-config and the loader at it when the machine has none.
set -euo pipefail
cd "$(dirname "$0")/../.."
dst=.deps/ucx
lib=/usr/lib/x86_64-linux-gnu
rm -rf "$dst" && mkdir -p "$dst/include" "$dst/lib/pkgconfig" "$dst/lib/ucx"
cp -r /usr/include/ucp /usr/include/uct /usr/include/ucs /usr/include/ucm "$dst/include/"
cp -a "$lib"/libuc{p,t,s,m}.so* "$lib"/libucs_signal.so* "$dst/lib/"
cp -a "$lib"/ucx/*.so* "$dst/lib/ucx/"
# The tools, when ucx-utils is installed: ucx_info (what UCX sees) and ucx_perftest (the network path's ceiling).
mkdir -p "$dst/bin"
for b in ucx_info ucx_perftest; do [ -x /usr/bin/$b ] && cp /usr/bin/$b "$dst/bin/"; done
for pc in "$lib"/pkgconfig/ucx*.pc; do
  sed -e 's|^prefix *=.*|prefix = ${pcfiledir}/../..|' -e 's|^libdir *=.*|libdir = ${prefix}/lib|' "$pc" > "$dst/lib/pkgconfig/$(basename "$pc")"
done
du -sh "$dst"
