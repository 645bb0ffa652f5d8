#!/usr/bin/env bash
# clang-format and clang-tidy (.clang-tidy) over Headway's own C++ sources.
#   bash scripts/lint.sh               every source file (about 20 minutes on 2 cores)
#   bash scripts/lint.sh --since REV   only the files changed since REV (a changed header is
#                                      formatted, but clang-tidy reads it only through a changed .cpp)
# clang-tidy needs a compile database: the build-test tree of scripts/test.sh (configured here if
# it is missing). Exit status 1 when either tool has something to say.
set -euo pipefail
cd "$(dirname "$0")/.."
since=""
if [ "${1:-}" = "--since" ]; then
  since=${2:?"--since needs a revision"}
elif [ $# -gt 0 ]; then
  echo "usage: bash scripts/lint.sh [--since REV]" >&2
  exit 2
fi
for tool in clang-format run-clang-tidy; do
  command -v "$tool" >/dev/null || { echo "lint: $tool not found (bash scripts/setup.sh installs it)" >&2; exit 2; }
done
if [ -n "$since" ] && ! git rev-parse --verify --quiet "$since^{commit}" >/dev/null; then
  echo "lint: --since $since is not a commit" >&2
  exit 2
fi
build=${HEADWAY_TEST_BUILD_DIR:-build-test}
sources='^(core|plugins|cmd|conformance|sdk|tests)/.*\.(cpp|h|hpp|cu|cuh)$'
if [ -n "$since" ]; then
  files=$(git diff --name-only --diff-filter=d "$since" -- | grep -E "$sources" || true)
else
  files=$(git ls-files | grep -E "$sources")
fi
[ -n "$files" ] || { echo "lint: no C++ files to check"; exit 0; }
status=0

echo "clang-format: $(echo "$files" | wc -l) files"
# shellcheck disable=SC2086
clang-format --dry-run -Werror $files || status=1

# clang-tidy reads translation units; .cu files are nvcc's and tests are left to the compiler's
# warnings, so only the .cpp files of the product are analysed (headers through them).
units=$(echo "$files" | grep -E '^(core|plugins|cmd|conformance|sdk)/.*\.cpp$' || true)
if [ -n "$units" ]; then
  if [ ! -f "$build/compile_commands.json" ]; then
    cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DHEADWAY_SANITIZE=ON \
      -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -g1" -DCMAKE_C_FLAGS_RELWITHDEBINFO="-O1 -g1" >/dev/null
    # The generated protobuf headers must exist before their users can be analysed.
    cmake --build "$build" --target headway_proto >/dev/null
  fi
  regex="^$PWD/($(echo "$units" | sed 's/[.]/[.]/g' | paste -sd'|'))\$"
  echo "clang-tidy: $(echo "$units" | wc -l) translation units"
  # run-clang-tidy exits 1 when a unit fails to parse: show everything then, not only warnings.
  if ! out=$(run-clang-tidy -p "$build" -j "$(nproc)" -quiet "$regex" 2>&1); then
    echo "$out"
    status=1
  fi
  warnings=$(echo "$out" | sed 's/\x1b\[[0-9;]*m//g' | grep -E ': (warning|error):' | sort -u || true)
  if [ -n "$warnings" ]; then
    echo "$warnings"
    status=1
  fi
fi
exit "$status"
