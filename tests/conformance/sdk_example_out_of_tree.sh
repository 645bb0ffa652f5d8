#!/usr/bin/env bash
# The plugin author's path, end to end: install the SDK to a temporary prefix, build the SRPF
# example out of tree against it (find_package(HeadwaySDK), nothing from the build tree), check it
# with headway-conformance (must be conformant), then simulate a deployment that names it by path.
set -euo pipefail
source_dir=$1
build_dir=$2
headway=$3
conformance=$4
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

cmake --install "$build_dir" --prefix "$work/prefix" --component sdk >/dev/null
cp -r "$source_dir/sdk/examples/srpf_scheduler" "$work/srpf"
lines=$(wc -l <"$work/srpf/srpf_scheduler.cpp")
test "$lines" -le 40 || { echo "FAIL: the example has $lines lines of C++ (at most 40)"; exit 1; }
lines=$(wc -l <"$work/srpf/CMakeLists.txt")
test "$lines" -le 10 || { echo "FAIL: the example's CMakeLists.txt has $lines lines"; exit 1; }
cmake -S "$work/srpf" -B "$work/srpf/build" -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_PREFIX_PATH="$work/prefix" >/dev/null
cmake --build "$work/srpf/build" >/dev/null
so="$work/srpf/build/srpf_scheduler.so"
test -f "$so" || { echo "FAIL: $so was not built"; exit 1; }
"$conformance" --plugin "$so" --report "$work/report.json" --junit "$work/report.xml" \
  || { echo "FAIL: the example is not conformant"; exit 1; }
"$headway" simulate --quiet --config "$work/srpf/deployment.toml" \
  --workload "$source_dir/tests/integration/data/small_mixed.toml" \
  || { echo "FAIL: simulate with the example"; exit 1; }
echo "SDK example built out of tree, conformant and simulated: OK"
