#!/usr/bin/env bash
# Installs the Debian packages kolo needs (only those missing), then
# configures and builds kolo in build/. Shared by quickstart.sh and test.sh;
# quick when nothing changed.
set -euo pipefail
cd "$(dirname "$0")/.."

packages=(
  build-essential cmake ninja-build pkg-config
  libgloo-dev libopenmpi-dev openmpi-bin
  libcli11-dev nlohmann-json3-dev libfmt-dev zlib1g-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  libtorch-dev dataset-fashion-mnist
  # OpenSSL's libcrypto: HMAC-SHA256 authenticates the TCP store's messages.
  libssl-dev
  # The PyTorch DDP peer of kolo-bench train (bench/peers/torch_ddp.py).
  python3-torch
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
# options right when a checkout gains a part (LibTorch) after its first build.
# -O2 as RelWithDebInfo, without its -g: debug information for LibTorch's
# templates adds half again to each file that includes them and to the
# links (a full build: 7.7 min without, about 10.5 with, on 2 cores). The
# sanitizer builds (scripts/sanitizers.sh) keep theirs.
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_CXX_FLAGS_RELEASE="-O2 -DNDEBUG" \
  -DKOLO_WITH_GLOO=ON -DKOLO_WITH_MPI=ON -DKOLO_WITH_TORCH=ON \
  -DKOLO_BUILD_TESTS=ON -DKOLO_BUILD_BENCH=ON > build-configure.log || {
  cat build-configure.log; exit 1; }
cmake --build build -- -j"$(nproc)"
