#!/usr/bin/env bash
# Installs what hvd needs and is missing: Debian packages, then a Python virtualenv outside the
# repository (HVD_VENV, default ~/.cache/hvd/venv) from the pinned requirement files. Idempotent:
# a second run with nothing to do only checks and returns in seconds.
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)

apt_packages=(
  build-essential cmake pkg-config ccache
  libcli11-dev libspdlog-dev libboost-dev nlohmann-json3-dev libssh2-1-dev catch2 libssl-dev
  python3-venv python3-dev openssh-server openssh-client procps iproute2
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

venv=${HVD_VENV:-$HOME/.cache/hvd/venv}
req="$repo/python/requirements.txt"
stamp="$venv/.hvd-requirements.sha256"
want=$(sha256sum "$req" | cut -d' ' -f1)
if [ ! -x "$venv/bin/python" ]; then
  echo "setup: creating virtualenv $venv"
  mkdir -p "$(dirname "$venv")"
  python3 -m venv "$venv"
fi
if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
  echo "setup: installing Python requirements into $venv"
  "$venv/bin/python" -m pip install -q --disable-pip-version-check -r "$req"
  echo "$want" >"$stamp"
fi
# TensorFlow 2.15 with Keras 2 and Estimator, the second environment the TensorFlow tests run in
# (a venv of its own: it needs NumPy 1 and another TensorFlow). Same Python, so hvd's compiled
# core serves both.
venv_tf215=${HVD_VENV_TF215:-$HOME/.cache/hvd/venv-tf215}
req_tf215="$repo/python/requirements-tf215.txt"
stamp_tf215="$venv_tf215/.hvd-requirements.sha256"
want_tf215=$(sha256sum "$req_tf215" | cut -d' ' -f1)
if [ ! -x "$venv_tf215/bin/python" ]; then
  echo "setup: creating virtualenv $venv_tf215"
  mkdir -p "$(dirname "$venv_tf215")"
  python3 -m venv "$venv_tf215"
fi
if [ "$(cat "$stamp_tf215" 2>/dev/null)" != "$want_tf215" ]; then
  echo "setup: installing TensorFlow 2.15's requirements into $venv_tf215"
  "$venv_tf215/bin/python" -m pip install -q --disable-pip-version-check -r "$req_tf215"
  echo "$want_tf215" >"$stamp_tf215"
fi
echo "setup: ok (venv $venv, TensorFlow 2.15 venv $venv_tf215)"
