#!/usr/bin/env bash
# Installs Headway's build dependencies from Debian 12's archive when any is missing (as root, or
# through sudo). Safe to re-run: with everything present it does nothing.
set -euo pipefail
packages=(
  build-essential cmake ninja-build ccache pkg-config git
  libtomlplusplus-dev libboost-dev nlohmann-json3-dev libcli11-dev libspdlog-dev libfmt-dev
  libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler
  libgtest-dev libgmock-dev libbenchmark-dev libdnnl-dev libsentencepiece-dev
  libcpp-httplib-dev libpcre2-dev libutf8proc-dev libssl-dev prometheus curl
  python3 python3-numpy clang-format clang-tidy gnuplot-nox
)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "setup: installing ${missing[*]}"
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  export DEBIAN_FRONTEND=noninteractive
  $sudo apt-get update -qq
  $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
