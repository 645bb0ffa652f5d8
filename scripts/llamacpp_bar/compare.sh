#!/usr/bin/env bash
# Issue 4's bar measured on this machine: llama.cpp (the "well-known C++ CPU inference server")
# and Headway's cpu model on the same checkpoint (hidden 512, 8 layers, 8/4 heads, FFN 1408, vocab
# 32000, F16 weights), 2 threads, in alternating runs so that both see the same machine.
#
#   scripts/llamacpp_bar/compare.sh [BUILD_DIR] [ROUNDS]     (defaults: build, 4)
#
# First run: downloads llama.cpp's source from PyPI (the llama-cpp-python sdist vendors it; the
# only registry this machine reaches), builds llama-bench (CPU, -march=native, ~10 min on 2
# cores), writes the bar checkpoint with `headway model make-tiny` and converts it to GGUF
# (safetensors_to_gguf.py, with the gguf-py that ships in that source). Everything lives in
# $HEADWAY_LLAMACPP_DIR (default /tmp/headway-llamacpp). Then ROUNDS times: llama-bench prefill
# (3,500 tokens) and decode (128 tokens from an empty cache, and 32 after a 128-token prefix, with
# flash attention auto and on), Headway's `cpu_model_benchmark --benchmark_filter=Bar`, and the
# machine's 2-thread streaming read. Prints one line per figure; docs/cpu_model.md has a run.
set -euo pipefail
REPO=$(cd "$(dirname "$0")/../.." && pwd)
BUILD=${1:-build}
ROUNDS=${2:-4}
[[ "$BUILD" = /* ]] || BUILD="$REPO/$BUILD"
WORK=${HEADWAY_LLAMACPP_DIR:-/tmp/headway-llamacpp}
VERSION=0.3.36 # llama-cpp-python; vendors ggml-org/llama.cpp 0c1e57098bba43ac29e6e3b677cdceebdd22334f
SRC="$WORK/llama_cpp_python-$VERSION/vendor/llama.cpp"
BENCH="$WORK/build/bin/llama-bench"
GGUF="$WORK/bar-56m-f16.gguf"

for tool in "$BUILD/bin/headway" "$BUILD/bin/cpu_model_benchmark"; do
  [[ -x "$tool" ]] || { echo "compare.sh: $tool is missing: build it first (ninja -C $BUILD headway cpu_model_benchmark)" >&2; exit 1; }
done
mkdir -p "$WORK"
if [[ ! -x "$BENCH" ]]; then
  python3 -m venv "$WORK/venv"
  "$WORK/venv/bin/pip" install --quiet numpy
  "$WORK/venv/bin/pip" download --quiet "llama-cpp-python==$VERSION" --no-binary :all: --no-deps -d "$WORK/dl"
  tar -xzf "$WORK/dl/llama_cpp_python-$VERSION.tar.gz" -C "$WORK"
  cmake -S "$SRC" -B "$WORK/build" -DCMAKE_BUILD_TYPE=Release -DLLAMA_CURL=OFF -DGGML_CUDA=OFF \
    -DGGML_NATIVE=ON -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_SERVER=OFF -DLLAMA_BUILD_EXAMPLES=OFF \
    -DBUILD_SHARED_LIBS=OFF >/dev/null
  cmake --build "$WORK/build" --target llama-bench -j"$(nproc)" >/dev/null
fi
if [[ ! -f "$GGUF" ]]; then
  # The shape and dtype of cpu_model_benchmark's Bar checkpoint (same files, byte for byte).
  "$BUILD/bin/headway" model make-tiny --out "$WORK/ckpt" --layers 8 --hidden 512 --heads 8 \
    --kv-heads 4 --ffn 1408 --vocab 32000 --dtype f16 >/dev/null
  PYTHONPATH="$SRC/gguf-py" "$WORK/venv/bin/python" "$REPO/scripts/llamacpp_bar/safetensors_to_gguf.py" \
    "$WORK/ckpt" "$GGUF"
fi

llama() { # label, llama-bench arguments
  local label=$1
  shift
  "$BENCH" -m "$GGUF" -t 2 -ngl 0 -r 3 -o jsonl "$@" 2>/dev/null |
    python3 -c '
import json, sys
for line in sys.stdin:
    r = json.loads(line)
    fa = {-1: "auto", 0: "off", 1: "on"}.get(r["flash_attn"], r["flash_attn"])
    print("llama.cpp %-18s %7.1f tokens/s +- %5.1f (flash attention %s)" % (sys.argv[1], r["avg_ts"], r["stddev_ts"], fa))
' "$label"
}

for round in $(seq "$ROUNDS"); do
  echo "=== round $round $(date +%T), load $(cut -d' ' -f1 /proc/loadavg)"
  llama prefill_3500 -p 3500 -n 0
  llama decode_1 -p 0 -n 128
  llama decode_1@ctx128 -p 0 -n 32 -d 128
  llama decode_1 -p 0 -n 128 -fa 1
  llama decode_1@ctx128 -p 0 -n 32 -d 128 -fa 1
  "$BUILD/bin/cpu_model_benchmark" --benchmark_filter='Bar|BM_MemoryRead/2' 2>/dev/null |
    grep -E '^(Bar|BM_)' | sed 's/^/headway   /'
done
