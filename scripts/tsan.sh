#!/usr/bin/env bash
# The threaded parts under ThreadSanitizer: builds build-tsan (CPU only, -O1 -g1) and runs ctest
# there. Arguments go to ctest, e.g. `bash scripts/tsan.sh -R 'HttpFrontend|Service'`.
# Exit status: 1 when any process wrote a TSan warning, else ctest's.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
export CCACHE_BASEDIR="$PWD" CCACHE_NOHASHDIR=1
build=${HEADWAY_TSAN_BUILD_DIR:-build-tsan}
# No CUDA: device code cannot be instrumented, and nvcc would only add build time.
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DHEADWAY_TSAN=ON \
  -DHEADWAY_CUDA=OFF -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -g1" \
  -DCMAKE_C_FLAGS_RELWITHDEBINFO="-O1 -g1" >/dev/null
cmake --build "$build"
# Debian's libgomp is not instrumented, so TSan cannot see the barriers that order the CPU model's
# OpenMP loops. One OpenMP thread keeps those loops serial; the threads Headway starts itself (engine
# drivers, frontends, transports, the bench client) are what this run checks.
export OMP_THREAD_LIMIT=1
# Reports go to files, one per process: a `headway serve` child that a test starts reports there
# too, where its exit status might not reach the test.
reports="$(cd "$build" && pwd)/tsan-reports"
rm -rf "$reports" && mkdir -p "$reports"
# gRPC, Protobuf, abseil and cpp-httplib are Debian's uninstrumented builds: their locks (absl
# futexes) and inline static guards are invisible to TSan. ignore_noninstrumented_modules makes the
# interceptors (memcpy, free, ...) skip calls made from those libraries instead of reporting them,
# which also keeps a 1 MiB gRPC message from taking seconds of race reporting. What they still get
# wrong is suppressed in scripts/tsan.supp, which says what each entry gives up.
# Options already in TSAN_OPTIONS come last, so they win over these.
export TSAN_OPTIONS="ignore_noninstrumented_modules=1:suppressions=$PWD/scripts/tsan.supp:second_deadlock_stack=1:history_size=4:log_path=$reports/tsan${TSAN_OPTIONS:+:$TSAN_OPTIONS}"
status=0
ctest --test-dir "$build" --output-on-failure -j "$(nproc)" --timeout 900 "$@" || status=$?
# Only warnings (races, lock-order inversions, ...) count: tests that crash a plugin on purpose
# (the conformance suite's isolated runs) leave an "ERROR: ThreadSanitizer: SEGV" file here, and a
# crash that is not on purpose fails its test anyway.
found=$(grep -l "WARNING: ThreadSanitizer" "$reports"/* 2>/dev/null || true)
if [ -n "$found" ]; then
  # shellcheck disable=SC2086
  cat $found
  echo "ThreadSanitizer reported in $(echo "$found" | wc -l) process(es): see above (or $reports)" >&2
  exit 1
fi
exit "$status"
