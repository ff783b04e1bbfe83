#!/usr/bin/env bash
# Sets everything up, builds, and runs the demo: four local ranks agree on an allreduce.
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
"$repo/scripts/setup.sh"
"$repo/scripts/build.sh"
build=${HVD_BUILD_DIR:-$repo/build}
exec "$build/apps/hvdrun" -np 4 -H localhost:4 "$build/examples/allreduce_demo"
