#!/usr/bin/env bash
# Makes Horovod's environment for kolo-bench python's comparison,
# .venv-horovod at the repository root (KOLO_HOROVOD_VENV overrides it), and
# prints its interpreter's path; horovodrun is beside it. Quick when nothing
# changed (the requirements' checksum is kept in the environment).
#
# Horovod 0.28.1 is its last release, and as released it does not build
# against torch 2.1 or later: its CMake files ask for C++14 where torch's
# headers need C++17. This script builds it from PyPI's source with the two
# CMAKE_CXX_STANDARD lines (CMakeLists.txt, horovod/torch/CMakeLists.txt)
# set to 17, against the very torch kolo uses: the environment shares the
# project's .venv site-packages (a .pth file) rather than installing torch
# again, so both sides of a comparison run the same torch binary. CPU
# operations on Gloo (MPI compiled in too); no GPU operations. The build
# takes about 4 minutes on two cores.
#   scripts/setup_horovod.sh     # prints /path/to/.venv-horovod/bin/python
set -euo pipefail
cd "$(dirname "$0")/.."
venv="${KOLO_HOROVOD_VENV:-$PWD/.venv-horovod}"
requirements=scripts/requirements-horovod.txt
stamp="$venv/kolo-requirements.sha256"
wanted="$(sha256sum "$requirements" | cut -d' ' -f1)"

if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$wanted" ]; then
  scripts/install_missing.sh build-essential cmake libopenmpi-dev openmpi-bin
  project_python="$(scripts/setup_python.sh)"
  site="$("$project_python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
  python3 -m venv "$venv"
  own_site="$("$venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
  echo "$site" > "$own_site/kolo-project-torch.pth"
  "$venv/bin/python" -m pip install --quiet --upgrade pip >&2
  grep -v '^horovod==' "$requirements" | "$venv/bin/python" -m pip install --quiet -r /dev/stdin >&2
  version="$(sed -n 's/^horovod==//p' "$requirements")"
  source_dir="$(mktemp -d)"
  trap 'rm -rf "$source_dir"' EXIT
  "$venv/bin/python" -m pip download --quiet --no-binary :all: --no-deps \
    "horovod==$version" -d "$source_dir" >&2
  tar xzf "$source_dir/horovod-$version.tar.gz" -C "$source_dir"
  tree="$source_dir/horovod-$version"
  sed -i 's/set(CMAKE_CXX_STANDARD 14)/set(CMAKE_CXX_STANDARD 17)/' \
    "$tree/CMakeLists.txt" "$tree/horovod/torch/CMakeLists.txt"
  echo "setup_horovod: building Horovod $version (C++17) into $venv" >&2
  HOROVOD_WITH_PYTORCH=1 HOROVOD_WITH_GLOO=1 HOROVOD_WITH_MPI=1 \
    HOROVOD_WITHOUT_TENSORFLOW=1 HOROVOD_WITHOUT_MXNET=1 \
    HOROVOD_CPU_OPERATIONS=GLOO MAKEFLAGS="-j$(nproc)" \
    "$venv/bin/python" -m pip install --quiet --no-build-isolation --no-deps "$tree" \
    > "$venv/horovod-build.log" 2>&1 || { tail -40 "$venv/horovod-build.log" >&2; exit 1; }
  "$venv/bin/python" -c 'import horovod.torch as hvd; assert hvd.gloo_built()' >&2
  echo "$wanted" > "$stamp"
fi
echo "$venv/bin/python"
