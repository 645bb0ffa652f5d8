#!/usr/bin/env bash
# Measures the CPU head-of-line comparison of docs/performance.md: for each deployment of
# configs/cpu_hol, starts `headway serve`, runs `headway bench --hol-baseline` with
# configs/workloads/cpu_hol_mixed.toml and scripts/hol_3500_64.py against it, and stops it with
# SIGTERM. Needs a built tree (scripts/run.sh or scripts/test.sh) and models/tiny; run it on an
# otherwise idle machine: every figure is wall-clock time on the CPU.
#
#   scripts/measure_cpu_hol.sh [BUILD_DIR] [OUT_DIR]     # defaults: build, hol-results
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
out=${2:-hol-results}
headway="$build/bin/headway"
mkdir -p "$out"
[[ -f models/tiny/model.safetensors ]] || "$headway" model make-tiny --out models/tiny

for config in baseline partial_prefill length_routing; do
  echo "== $config" >&2
  "$headway" serve --config "configs/cpu_hol/$config.toml" >"$out/$config.serve.log" 2>&1 &
  server=$!
  for _ in $(seq 100); do
    curl -sf http://127.0.0.1:8000/health >/dev/null && break
    kill -0 "$server" 2>/dev/null || { cat "$out/$config.serve.log" >&2; exit 1; }
    sleep 0.2
  done
  "$headway" bench --url http://127.0.0.1:8000 --workload configs/workloads/cpu_hol_mixed.toml \
    --hol-baseline --quiet --out "$out/$config.bench.json" | tee "$out/$config.bench.txt"
  python3 scripts/hol_3500_64.py --url http://127.0.0.1:8000 --repeat 3 | tee "$out/$config.3500_64.txt"
  kill -TERM "$server"
  wait "$server"
done
