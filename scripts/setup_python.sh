#!/usr/bin/env bash
# Makes the project's Python environment, .venv at the repository root (never
# the system Python), from scripts/requirements-torch.txt, and prints its
# interpreter's path. Quick when nothing changed: the requirements file's
# checksum is kept in .venv/kolo-requirements.sha256 after a complete install,
# so an interrupted one is resumed on the next run.
#   scripts/setup_python.sh            # prints /path/to/.venv/bin/python
set -euo pipefail
cd "$(dirname "$0")/.."
venv="$PWD/.venv"
requirements=scripts/requirements-torch.txt
stamp="$venv/kolo-requirements.sha256"
wanted="$(sha256sum "$requirements" | cut -d' ' -f1)"

if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$wanted" ]; then
  # python3 on PATH (pyenv's on these machines) has the venv module; Debian's
  # /usr/bin/python3 needs python3-venv, installed only if it is the one used.
  python=python3
  if ! "$python" -c 'import venv, ensurepip' 2>/dev/null; then
    scripts/install_missing.sh python3-venv
  fi
  echo "setup_python: installing $(grep -v '^#' "$requirements" | xargs) into $venv" >&2
  "$python" -m venv "$venv"
  "$venv/bin/python" -m pip install --quiet --upgrade pip >&2
  "$venv/bin/python" -m pip install --quiet -r "$requirements" >&2
  echo "$wanted" > "$stamp"
fi
echo "$venv/bin/python"
