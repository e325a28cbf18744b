#!/usr/bin/env bash
# Sets kolo up (packages, build) and runs every test.
set -euo pipefail
cd "$(dirname "$0")"
scripts/setup.sh
# Multi-process tests oversubscribe on purpose; two at a time keeps the
# suite well under ten minutes on two cores.
ctest --test-dir build --output-on-failure -j2 --timeout 600 -LE '^python$' "$@"
# The Python package's pytest suites, with every rank's summary shown.
ctest --test-dir build --verbose --timeout 600 -L '^python$' "$@"
