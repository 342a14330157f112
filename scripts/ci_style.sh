#!/usr/bin/env bash
# CI's style checks on the commits of the checked range (docs/contributing.md, "Habits"); .ci/run runs it, make test
# does not. Fails when a commit subject is longer than 72 characters, or when a C, C++ or CUDA line changed in the
# range is not formatted as .clang-format says (only changed lines: the tree as a whole is not yet formatted).
# The range is BASE..HEAD: BASE is $DFCCL_STYLE_BASE (e.g. the last commit CI passed) or else HEAD~20. Where the
# history is shorter or a shallow clone ends earlier, the range starts at the oldest commit there is, whose own
# changes then go unchecked (its parent is not there to compare with); a clone with a single commit has nothing to
# check. Installs clang-format with apt-get when it is missing and this runs as root.
set -euo pipefail
cd "$(dirname "$0")/.."
export LC_ALL=C.UTF-8
max_subject=72
depth=20

base=${DFCCL_STYLE_BASE:-}
if [ -n "$base" ] && ! git rev-parse -q --verify "$base^{commit}" >/dev/null; then
  echo "ci_style.sh: DFCCL_STYLE_BASE=$base is not a commit here; using the last $depth commits" >&2
  base=
fi
if [ -z "$base" ]; then
  # The oldest of the last depth+1 commits that exist (HEAD~20 where the history has it).
  base=$(git rev-list --first-parent --max-count=$((depth + 1)) HEAD | tail -n 1)
fi
if [ "$(git rev-parse "$base")" = "$(git rev-parse HEAD)" ]; then
  echo "ci_style.sh: no commit after $base to check"
  exit 0
fi
echo "ci_style.sh: checking $(git rev-list --count "$base..HEAD") commits, $(git rev-parse --short "$base")..HEAD"

status=0
# Subjects: characters, not bytes.
while IFS= read -r line; do
  hash=${line%% *}
  subject=${line#* }
  if [ "${#subject}" -gt "$max_subject" ]; then
    echo "ci_style.sh: commit $hash's subject has ${#subject} characters (at most $max_subject): $subject" >&2
    status=1
  fi
done < <(git log --format='%h %s' "$base..HEAD")

# Formatting of the changed lines.
if ! command -v git-clang-format >/dev/null || ! command -v clang-format >/dev/null; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    apt-get update -q
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends clang-format
  fi
fi
if ! command -v git-clang-format >/dev/null; then
  echo "ci_style.sh: git-clang-format is missing (apt-get install clang-format)" >&2
  exit 1
fi
diff=$(git clang-format --diff --extensions c,h,cc,cpp,hpp,cu,cuh "$base" HEAD -- || true)
case "$diff" in
  "" | "no modified files to format" | *"did not modify any files"*) ;;
  *)
    echo "$diff"
    echo "ci_style.sh: the lines above, changed since $(git rev-parse --short "$base"), are not formatted as" \
      ".clang-format says (git clang-format $(git rev-parse --short "$base") formats them)" >&2
    status=1
    ;;
esac
[ "$status" = 0 ] && echo "ci_style.sh: subjects and changed lines are in style"
exit "$status"
