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
echo "setup: ok (venv $venv)"
