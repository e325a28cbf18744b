#!/usr/bin/env bash
# Installs the Debian packages kolo needs (only those missing) and the
# project's Python environment (.venv: torch 2.11.0 from PyPI), then
# configures and builds one of kolo's two configurations. Shared by
# quickstart.sh, test.sh and .ci/run; quick when nothing changed.
#
#   scripts/setup.sh            build/: LibTorch 2.11.0 from .venv's torch
#                               (CUDA compiled in where the toolkit is), Gloo,
#                               MPI, every tool, test and benchmark
#   scripts/setup.sh debian     build-debian/: Debian's libtorch-dev 1.13.1
#                               (no CUDA), without Gloo and MPI (the shm and
#                               tcp engines only, as on the GPU machines),
#                               without kolo-bench
#   scripts/setup.sh debian TARGET...
#                               only those targets of build-debian
set -euo pipefail
cd "$(dirname "$0")/.."
configuration="${1:-default}"
case "$configuration" in
  default | debian) ;;
  *) echo "setup.sh: unknown configuration '$configuration' (default or debian)" >&2; exit 2 ;;
esac
shift $(( $# > 0 ? 1 : 0 ))
targets=("$@")

packages=(
  build-essential cmake ninja-build pkg-config
  libgloo-dev libopenmpi-dev openmpi-bin
  libcli11-dev nlohmann-json3-dev libfmt-dev zlib1g-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  # Debian's LibTorch 1.13.1: the second configuration (setup.sh debian).
  libtorch-dev dataset-fashion-mnist
  # OpenSSL's libcrypto: HMAC-SHA256 authenticates the TCP store's messages.
  libssl-dev
  # Headless rendering of kolo-bench report's page in its tests.
  chromium
  # A terminal for the tests that read what a person sees of kolorun's
  # in-place progress line (tests/tools/kolo-train/progress_test.cc).
  tmux
  # A real Prometheus that scrapes a running job, against which the tests
  # run every query of the Grafana dashboard (deploy/grafana/kolo.json).
  # They start an instance of their own on a free port and never use the
  # package's service, which may or may not start (no systemd in a
  # container).
  prometheus
  # ip, tc, and sshd inside test namespaces (scripts/netns_cluster.sh). The
  # package's own service is not used; where it starts it listens in the
  # root namespace only, apart from the namespaces' sshds.
  iproute2 openssh-server
)

scripts/install_missing.sh "${packages[@]}"

# Configuring an existing build directory again is quick, and it keeps the
# options right when a checkout gains a part after its first build.
# -O2 as RelWithDebInfo, without its -g: debug information for LibTorch's
# templates adds half again to each file that includes them and to the
# links (a full build: 7.7 min without, about 10.5 with, on 2 cores). The
# sanitizer builds (scripts/sanitizers.sh) keep theirs.
common=(-G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_FLAGS_RELEASE="-O2 -DNDEBUG"
  -DKOLO_WITH_TORCH=ON -DKOLO_BUILD_TESTS=ON)
# The PyTorch peers of kolo-bench run in the project's environment in both
# configurations, so that they are always torch 2.11.0.
python="$(scripts/setup_python.sh)"
if [ "$configuration" = default ]; then
  build=build
  # torch's own CMake configuration, as PyTorch documents for LibTorch users.
  torch_prefix="$("$python" -c 'import torch; print(torch.utils.cmake_prefix_path)')"
  options=(-DCMAKE_PREFIX_PATH="$torch_prefix" -DKOLO_WITH_GLOO=ON -DKOLO_WITH_MPI=ON
    -DKOLO_BUILD_BENCH=ON -DKOLO_BUILD_PYTHON=ON)
else
  build=build-debian
  options=(-DKOLO_WITH_GLOO=OFF -DKOLO_WITH_MPI=OFF -DKOLO_BUILD_BENCH=OFF)
fi
options+=(-DKOLO_PYTHON="$python")
cmake -S . -B "$build" "${common[@]}" "${options[@]}" \
  > "$build-configure.log" 2>&1 || { cat "$build-configure.log"; exit 1; }
cmake --build "$build" ${targets[@]+--target "${targets[@]}"} -- -j"$(nproc)"

# The Python package into the project's environment, as a user installs it
# (pip install .), from the build just made: scikit-build-core configures
# build/ with the same options, finds nothing to rebuild and installs the
# component `python` (pyproject.toml). Skipped when the installed copy is
# this build's.
if [ "$configuration" = default ]; then
  extension="$(ls "$build"/python/kolo/_kolo.*.so)"
  stamp="$PWD/.venv/kolo-package.sha256"
  wanted="$(cat "$extension" "$build"/python/kolo/bin/kolorun \
    $(find src/python/kolo -name '*.py' | sort) | sha256sum | cut -d' ' -f1)"
  if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$wanted" ]; then
    cmake_args="$(IFS=';'; echo "${common[*]:2};${options[*]}")"
    "$python" -m pip install --quiet --no-build-isolation --no-deps \
      -C build-dir="$build" -C cmake.args="$cmake_args" \
      -C cmake.define.KOLO_BUILD_TESTS=ON -C cmake.define.KOLO_BUILD_BENCH=ON . \
      > "$build-pip.log" 2>&1 || { cat "$build-pip.log"; exit 1; }
    echo "$wanted" > "$stamp"
  fi
fi
