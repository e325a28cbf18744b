#!/usr/bin/env bash
# Sets kolo up (packages, build) and runs the main job: LeNet trained on
# Fashion-MNIST by 2 workers for 3 epochs, with test accuracy after each.
set -euo pipefail
cd "$(dirname "$0")"
scripts/setup.sh
build/tools/kolorun/kolorun -np 2 -- \
  build/tools/kolo-train/kolo-train --model lenet --dataset fashion-mnist \
  --epochs 3 --batch-size 128 "$@"
