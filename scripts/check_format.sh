#!/usr/bin/env bash
# Fails when a tracked C++ file differs from what clang-format makes of it
# with the tree's .clang-format, and names each such file and line.
# Reformat with: git ls-files '*.cc' '*.h' | xargs clang-format -i
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/install_missing.sh clang-format

mapfile -t files < <(git ls-files '*.cc' '*.h')
if clang-format --style=file --dry-run --Werror "${files[@]}"; then
  echo "check_format: ${#files[@]} files formatted as .clang-format says"
else
  echo "check_format: the files above differ from clang-format's output" >&2
  exit 1
fi
