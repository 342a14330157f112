#!/usr/bin/env bash
# Binaries built on the CPU machine, carried to the GPU machine compressed: a device call carries at most 64 MiB with
# the tree, and one test binary is about 7 MiB (its device code), while xz packs eight of them into about 5 MiB.
# Building there instead costs 2-3 minutes of device time per machine.
#   scripts/device/carry.sh pack <build dir>...  (CPU machine) packs each <build dir>/bin into build-dev/pack/bins.tar.xz
#   scripts/device/carry.sh torch                (CPU machine) builds dfccl_shared in build-dev and the torch extension
#                                                for the GPU machine's Python (3.12) into build-dev/python, packed into
#                                                build-dev/pack/torch.tar.xz (venv: $DFCCL_TORCH312_VENV)
#   scripts/device/carry.sh unpack               (GPU machine) unpacks what was packed, in the repository root
# Carry build-dev/pack and .deps ("carry": [".deps", "build-dev/pack"]). The torch tests then run with
# LD_LIBRARY_PATH=$PWD/build-dev/lib DFCCL_TORCH_PYTHON=$(command -v python3) tests/python/run_pytest.sh build-dev ...
set -euo pipefail
cd "$(dirname "$0")/../.."
pack=build-dev/pack
case ${1:-} in
  pack)
    shift
    [ $# -gt 0 ] || { echo "carry.sh pack: name at least one build dir" >&2; exit 2; }
    mkdir -p "$pack"
    bins=()
    for d in "$@"; do
      [ -d "$d/bin" ] || { echo "carry.sh pack: $d/bin does not exist" >&2; exit 2; }
      bins+=("$d/bin")
    done
    tar cJf "$pack/bins.tar.xz" "${bins[@]}"
    du -h "$pack/bins.tar.xz"
    ;;
  torch)
    venv=${DFCCL_TORCH312_VENV:-/root/.cache/dfccl/venv-torch312}
    if [[ ! -x $venv/bin/python ]]; then  # the GPU machine's Python and torch (docs of the device tool: 3.12, 2.11)
      python3.12 -m venv "$venv"
      "$venv/bin/pip" install --progress-bar off torch==2.11.0 "setuptools>=64" wheel ninja numpy
    fi
    cmake --build build-dev -j2 --target dfccl_shared
    rm -rf build-dev/python
    DFCCL_TORCH_PYTHON=$venv/bin/python bash tests/python/run_pytest.sh build-dev build
    mkdir -p "$pack"
    tar cJf "$pack/torch.tar.xz" build-dev/lib/libdfccl.so* build-dev/python/lib
    du -h "$pack/torch.tar.xz"
    ;;
  unpack)
    for f in "$pack"/bins.tar.xz "$pack"/torch.tar.xz; do
      if [ -f "$f" ]; then tar xJf "$f"; fi
    done
    ;;
  *)
    echo "usage: carry.sh pack <build dir>... | torch | unpack" >&2
    exit 2
    ;;
esac
