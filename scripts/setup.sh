#!/usr/bin/env bash
# Installs what hvd needs and is missing: Debian packages, then a Python virtualenv outside the
# repository (HVD_VENV, default ~/.cache/hvd/venv) from the pinned requirement files. Idempotent:
# a second run with nothing to do only checks and returns in seconds.
#
#   setup.sh          everything the tests need (scripts/test.sh)
#   setup.sh --demo   only what the demo needs (scripts/demo.sh): the build's packages and one
#                     virtualenv with PyTorch; no sanitizer toolchain, TensorFlow or sshd
#   setup.sh --bench  what the tests need, and the benchmarks' plotting (matplotlib)
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
mode=all
case "${1:-}" in
  "") ;;
  --demo) mode=demo ;;
  --bench) mode=bench ;;
  *) echo "usage: $0 [--demo|--bench]" >&2; exit 2 ;;
esac

apt_packages=(
  build-essential cmake ninja-build pkg-config ccache
  libcli11-dev libspdlog-dev libboost-dev libboost-context-dev nlohmann-json3-dev libssh2-1-dev catch2 libssl-dev
  python3-venv python3-dev procps
)
if [ "$mode" != demo ]; then
  apt_packages+=(
    # the SSH and network-namespace tests
    openssh-server openssh-client iproute2
    # the cluster tests' real daemons: Slurm with munge, Open MPI's mpirun, MPICH's mpiexec
    slurmd slurmctld slurm-client munge openmpi-bin mpich
    # hvd.spark.run's tests: a Spark standalone cluster (PySpark's jars) runs on Java
    openjdk-17-jre-headless
    # scripts/sanitize.sh: clang, its sanitizer and libFuzzer runtimes, llvm-symbolizer for reports
    clang libclang-rt-dev llvm
    # scripts/check_format.sh (in the tests): the clang-format .clang-format was written for
    clang-format
  )
fi

missing=()
for p in "${apt_packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing Debian packages: ${missing[*]}"
  sudo_cmd=""
  [ "$(id -u)" -eq 0 ] || sudo_cmd="sudo"
  export DEBIAN_FRONTEND=noninteractive
  $sudo_cmd apt-get update -qq
  $sudo_cmd apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

venv=${HVD_VENV:-$HOME/.cache/hvd/venv}
# uv installs the requirements: it downloads PyTorch's wheels in parallel (pip fetches them one
# at a time) and links installed files from its cache. It lives in the main virtualenv.
uv="$venv/bin/uv"

# make_venv DIR: a virtualenv at DIR, unless there is one.
make_venv() {
  if [ ! -x "$1/bin/python" ]; then
    echo "setup: creating virtualenv $1"
    mkdir -p "$(dirname "$1")"
    python3 -m venv "$1"
  fi
}

# venv_with DIR REQUIREMENTS [INCLUDED...]: a virtualenv at DIR with the pinned requirement file
# installed; installs again when it or a file it includes (-r, named after it) changed since (a
# stamp of their hashes in the venv).
venv_with() {
  local dir=$1 requirements=$2
  shift
  local stamp="$dir/.hvd-$(basename "$requirements" .txt).sha256" want
  # "bytecode": venvs installed before the step below get it once.
  want=$( (cat "$@"; echo bytecode) | sha256sum | cut -d' ' -f1)
  make_venv "$dir"
  if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
    echo "setup: installing $(basename "$requirements") into $dir"
    "$uv" pip install -q --python "$dir/bin/python" -r "$requirements"
    compile_bytecode "$dir"
    echo "$want" >"$stamp"
  fi
}

# compile_bytecode DIR: writes the .pyc of every module in DIR's site-packages. uv installs
# without them, and where PYTHONDONTWRITEBYTECODE is set (as on CI machines) Python would never
# write them: every process would compile what it imports again, which is most of what
# `import tensorflow` costs (11 CPU seconds here, 4.5 with the .pyc; torch 4 and 2). A few
# packages ship test files that do not compile; compileall's exit code is theirs, not ours.
compile_bytecode() {
  local site
  site=$("$1/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
  echo "setup: compiling the bytecode of $site"
  "$1/bin/python" -m compileall -q -j 0 "$site" >/dev/null 2>&1 || true
}

if [ ! -x "$uv" ]; then
  make_venv "$venv"
  "$venv/bin/python" -m pip install -q --disable-pip-version-check uv==0.13.9
fi
if [ "$mode" = demo ]; then
  venv_with "$venv" "$repo/python/requirements-demo.txt"
  echo "setup: ok for the demo (venv $venv)"
  exit 0
fi
venv_with "$venv" "$repo/python/requirements.txt" "$repo/python/requirements-demo.txt"
# TensorFlow 2.15 with Keras 2 and Estimator, the second environment the TensorFlow tests run in
# (a venv of its own: it needs NumPy 1 and another TensorFlow). Same Python, so hvd's compiled
# core serves both.
venv_tf215=${HVD_VENV_TF215:-$HOME/.cache/hvd/venv-tf215}
venv_with "$venv_tf215" "$repo/python/requirements-tf215.txt"
[ "$mode" = bench ] && venv_with "$venv" "$repo/python/requirements-bench.txt"
echo "setup: ok (venv $venv, TensorFlow 2.15 venv $venv_tf215)"
