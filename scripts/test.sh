#!/usr/bin/env bash
# Sets everything up, builds, and runs every test (CTest; pytest once Python tests exist).
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
"$repo/scripts/setup.sh"
"$repo/scripts/build.sh"
build=${HVD_BUILD_DIR:-$repo/build}
cd "$build"
ctest --output-on-failure --timeout 300 -j 2 "$@"
