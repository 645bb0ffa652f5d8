#!/usr/bin/env bash
# The one prepared check for a machine with an NVIDIA H200 (sm_90a): runs the GPU tests, the
# kernel and model benchmarks, profiles five kernels with Nsight Compute where it can, profiles the
# model for the simulator and serves it under the head-of-line workload with two schedulers, in
# under 8 minutes, and writes a summary (per-kernel times with achieved bandwidth and FLOP/s, what
# ncu's counters say of the five, prefill tokens/s, decode step time at batch 1/8/64 as fractions
# of the H200's 4.8 TB/s HBM bandwidth and 989 TFLOP/s BF16 dense peak, the fitted cost file, TTFT
# and inter-token latency per scheduler).
#
#   bash scripts/device-check.sh                       # configure + build here, then check
#   bash scripts/device-check.sh --bundle .device      # (on the build machine) build and pack
#   bash scripts/device-check.sh --prebuilt .device    # (on the GPU machine) check the pack
#   DEVICE_CHECK_STEPS=benchmarks,serve bash scripts/device-check.sh --prebuilt .device
#
# Steps (DEVICE_CHECK_STEPS, comma-separated; default all): tests, benchmarks, ncu, profile, serve.
# DEVICE_CHECK_KERNEL_BENCHMARKS and DEVICE_CHECK_MODEL_BENCHMARKS narrow the two benchmark runs
# (Google Benchmark filters; default every kernel benchmark, every BM_Model* one) for a short run.
# The ncu step (Nsight Compute on five kernels, at most 60 s) finds ncu in PATH, /usr/local/cuda/bin
# or /opt/nvidia/nsight-compute, or runs DEVICE_CHECK_NCU; without one it says so and moves on.
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
       nccl_transport_test host_copy_device_test cuda_staged_handoff_test
       cuda_device_weights_test)
targets=(headway headway-conformance headway_model_cuda headway_model_cpu headway_model_sim
         headway_scheduler_chunked headway_scheduler_partial_prefill headway_router_single
         headway_kv_transport_nccl headway_kv_transport_host_copy cuda_benchmark "${tests[@]}")

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
  for t in headway headway-conformance cuda_benchmark "${tests[@]}"; do
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

steps=",${DEVICE_CHECK_STEPS:-tests,benchmarks,ncu,profile,serve},"
for step in ${steps//,/ }; do
  case "$step" in
    tests | benchmarks | ncu | profile | serve) ;;
    *) echo "device-check: unknown step '$step' in DEVICE_CHECK_STEPS (tests, benchmarks," \
         "ncu, profile, serve)" >&2; exit 2 ;;
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
print("\n## Conformance (headway_model_cuda, tiny checkpoint, deterministic = true)\n")
verdicts = [line.strip() for line in read("conformance.log").splitlines()
            if line.startswith(("PASS", "FAIL", "SKIP", "NOT_SUPPORTED", "QUALITY_WARNING"))
            or "CONFORMANT" in line or line.startswith("(missing")]
for line in verdicts or ["(no result lines: see conformance.log in results.tgz)"]:
    print(f"- {line}")
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
# Nsight Compute: why the five kernels take their time (the ncu step). Metric names differ across
# ncu versions, so the details are matched by name loosely and a missing one prints "?".
import csv, re
def ncu_rows(path):  # CSV rows from the header ("ID", ...) on: ncu may print notes before it
    try:
        lines = open(path, errors="replace").read().splitlines()
    except OSError:
        return []
    start = next((i for i, l in enumerate(lines) if l.startswith('"ID"')), None)
    return [] if start is None else list(csv.reader(lines[start:]))
def num(s):
    try:
        return float(str(s).replace(",", ""))
    except ValueError:
        return None
def ncu_metric(details, names, unit=None):  # the first row named like one of names -> (value, unit)
    for loose in (False, True):
        for n in names:
            for r in details:
                m = r.get("Metric Name", "").strip().lower()
                if (m.startswith(n.lower()) if loose else m == n.lower()) and \
                        (unit is None or r.get("Metric Unit", "").strip() == unit):
                    return num(r.get("Metric Value", "")), r.get("Metric Unit", "").strip()
    return None, ""
