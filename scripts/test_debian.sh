#!/usr/bin/env bash
# The second configuration, as CI runs it: kolo built against Debian's
# libtorch-dev 1.13.1 without Gloo and MPI (scripts/setup.sh debian), and
# the tests LibTorch's version can change: the LibTorch layer and kolo-train
# (label torch: the compatibility header, DistributedOptimizer, ZeRO and its
# checkpoints, pipelines, parameter servers, elastic state, kolo-train's
# jobs), the example built with find_package(kolo), the documentation's
# code and commands, and the tools' --version and build facts. Not the
# core's tests: the core is the same code whichever LibTorch is installed,
# and test.sh's build runs them on every engine (here they took 8 of CI's
# minutes to say the same again).
#   scripts/test_debian.sh [ctest arguments]
set -euo pipefail
cd "$(dirname "$0")/.."
# Only what those tests run: the torch layer's tests and their workers,
# the tools, kolo-train's tests, the build facts' test and the worker the
# documentation's multi-host page runs (132 of the 201 compilations).
scripts/setup.sh debian tests/torch/all tools/all tests/common_base_test \
  tests/kolo_train_test tests/kolo_train_checkpoint_test tests/kolo_train_progress_test \
  tests/integration/collectives_worker
ctest --test-dir build-debian --output-on-failure -j2 --timeout 600 -L '^torch$' "$@"
ctest --test-dir build-debian --output-on-failure -j2 --timeout 600 -LE '^torch$' \
  -R '^(Documentation|InstallAndFindPackage|BuildInfo\.|kolo_train\.|[a-z-]+_version$)' "$@"
