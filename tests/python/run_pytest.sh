#!/usr/bin/env bash
# ctest driver of the dfccl_torch tests (label python).
#   run_pytest.sh <build dir> build            builds dfccl_torch into <build dir>/python (incremental)
#   run_pytest.sh <build dir> <pytest args...> runs pytest on python/tests with that build first on PYTHONPATH
# The interpreter is $DFCCL_TORCH_PYTHON, else the venv .ci/run creates (/root/.cache/dfccl/venv-torch). Exits 77
# (ctest: skipped) when it is missing or cannot import torch.
set -euo pipefail
build=$(cd "$1" && pwd)
shift
src=$(cd "$(dirname "$0")/../.." && pwd)
py=${DFCCL_TORCH_PYTHON:-/root/.cache/dfccl/venv-torch/bin/python}
if [[ ! -x $py ]] || ! "$py" -c 'import torch.distributed' 2>/dev/null; then
  echo "run_pytest.sh: no Python with torch at $py (set DFCCL_TORCH_PYTHON, or run .ci/run once): skipped"
  exit 77
fi
out=$build/python
if [[ ${1:-} == build ]]; then
  cd "$src/python"
  DFCCL_BUILD_DIR=$build MAX_JOBS=${MAX_JOBS:-2} nice "$py" setup.py -q build_py -d "$out/lib" \
    build_ext -b "$out/lib" -t "$out/tmp"
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
