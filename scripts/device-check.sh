#!/usr/bin/env bash
# The one prepared check for a machine with an NVIDIA H200 (sm_90a): configures and builds only the
# CUDA targets and their tests (Release, -j16), runs the GPU tests and the benchmarks in under
# 8 minutes, and writes a summary (per-kernel times with achieved bandwidth and FLOP/s, prefill
# tokens/s, decode step time at batch 1/8/64 as fractions of the H200's 4.8 TB/s HBM bandwidth and
# 989 TFLOP/s BF16 dense peak) to $OUT/summary.md when $OUT is set, to stdout otherwise.
#
#   bash scripts/device-check.sh              # build + tests + benchmarks
#   HEADWAY_DEVICE_BUILD_DIR=build-gpu JOBS=16 bash scripts/device-check.sh
#
# Needs: CMake >= 3.22, Ninja, nvcc (CUDA 12.4+), the Debian packages of scripts/setup.sh, python3
# for the summary (the raw JSON is kept when python3 is missing).
set -euo pipefail
cd "$(dirname "$0")/.."
start=$(date +%s)
build=${HEADWAY_DEVICE_BUILD_DIR:-build-device}
jobs=${JOBS:-16}
out=${OUT:-}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
log() { echo "[device-check $(($(date +%s) - start))s] $*"; }

export CCACHE_BASEDIR="$PWD" CCACHE_NOHASHDIR=1
log "configure ($build, Release, sm_90a)"
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DHEADWAY_CUDA=ON \
  -DCMAKE_CUDA_ARCHITECTURES=90a >"$work/configure.log" 2>&1 || { tail -50 "$work/configure.log"; exit 1; }
targets=(headway_model_cuda headway_model_cpu headway_scheduler_chunked headway_router_single
         headway_kv_transport_nccl headway_kv_transport_host_copy cuda_model_config_test
         cuda_step_plan_test cuda_kernels_test cuda_model_test nccl_transport_test
         host_copy_device_test cuda_staged_handoff_test cuda_benchmark)
log "build ${targets[*]} (-j$jobs)"
cmake --build "$build" -j "$jobs" --target "${targets[@]}" >"$work/build.log" 2>&1 \
  || { tail -80 "$work/build.log"; exit 1; }
if [[ "${DEVICE_CHECK_BUILD_ONLY:-0}" == 1 ]]; then log "built (DEVICE_CHECK_BUILD_ONLY=1)"; exit 0; fi

nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm --format=csv,noheader \
  >"$work/gpu.txt" 2>&1 || echo "nvidia-smi unavailable" >"$work/gpu.txt"
log "GPU: $(cat "$work/gpu.txt")"

status=0
for t in cuda_model_config_test cuda_step_plan_test cuda_kernels_test cuda_model_test \
    nccl_transport_test host_copy_device_test cuda_staged_handoff_test; do
  log "test $t"
  if ! timeout 180 "$build/bin/$t" --gtest_brief=1 --gtest_output="json:$work/$t.json" \
      >"$work/$t.log" 2>&1; then
    status=1
    tail -40 "$work/$t.log"
  fi
done

log "benchmarks"
if ! timeout 300 "$build/bin/cuda_benchmark" --benchmark_out="$work/bench.json" \
    --benchmark_out_format=json --benchmark_min_time=0.2 >"$work/bench.log" 2>&1; then
  status=1
  tail -40 "$work/bench.log"
fi

summary="$work/summary.md"
if command -v python3 >/dev/null; then
  python3 - "$work" "$status" "$(($(date +%s) - start))" >"$summary" <<'PY'
import json, os, sys
work, status, seconds = sys.argv[1], int(sys.argv[2]), sys.argv[3]
HBM, PEAK = 4.8e12, 989e12
print("# Headway device check (cuda model)\n")
print(f"GPU: {open(os.path.join(work, 'gpu.txt')).read().strip()}  ")
print(f"Result: {'PASS' if status == 0 else 'FAIL'} in {seconds} s  \n")
print("## Tests\n\n| binary | tests | failures | skipped |\n|---|---|---|---|")
for t in ["cuda_model_config_test", "cuda_step_plan_test", "cuda_kernels_test", "cuda_model_test",
          "nccl_transport_test", "host_copy_device_test"]:
    try:
        j = json.load(open(os.path.join(work, t + ".json")))
        skipped = sum(1 for s in j["testsuites"] for c in s["testsuite"] if c.get("result") == "SKIPPED")
        print(f"| {t} | {j['tests']} | {j['failures']} | {skipped} |")
    except Exception as e:
        print(f"| {t} | (no report: {e}) | | |")
try:
    bench = json.load(open(os.path.join(work, "bench.json")))["benchmarks"]
except Exception as e:
    print(f"\nNo benchmark results: {e}")
    sys.exit(0)
def ms(b):
    scale = {"ns": 1e-6, "us": 1e-3, "ms": 1.0, "s": 1e3}[b.get("time_unit", "ns")]
    return b["real_time"] * scale
print("\n## Kernels (CUDA events; Llama-3.1-8B shapes)\n")
print("| benchmark | time (ms) | GB/s | % of 4.8 TB/s | TFLOP/s | % of 989 TFLOP/s |\n|---|---|---|---|---|---|")
for b in bench:
    if b["name"].startswith("BM_Model") or b.get("error_occurred"):
        continue
    bw, fl = b.get("bytes_per_second", 0.0), b.get("flop_per_second", 0.0)
    print(f"| {b['name']} | {ms(b):.4f} | {bw/1e9:.1f} | {100*bw/HBM:.1f} | {fl/1e12:.2f} | {100*fl/PEAK:.2f} |")
print("\n## Model (random Llama-3.1-8B weights, BF16, one GPU)\n")
print("| benchmark | step (ms) | tokens/s | % of HBM (weights + KV read) | % of BF16 peak |\n|---|---|---|---|---|")
for b in bench:
    if not b["name"].startswith("BM_Model") or b.get("error_occurred"):
        continue
    bw, fl = b.get("bytes_per_second", 0.0), b.get("flop_per_second", 0.0)
    hbm = f"{100*bw/HBM:.1f}" if bw else "-"
    print(f"| {b['name']} | {ms(b):.2f} | {b.get('tokens_per_second', 0):.0f} | {hbm} | {100*fl/PEAK:.2f} |")
errors = [b for b in bench if b.get("error_occurred")]
for b in errors:
    print(f"\n{b['name']}: {b.get('error_message')}")
PY
else
  { echo "# Headway device check"; echo; echo "python3 missing; raw benchmark JSON:"; echo '```'; cat "$work/bench.json" 2>/dev/null; echo '```'; } >"$summary"
fi

if [[ -n "$out" ]]; then
  mkdir -p "$out"
  cp "$summary" "$out/summary.md"
  cp "$work"/*.json "$work"/*.log "$out/" 2>/dev/null || true
  log "summary written to $out/summary.md"
else
  cat "$summary"
fi
log "done (status $status)"
exit "$status"
