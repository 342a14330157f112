#!/usr/bin/env bash
# Runs a Python script with the first interpreter that has h5py, numpy, pandas and matplotlib (CI: Debian's python3
# with python3-h5py and python3-pandas, which scripts/install_deps.sh installs; GPU machine: the image's python3).
# Usage: scripts/python.sh script.py [args...]
for py in "${DFCCL_PYTHON:-}" python3 /usr/bin/python3; do
  [ -n "$py" ] || continue
  if "$py" -c "import h5py, numpy, pandas, matplotlib" >/dev/null 2>&1; then
    MPLBACKEND=Agg exec "$py" "$@"
  fi
done
echo "scripts/python.sh: no python3 with h5py, numpy, pandas and matplotlib" \
  "(apt-get install python3-h5py python3-pandas python3-matplotlib)" >&2
exit 1
