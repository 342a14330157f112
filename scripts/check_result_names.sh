#!/usr/bin/env bash
# Fails, listing each place, when a tracked text file names a result by a numbered label instead of its run number,
# date and commit (docs/contributing.md, "Habits"). The labels it looks for: the word "session" or "sessions" followed
# by a number (any case, "-", "_" or "#" between them allowed); an upper-case S followed by one to three digits as a
# word of its own; and script and branch names built from such a label, that is a lower-case s, one to three digits,
# an optional letter and ".sh", or those digits followed by a hyphen and a word, or such a name under ".device/". The
# patterns below do not match their own text, so nothing is excluded.
# Usage: scripts/check_result_names.sh [repository root, default: this script's]. Exit 0: none found; 1: found;
# 77: not a git checkout (nothing to list).
set -euo pipefail
root=${1:-$(cd "$(dirname "$0")/.." && pwd)}
cd "$root"
if ! git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
  echo "check_result_names.sh: $root is not a git checkout" >&2
  exit 77
fi
found=0
# -I skips binary files (plots, HDF5); git grep reads the tracked files of the work tree.
if git grep -n -I -i -E '\bsessions?[-_ #]*[0-9]+' -- .; then found=1; fi
if git grep -n -I -E '\bS[0-9]{1,3}\b' -- .; then found=1; fi
if git grep -n -I -E '(\.device/(bin/)?s[0-9]|\bs[0-9]{1,3}[a-z]?\.sh\b|\bs[0-9]{1,3}-[a-z]{3,})' -- .; then found=1; fi
if [ "$found" = 1 ]; then
  echo "check_result_names.sh: the places above name a result by a numbered label; name its run, date and commit instead" >&2
  exit 1
fi
echo "check_result_names.sh: no tracked file names a result by a numbered label"
