#!/usr/bin/env bash
# Sets everything up, builds, and runs the demo: the PyTorch MNIST example trained by two local
# ranks with hvd (DistributedOptimizer, broadcast from rank 0, metrics averaged across ranks).
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# Only what the demo runs: hvdrun and the Python package (scripts/test.sh builds the rest).
"$repo/scripts/setup.sh" --demo
"$repo/scripts/build.sh" hvdrun _core
build=${HVD_BUILD_DIR:-$repo/build}
venv=${HVD_VENV:-$HOME/.cache/hvd/venv}
exec "$build/apps/hvdrun" -np 2 -H localhost:2 "$venv/bin/python" \
  "$repo/examples/pytorch_mnist.py" "$@"
