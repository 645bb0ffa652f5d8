#!/usr/bin/env bash
# First README command: install what is missing, build (Release), and run the main job:
# `headway simulate` on the built-in default deployment and workload (no GPU, no download).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
# ccache keys on paths relative to the checkout, so clones in other folders share the cache.
export CCACHE_BASEDIR="$PWD" CCACHE_NOHASHDIR=1
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DHEADWAY_BUILD_TESTS=OFF >/dev/null
cmake --build build --target headway
# The built-in tiny model that configs/default.toml serves on the CPU (random weights, no download).
[ -f models/tiny/config.json ] || ./build/bin/headway model make-tiny --out models/tiny
./build/bin/headway simulate "$@"
