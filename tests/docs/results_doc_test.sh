#!/usr/bin/env bash
# docs/results.md is what scripts/results_doc.py computes from the HDF5 files in results/: regenerates it into a
# temporary folder and fails, showing the difference, where the committed page differs.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$root/scripts/python.sh" "$root/scripts/results_doc.py" --out "$tmp/results.md"
if ! diff -u "$root/docs/results.md" "$tmp/results.md"; then
  echo "docs/results.md is not what results/ gives: run scripts/python.sh scripts/results_doc.py" >&2
  exit 1
fi
echo "docs/results.md matches results/"
