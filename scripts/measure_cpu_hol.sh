#!/usr/bin/env bash
# Measures the CPU head-of-line comparison of docs/performance.md: for each deployment of
# configs/cpu_hol (and the two engine processes + router of configs/processes), starts
# `headway serve`, runs `headway bench --hol-baseline` with
# configs/workloads/cpu_hol_mixed.toml and scripts/hol_3500_64.py against it, and stops it with
# SIGTERM. Needs a built tree (scripts/run.sh or scripts/test.sh) and models/tiny; run it on an
# otherwise idle machine: every figure is wall-clock time on the CPU.
#
#   [HOL_3500_64_ONLY=1] scripts/measure_cpu_hol.sh [BUILD_DIR] [OUT_DIR] [DEPLOYMENT...]
#   HOL_3500_64_ONLY=1: skip `headway bench`, run only scripts/hol_3500_64.py
#   defaults: build, hol-results, every deployment (baseline partial_prefill length_routing
#   length_processes disaggregated conditional_disaggregated disaggregated_processes
#   conditional_processes); also disaggregated_socket_processes (the KV over gRPC, as between
#   hosts)
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
out=${2:-hol-results}
shift $(($# < 2 ? $# : 2))
deployments=("$@")
[[ ${#deployments[@]} -gt 0 ]] || deployments=(baseline partial_prefill length_routing length_processes
  disaggregated conditional_disaggregated disaggregated_processes conditional_processes)
headway="$build/bin/headway"
mkdir -p "$out"
[[ -f models/tiny/model.safetensors ]] || "$headway" model make-tiny --out models/tiny

# Starts `headway serve --config $2` in the background, logging to $out/$1.serve.log; sets $started.
start() {
  "$headway" serve --config "$2" >"$out/$1.serve.log" 2>&1 &
  started=$!
}

# Waits for $1 (a URL) to answer while process $2 lives.
wait_for() {
  for _ in $(seq 100); do
    curl -sf "$1" >/dev/null && return 0
    kill -0 "$2" 2>/dev/null || return 1
    sleep 0.2
  done
  return 1
}

for config in "${deployments[@]}"; do
  echo "== $config" >&2
  engines=()
  if [[ $config == *_processes ]]; then
    # Two engine processes of one thread each (the same two cores), the router in front.
    case $config in
      length_processes) pair=(short long) router=router ;;
      disaggregated_processes) pair=(prefill decode) router=router_disaggregated ;;
      disaggregated_socket_processes) pair=(prefill decode_socket) router=router_disaggregated ;;
      conditional_processes) pair=(prefill decode) router=router_conditional ;;
      *) echo "unknown deployment $config" >&2; exit 2 ;;
    esac
    for part in "${pair[@]}"; do
      start "$config.engine_$part" "configs/processes/engine_$part.toml"
      engines+=("$started")
    done
    start "$config" "configs/processes/$router.toml"
  else
    start "$config" "configs/cpu_hol/$config.toml"
  fi
  server=$started
  wait_for http://127.0.0.1:8000/health "$server" || { cat "$out/$config.serve.log" >&2; exit 1; }
  if [[ ${HOL_3500_64_ONLY:-0} != 1 ]]; then
    "$headway" bench --url http://127.0.0.1:8000 --workload configs/workloads/cpu_hol_mixed.toml \
      --hol-baseline --quiet --out "$out/$config.bench.json" | tee "$out/$config.bench.txt"
  fi
  python3 scripts/hol_3500_64.py --url http://127.0.0.1:8000 --repeat 3 | tee "$out/$config.3500_64.txt"
  kill -TERM "$server"
  wait "$server"
  for engine in "${engines[@]}"; do
    kill -TERM "$engine"
    wait "$engine"
  done
done
