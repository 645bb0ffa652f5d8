#!/usr/bin/env bash
# Every template under sdk/templates/ builds out of tree against the SDK installed to a temporary
# prefix and is conformant as shipped: an author starts from a passing plugin.
set -euo pipefail
source_dir=$1
build_dir=$2
conformance=$3
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

cmake --install "$build_dir" --prefix "$work/prefix" --component sdk >/dev/null
for template in "$source_dir"/sdk/templates/*/; do
  name=$(basename "$template")
  cp -r "$template" "$work/$name"
  cmake -S "$work/$name" -B "$work/$name/build" -G Ninja -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_PREFIX_PATH="$work/prefix" >/dev/null
  cmake --build "$work/$name/build" >/dev/null
  so=$(find "$work/$name/build" -maxdepth 1 -name '*.so' | head -n 1)
  test -n "$so" || { echo "FAIL: template $name built no plugin"; exit 1; }
  "$conformance" --plugin "$so" >"$work/$name.txt" \
    || { cat "$work/$name.txt"; echo "FAIL: template $name is not conformant"; exit 1; }
  # Extended, so outside the verdict; a template others copy must still check its blocks right.
  if grep -qE '^FAIL +extended +kv\.offset_overflow' "$work/$name.txt"; then
    cat "$work/$name.txt"
    echo "FAIL: template $name copies a block whose offset overflows"
    exit 1
  fi
  tail -n 1 "$work/$name.txt"
done
echo "every SDK template built out of tree and conformant: OK"
