#!/usr/bin/env bash
# docs/results.md, and the README's headline table (between its "headline" markers), are what scripts/results_doc.py
# computes from the HDF5 files in results/: regenerates both into a temporary folder and fails, showing the
# difference, where the committed text differs.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$root/scripts/python.sh" "$root/scripts/results_doc.py" --out "$tmp/results.md"
"$root/scripts/python.sh" "$root/scripts/results_doc.py" --headline >"$tmp/headline.md"
sed -n '/^<!-- headline:/,/^<!-- end of headline -->/{/^<!--/d;p}' "$root/README.md" >"$tmp/readme-headline.md"
status=0
if ! diff -u "$root/docs/results.md" "$tmp/results.md"; then
  echo "docs/results.md is not what results/ gives: run scripts/python.sh scripts/results_doc.py" >&2
  status=1
fi
if ! diff -u "$tmp/readme-headline.md" "$tmp/headline.md"; then
  echo "README.md's headline table is not what results/ gives: paste scripts/python.sh scripts/results_doc.py" \
    "--headline between its markers" >&2
  status=1
fi
[ "$status" = 0 ] && echo "docs/results.md and the README's headline table match results/"
exit "$status"
