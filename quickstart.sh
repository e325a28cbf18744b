#!/usr/bin/env bash
# Sets kolo up (packages, build) and runs the main job: the collectives
# benchmark on 2 workers, on the Gloo backend and on the MPI backend.
set -euo pipefail
cd "$(dirname "$0")"
scripts/setup.sh
for backend in gloo mpi; do
  build/tools/kolorun/kolorun -np 2 --backend "$backend" -- \
    build/tools/kolo-bench/kolo-bench collectives -b 8 -e 64M -f 4 "$@"
done