def fmt(v, digits=1):
    return "?" if v is None else f"{v:.{digits}f}"
def ncu_stalls(name, details):  # the top 3 stall reasons, cycles per issued instruction
    rows = ncu_rows(os.path.join(work, "ncu", f"{name}_raw.csv"))
    data = [r for r in rows[1:] if r and r[0].strip().isdigit()]
    stalls = {}
    if rows and data:
        pattern = re.compile(r"smsp__average_warps?(?:_latency)?_issue_stalled_(\w+?)(_per_issue_active)?\.ratio$")
        for metric, value in zip(rows[0], data[0]):
            m = pattern.match(metric)
            v = num(value)
            if not m or v is None or m.group(1) == "selected" or m.group(1).endswith("_not_issued"):
                continue
            # The per-issued-instruction family when there is one (what ncu's chart shows).
            key = (m.group(2) is not None, m.group(1))
            stalls[key] = v
        best = any(k[0] for k in stalls)
        stalls = {k[1]: v for k, v in stalls.items() if k[0] == best}
    else:  # no raw page: the Warp State section's own rows
        stalls = {r["Metric Name"]: num(r.get("Metric Value", "")) for r in details
                  if "warp state" in r.get("Section Name", "").lower()
                  and num(r.get("Metric Value", "")) is not None}
    top = sorted(stalls.items(), key=lambda kv: -kv[1])[:3]
    return ", ".join(f"{k} {v:.1f}" for k, v in top) or "?"
def ncu_summary():
    step = read("ncu/step.txt").strip()
    if step.startswith("(missing"):
        step = "not run (the run ended before this step did)"
    print("\n## Nsight Compute (ncu step: one launch each after the warm-up, --clock-control none)\n")
    cases = [line.split("\t") for line in read("ncu/cases.tsv").splitlines() if line.count("\t") == 2]
    if not step.startswith("ran"):
        print(f"ncu: {step}")
        if len({c[2] for c in cases}) > 1:  # kernels that failed each their own way
            print("\n" + "\n".join(f"- {c[0]}: {c[2]}" for c in cases))
        return
    version = read("ncu/version.txt").strip().splitlines()
    print(f"{version[-1] if version else 'ncu'}; CSVs, logs and .ncu-rep reports under ncu/ in "
          "results.tgz. Stalls: cycles per issued instruction.\n")
    print("| case (benchmark) | kernel | time (us) | DRAM % of peak | SM % of peak | occupancy "
          "achieved / theoretical % | regs/thread | blocks x threads | top 3 stall reasons | "
          "top ncu rule (est. speedup %) |\n|---|---|---|---|---|---|---|---|---|---|")
    failed = []
    for name, bench, result in cases:
        if result != "ok":
            failed.append(f"{name}: {result}")
            continue
        with_header = ncu_rows(os.path.join(work, "ncu", f"{name}.csv"))
        details = [dict(zip(with_header[0], r)) for r in with_header[1:]] if with_header else []
        if not details:
            failed.append(f"{name}: the report has no details page (ncu/{name}.log)")
            continue
        # "void ns::(anonymous namespace)::name<...>(...)" (or already the bare name) -> name.
        kernel = re.sub(r"^void\s+|\(anonymous namespace\)::", "", details[0].get("Kernel Name", "?"))
        kernel = re.split(r"[<(]", kernel)[0].split("::")[-1][:48] or "?"
        dur, unit = ncu_metric(details, ["Duration", "gpu__time_duration.sum"])
        scale = {"ns": 1e-3, "nsecond": 1e-3, "us": 1, "usecond": 1, "ms": 1e3, "msecond": 1e3,
                 "s": 1e6, "second": 1e6}.get(unit)
        dur = dur * scale if dur is not None and scale else None
        dram, _ = ncu_metric(details, ["DRAM Throughput"], "%")
        sm, _ = ncu_metric(details, ["Compute (SM) Throughput", "Compute (SM) [%]", "SM [%]"])
        achieved, _ = ncu_metric(details, ["Achieved Occupancy"])
        theoretical, _ = ncu_metric(details, ["Theoretical Occupancy"])
        regs, _ = ncu_metric(details, ["Registers Per Thread"])
        grid, _ = ncu_metric(details, ["Grid Size"])
        block, _ = ncu_metric(details, ["Block Size"])
        rules = [(num(r.get("Estimated Speedup", "")), r.get("Rule Name", "")) for r in details
                 if r.get("Rule Name") and num(r.get("Estimated Speedup", "")) is not None]
        rule = max(rules)[1] + f" ({max(rules)[0]:.0f})" if rules else "-"
        print(f"| {name} (`{bench.strip('^$').replace('/manual_time', '')}`) | {kernel} | {fmt(dur, 2)} | {fmt(dram)} | {fmt(sm)} | "
              f"{fmt(achieved)} / {fmt(theoretical)} | {fmt(regs, 0)} | {fmt(grid, 0)} x {fmt(block, 0)} | "
              f"{ncu_stalls(name, details)} | {rule} |")
    if failed:
        print("\nNot profiled:\n")
        for f in failed:
            print(f"- {f}")
