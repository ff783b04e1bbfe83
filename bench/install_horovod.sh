#!/usr/bin/env bash
# Builds Horovod itself (its PyTorch and TensorFlow frontends, each where HVD_VENV has the
# framework; Gloo controller and operations; no MPI, no NCCL), as a peer for the bench scripts
# and test/e2e/test_horovod_conformance.py, into its own virtualenv (HOROVOD_VENV, default
# ~/.cache/hvd/horovod-venv) that sees torch and TensorFlow from hvd's (HVD_VENV) through a .pth
# line, so both libraries run against the same frameworks. Idempotent: does nothing when that
# virtualenv already imports the frontends it would build. Takes about 6 to 15 minutes on 2
# cores. For TensorFlow 2.15 (Keras 2), HVD_VENV=~/.cache/hvd/venv-tf215
# HOROVOD_VENV=~/.cache/hvd/horovod-venv-tf215.
#
# Horovod's last release (0.28.1, 2023) needs three changes to build against today's
# frameworks, made to the sdist before building: its torch frontend compiles as C++14 and
# torch's headers now need C++20 (c10 uses std::bit_width and std::strong_ordering), so
# CMAKE_CXX_STANDARD is raised (17 for the core, 20 for the torch frontend); and its XLA ops
# (off unless HOROVOD_ENABLE_XLA_OPS is set) are left out, since TensorFlow 2.21's wheel lacks
# the highwayhash headers XLA's include. Nothing else is changed.
set -euo pipefail
version=${HOROVOD_VERSION:-0.28.1}
hvd_venv=${HVD_VENV:-$HOME/.cache/hvd/venv}
venv=${HOROVOD_VENV:-$HOME/.cache/hvd/horovod-venv}

# Each frontend whose framework HVD_VENV has (the TensorFlow 2.15 virtualenv has no torch).
has() { [ -x "$hvd_venv/bin/python" ] && "$hvd_venv/bin/python" -c "import $1" 2>/dev/null; }
frameworks="import horovod"
with_torch=HOROVOD_WITHOUT_PYTORCH=1
with_tf=HOROVOD_WITHOUT_TENSORFLOW=1
if has torch; then
  frameworks="$frameworks, horovod.torch"
  with_torch=HOROVOD_WITH_PYTORCH=1
fi
if has tensorflow; then
  frameworks="$frameworks, horovod.tensorflow"
  with_tf=HOROVOD_WITH_TENSORFLOW=1
fi
if [ -x "$venv/bin/python" ] && "$venv/bin/python" -c "$frameworks" 2>/dev/null; then
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
sed -i '/horovod\/tensorflow\/xla_mpi_ops.cc/d' "$src/horovod/tensorflow/CMakeLists.txt"
env "$with_tf" "$with_torch" HOROVOD_WITHOUT_MXNET=1 \
  HOROVOD_WITH_GLOO=1 HOROVOD_WITHOUT_MPI=1 HOROVOD_CPU_OPERATIONS=GLOO \
  MAKEFLAGS=-j"$(nproc)" "$venv/bin/pip" install --no-build-isolation --no-cache-dir "$src"
"$venv/bin/horovodrun" --check-build
