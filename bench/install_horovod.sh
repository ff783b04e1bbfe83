#!/usr/bin/env bash
# Builds Horovod itself (PyTorch frontend, Gloo controller and operations; no MPI, no NCCL), as
# a peer for bench/engine_vs_horovod.py, into its own virtualenv (HOROVOD_VENV, default
# ~/.cache/hvd/horovod-venv) that sees torch from hvd's (HVD_VENV) through a .pth line, so the
# two libraries run against the same torch. Idempotent: does nothing when that virtualenv
# already imports horovod.torch. Takes about 10 minutes on 2 cores.
#
# Horovod's last release (0.28.1, 2023) compiles its torch frontend as C++14, and torch's
# headers now need C++20 (c10 uses std::bit_width and std::strong_ordering), so the sdist's
# CMAKE_CXX_STANDARD is raised (17 for the core, 20 for the torch frontend) before building;
# nothing else is changed.
set -euo pipefail
version=${HOROVOD_VERSION:-0.28.1}
hvd_venv=${HVD_VENV:-$HOME/.cache/hvd/venv}
venv=${HOROVOD_VENV:-$HOME/.cache/hvd/horovod-venv}

if [ -x "$venv/bin/python" ] && "$venv/bin/python" -c 'import horovod.torch' 2>/dev/null; then
  echo "install_horovod: $venv already has Horovod $("$venv/bin/python" -c \
    'import horovod; print(horovod.__version__)')"
  exit 0
fi
[ -x "$hvd_venv/bin/python" ] || {
  echo "install_horovod: $hvd_venv has no python; run ./scripts/setup.sh first" >&2; exit 2; }

base_python=$("$hvd_venv/bin/python" -c 'import sys; print(sys._base_executable)')
"$base_python" -m venv "$venv"
"$hvd_venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])' \
  > "$("$venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')/hvd-venv.pth"

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$venv/bin/pip" download --quiet --no-deps --no-binary :all: -d "$work" "horovod==$version"
tar -xzf "$work/horovod-$version.tar.gz" -C "$work"
src=$work/horovod-$version
sed -i 's/set(CMAKE_CXX_STANDARD 14)/set(CMAKE_CXX_STANDARD 17)/' "$src/CMakeLists.txt"
sed -i 's/set(CMAKE_CXX_STANDARD 14)/set(CMAKE_CXX_STANDARD 20)/' "$src/horovod/torch/CMakeLists.txt"
HOROVOD_WITH_PYTORCH=1 HOROVOD_WITHOUT_TENSORFLOW=1 HOROVOD_WITHOUT_MXNET=1 \
  HOROVOD_WITH_GLOO=1 HOROVOD_WITHOUT_MPI=1 HOROVOD_CPU_OPERATIONS=GLOO \
  MAKEFLAGS=-j"$(nproc)" "$venv/bin/pip" install --no-build-isolation --no-cache-dir "$src"
"$venv/bin/horovodrun" --check-build
