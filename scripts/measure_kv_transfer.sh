#!/usr/bin/env bash
# Measures what moving a request's KV between two engine processes costs (docs/performance.md,
# "KV over the socket"): starts the prefill and decode engine processes of configs/processes/ and
# the disaggregated router in front of them, sends one 500-token and three 3,500-token prompts
# (4 output tokens each), prints the router's KV-transfer metrics of the decode process, and stops
# them with SIGTERM. Needs a built tree and models/tiny; run it on an otherwise idle machine.
#
#   scripts/measure_kv_transfer.sh [BUILD_DIR] [DECODE_CONFIG] [PREFILL_CONFIG]
#   DECODE_CONFIG: engine_decode (shared memory, default), engine_decode_socket (gRPC) or
#   engine_decode_host_copy (shared memory, copied by the process's KV transport)
#   PREFILL_CONFIG: engine_prefill (default) or engine_prefill_host_copy
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
decode=${2:-engine_decode}
prefill=${3:-engine_prefill}
headway="$build/bin/headway"
[[ -f models/tiny/model.safetensors ]] || "$headway" model make-tiny --out models/tiny
logs=$(mktemp -d)
pids=()
stop() { kill -TERM "${pids[@]}" 2>/dev/null || true; wait "${pids[@]}" 2>/dev/null || true; }
trap 'stop; rm -rf "$logs"' EXIT

"$headway" serve --config "configs/processes/$prefill.toml" >"$logs/prefill.log" 2>&1 &
pids+=($!)
"$headway" serve --config "configs/processes/$decode.toml" >"$logs/decode.log" 2>&1 &
pids+=($!)
"$headway" serve --config configs/processes/router_disaggregated.toml >"$logs/router.log" 2>&1 &
pids+=($!)
for _ in $(seq 150); do curl -sf http://127.0.0.1:8000/health >/dev/null && break; sleep 0.2; done
curl -sf http://127.0.0.1:8000/health >/dev/null || { cat "$logs"/*.log >&2; exit 1; }

python3 - <<'PY'
import json, urllib.request
for n in (500, 3500, 3500, 3500):
    prompt = [(i * 7) % 300 + 10 for i in range(n)]
    body = json.dumps({"model": "tiny", "prompt": prompt, "max_tokens": 4, "temperature": 0})
    request = urllib.request.Request("http://127.0.0.1:8000/v1/completions", body.encode(),
                                     {"Content-Type": "application/json"})
    urllib.request.urlopen(request, timeout=300).read()
PY
curl -sf http://127.0.0.1:8000/metrics | grep -E '^headway_kv_transfer.*(_sum|_count|_bytes_total)\{engine="1"'
