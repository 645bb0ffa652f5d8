#!/usr/bin/env bash
# The one prepared check for a machine with an NVIDIA H200 (sm_90a): runs the GPU tests, the
# kernel and model benchmarks, profiles the model for the simulator and serves it under the
# head-of-line workload with two schedulers, in under 8 minutes, and writes a summary (per-kernel
# times with achieved bandwidth and FLOP/s, prefill tokens/s, decode step time at batch 1/8/64 as
# fractions of the H200's 4.8 TB/s HBM bandwidth and 989 TFLOP/s BF16 dense peak, the fitted cost
# file, TTFT and inter-token latency per scheduler).
#
#   bash scripts/device-check.sh                       # configure + build here, then check
#   bash scripts/device-check.sh --bundle .device      # (on the build machine) build and pack
#   bash scripts/device-check.sh --prebuilt .device    # (on the GPU machine) check the pack
#   DEVICE_CHECK_STEPS=benchmarks,serve bash scripts/device-check.sh --prebuilt .device
#
# Steps (DEVICE_CHECK_STEPS, comma-separated; default all): tests, benchmarks, profile, serve.
# DEVICE_CHECK_KERNEL_BENCHMARKS and DEVICE_CHECK_MODEL_BENCHMARKS narrow the two benchmark runs
# (Google Benchmark filters; default every kernel benchmark, every BM_Model* one) for a short run.
#
# The lent GPU machines have CUDA, CMake and Python but not the Debian packages Headway links
# (gRPC, Boost, toml++, ...), and nothing can be installed there: --bundle builds the CUDA
# targets in HEADWAY_DEVICE_BUILD_DIR (default build-device) on this machine, strips them and packs them
# with every shared library they need except the C library and the CUDA libraries the GPU machine
# has (cuBLAS, cuBLASLt, NCCL, the driver); --prebuilt unpacks that, links the build's absolute
# paths (the tests find plugins and test data through them) to the copy, finds cuBLAS and NCCL on
# the machine and runs the checks. Results go to $OUT (summary.md, results.tgz, the cost file)
# when OUT is set, else to ./device-check-out.
set -euo pipefail
cd "$(dirname "$0")/.."
start=$(date +%s)
log() { echo "[device-check $(($(date +%s) - start))s] $*"; }
# Every step's time limit is cut to what is left before a deadline (DEVICE_CHECK_DEADLINE_S after
# the start, or after the build when this script builds; default 540 s: the lent machine's commands
# end at 600 s), keeping 20 s for the summary, so that a hung step still leaves a summary behind.
# `timeout --foreground`: the step stays in this script's process group, so a SIGTERM sent to the
# group stops it at once and the trap below writes the summary (bash runs a trap only once the
# foreground command has ended).
budget() {  # a step's own limit in seconds -> the limit it gets now (0: no time left)
  local left=$((deadline - $(date +%s) - 20))
  if ((left < $1)); then echo $((left > 0 ? left : 0)); else echo "$1"; fi
}

mode=build
pack=""
case "${1:-}" in
  --bundle) mode=bundle; pack=${2:?--bundle needs a folder} ;;
  --prebuilt) mode=prebuilt; pack=${2:?--prebuilt needs a folder} ;;
  "") ;;
  *) echo "usage: $0 [--bundle DIR | --prebuilt DIR]" >&2; exit 2 ;;
esac

# Its own build folder: scripts/run.sh configures build/ without the tests this check runs.
build=${HEADWAY_DEVICE_BUILD_DIR:-build-device}
jobs=${JOBS:-$(nproc)}
tests=(cuda_model_config_test cuda_step_plan_test cuda_kernels_test cuda_model_test
       nccl_transport_test host_copy_device_test cuda_staged_handoff_test cuda_radix_cut_test)
targets=(headway headway_model_cuda headway_model_cpu headway_model_sim headway_scheduler_chunked
         headway_scheduler_partial_prefill headway_router_single headway_kv_transport_nccl
         headway_kv_transport_host_copy cuda_benchmark "${tests[@]}")

