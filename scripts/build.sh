#!/usr/bin/env bash
# Configures and builds hvd into build/ (Release), with the Python package built for the project
# virtualenv's interpreter. Incremental after the first run.
#
#   build.sh             every target: libraries, apps, tests, benchmarks, the Python package
#   build.sh TARGET...   those targets only (scripts/demo.sh: hvdrun _core)
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${HVD_BUILD_DIR:-$repo/build}
venv=${HVD_VENV:-$HOME/.cache/hvd/venv}
python_args=()
[ -x "$venv/bin/python" ] && python_args=(-DPython_EXECUTABLE="$venv/bin/python")
# ccache makes rebuilds of unchanged sources (a fresh clone, the `pip install .` test's wheel)
# cost a cache lookup instead of a compile. A launcher the caller chose wins. Paths under the
# checkout are hashed relative to it, so a clone elsewhere (CI's) hits the same entries.
export CCACHE_BASEDIR=${CCACHE_BASEDIR:-$repo} CCACHE_NOHASHDIR=${CCACHE_NOHASHDIR:-1}
launcher_args=()
if [ -z "${CMAKE_CXX_COMPILER_LAUNCHER:-}" ] && command -v ccache >/dev/null; then
  launcher_args=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
fi
# Ninja, as scikit-build-core uses for `pip install .`: the same generator compiles from the same
# relative folder with the same command line, so the wheel test's build (build-wheel/, beside
# this one) is ccache hits of this one's compiles. A folder configured for another generator
# (Unix Makefiles, before) is configured again.
if [ -f "$build/CMakeCache.txt" ] && ! grep -qx 'CMAKE_GENERATOR:INTERNAL=Ninja' "$build/CMakeCache.txt"; then
  echo "build: $build was configured for another generator; configuring it again for Ninja"
  rm -rf "$build/CMakeCache.txt" "$build/CMakeFiles"
fi
cmake -S "$repo" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release "${python_args[@]}" \
  "${launcher_args[@]}" >/dev/null
targets=()
[ $# -gt 0 ] && targets=(--target "$@")
cmake --build "$build" -j "$(nproc)" "${targets[@]}"

# Makes `import hvd` work in the virtualenv without PYTHONPATH (the most recent build wins;
# hvdrun puts its own build's package first for its workers).
if [ -d "$build/python/hvd" ] && [ -x "$venv/bin/python" ]; then
  site=$("$venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
  echo "$build/python" >"$site/hvd-build.pth"
fi
