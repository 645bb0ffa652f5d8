#!/usr/bin/env bash
# A plugin author who writes C, not C++: install the SDK to a temporary prefix, build the C example
# (sdk/examples/c_plugins: a scheduler and a router against headway/abi.h alone) out of tree as
# strict C11 with every warning an error, check that each library exports headway_plugin_entry
# alone and needs no C++ runtime, that both are conformant, and simulate a deployment naming them.
set -euo pipefail
source_dir=$1
build_dir=$2
headway=$3
conformance=$4
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

cmake --install "$build_dir" --prefix "$work/prefix" --component sdk >/dev/null
cp -r "$source_dir/sdk/examples/c_plugins" "$work/c"
# A helper function left non-static, in a file of its own: headway_add_plugin must hide it as it
# hides a C++ plugin's (C_VISIBILITY_PRESET), or two plugins defining it would clash.
printf 'int c_plugins_shared_helper(void) { return 1; }\n' >"$work/c/helper.c"
printf 'headway_add_plugin(c_router_with_helper SOURCES least_loaded_router.c helper.c)\n' \
  >>"$work/c/CMakeLists.txt"
# Without ASan/UBSan: the example must build with nothing but the C compiler's own flags.
env -u CFLAGS -u LDFLAGS cmake -S "$work/c" -B "$work/c/build" -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_C_FLAGS="-std=c11 -Wall -Wextra -pedantic -Werror" -DCMAKE_PREFIX_PATH="$work/prefix" \
  >/dev/null
cmake --build "$work/c/build" >/dev/null
for name in c_fcfs_scheduler c_least_loaded_router c_router_with_helper; do
  so="$work/c/build/$name.so"
  test -f "$so" || { echo "FAIL: $so was not built"; exit 1; }
  exported=$(nm -D --defined-only "$so" | awk '$2 ~ /^[TDBR]$/ {print $3}' | sort | tr '\n' ' ')
  test "$exported" = "headway_plugin_entry " \
    || { echo "FAIL: $name exports '$exported', not headway_plugin_entry alone"; exit 1; }
  if readelf -d "$so" | grep -q 'NEEDED.*libstdc++'; then
    echo "FAIL: $name needs libstdc++"; exit 1
  fi
done
for name in c_fcfs_scheduler c_least_loaded_router; do
  "$conformance" --plugin "$work/c/build/$name.so" >"$work/$name.txt" \
    || { cat "$work/$name.txt"; echo "FAIL: $name is not conformant"; exit 1; }
  tail -n 1 "$work/$name.txt"
done
"$headway" simulate --quiet --config "$work/c/deployment.toml" \
  --workload "$source_dir/tests/integration/data/small_mixed.toml" \
  || { echo "FAIL: simulate with the C plugins"; exit 1; }
echo "C example built out of tree as C11, exporting one symbol, conformant and simulated: OK"
