#!/usr/bin/env bash
# Installs the Debian/Ubuntu packages the build and the tests need, if some are missing (run by `make` before its
# first configure, and by CI). As root it installs them with apt-get; otherwise it prints the command and fails.
# DFCCL_SKIP_DEPS=1 skips the check (machines without apt that bring the header-only packages another way, see
# docs/lab/gpu-runs.md). The CUDA toolkit (nvcc) is expected to be installed already.
set -euo pipefail
[ "${DFCCL_SKIP_DEPS:-0}" = 1 ] && exit 0
# libucx-dev: the network transport (ranks on several hosts; the netns tests); iproute2: those tests' fake hosts;
# ccache: rebuilds (the Makefile uses it where found; CI's fresh clones share its cache in ~/.cache/ccache).
packages=(cmake g++ make ccache libopenmpi-dev openmpi-bin libhdf5-dev libfmt-dev libgtest-dev libucx-dev
          libtomlplusplus-dev libcli11-dev pkg-config iproute2 python3 python3-h5py python3-numpy python3-pandas
          python3-matplotlib)
missing=()
for p in "${packages[@]}"; do
  dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
done
((${#missing[@]} == 0)) && exit 0
if [ "$(id -u)" != 0 ]; then
  echo "install_deps: missing packages; run: sudo apt-get install -y ${missing[*]}" >&2
  exit 1
fi
echo "install_deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -q
apt-get install -y -q --no-install-recommends "${missing[@]}"
