#!/usr/bin/env bash
# Installs what hvd needs and is missing: Debian packages, then a Python virtualenv outside the
# repository (HVD_VENV, default ~/.cache/hvd/venv) from the pinned requirement files. Idempotent:
# a second run with nothing to do only checks and returns in seconds.
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)

apt_packages=(
  build-essential cmake pkg-config ccache
  libcli11-dev libspdlog-dev libboost-dev libboost-context-dev nlohmann-json3-dev libssh2-1-dev catch2 libssl-dev
  python3-venv python3-dev openssh-server openssh-client procps iproute2
  # scripts/sanitize.sh: clang, its sanitizer and libFuzzer runtimes, llvm-symbolizer for reports
  clang libclang-rt-dev llvm
  # scripts/check_format.sh (in the tests): the clang-format .clang-format was written for
  clang-format
)

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

# A virtualenv at $1 with the pinned requirements file $2 installed; reinstalls when the file
# changed since (a stamp of its hash in the venv).
venv_with() {
  local dir=$1 requirements=$2
  local stamp="$dir/.hvd-requirements.sha256" want
  want=$(sha256sum "$requirements" | cut -d' ' -f1)
  if [ ! -x "$dir/bin/python" ]; then
    echo "setup: creating virtualenv $dir"
    mkdir -p "$(dirname "$dir")"
    python3 -m venv "$dir"
  fi
  if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
    echo "setup: installing $(basename "$requirements") into $dir"
    "$dir/bin/python" -m pip install -q --disable-pip-version-check -r "$requirements"
    echo "$want" >"$stamp"
  fi
}

venv=${HVD_VENV:-$HOME/.cache/hvd/venv}
venv_with "$venv" "$repo/python/requirements.txt"
# TensorFlow 2.15 with Keras 2 and Estimator, the second environment the TensorFlow tests run in
# (a venv of its own: it needs NumPy 1 and another TensorFlow). Same Python, so hvd's compiled
# core serves both.
venv_tf215=${HVD_VENV_TF215:-$HOME/.cache/hvd/venv-tf215}
venv_with "$venv_tf215" "$repo/python/requirements-tf215.txt"
echo "setup: ok (venv $venv, TensorFlow 2.15 venv $venv_tf215)"
