#!/usr/bin/env bash
# Install the Debian packages Turnfleet needs to build and test, only those missing.
# Runs as root (CI, fresh machines) or through sudo when available.
set -euo pipefail

pkgs=(
  build-essential cmake pkg-config
  libssl-dev libcurl4-openssl-dev libcjson-dev libyaml-dev libmicrohttpd-dev libgnutls28-dev liburing-dev
  check
  coturn
  python3 python3-dev swig valgrind
  clang iproute2
  abigail-tools
  mmdebstrap
  prometheus
  python3-kubernetes python3-yaml openssl
  chromium python3-aiortc
)

missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
[ "${#missing[@]}" -eq 0 ] && exit 0

echo "install-deps: installing ${missing[*]}" >&2
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
# Debian enables a coturn system service on install; the project runs its own
# turnserver processes and must not share ports with a system one.
if command -v systemctl >/dev/null 2>&1 && systemctl is-active --quiet coturn 2>/dev/null; then
  $SUDO systemctl stop coturn || true
fi
# likewise Prometheus (the monitoring tests run their own, on loopback)
if command -v systemctl >/dev/null 2>&1 && systemctl is-active --quiet prometheus 2>/dev/null; then
  $SUDO systemctl stop prometheus || true
fi
