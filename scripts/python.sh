#!/usr/bin/env bash
# Runs a Python script with the first interpreter that has h5py, numpy and matplotlib (CI: Debian's python3 with
# python3-h5py; GPU machine: the image's python3). Usage: scripts/python.sh script.py [args...]
for py in "${DFCCL_PYTHON:-}" python3 /usr/bin/python3; do
  [ -n "$py" ] || continue
  if "$py" -c "import h5py, numpy, matplotlib" >/dev/null 2>&1; then
    MPLBACKEND=Agg exec "$py" "$@"
  fi
done
echo "scripts/python.sh: no python3 with h5py, numpy and matplotlib (apt-get install python3-h5py python3-matplotlib)" >&2
exit 1
