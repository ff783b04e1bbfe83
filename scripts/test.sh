#!/usr/bin/env bash
# Sets everything up, builds, and runs every test: the C++ suites through CTest, then the
# end-to-end pytest suites that run hvdrun on real processes.
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
"$repo/scripts/setup.sh"
"$repo/scripts/build.sh"
build=${HVD_BUILD_DIR:-$repo/build}
venv=${HVD_VENV:-$HOME/.cache/hvd/venv}
(cd "$build" && ctest --output-on-failure --timeout 300 -j 2)
HVD_BUILD_DIR="$build" "$venv/bin/python" -m pytest "$repo/test/e2e" -q -p no:cacheprovider
