#!/usr/bin/env bash
# Sets everything up, builds, and runs every test: the C++ suites through CTest, the same C++
# unit and rank tests under ASAN+UBSAN and TSAN plus the fuzzers (scripts/sanitize.sh;
# HVD_SKIP_SANITIZE=1 leaves them out), the Python API suites (PyTorch and NumPy, then
# TensorFlow) under hvdrun with 2 and with 3 ranks, then the end-to-end pytest suites that run
# hvdrun on real processes (last, so their summary closes the output).
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
"$repo/scripts/setup.sh"
"$repo/scripts/build.sh"
build=${HVD_BUILD_DIR:-$repo/build}
venv=${HVD_VENV:-$HOME/.cache/hvd/venv}
(cd "$build" && ctest --output-on-failure --timeout 300 -j 2)
[ "${HVD_SKIP_SANITIZE:-0}" = 1 ] || HVD_BUILD_DIR="$build" "$repo/scripts/sanitize.sh"
for np in 2 3; do
  echo "test/python under hvdrun -np $np"
  timeout 600 "$build/apps/hvdrun" -np "$np" -x HVD_OP_TIMEOUT=60 "$venv/bin/python" -m pytest -x \
    "$repo/test/python" -q -p no:cacheprovider
  # In processes of their own: see test/python/conftest.py.
  echo "test/python/tensorflow under hvdrun -np $np"
  timeout 600 "$build/apps/hvdrun" -np "$np" -x HVD_OP_TIMEOUT=60 -x TF_CPP_MIN_LOG_LEVEL=2 \
    "$venv/bin/python" -m pytest -x "$repo/test/python/tensorflow" -q -p no:cacheprovider
done
# The second TensorFlow environment: TensorFlow 2.15 with Keras 2 (scripts/setup.sh).
venv_tf215=${HVD_VENV_TF215:-$HOME/.cache/hvd/venv-tf215}
echo "test/python/tensorflow under hvdrun -np 2, TensorFlow 2.15 with Keras 2"
timeout 600 "$build/apps/hvdrun" -np 2 -x HVD_OP_TIMEOUT=60 -x TF_CPP_MIN_LOG_LEVEL=2 \
  "$venv_tf215/bin/python" -m pytest -x "$repo/test/python/tensorflow" -q -p no:cacheprovider
HVD_BUILD_DIR="$build" HVD_TF215_PYTHON="$venv_tf215/bin/python" \
  "$venv/bin/python" -m pytest "$repo/test/e2e" -q -p no:cacheprovider