ncu_summary()
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
# Each binary's own limit, cut like every step's to what the deadline leaves: 150 s, but 240 s for
# cuda_model_test, whose ~25 tests load models (three random-weight 7-8B ones among them).
test_limit() {  # binary -> its limit in seconds
  case "$1" in
    cuda_model_test) echo 240 ;;
    *) echo 150 ;;
  esac
}
for t in "${tests[@]}"; do
  want tests || break
  cap=$(budget "$(test_limit "$t")")
  if ((cap < 10)); then log "deadline: $t and the tests after it not run"; status=1; break; fi
  log "test $t"
  if ! timeout --foreground -k 5 "$cap" env "${run_env[@]}" "$build/bin/$t" --gtest_brief=1 \
      --gtest_output="json:$work/$t.json" >"$work/$t.log" 2>&1; then
    status=1
    tail -40 "$work/$t.log"
  fi
  save
done

# ---- 1b. the conformance suite's model profile on the cuda model --------------------------------
# On a tiny checkpoint, against the cpu model as its reference: chunking, batching and block-size
# invariance, the KV addressing, rows on request, and whether its device sampler picks the core's
# tokens (model.device_sampling).
if want tests; then
  cap=$(budget 150)
  if ((cap < 20)); then
    log "deadline: conformance not run"
    status=1
  else
    log "conformance: headway_model_cuda on a tiny checkpoint"
    # deterministic = true: the mode whose logits meet the suite's 2e-3 (docs/cuda_model.md).
    # BF16 weights, as the cuda model keeps them. The suite's own --timeout, below the step's, so
    # that it kills the child it runs the profile in and still writes its report.
    if ! { timeout --foreground -k 5 60 env "${run_env[@]}" "$build/bin/headway" model make-tiny \
             --out "$work/tiny" --layers 2 --hidden 128 --heads 4 --kv-heads 2 --ffn 256 \
             --dtype bf16 &&
           timeout --foreground -k 5 "$cap" env "${run_env[@]}" "$build/bin/headway-conformance" \
             --plugin "$build/lib/headway/plugins/headway_model_cuda.so" \
             --options "path = \"$work/tiny\", deterministic = true" \
             --timeout "$((cap - 15))" --report "$work/conformance.json"; } \
        >"$work/conformance.log" 2>&1; then
      status=1
      tail -40 "$work/conformance.log"
    fi
  fi
  save
fi

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

