#!/usr/bin/env bash
# ctest driver of the dfccl_torch tests (label python), and the build step's builder of dfccl_torch.
#   run_pytest.sh <build dir> build            builds dfccl_torch into <build dir>/python unless it is up to date:
#                                              built by this interpreter, after every file it is built from
#                                              (python/setup.py, csrc, dfccl_torch, lib/include/dfccl.h) and after
#                                              the interpreter's torch; then it starts no Python at all
#   run_pytest.sh <build dir> build-if-torch   the same, but exits 0 where there is no Python with torch (the build
#                                              step, target dfccl_torch_ext: a build without torch goes on)
#   run_pytest.sh <build dir> <pytest args...> runs pytest on python/tests with that build first on PYTHONPATH
# The interpreter is $DFCCL_TORCH_PYTHON, else the venv .ci/run creates (/root/.cache/dfccl/venv-torch). Exits 77
# (ctest: skipped) when it is missing or has no torch.
set -euo pipefail
build=$(cd "$1" && pwd)
shift
src=$(cd "$(dirname "$0")/../.." && pwd)
py=${DFCCL_TORCH_PYTHON:-/root/.cache/dfccl/venv-torch/bin/python}
out=$build/python
stamp=$out/dfccl_torch.stamp  # the interpreter that built $out/lib, written once the build succeeded
if [[ ${1:-} == build || ${1:-} == build-if-torch ]] && [[ -x $py && -f $stamp && $(cat "$stamp") == "$py" ]] &&
  compgen -G "$out/lib/dfccl_torch/_C*.so" > /dev/null; then
  torch_version=$(compgen -G "$(dirname "$py")/../lib/python3*/site-packages/torch/version.py" | head -1 || true)
  if [[ -n $torch_version ]] && [[ -z $(find "$src/python/setup.py" "$src/python/pyproject.toml" "$src/python/csrc" \
    "$src/python/dfccl_torch" "$src/lib/include/dfccl.h" "$torch_version" -newer "$stamp" -print -quit) ]]; then
    exit 0
  fi
fi
# --device cuda: no NVIDIA device node, no GPU for torch either (skipped without starting Python).
if [[ " $* " == *" --device cuda "* ]] && ! compgen -G "/dev/nvidia[0-9]*" > /dev/null && [[ ! -e /dev/dxg ]]; then
  echo "run_pytest.sh: --device cuda but no GPU device node (/dev/nvidia*, /dev/dxg): skipped"
  exit 77
fi
# Found, not imported (an import of torch costs seconds of CPU, and pytest imports it next).
if [[ ! -x $py ]] || ! "$py" -c 'import importlib.util as u, sys; sys.exit(u.find_spec("torch") is None)' 2>/dev/null; then
  echo "run_pytest.sh: no Python with torch at $py (set DFCCL_TORCH_PYTHON, or run .ci/run once): skipped"
  [[ ${1:-} == build-if-torch ]] && exit 0
  exit 77
fi
if [[ ${1:-} == build || ${1:-} == build-if-torch ]]; then
  rm -f "$stamp"
  cd "$src/python"
  DFCCL_BUILD_DIR=$build MAX_JOBS=${MAX_JOBS:-2} nice "$py" setup.py -q build_py -d "$out/lib" \
    build_ext -b "$out/lib" -t "$out/tmp"
  echo "$py" > "$stamp"
  exit 0
fi
if [[ ! -f $out/lib/dfccl_torch/__init__.py ]]; then
  echo "run_pytest.sh: $out/lib has no dfccl_torch; run the python_build test first" >&2
  exit 1
fi
if [[ " $* " == *" --device cuda "* ]] && ! "$py" -c 'import sys, torch; sys.exit(0 if torch.cuda.is_available() else 1)'; then
  echo "run_pytest.sh: --device cuda but torch sees no GPU: skipped"
  exit 77
fi
# Out of the source folder, so that python/dfccl_torch (without its extension) does not shadow the build.
cd "$out"
export PYTHONPATH=$out/lib${PYTHONPATH:+:$PYTHONPATH} PYTHONDONTWRITEBYTECODE=1 OMP_NUM_THREADS=1
exec "$py" -m pytest -p no:cacheprovider -q "$@"
