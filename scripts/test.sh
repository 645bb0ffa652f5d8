#!/usr/bin/env bash
# Second README command (and CI's): install what is missing, build everything once with
# AddressSanitizer + UndefinedBehaviorSanitizer, and run the whole test suite with ctest.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
# ccache keys on paths relative to the checkout, so clones in other folders share the cache.
export CCACHE_BASEDIR="$PWD" CCACHE_NOHASHDIR=1
build=${HEADWAY_TEST_BUILD_DIR:-build-test}
# -O1 -g1: what the sanitizers recommend (readable reports with line numbers), and it compiles
# faster than -O2 -g on CI's 2 cores.
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DHEADWAY_SANITIZE=ON \
  -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -g1" -DCMAKE_C_FLAGS_RELWITHDEBINFO="-O1 -g1" >/dev/null
cmake --build "$build"
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
ctest --test-dir "$build" --output-on-failure -j "$(nproc)"