# ---- 2b. why five kernels take the time they do: Nsight Compute, one launch each ---------------
# The benchmarks time the kernels; ncu's counters say why they take that long (DRAM or SM bound,
# occupancy, registers, what the warps stall on). One launch of each, picked by its kernel name
# after its benchmark's warm-up launch, in a cuda_benchmark run of that one case. It is optional and
# bounded: at most 60 s in all, and never a failure of the check: where ncu is missing or cannot
# read the counters (it can under Firecracker, not under gVisor: "Failed to initialize the
# profiler: LibraryNotLoaded") it says why in one line and the check goes on.
# Each case: name, the Google Benchmark filter of exactly one case, ncu's kernel filter. The decode
# cases' 2/256 are kDecodeBlocksPerSm and kDecodeKeysPerSplit (step_plan.h, the model's); prefill
# tiling 3 is 128x64, the cuda model's default; the GEMMs are gate|up (28,672 x 4,096).
ncu_cases=(
  "decode_b64 ^BM_AttentionDecode/64/1024/2/256/manual_time$ regex:mma_decode_kernel"
  "decode_b1 ^BM_AttentionDecode/1/1024/2/256/manual_time$ regex:mma_decode_kernel"
  "prefill_2048 ^BM_AttentionPrefill/2048/2048/3/0/0/manual_time$ regex:mma_attention_kernel"
  "gemv_m1_gate_up ^BM_Gemm/1/28672/4096/1/manual_time$ regex:gemv_kernel"
  # cuBLASLt's kernel names change with its version (sm90_xmma_*, nvjet_*, cutlass*): anything but
  # the fills that set the benchmark's operands up, which are its only other launches.
  "cublaslt_m8_gate_up ^BM_Gemm/8/28672/4096/0/manual_time$ regex:^(?!.*fill_(uniform|float)_kernel)"
)
ncu_sections=(SpeedOfLight Occupancy LaunchStats WarpStateStats MemoryWorkloadAnalysis SchedulerStats)
find_ncu() {  # -> the ncu to run; fails when there is none
  local c
  if [[ -n "${DEVICE_CHECK_NCU:-}" ]]; then [[ -x "$DEVICE_CHECK_NCU" ]] && echo "$DEVICE_CHECK_NCU"; return; fi
  # PATH's, then the toolkit's, then the newest of the other installs.
  for c in "$(command -v ncu || true)" /usr/local/cuda/bin/ncu \
      $(printf '%s\n' /opt/nvidia/nsight-compute/*/ncu /usr/local/cuda-*/bin/ncu | sort -rV); do
    [[ -n "$c" && -x "$c" ]] && { echo "$c"; return 0; }
  done
  return 1
}
ncu_not_run() {  # why: the step's one line, in the log and in the summary
  echo "not run ($1)" >"$work/ncu/step.txt"
  log "ncu: not run ($1)"
}
ncu_why() {  # log exit-status benchmark kernel-filter limit -> one line: why no report came out
  local line
  line=$(grep -m1 '==ERROR==' "$1" || true)
  if [[ -n "$line" ]]; then echo "${line#*==ERROR== }" | cut -c1-200; return; fi
  if (($2 == 124 || $2 == 137)); then echo "timed out after $5 s"; return; fi
  if grep -q 'Failed to match any benchmarks' "$1"; then echo "cuda_benchmark has no benchmark $3"; return; fi
  line=$(grep -m1 'ERROR OCCURRED' "$1" || true)
  if [[ -n "$line" ]]; then echo "the benchmark failed: ${line#*ERROR OCCURRED: }" | cut -c1-200; return; fi
  if grep -q 'No kernels were profiled' "$1"; then echo "no launch of $4 after the warm-up"; return; fi
  echo "ncu exited with status $2 and wrote no report"
}
run_ncu() {
  mkdir -p "$work/ncu"
  : >"$work/ncu/cases.tsv"
  local ncu cap step_end
  if ! ncu=$(find_ncu); then
    ncu_not_run "no ncu: not in PATH, /usr/local/cuda/bin, /opt/nvidia/nsight-compute or DEVICE_CHECK_NCU"
    return
  fi
  cap=$(budget 60)
  if ((cap < 15)); then ncu_not_run "deadline: ${cap} s left for it"; return; fi
  step_end=$(($(date +%s) + cap))
  timeout -k 2 10 "$ncu" --version >"$work/ncu/version.txt" 2>&1 || true
  log "ncu: $(tail -1 "$work/ncu/version.txt") ($ncu): ${#ncu_cases[@]} kernels in ${cap} s at most"
  local section_args=() s
  for s in "${ncu_sections[@]}"; do section_args+=(--section "$s"); done
  local case_line name bench kernel left rc limit why="" first_why="" profiled=0 stop=""
  for case_line in "${ncu_cases[@]}"; do
    read -r name bench kernel <<<"$case_line"
    left=$((step_end - $(date +%s)))
    if [[ -n "$stop" ]]; then
      printf '%s\t%s\tnot run (%s)\n' "$name" "$bench" "$stop" >>"$work/ncu/cases.tsv"
      continue
    fi
    if ((left < 8)); then
      printf '%s\t%s\tnot run (the %s s of the step were spent)\n' "$name" "$bench" "$cap" \
        >>"$work/ncu/cases.tsv"
      continue
    fi
    # Not `timeout --foreground`: ncu's target is its child, and only a signal to timeout's own
    # process group stops both (a SIGTERM to this script waits for this case, at most 25 s).
    # --clock-control none: the GPU at the clocks the benchmarks ran at, not ncu's base clocks.
    # --target-processes all: ncu follows `env` into cuda_benchmark; `env` keeps the pack's
    # LD_LIBRARY_PATH away from ncu itself.
    rc=0 limit=$((left < 25 ? left : 25))
    timeout -k 5 "$limit" "$ncu" --clock-control none --target-processes all \
      "${section_args[@]}" --kernel-name "$kernel" --launch-skip 1 --launch-count 1 \
      --force-overwrite --export "$work/ncu/$name" \
      env "${run_env[@]}" "$build/bin/cuda_benchmark" --benchmark_filter="$bench" \
      --benchmark_min_time=0.05 >"$work/ncu/$name.log" 2>&1 || rc=$?
    if [[ -s "$work/ncu/$name.ncu-rep" ]] &&
        timeout -k 2 20 "$ncu" --import "$work/ncu/$name.ncu-rep" --csv --page details \
          >"$work/ncu/$name.csv" 2>>"$work/ncu/$name.log"; then
      # The stall reasons are raw metrics of WarpStateStats, not rows of its details page.
      timeout -k 2 20 "$ncu" --import "$work/ncu/$name.ncu-rep" --csv --page raw \
        >"$work/ncu/${name}_raw.csv" 2>>"$work/ncu/$name.log" || true
      printf '%s\t%s\tok\n' "$name" "$bench" >>"$work/ncu/cases.tsv"
      profiled=$((profiled + 1))
    else
      why=$(ncu_why "$work/ncu/$name.log" "$rc" "$bench" "$kernel" "$limit")
      [[ -n "$first_why" ]] || first_why=$why
      printf '%s\t%s\t%s\n' "$name" "$bench" "$why" >>"$work/ncu/cases.tsv"
      # A profiler that cannot start fails the same way on every kernel: not four more tries (the
      # step's not-run line says why).
      if [[ "$why" =~ initiali[sz]e|LibraryNotLoaded|ERR_NVGPUCTRPERM|[Nn]ot\ supported|[Pp]ermission ]]; then
        stop="ncu failed on $name"
      fi
      [[ -n "$stop" && $profiled == 0 ]] || log "ncu: $name: $why"
    fi
    save
  done
  if ((profiled == 0)); then
    ncu_not_run "${first_why:-no kernel profiled}"
  else
    echo "ran: $profiled of ${#ncu_cases[@]} kernels profiled" >"$work/ncu/step.txt"
    log "ncu: $profiled of ${#ncu_cases[@]} kernels profiled"
  fi
}
if want ncu; then
  run_ncu
else
  mkdir -p "$work/ncu"
  echo "not run (not in DEVICE_CHECK_STEPS)" >"$work/ncu/step.txt"
fi
save

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
