#!/usr/bin/env bash
# Fails when a tracked C++ file differs from what clang-format makes of it
# with the tree's .clang-format, and names each such file and line.
# Reformat with: git ls-files '*.cc' '*.h' | xargs clang-format -i
set -euo pipefail
cd "$(dirname "$0")/.."

if ! dpkg-query -W -f='${Status}' clang-format 2>/dev/null | grep -q "install ok installed"; then
  echo "check_format: installing clang-format"
  sudo_cmd=()
  if [ "$(id -u)" -ne 0 ]; then sudo_cmd=(sudo); fi
  "${sudo_cmd[@]}" apt-get update -q
  DEBIAN_FRONTEND=noninteractive "${sudo_cmd[@]}" apt-get install -y -q --no-install-recommends clang-format
fi

mapfile -t files < <(git ls-files '*.cc' '*.h')
if clang-format --style=file --dry-run --Werror "${files[@]}"; then
  echo "check_format: ${#files[@]} files formatted as .clang-format says"
else
  echo "check_format: the files above differ from clang-format's output" >&2
  exit 1
fi
