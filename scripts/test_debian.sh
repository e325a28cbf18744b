#!/usr/bin/env bash
# The second configuration, as CI runs it: kolo built against Debian's
# libtorch-dev 1.13.1 without Gloo and MPI (scripts/setup.sh debian), and
# its tests: the LibTorch layer (tests/torch: the compatibility header,
# DistributedOptimizer, ZeRO and its checkpoints, pipelines, parameter
# servers, elastic state), kolo-train, the example built with
# find_package(kolo), the documentation's code, and the core's tests, which
# here run on the shm and tcp engines alone. Not the jobs on clusters of
# network namespaces and the Prometheus scrape (labels multihost, netns,
# monitoring): they exercise kolorun, its agents and the network, which
# LibTorch's version does not touch, and test.sh's build runs them (2.5
# minutes of CI).
#   scripts/test_debian.sh [ctest arguments]
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh debian
ctest --test-dir build-debian --output-on-failure -j2 --timeout 600 \
  -LE "^(multihost|netns|monitoring)$" "$@"
