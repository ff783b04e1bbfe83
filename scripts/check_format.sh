#!/usr/bin/env bash
# Checks every tracked C++ and CUDA file against .clang-format and names each file that differs
# (with the first lines clang-format would change). `--fix` rewrites them instead.
# Formatting differs between clang-format versions, so the check runs with the version the
# style was written for (Debian bookworm's clang-format, 14), which scripts/setup.sh installs.
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
want=14
tool=""
for candidate in "clang-format-$want" clang-format; do
  if command -v "$candidate" >/dev/null &&
     [[ "$("$candidate" --version)" =~ version\ $want\. ]]; then
    tool=$candidate
    break
  fi
done
if [ -z "$tool" ]; then
  echo "check_format: clang-format $want not found (scripts/setup.sh installs it)" >&2
  exit 2
fi
cd "$repo"
if git rev-parse --git-dir >/dev/null 2>&1; then
  mapfile -t files < <(git ls-files '*.cc' '*.h' '*.cu' '*.cuh' '*.cpp')
else  # a source tree without its history: every such file outside the build folders
  mapfile -t files < <(find . -path './build*' -prune -o -path './.git' -prune -o -type f \
    \( -name '*.cc' -o -name '*.h' -o -name '*.cu' -o -name '*.cuh' -o -name '*.cpp' \) \
    -print | sed 's|^\./||' | sort)
fi
if [ "${1:-}" = "--fix" ]; then
  "$tool" -i --style=file "${files[@]}"
  exit 0
fi
# One clang-format for every file answers the common case (all match) quickly; only when some
# differ does each file get its own run, to name it and show its first changes.
if "$tool" --style=file --dry-run -Werror "${files[@]}" >/dev/null 2>&1; then
  echo "check_format: ${#files[@]} files match .clang-format"
  exit 0
fi
bad=0
for f in "${files[@]}"; do
  if ! "$tool" --style=file --dry-run -Werror "$f" >/dev/null 2>&1; then
    echo "$f: not formatted as .clang-format says; the first changes:"
    "$tool" --style=file "$f" | diff "$f" - | head -8 | sed 's/^/    /'
    bad=$((bad + 1))
  fi
done
if [ "$bad" -gt 0 ]; then
  echo "check_format: $bad of ${#files[@]} files differ; run scripts/check_format.sh --fix" >&2
  exit 1
fi
echo "check_format: ${#files[@]} files match .clang-format"
