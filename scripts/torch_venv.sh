#!/usr/bin/env bash
# Creates or updates the Python venv that the python/ tests (ctest label python) run with: torch 2.11.0 from PyPI
# (the CUDA 13 build, about 4.7 GB with its NVIDIA wheels; it imports and runs CPU tensors without a GPU), pytest,
# numpy, setuptools, wheel, ninja and h5py (the workloads/pytorch examples write HDF5). The venv lives outside the
# checkout, at $DFCCL_TORCH_VENV
# (default /root/.cache/dfccl/venv-torch), and is reused: nothing is downloaded when it already has torch 2.11.0.
set -euo pipefail
venv=${DFCCL_TORCH_VENV:-/root/.cache/dfccl/venv-torch}
want=2.11.0
if [[ -x $venv/bin/python ]] &&
  "$venv/bin/python" -c "import sys, torch, pytest, setuptools, h5py; sys.exit(torch.__version__.split('+')[0] != '$want')" \
    2>/dev/null; then
  echo "torch_venv.sh: $venv has torch $want"
  exit 0
fi
mkdir -p "$(dirname "$venv")"
[[ -x $venv/bin/python ]] || python3 -m venv "$venv"
"$venv/bin/pip" install --progress-bar off --upgrade "torch==$want" pytest numpy "setuptools>=64" wheel ninja h5py
"$venv/bin/python" -c "import torch; print('torch_venv.sh: torch', torch.__version__, 'in $venv')"