build_targets() {
  export CCACHE_BASEDIR="$PWD" CCACHE_NOHASHDIR=1
  if [[ ! -f "$build/CMakeCache.txt" ]]; then
    log "configure ($build, Release, sm_90a)"
    cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DHEADWAY_CUDA=ON \
      -DHEADWAY_BUILD_TESTS=ON -DCMAKE_CUDA_ARCHITECTURES=90a >"$1/configure.log" 2>&1 \
      || { tail -50 "$1/configure.log"; exit 1; }
  elif grep -q '^HEADWAY_BUILD_TESTS:BOOL=OFF' "$build/CMakeCache.txt"; then
    log "reconfigure $build with the tests (HEADWAY_BUILD_TESTS=ON)"
    cmake -S . -B "$build" -DHEADWAY_BUILD_TESTS=ON >"$1/configure.log" 2>&1 \
      || { tail -50 "$1/configure.log"; exit 1; }
  fi
  log "build ${#targets[@]} targets in $build (-j$jobs)"
  cmake --build "$build" -j "$jobs" --target "${targets[@]}" >"$1/build.log" 2>&1 \
    || { tail -80 "$1/build.log"; exit 1; }
}

# ---- --bundle: build here, pack binaries, plugins and their shared libraries -------------------
if [[ $mode == bundle ]]; then
  if grep -q '^HEADWAY_CUDA:STRING=OFF' "$build/CMakeCache.txt" 2>/dev/null; then
    echo "device-check: $build is configured with HEADWAY_CUDA=OFF; pack a build with CUDA" \
      "(HEADWAY_DEVICE_BUILD_DIR=...)" >&2
    exit 2
  fi
  # CMakeLists.txt defaults to 90a; a cache entry means someone chose other architectures.
  archs=$(sed -n 's/^CMAKE_CUDA_ARCHITECTURES:[A-Z]*=//p' "$build/CMakeCache.txt" 2>/dev/null || true)
  if [[ -n "$archs" && "$archs" != *90* ]]; then
    echo "device-check: $build builds CUDA for '$archs', not for the H100/H200 (90a)" >&2
    exit 2
  fi
  mkdir -p "$pack"
  stage=$(mktemp -d)
  trap 'rm -rf "$stage"' EXIT
  build_targets "$stage"
  build_abs=$(cd "$build" && pwd)
  plugins_rel=lib/headway/plugins
  mkdir -p "$stage/pack/build/bin" "$stage/pack/build/$plugins_rel" "$stage/pack/lib"
  files=()
  for t in headway cuda_benchmark "${tests[@]}"; do
    strip --strip-unneeded -o "$stage/pack/build/bin/$t" "$build/bin/$t"
    files+=("$build/bin/$t")
  done
  for so in "$build/$plugins_rel"/*.so; do
    strip --strip-unneeded -o "$stage/pack/build/$plugins_rel/$(basename "$so")" "$so"
    files+=("$so")
  done
  ldd "${files[@]}" >"$stage/ldd.txt" 2>&1 || true
  if grep -q "not found" "$stage/ldd.txt"; then
    grep "not found" "$stage/ldd.txt" | sort -u >&2
    echo "device-check: the build needs libraries this machine does not resolve" >&2
    exit 1
  fi
  # Every library the loader resolves, but the C library's and those of CUDA that must match the
  # GPU machine's driver: those are found there (their names go along in paths.env).
  machine_libs='/(libc|libm|libdl|libpthread|librt|ld-linux[^/]*|libcuda|libcublas|libcublasLt|libnccl)\.so'
  awk '$2 == "=>" && $3 ~ /^\// {print $3}' "$stage/ldd.txt" | sort -u >"$stage/libs.txt"
  { grep -Ev "$machine_libs" "$stage/libs.txt" || true; } |
    while read -r lib; do strip --strip-unneeded -o "$stage/pack/lib/$(basename "$lib")" "$lib"; done
  cuda_libs=$({ grep -E '/(libcublas|libcublasLt|libnccl)\.so' "$stage/libs.txt" || true; } |
    xargs -r -n1 basename | tr '\n' ' ')
  printf 'SOURCE_DIR=%q\nBUILD_DIR=%q\nCUDA_LIBS=%q\n' "$PWD" "$build_abs" "$cuda_libs" \
    >"$stage/pack/paths.env"
  tar -C "$stage/pack" -czf "$pack/bundle.tgz" .
  log "packed $(du -h "$pack/bundle.tgz" | cut -f1) into $pack/bundle.tgz" \
    "($(ls "$stage/pack/lib" | wc -l) libraries; from the GPU machine: $cuda_libs)"
  exit 0
fi

steps=",${DEVICE_CHECK_STEPS:-tests,benchmarks,profile,serve},"
for step in ${steps//,/ }; do
  case "$step" in
    tests | benchmarks | profile | serve) ;;
    *) echo "device-check: unknown step '$step' in DEVICE_CHECK_STEPS (tests, benchmarks," \
         "profile, serve)" >&2; exit 2 ;;
  esac
done
want() { [[ $steps == *",$1,"* ]]; }

out=${OUT:-$PWD/device-check-out}
mkdir -p "$out"
work=$(mktemp -d)
cleanup=("rm -rf '$work'")
trap 'for c in "${cleanup[@]}"; do eval "$c"; done' EXIT
# Variables for the binaries under test (not for python3, tar or nvidia-smi). On this machine a
# GPU test that finds no device fails instead of skipping, so that a runtime that cannot see the
# GPU never passes as a check.
run_env=(HEADWAY_REQUIRE_GPU=1)

# ---- --prebuilt: unpack, recreate the build's paths, find CUDA's libraries ---------------------
if [[ $mode == prebuilt ]]; then
  root=$(mktemp -d /tmp/headway-prebuilt.XXXX)
  cleanup+=("rm -rf '$root'")
  tar -C "$root" -xzf "$pack/bundle.tgz"
  # shellcheck disable=SC1091
  source "$root/paths.env"
  here=$(pwd -P)
  build_here="$here/${BUILD_DIR#"$SOURCE_DIR"/}"  # where the build's path lands in this copy
  # A run killed before its clean-up (SIGKILL) leaves its links behind; they point into an earlier
  # unpack (or at this checkout) and would make this run refuse to start.
  if [[ -L "$build_here" && "$(readlink "$build_here")" == /tmp/headway-prebuilt.*/build ]]; then
    log "removing $build_here, a link left by an earlier run"
    rm -f "$build_here"
  fi
  if [[ "$here" != "$SOURCE_DIR" && -L "$SOURCE_DIR" && "$(readlink "$SOURCE_DIR")" == "$here" ]]; then
    log "removing $SOURCE_DIR, a link left by an earlier run"
    rm -f "$SOURCE_DIR"
  fi
  # Every check before anything is moved or linked; everything is put back on exit.
  link_source=0
  if [[ "$(realpath -m "$SOURCE_DIR")" != "$here" ]]; then
    link_source=1
    if [[ (-e "$SOURCE_DIR" || -L "$SOURCE_DIR") && "${HEADWAY_DEVICE_MOVE_ASIDE:-0}" != 1 ]]; then
      echo "device-check: the pack was built in $SOURCE_DIR, which exists here and is not this" \
        "checkout; set HEADWAY_DEVICE_MOVE_ASIDE=1 to move it aside (on a throw-away machine)" >&2
      exit 2
    fi
  fi
  if [[ "$BUILD_DIR" != "$SOURCE_DIR"/* || -e "$build_here" || -L "$build_here" ]]; then
    echo "device-check: the build's path $BUILD_DIR would land on $build_here, which exists (or" \
      "lies outside the checkout); --prebuilt is for a copy of the checkout without it" >&2
    exit 2
  fi
  if [[ $link_source == 1 ]]; then
    if [[ -e "$SOURCE_DIR" || -L "$SOURCE_DIR" ]]; then
      mv "$SOURCE_DIR" "$SOURCE_DIR.moved.$$"
      cleanup+=("mv '$SOURCE_DIR.moved.$$' '$SOURCE_DIR'")
    fi
    mkdir -p "$(dirname "$SOURCE_DIR")"
    ln -s "$here" "$SOURCE_DIR"
    cleanup=("rm -f '$SOURCE_DIR'" "${cleanup[@]}")
  fi
  ln -s "$root/build" "$build_here"
  cleanup=("rm -f '$build_here'" "${cleanup[@]}")
  build=$BUILD_DIR
  lib_dir_of() {
    local d
    for d in /usr/local/cuda/lib64 /usr/local/cuda/lib /usr/local/cuda/targets/x86_64-linux/lib \
        /usr/lib/x86_64-linux-gnu; do
      [[ -e "$d/$1" ]] && { echo "$d"; return; }
    done
    d=$(find /usr /opt -name "$1" -print -quit 2>/dev/null || true)
    [[ -n "$d" ]] && dirname "$d"
  }
  ld_path="$root/lib"
  for lib in $CUDA_LIBS; do
    d=$(lib_dir_of "$lib" || true)
    if [[ -z "$d" ]]; then log "warning: $lib not found on this machine"; continue; fi
    log "$lib: $d"
    [[ ":$ld_path:" == *":$d:"* ]] || ld_path="$ld_path:$d"
  done
  run_env+=("LD_LIBRARY_PATH=$ld_path${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}")
  for f in "$build/bin/headway" "$build/lib/headway/plugins/headway_model_cuda.so"; do
    env "${run_env[@]}" ldd "$f" | grep "not found" && log "warning: $f has unresolved libraries"
  done
else
  build_targets "$work"
  if [[ "${DEVICE_CHECK_BUILD_ONLY:-0}" == 1 ]]; then log "built (DEVICE_CHECK_BUILD_ONLY=1)"; exit 0; fi
fi

# From the start with --prebuilt (the lent machine's clock runs from the command's start); from
# now after a build.
if [[ $mode == prebuilt ]]; then checks_from=$start; else checks_from=$(date +%s); fi
deadline=$((checks_from + ${DEVICE_CHECK_DEADLINE_S:-540}))
nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm --format=csv,noheader \
  >"$work/gpu.txt" 2>&1 || echo "nvidia-smi unavailable" >"$work/gpu.txt"
log "GPU: $(cat "$work/gpu.txt")"

# Everything so far goes back even if a later step runs out of time.
save() { tar -C "$work" -czf "$out/results.tgz" . 2>/dev/null || true; }
status=0

# ---- summary -----------------------------------------------------------------------------------
# Also written when the run is interrupted (SIGTERM, SIGINT): what finished is reported.
write_summary() {  # [note]
python3 - "$work" "$status" "$(($(date +%s) - start))" "${1:-}" "${tests[@]}" >"$work/summary.md" <<'PY' || true
import json, os, sys
work, status, seconds, note, tests = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5:]
HBM, PEAK = 4.8e12, 989e12
def read(name):
    try:
        return open(os.path.join(work, name)).read()
    except OSError as e:
        return f"(missing: {e})"
print("# Headway device check (cuda model)\n")
print(f"GPU: {read('gpu.txt').strip()}  ")
print(f"Result: {'PASS' if status == 0 else 'FAIL'} in {seconds} s  \n")
if note:
    print(f"**{note}**\n")
print("## Tests\n\n| binary | tests | failures | skipped |\n|---|---|---|---|")
for t in tests:
    try:
        j = json.load(open(os.path.join(work, t + ".json")))
        skipped = sum(1 for s in j["testsuites"] for c in s["testsuite"] if c.get("result") == "SKIPPED")
        print(f"| {t} | {j['tests']} | {j['failures']} | {skipped} |")
    except Exception as e:
        print(f"| {t} | (no report: {e}) | | |")
bench = []
for part in ("kernels", "model"):
    try:
        bench += json.load(open(os.path.join(work, f"bench_{part}.json")))["benchmarks"]
    except Exception as e:
        print(f"\nNo {part} benchmark results: {e}")
def named(b):
    # The label says what the arguments' indices mean (the attention tiling, "split", ...).
    return b["name"] + (f" ({b['label']})" if b.get("label") else "")
def ms(b):
    scale = {"ns": 1e-6, "us": 1e-3, "ms": 1.0, "s": 1e3}[b.get("time_unit", "ns")]
    return b["real_time"] * scale
if bench:
    print("\n## Kernels (CUDA events; Llama-3.1-8B shapes)\n")
    print("| benchmark | time (ms) | GB/s | % of 4.8 TB/s | TFLOP/s | % of 989 TFLOP/s |\n|---|---|---|---|---|---|")
    for b in bench:
        if b["name"].startswith("BM_Model") or b.get("error_occurred"):
            continue
        bw, fl = b.get("bytes_per_second", 0.0), b.get("flop_per_second", 0.0)
        print(f"| {named(b)} | {ms(b):.4f} | {bw/1e9:.1f} | {100*bw/HBM:.1f} | {fl/1e12:.2f} | {100*fl/PEAK:.2f} |")
    print("\n## Model (random Llama-3.1-8B weights, BF16, one GPU)\n")
    print("| benchmark | step (ms) | tokens/s | % of HBM (weights + KV read) | % of BF16 peak |\n|---|---|---|---|---|")
    for b in bench:
        if not b["name"].startswith("BM_Model") or b.get("error_occurred"):
            continue
        bw, fl = b.get("bytes_per_second", 0.0), b.get("flop_per_second", 0.0)
        hbm = f"{100*bw/HBM:.1f}" if bw else "-"
        print(f"| {named(b)} | {ms(b):.2f} | {b.get('tokens_per_second', 0):.0f} | {hbm} | {100*fl/PEAK:.2f} |")
    errors = {}
    for b in bench:
        if b.get("error_occurred"):
            errors.setdefault(b.get("error_message"), []).append(b["name"])
    for message, names in errors.items():
        print(f"\n{len(names)} benchmark(s) failed: {message}: {', '.join(names[:4])}"
              f"{' ...' if len(names) > 4 else ''}")
    # The phase_timing model's summary (cuda_benchmark logs it when it releases the model).
    phases = [line.split("phase times (ms per step), ", 1)[1] for line in read("bench_model.log").splitlines()
              if "phase times (ms per step), " in line]
    if phases:
        print("\n## Phase times (phase_timing: CUDA events at every phase boundary, ms per step)\n")
        for summary in phases:
            for group in summary.split("; "):
                print(f"- {group}")
    # Each CUDA-graph model's count of replayed and directly run steps (logged when released).
    graph_lines = [line.split("cuda model: ", 1)[1] for line in read("bench_model.log").splitlines()
                   if "cuda model: CUDA graphs: " in line or "could not be captured" in line]
    if graph_lines:
        print("\n## CUDA graphs (cuda_graph_max_batch = 64 runs)\n")
        for line in graph_lines:
            print(f"- {line}")
print("\n## Cost file (headway profile)\n\n```")
print(read("h200_llama8b_cost.toml").strip()[:3000])
print("```")
for name in ("chunked", "partial_prefill"):
    print(f"\n## Served: {name} (headway bench, h200_hol_mixed, 20 s)\n\n```")
    print(read(f"bench_{name}.txt").strip()[-4500:])
    print("```")
    fit = read(f"trace_fit_{name}.log").strip()
    if fit and not fit.startswith("(missing"):
        print(f"\nCost fitted to the served steps (h200_served_{name}_cost.toml):\n\n```\n{fit}\n```")
    check = read(f"trace_check_{name}.log").strip()
    if check and not check.startswith("(missing"):
        print(f"\nThe grid's twin on the served steps (profile --check):\n\n```\n{check}\n```")
    try:
        o = json.load(open(os.path.join(work, f"trace_twin_{name}.json")))["overall"]
        print(f"\nIts twin's prediction of the same 20 s: TTFT p50/p99 {o['ttft']['p50']*1e3:.1f}/"
              f"{o['ttft']['p99']*1e3:.1f} ms, ITL p50/p99 {o['itl']['p50']*1e3:.2f}/"
              f"{o['itl']['p99']*1e3:.2f} ms, {o['output_tokens_per_s']:.0f} output tok/s")
    except (OSError, KeyError, ValueError) as e:
        print(f"\n(no prediction from the served fit: {e})")
PY
save
cp "$work/summary.md" "$out/summary.md"
}
serve_pid=""
trap '{ [[ -n $serve_pid ]] && kill -KILL "$serve_pid"; } 2>/dev/null || true; log "interrupted"; status=1; write_summary "Interrupted: the steps after the last one reported did not finish."; exit 143' TERM INT

# ---- 1. GPU tests ------------------------------------------------------------------------------
for t in "${tests[@]}"; do
  want tests || break
  cap=$(budget 150)
  if ((cap < 10)); then log "deadline: $t and the tests after it not run"; status=1; break; fi
  log "test $t"
  if ! timeout --foreground -k 5 "$cap" env "${run_env[@]}" "$build/bin/$t" --gtest_brief=1 \
      --gtest_output="json:$work/$t.json" >"$work/$t.log" 2>&1; then
    status=1
    tail -40 "$work/$t.log"
  fi
  save
done

# ---- 2. kernel and model benchmarks ------------------------------------------------------------
# Two runs, so that a crash or a timeout in one keeps the other's JSON (Google Benchmark writes
# its file at the end). A benchmark that fails reports an error and the binary still exits 0.
run_benchmarks() {  # name filter limit
  local cap
  cap=$(budget "$3")
  if ((cap < 10)); then log "deadline: benchmarks ($1) not run"; status=1; return; fi
  log "benchmarks ($1)"
  if ! timeout --foreground -k 5 "$cap" env "${run_env[@]}" "$build/bin/cuda_benchmark" \
      --benchmark_filter="$2" --benchmark_out="$work/bench_$1.json" --benchmark_out_format=json \
      --benchmark_min_time=0.2 >"$work/bench_$1.log" 2>&1; then
    status=1
    tail -40 "$work/bench_$1.log"
  fi
  if grep -q '"error_occurred": true' "$work/bench_$1.json" 2>/dev/null; then
    status=1
    log "benchmarks ($1): some reported an error (see summary.md)"
  fi
}
if want benchmarks; then
  run_benchmarks kernels "${DEVICE_CHECK_KERNEL_BENCHMARKS:-^BM_[^M]}" 150  # all but BM_Model*
  save
  run_benchmarks model "${DEVICE_CHECK_MODEL_BENCHMARKS:-^BM_Model}" 200
  save
fi

# ---- 3. the simulator's cost file, fitted to this GPU ------------------------------------------
want profile && log "profile configs/gpu/llama8b_h200_chunked.toml"
if ! want profile; then
  :
elif (($(budget 150) < 10)); then
  log "deadline: profile not run"
  status=1
elif timeout --foreground -k 5 "$(budget 150)" env "${run_env[@]}" "$build/bin/headway" profile \
    --config configs/gpu/llama8b_h200_chunked.toml --max-context 32768 \
    --out "$work/h200_llama8b_cost.toml" >"$work/profile.log" 2>&1; then
  cp "$work/h200_llama8b_cost.toml" "$out/"
else
  status=1
  tail -30 "$work/profile.log"
fi
save

# ---- 4. serve under the head-of-line workload, baseline and partial prefills -------------------
serve_and_bench() {  # name config
  local name=$1 config=$2 pid url=""
  if (($(budget 120) < 60)); then log "deadline: serve $config not run"; status=1; return; fi
  log "serve $config; bench configs/workloads/h200_hol_mixed.toml (20 s of arrivals)"
  # An ephemeral port, read back from the server's log: no other server is asked by mistake.
  env "${run_env[@]}" "$build/bin/headway" serve --config "$config" --port 0 \
    --step-trace "$work/steps_$name.jsonl" >"$work/serve_$name.log" 2>&1 &
  pid=$!
  serve_pid=$pid
  local waits
  waits=$(($(budget 120) * 2))
  for _ in $(seq 1 "$waits"); do
    url=$(sed -n 's|.*HTTP listening on \(http://[^ ]*\).*|\1|p' "$work/serve_$name.log" | head -1)
    [[ -n "$url" ]] && break
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.5
  done
  # The deployment's simulator twin, reading the cost file just profiled when there is one, so
  # that bench prints its prediction beside the measurement.
  local twin="configs/gpu/llama8b_h200_${name}_sim.toml" predict=()
  if [[ -f "$work/h200_llama8b_cost.toml" ]]; then
    sed "s|cost_file = \"h200_llama8b_cost.toml\"|cost_file = \"$work/h200_llama8b_cost.toml\"|" \
      "$twin" >"$work/twin_$name.toml"
    twin="$work/twin_$name.toml"
  fi
  [[ -f "$twin" ]] && predict=(--predict-config "$twin")
  if [[ -n "$url" ]] && (($(budget 120) >= 30)); then
    timeout --foreground -k 5 "$(budget 120)" env "${run_env[@]}" "$build/bin/headway" bench --url "$url" \
      --workload configs/workloads/h200_hol_mixed.toml --duration 20 --timeout 60 --quiet \
      "${predict[@]}" --out "$work/bench_$name.json" >"$work/bench_$name.txt" 2>&1 || status=1
  else
    status=1
    log "server for $config did not come up"
    tail -20 "$work/serve_$name.log"
  fi
  # serve drains for up to 30 s after SIGTERM (and ignores it while the model loads): bounded.
  kill -TERM "$pid" 2>/dev/null || true
  for _ in $(seq 1 80); do
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.5
  done
  kill -KILL "$pid" 2>/dev/null || true
  wait "$pid" 2>/dev/null || true
  serve_pid=""
  analyse_served_steps "$name"
}
# Off the GPU, seconds each, after a served run (none of it fails the check; a failure is logged):
# the cost file fitted to the served steps themselves, beside the grid's, and its twin's prediction
# of the same 20 s (as the grid's twin predicted it for bench); and the grid's twin replayed on the
# very steps served, its error step by step, decodes and prefills apart.
analyse_served_steps() {  # name
  local name=$1 steps="$work/steps_$1.jsonl" served_cost="$out/h200_served_$1_cost.toml"
  [[ -s "$steps" ]] || { log "no step trace of the served $name run"; return; }
  # `timeout 0` would mean no limit at all.
  (($(budget 30) >= 5)) || { log "deadline: the served $name steps not analysed"; return; }
  if timeout -k 5 "$(budget 30)" env "${run_env[@]}" "$build/bin/headway" profile --from-step-trace "$steps" \
      --out "$served_cost" >"$work/trace_fit_$name.log" 2>&1; then
    sed "s|cost_file = \"h200_llama8b_cost.toml\"|cost_file = \"$served_cost\"|" \
      "configs/gpu/llama8b_h200_${name}_sim.toml" >"$work/trace_twin_$name.toml"
    timeout -k 5 "$(budget 30)" env "${run_env[@]}" "$build/bin/headway" simulate --config "$work/trace_twin_$name.toml" \
      --no-baseline --quiet --workload configs/workloads/h200_hol_mixed.toml --duration 20 \
      --out "$work/trace_twin_$name.json" >>"$work/trace_fit_$name.log" 2>&1 ||
      log "the served $name fit's twin did not simulate"
  else
    log "fit of the served $name steps failed"
    tail -5 "$work/trace_fit_$name.log" 2>/dev/null || true
  fi
  if [[ -f "$work/twin_$name.toml" ]]; then
    timeout -k 5 "$(budget 30)" env "${run_env[@]}" "$build/bin/headway" profile --from-step-trace "$steps" \
      --check "$work/twin_$name.toml" >"$work/trace_check_$name.log" 2>&1 ||
      log "the grid's twin could not replay the served $name steps"
  fi
}
if want serve; then
  serve_and_bench chunked configs/gpu/llama8b_h200_chunked.toml
  save
  serve_and_bench partial_prefill configs/gpu/llama8b_h200_partial_prefill.toml
  save
fi

write_summary
cat "$work/summary.md"
log "done (status $status); results in $out"
exit "$status"
