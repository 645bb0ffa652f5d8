#!/usr/bin/env bash
# Installs the SDK to a temporary prefix, builds the scheduler template against it out of tree
# (find_package(HeadwaySDK) + headway_add_plugin, nothing from the build tree), and checks that
# the host loads and describes the result.
set -euo pipefail
source_dir=$1
build_dir=$2
headway=$3
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

cmake --install "$build_dir" --prefix "$work/prefix" --component sdk >/dev/null
cp -r "$source_dir/sdk/templates/step_scheduler" "$work/plugin"
cmake -S "$work/plugin" -B "$work/plugin-build" -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_PREFIX_PATH="$work/prefix" >/dev/null
cmake --build "$work/plugin-build" >/dev/null
so="$work/plugin-build/my_scheduler.so"
test -f "$so" || { echo "FAIL: $so was not built"; exit 1; }
out=$("$headway" plugin describe "$so")
grep -q "com.example.scheduler.mine" <<<"$out" || { echo "FAIL: describe output: $out"; exit 1; }
grep -q "max_num_batched_tokens = 4096" <<<"$out" || { echo "FAIL: no template: $out"; exit 1; }
exported=$(nm -D --defined-only "$so" | awk '{print $3}' | grep -v '^_' | grep -c headway_plugin_entry)
test "$exported" = 1 || { echo "FAIL: headway_plugin_entry not exported"; exit 1; }
echo "out-of-tree plugin built against the installed SDK and loaded: OK"
