// Google Benchmark of the cuda model on the Llama-3.1-8B shape (random weights, BF16): each kernel
// (time from CUDA events, achieved bytes/s and FLOP/s as counters) and the whole model (prefill
// tokens/s, decode step time at batch 1/8/64). scripts/device-check.sh runs it and turns the JSON
// into a summary with fractions of the H200's HBM bandwidth and BF16 dense peak.
//
// Without a CUDA device every benchmark reports "no CUDA device visible" and does nothing.
#include <benchmark/benchmark.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cmath>
#include <exception>
#include <filesystem>
#include <memory>
#include <numeric>
#include <string>
#include <vector>

#include "attention.h"
#include "embedding.h"
#include "gemm.h"
#include "gemv.h"
#include "gpu_test_support.h"
#include "kv_layout.h"
#include "model_harness.h"
#include "random_fill.h"
#include "rms_norm.h"
#include "rope_kv.h"
#include "sampling.h"
#include "step_plan.h"
#include "swiglu.h"

namespace headway::gpu_test {
namespace {

namespace k = models::cuda::kernels;

// Llama-3.1-8B.
constexpr uint32_t kHidden = 4096, kHeads = 32, kKvHeads = 8, kHeadDim = 128, kFfn = 14336,
                   kVocab = 128256, kLayers = 32;
constexpr uint32_t kQkv = (kHeads + 2 * kKvHeads) * kHeadDim;

// Google Benchmark does not catch exceptions: one thrown by a body (a CUDA error through check(),
// a model that fails to load) would end the process and lose every result so far, the JSON file
// included. A guarded benchmark reports it as that benchmark's error instead.
template <class Body>
void guard(benchmark::State& state, Body body) {
  try {
    body(state);
  } catch (const std::exception& e) {
    state.SkipWithError(e.what());
  }
}
#define HW_GUARDED_BENCHMARK(name)                                  \
  void name##_body(benchmark::State& state);                        \
  void name(benchmark::State& state) { guard(state, name##_body); } \
  void name##_body(benchmark::State& state)

bool skip(benchmark::State& state) {
  const std::string reason = no_device_reason();
  if (reason.empty()) return false;
  state.SkipWithError(reason.c_str());
  return true;
}

template <class T>
T* device_random(size_t count) {
  T* p = nullptr;
  check(cudaMalloc(&p, count * sizeof(T)), "cudaMalloc");
  if constexpr (std::is_same_v<T, __nv_bfloat16>) {
    check(k::fill_uniform_bf16(p, count, 1.0f, count, nullptr), "fill");
  } else {
    check(cudaMemset(p, 0, count * sizeof(T)), "cudaMemset");
  }
  return p;
}

// Times `launch` with CUDA events over the benchmark's iterations (manual time) and sets the
// bytes/s and FLOP/s counters from per-iteration figures.
template <class Launch>
void timed(benchmark::State& state, double bytes, double flops, Launch launch) {
  cudaEvent_t start, stop;
  check(cudaEventCreate(&start), "cudaEventCreate");
  check(cudaEventCreate(&stop), "cudaEventCreate");
  launch();  // warm-up (and cuBLASLt planning)
  check(cudaDeviceSynchronize(), "warm-up");
  for (auto _ : state) {
    check(cudaEventRecord(start), "cudaEventRecord");
    launch();
    check(cudaEventRecord(stop), "cudaEventRecord");
    check(cudaEventSynchronize(stop), "cudaEventSynchronize");
    float ms = 0.0f;
    check(cudaEventElapsedTime(&ms, start, stop), "cudaEventElapsedTime");
    state.SetIterationTime(ms / 1e3);
  }
  state.counters["bytes_per_second"] =
      benchmark::Counter(bytes, benchmark::Counter::kIsIterationInvariantRate);
  state.counters["flop_per_second"] =
      benchmark::Counter(flops, benchmark::Counter::kIsIterationInvariantRate);
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
}

HW_GUARDED_BENCHMARK(BM_RmsNorm) {
  if (skip(state)) return;
  const uint32_t T = static_cast<uint32_t>(state.range(0));
  auto* x = device_random<float>(size_t{T} * kHidden);
  auto* add = device_random<__nv_bfloat16>(size_t{T} * kHidden);
  auto* w = device_random<float>(kHidden);
  auto* out = device_random<__nv_bfloat16>(size_t{T} * kHidden);
  timed(state, static_cast<double>(T) * kHidden * (4 + 4 + 2 + 2),
        static_cast<double>(T) * kHidden * 5, [&] {
          check(k::add_rms_norm(x, add, nullptr, w, nullptr, T, kHidden, 1e-5f, out, nullptr),
                "add_rms_norm");
        });
  cudaFree(x), cudaFree(add), cudaFree(w), cudaFree(out);
}
BENCHMARK(BM_RmsNorm)->Arg(1)->Arg(64)->Arg(2048)->UseManualTime();

HW_GUARDED_BENCHMARK(BM_Swiglu) {
  if (skip(state)) return;
  const uint32_t T = static_cast<uint32_t>(state.range(0));
  auto* gu = device_random<__nv_bfloat16>(size_t{T} * 2 * kFfn);
  auto* act = device_random<__nv_bfloat16>(size_t{T} * kFfn);
  timed(state, static_cast<double>(T) * kFfn * 6, static_cast<double>(T) * kFfn * 6,
        [&] { check(k::swiglu(gu, T, kFfn, act, nullptr), "swiglu"); });
  cudaFree(gu), cudaFree(act);
}
BENCHMARK(BM_Swiglu)->Arg(1)->Arg(64)->Arg(2048)->UseManualTime();

HW_GUARDED_BENCHMARK(BM_Embedding) {
  if (skip(state)) return;
  const uint32_t T = static_cast<uint32_t>(state.range(0));
  auto* table = device_random<__nv_bfloat16>(size_t{kVocab} * kHidden);
  std::vector<int32_t> ids(T);
  for (uint32_t i = 0; i < T; ++i) ids[i] = static_cast<int32_t>((i * 7919u) % kVocab);
  Dev<int32_t> d_ids(ids);
  auto* out = device_random<float>(size_t{T} * kHidden);
  timed(state, static_cast<double>(T) * kHidden * 6, 0.0, [&] {
    check(k::embedding_gather(table, kHidden, d_ids.get(), T, out, nullptr), "embedding");
  });
  cudaFree(table), cudaFree(out);
}
BENCHMARK(BM_Embedding)->Arg(64)->Arg(2048)->UseManualTime();

// The order of a step's prefill units: the model's for the tiling (longest first for the lean
// ones, StepLimits::prefill_longest_first), or either order whatever the tiling.
enum class PrefillOrder { kModels, kPosition, kLongestFirst };

// A step of `batch` slices of `tokens` tokens at context `context` (positions context-tokens ..
// context-1), as the model would plan it.
struct AttentionSetup {
  k::KvLayout layout{1, kKvHeads, kHeadDim, 16};
  models::cuda::StepPlan plan;
  __nv_bfloat16* cache = nullptr;
  __nv_bfloat16* qkv = nullptr;
  __nv_bfloat16* out = nullptr;
  std::byte* d_plan = nullptr;
  float* acc = nullptr;
  float* ml = nullptr;
  k::AttentionArgs args;

  AttentionSetup(uint32_t batch, uint32_t tokens, uint32_t context,
                 k::MmaTiling tiling = k::MmaTiling::k64x32,
                 uint32_t decode_blocks_per_sm = models::cuda::kDecodeBlocksPerSm,
                 uint32_t prefill_split_min_keys = 0,
                 uint32_t decode_keys_per_split = models::cuda::kDecodeKeysPerSplit,
                 PrefillOrder prefill_order = PrefillOrder::kModels) {
    const uint32_t per = (context + layout.block_size - 1) / layout.block_size;
    const uint32_t blocks = batch * per;
    std::vector<std::vector<uint32_t>> tables(batch);
    std::vector<int32_t> ids(tokens, 1);
    std::vector<hw_model_slice> slices;
    for (uint32_t b = 0; b < batch; ++b) {
      tables[b].resize(per);
      std::iota(tables[b].begin(), tables[b].end(), b * per);
      slices.push_back(hw_model_slice{b, context - tokens, tokens, ids.data(), tables[b].data(),
                                      per, 0, 0.0f, 1.0f, 0, 0, 0, 0.0f, 0});
    }
    hw_model_batch hb{sizeof(hw_model_batch), slices.data(), batch, layout.block_size};
    models::cuda::StepLimits limits{kVocab, 1u << 20, blocks, kHeads / kKvHeads, false};
    limits.prefill_tile_rows =
        k::attention_prefill_tile_rows(kHeadDim, false, tiling);  // as the model
    int sms = 0;
    check(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0), "SM count");
    limits.decode_blocks_wanted = decode_blocks_per_sm * static_cast<uint32_t>(sms);
    limits.prefill_split_min_keys = prefill_split_min_keys;
    limits.decode_keys_per_split = decode_keys_per_split;
    limits.prefill_longest_first = prefill_order == PrefillOrder::kModels
                                       ? k::attention_prefill_longest_first(kHeadDim, false, tiling)
                                       : prefill_order == PrefillOrder::kLongestFirst;
    plan.build(hb, layout, limits);
    cache = device_random<__nv_bfloat16>(layout.block_elems() * blocks);
    qkv = device_random<__nv_bfloat16>(size_t{batch} * tokens * kQkv);
    out = device_random<__nv_bfloat16>(size_t{batch} * tokens * kHeads * kHeadDim);
    check(cudaMalloc(&d_plan, plan.offsets().total), "cudaMalloc");
    check(cudaMemcpy(d_plan, plan.staging(), plan.offsets().total, cudaMemcpyHostToDevice), "plan");
    acc = device_random<float>(size_t{plan.partial_records() + 1} * kHeadDim);
    ml = device_random<float>(size_t{plan.partial_records() + 1} * 2);
    args.qkv = qkv;
    args.q_stride = kQkv;
    args.out = out;
    args.layer_cache = cache;
    args.block_elems = layout.block_elems();
    args.head_elems = layout.head_elems();
    args.block_size = layout.block_size;
    args.block_tables = reinterpret_cast<const int32_t*>(d_plan + plan.offsets().block_tables);
    args.max_prefill_rows = plan.max_prefill_rows();
    args.mma_tiling = tiling;
    args.heads = kHeads;
    args.kv_heads = kKvHeads;
    args.head_dim = kHeadDim;
    args.scale = 1.0f / std::sqrt(float(kHeadDim));
    args.partial_acc = acc;
    args.partial_ml = ml;
  }
  void run() {
    const auto& o = plan.offsets();
    check(k::paged_attention(args,
                             reinterpret_cast<const k::AttentionUnit*>(d_plan + o.prefill_units),
                             plan.prefill_unit_count(), k::AttentionKind::kPrefill, nullptr),
          "prefill attention");
    check(
        k::paged_attention(args, reinterpret_cast<const k::AttentionUnit*>(d_plan + o.decode_units),
                           plan.decode_unit_count(), k::AttentionKind::kDecode, nullptr),
        "decode attention");
    check(k::attention_reduce(
              args, reinterpret_cast<const k::AttentionReduceUnit*>(d_plan + o.reduce_units),
              plan.reduce_unit_count(), nullptr),
          "reduce");
  }
  ~AttentionSetup() {
    cudaFree(cache), cudaFree(qkv), cudaFree(out), cudaFree(d_plan), cudaFree(acc), cudaFree(ml);
  }
};

// Args: batch, context, decode blocks wanted per SM (StepLimits::decode_blocks_wanted / SMs; the
// model's is kDecodeBlocksPerSm; 0 = split by context alone), and keys per split range
// (StepLimits::decode_keys_per_split; the model's is kDecodeKeysPerSplit). Batch 64 has 512 blocks
// unsplit, enough for the GPU: coarser ranges (at 1,024: 512 keys and none; at 4,096: 1,024 and
// none) measure what its 4 or 16 ranges of 256 keys and their reduce cost.
HW_GUARDED_BENCHMARK(BM_AttentionDecode) {
  if (skip(state)) return;
  const uint32_t batch = static_cast<uint32_t>(state.range(0));
  const uint32_t context = static_cast<uint32_t>(state.range(1));
  AttentionSetup s(batch, 1, context, k::MmaTiling::k64x32, static_cast<uint32_t>(state.range(2)),
                   0, static_cast<uint32_t>(state.range(3)));
  const double kv_bytes = static_cast<double>(batch) * context * kKvHeads * kHeadDim * 2 * 2;
  const double flops = static_cast<double>(batch) * kHeads * context * kHeadDim * 4;
  timed(state, kv_bytes, flops, [&] { s.run(); });
}
BENCHMARK(BM_AttentionDecode)
    ->ArgsProduct({{1, 8, 64},
                   {1024, 4096},
                   {models::cuda::kDecodeBlocksPerSm},
                   {models::cuda::kDecodeKeysPerSplit}})
    ->ArgsProduct({{1, 8}, {1024}, {0}, {models::cuda::kDecodeKeysPerSplit}})
    ->Args({1, 32768, models::cuda::kDecodeBlocksPerSm, models::cuda::kDecodeKeysPerSplit})
    ->Args({64, 1024, models::cuda::kDecodeBlocksPerSm, 512})
    ->Args({64, 1024, models::cuda::kDecodeBlocksPerSm, 1024})
    ->Args({64, 4096, models::cuda::kDecodeBlocksPerSm, 1024})
    ->Args({64, 4096, models::cuda::kDecodeBlocksPerSm, 4096})
    ->UseManualTime();

// Arguments: tokens, context, the tiling of the prefill blocks (index into k::kMmaTilings:
// 0 = 64x32, the kernels' default; 3 = 128x64, the model's; 4-7 the lean ones, not yet run;
// docs/cuda_model.md), 1 to split
// the tiles over key ranges as split_prefill_attention does (the reduce included in the time): a
// short chunk deep in a context is a few tiles, too few blocks for the GPU without it; and the
// units' order (PrefillOrder: 0 the model's, 1 position order, 2 longest first): a lean tiling in
// position order tells the order's share of its time, 128x64 longest first what the order alone
// gains on the default kernel's grid (kv head by kv head).
HW_GUARDED_BENCHMARK(BM_AttentionPrefill) {
  if (skip(state)) return;
  const uint32_t tokens = static_cast<uint32_t>(state.range(0));
  const uint32_t context = static_cast<uint32_t>(state.range(1));
  const k::MmaTiling tiling = k::kMmaTilings[state.range(2)];
  const bool split = state.range(3) != 0;
  const auto order = static_cast<PrefillOrder>(state.range(4));
  state.SetLabel(std::string(k::mma_tiling_name(tiling)) + (split ? ", split" : "") +
                 (order == PrefillOrder::kPosition       ? ", position order"
                  : order == PrefillOrder::kLongestFirst ? ", longest first"
                                                         : ""));
  AttentionSetup s(1, tokens, context, tiling, models::cuda::kDecodeBlocksPerSm,
                   split ? models::cuda::kPrefillSplitMinKeys : 0,
                   models::cuda::kDecodeKeysPerSplit, order);
  const double pairs = static_cast<double>(tokens) * (context - tokens) +
                       static_cast<double>(tokens) * (tokens + 1) / 2;
  const double kv_bytes = static_cast<double>(context) * kKvHeads * kHeadDim * 2 * 2;
  timed(state, kv_bytes, pairs * kHeads * kHeadDim * 4, [&] { s.run(); });
}
BENCHMARK(BM_AttentionPrefill)
    ->ArgsProduct({{512}, {512}, {0, 1, 2, 3, 4, 5, 6, 7}, {0}, {0}})
    ->ArgsProduct({{2048}, {2048}, {0, 1, 2, 3, 4, 5, 6, 7}, {0}, {0}})
    ->ArgsProduct({{2048}, {2048}, {4, 7}, {0}, {1}})
    ->Args({2048, 2048, 3, 0, 2})
    ->ArgsProduct({{512}, {8192}, {0, 1, 2, 3, 4, 5, 6, 7}, {0}, {0}})
    ->ArgsProduct({{32, 256}, {4096, 16384}, {3}, {0, 1}, {0}})
    ->UseManualTime();

// Args: tokens, and 1 for what Qwen checkpoints add before RoPE (biases on q, k, v and a norm of
// each q and k head: the norms' prologue reads each head twice).
HW_GUARDED_BENCHMARK(BM_RopeKv) {
  if (skip(state)) return;
  const uint32_t T = static_cast<uint32_t>(state.range(0));
  const bool bias_and_norm = state.range(1) != 0;
  AttentionSetup s(1, T, T);  // for its plan (positions, slots) and cache
  k::RopeKvArgs a;
  a.qkv = s.qkv;
  a.tokens = T;
  a.heads = kHeads;
  a.kv_heads = kKvHeads;
  a.head_dim = kHeadDim;
  a.positions = reinterpret_cast<const int32_t*>(s.d_plan + s.plan.offsets().positions);
  a.slot_offsets = reinterpret_cast<const int64_t*>(s.d_plan + s.plan.offsets().slot_offsets);
  std::vector<double> freq(kHeadDim / 2, 1e-3);
  Dev<double> d_freq(freq);
  a.inv_freq = d_freq.get();
  a.layer_cache = s.cache;
  a.head_elems = s.layout.head_elems();
  Dev<float> bias(std::vector<float>((kHeads + 2 * kKvHeads) * kHeadDim, 0.01f));
  Dev<float> norm(std::vector<float>(kHeadDim, 1.0f));
  if (bias_and_norm) {
    a.qkv_bias = bias.get();
    a.q_norm = a.k_norm = norm.get();
    a.norm_eps = 1e-6f;
  }
  timed(state,
        static_cast<double>(T) * (kHeads + kKvHeads) * kHeadDim * 4 +
            static_cast<double>(T) * 2 * kKvHeads * kHeadDim * 2 * 2,
        static_cast<double>(T) * (kHeads + kKvHeads) * kHeadDim * 3,
        [&] { check(k::rope_kv_write(a, nullptr), "rope_kv_write"); });
}
BENCHMARK(BM_RopeKv)->ArgsProduct({{1, 64, 2048}, {0, 1}})->UseManualTime();

// The model's projections: (n, k) = qkv, o, gate|up, down, LM head; args m, n, k and 1 for
// Headway's GEMV (kernels/gemv.h, the model's decode_gemv) instead of cuBLASLt, 2 (gate|up only)
// for the GEMV with SwiGLU fused (gemv_swiglu, the model's fuse_swiglu: n / 2 outputs written).
HW_GUARDED_BENCHMARK(BM_Gemm) {
  if (skip(state)) return;
  const uint32_t m = static_cast<uint32_t>(state.range(0));
  const uint32_t n = static_cast<uint32_t>(state.range(1));
  const uint32_t kk = static_cast<uint32_t>(state.range(2));
  const int64_t mode = state.range(3);
  models::cuda::Gemm gemm;
  auto* x = device_random<__nv_bfloat16>(size_t{m} * kk);
  auto* w = device_random<__nv_bfloat16>(size_t{n} * kk);
  auto* out = device_random<__nv_bfloat16>(size_t{m} * n);
  const double written = static_cast<double>(m) * (mode == 2 ? n / 2 : n);
  timed(state, 2.0 * (static_cast<double>(n) * kk + static_cast<double>(m) * kk + written),
        2.0 * m * n * kk, [&] {
          if (mode == 2) {
            check(k::gemv_swiglu(x, w, out, m, n / 2, kk, nullptr), "gemv_swiglu");
          } else if (mode == 1) {
            check(k::gemv(x, w, out, false, m, n, kk, nullptr), "gemv");
          } else {
            gemm.run(x, w, out, models::cuda::GemmOut::kBF16, m, n, kk, nullptr);
          }
        });
  cudaFree(x), cudaFree(w), cudaFree(out);
}
void gemm_args(benchmark::internal::Benchmark* b) {
  for (int64_t m : {1, 2, 4, 8, 64, 2048}) {
    for (int64_t gemv : {0, 1}) {
      if (gemv == 1 && m > 8) continue;
      b->Args({m, kQkv, kHidden, gemv});
      b->Args({m, kHidden, kHeads * kHeadDim, gemv});
      b->Args({m, 2 * kFfn, kHidden, gemv});
      b->Args({m, kHidden, kFfn, gemv});
    }
    if (m <= 8) b->Args({m, 2 * kFfn, kHidden, 2});
  }
  b->Args({1, kVocab, kHidden, 0})->Args({1, kVocab, kHidden, 1})->Args({64, kVocab, kHidden, 0});
}
BENCHMARK(BM_Gemm)->Apply(gemm_args)->UseManualTime();

HW_GUARDED_BENCHMARK(BM_Sample) {
  if (skip(state)) return;
  const uint32_t rows = static_cast<uint32_t>(state.range(0));
  const bool greedy = state.range(1) == 0;
  std::vector<float> logits(size_t{rows} * kVocab);
  std::mt19937 rng(1);
  std::normal_distribution<float> normal(0.0f, 3.0f);
  for (float& l : logits) l = normal(rng);
  std::vector<k::SampleParams> params(
      rows, k::SampleParams{greedy ? 0.0f : 0.8f, 0.9f, 0.01f, 50, 7, 0, 0});
  Dev<float> d_logits(logits);
  Dev<k::SampleParams> d_params(params);
  Dev<int32_t> d_out(rows);
  timed(state, static_cast<double>(rows) * kVocab * 4, 0.0, [&] {
    check(k::sample_tokens(d_logits.get(), rows, kVocab, d_params.get(), d_out.get(), nullptr),
          "sample_tokens");
  });
}
BENCHMARK(BM_Sample)->Args({1, 0})->Args({1, 1})->Args({64, 0})->Args({64, 1})->UseManualTime();

// The host side of a decode step (no GPU needed): StepPlan::layout() of `batch` one-token slices at
// context 1,024 (the 8B shape's 8 kv heads, group 4, blocks of 16), and with the last argument 1
// padded for a CUDA graph (cuda_graph_max_batch = 64). CPU time per step.
HW_GUARDED_BENCHMARK(BM_StepPlanLayout) {
  const uint32_t batch = static_cast<uint32_t>(state.range(0));
  const uint32_t context = 1024, block = 16;
  const k::KvLayout layout{kLayers, kKvHeads, kHeadDim, block};
  models::cuda::StepLimits limits{kVocab, 32768, 1u << 20, kHeads / kKvHeads, true};
  limits.graph_max_batch = state.range(1) != 0 ? 64 : 0;
  std::vector<std::vector<uint32_t>> tables(batch);
  std::vector<int32_t> ids(batch, 1);
  std::vector<hw_model_slice> slices;
  for (uint32_t i = 0; i < batch; ++i) {
    tables[i].resize(context / block + 1);
    std::iota(tables[i].begin(), tables[i].end(), i * (context / block + 1));
    slices.push_back(hw_model_slice{i, context, 1, &ids[i], tables[i].data(),
                                    static_cast<uint32_t>(tables[i].size()), 1, 0.0f, 1.0f, 0, 0, 0,
                                    0.0f, 0});
  }
  const hw_model_batch b{sizeof(hw_model_batch), slices.data(), batch, block};
  models::cuda::StepPlan plan;
  for (auto _ : state) {
    plan.layout(b, layout, limits);
    benchmark::DoNotOptimize(plan.offsets().total);
  }
}
BENCHMARK(BM_StepPlanLayout)->ArgsProduct({{1, 8, 64}, {0, 1}});

// The whole model, random Llama-3.1-8B weights, one instance shared by the model benchmarks; with
// other options (decode_gemv, phase_timing, CUDA graphs) another, made after the previous one is
// released (each
// takes most of the GPU's memory for its KV cache). Released by main() before exit, so that a
// phase-timing instance logs its summary while logging still works.
std::unique_ptr<ModelHarness>& model_instance() {
  static std::unique_ptr<ModelHarness> m;
  return m;
}
// decode_gemv_rows: the decode_gemv_max_rows option, 0 = decode_gemv off.
ModelHarness& model(uint32_t decode_gemv_rows = 0, bool phase_timing = false,
                    k::MmaTiling tiling = k::MmaTiling::k128x64, bool cuda_graphs = false,
                    bool programmatic_dependent_launch = false, bool fuse_swiglu = true) {
  std::unique_ptr<ModelHarness>& m = model_instance();
  static std::string made_with;
  const std::string options =
      std::string(
          "shape = \"llama-3.1-8b\", random_weights = true, max_model_len = 32768, "
          "max_batch_tokens = 8192, decode_gemv = ") +
      (decode_gemv_rows > 0 ? "true, decode_gemv_max_rows = " + std::to_string(decode_gemv_rows)
                            : std::string("false")) +
      ", phase_timing = " + (phase_timing ? "true" : "false") + ", attention_tiling = \"" +
      k::mma_tiling_name(tiling) + "\", cuda_graph_max_batch = " + (cuda_graphs ? "64" : "0") +
      ", programmatic_dependent_launch = " + (programmatic_dependent_launch ? "true" : "false") +
      ", fuse_swiglu = " + (fuse_swiglu ? "true" : "false");
  if (m == nullptr || made_with != options) {
    m.reset();
    m = std::make_unique<ModelHarness>("cuda", options, std::filesystem::temp_directory_path(), 16,
                                       12288);
    made_with = options;
  }
  return *m;
}
uint64_t next_request = 1;

constexpr double kWeightBytes =
    2.0 * (static_cast<double>(kLayers) *
               (static_cast<double>(kQkv) * kHidden +
                static_cast<double>(kHidden) * kHeads * kHeadDim + 3.0 * kFfn * kHidden) +
           2.0 * kVocab * kHidden);
constexpr double kFlopsPerToken = kWeightBytes - 2.0 * kVocab * kHidden;  // 2 flops per weight

// Args: tokens, and the attention tiling (index into k::kMmaTilings; 3 = the model's default,
// 128x64; 4-7 the lean ones).
HW_GUARDED_BENCHMARK(BM_ModelPrefill) {
  if (skip(state)) return;
  const k::MmaTiling tiling = k::kMmaTilings[state.range(1)];
  state.SetLabel(k::mma_tiling_name(tiling));
  ModelHarness& m = model(0, false, tiling);
  const uint32_t tokens = static_cast<uint32_t>(state.range(0));
  const auto prompt = random_tokens(tokens, kVocab, 1);
  // Untimed: the first step of a new instance or row count loads modules and plans cuBLASLt.
  m.step({{next_request++, prompt}});
  for (auto _ : state) {
    m.step({{next_request++, prompt}});
  }
  state.counters["tokens_per_second"] =
      benchmark::Counter(tokens, benchmark::Counter::kIsIterationInvariantRate);
  state.counters["flop_per_second"] = benchmark::Counter(
      tokens * kFlopsPerToken + 4.0 * kLayers * kHeads * kHeadDim * tokens * (tokens + 1) / 2,
      benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(BM_ModelPrefill)
    ->Args({2048, 0})
    ->Args({2048, 1})
    ->Args({2048, 2})
    ->Args({2048, 4})
    ->Args({2048, 5})
    ->Args({2048, 6})
    ->Args({2048, 7})
    ->Args({512, 3})
    ->Args({2048, 3})
    ->Args({4096, 3})
    ->Args({8192, 3})
    ->Iterations(5)
    ->UseRealTime()  // wall time: the host waits for the GPU, however it waits
    ->Unit(benchmark::kMillisecond);

// Args: batch, context, the decode_gemv_max_rows option (0: decode_gemv off), 1 for phase_timing
// (whose per-phase times the model logs when main() releases it: the setup's prefill steps of 8,192
// tokens and the decode steps, each by its token count), 1 for CUDA graphs (cuda_graph_max_batch =
// 64), 1 for programmatic_dependent_launch, 1 for fuse_swiglu (the model's default). Two untimed
// decode steps first: a graph shape's first step runs launch by launch, its second is captured.
HW_GUARDED_BENCHMARK(BM_ModelDecode) {
  if (skip(state)) return;
  ModelHarness& m =
      model(static_cast<uint32_t>(state.range(2)), state.range(3) != 0, k::MmaTiling::k128x64,
            state.range(4) != 0, state.range(5) != 0, state.range(6) != 0);
  const uint32_t batch = static_cast<uint32_t>(state.range(0));
  const uint32_t context = static_cast<uint32_t>(state.range(1));
  const uint64_t first = next_request;
  next_request += batch;
  // Prefill every request to `context` tokens, 8 per step.
  for (uint32_t b = 0; b < batch; b += 8) {
    std::vector<ModelHarness::Slice> slices;
    for (uint32_t i = b; i < std::min(batch, b + 8); ++i) {
      slices.push_back({first + i, random_tokens(context, kVocab, i)});
    }
    m.step(slices);
  }
  std::vector<ModelHarness::Slice> step(batch);
  for (uint32_t i = 0; i < batch; ++i) step[i] = {first + i, {static_cast<int32_t>(i)}};
  m.step(step);
  m.step(step);
  for (auto _ : state) m.step(step);
  const double kv = static_cast<double>(batch) * context * kLayers * kKvHeads * kHeadDim * 2 * 2;
  state.counters["bytes_per_second"] =
      benchmark::Counter(kWeightBytes + kv, benchmark::Counter::kIsIterationInvariantRate);
  state.counters["tokens_per_second"] =
      benchmark::Counter(batch, benchmark::Counter::kIsIterationInvariantRate);
  state.counters["flop_per_second"] =
      benchmark::Counter(batch * kFlopsPerToken, benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(BM_ModelDecode)
    // Grouped by options: each group is one model instance.
    ->Args({1, 1024, 2, 0, 0, 0, 1})
    ->Args({2, 1024, 2, 0, 0, 0, 1})
    ->Args({8, 1024, 2, 0, 0, 0, 1})
    ->Args({16, 1024, 2, 0, 0, 0, 1})
    ->Args({32, 1024, 2, 0, 0, 0, 1})
    ->Args({64, 1024, 2, 0, 0, 0, 1})
    ->Args({1, 1024, 2, 0, 1, 0, 1})
    ->Args({2, 1024, 2, 0, 1, 0, 1})
    ->Args({8, 1024, 2, 0, 1, 0, 1})
    ->Args({16, 1024, 2, 0, 1, 0, 1})
    ->Args({32, 1024, 2, 0, 1, 0, 1})
    ->Args({64, 1024, 2, 0, 1, 0, 1})
    ->Args({1, 1024, 0, 0, 0, 0, 1})
    ->Args({2, 1024, 0, 0, 0, 0, 1})
    ->Args({1, 1024, 2, 1, 0, 0, 1})
    ->Args({8, 1024, 2, 1, 0, 0, 1})
    ->Args({64, 1024, 2, 1, 0, 0, 1})
    // Overlapped launches, with graphs (the defaults' way up to 16 rows) and without.
    ->Args({1, 1024, 2, 0, 1, 1, 1})
    ->Args({2, 1024, 2, 0, 1, 1, 1})
    ->Args({8, 1024, 2, 0, 1, 1, 1})
    ->Args({16, 1024, 2, 0, 1, 1, 1})
    ->Args({64, 1024, 2, 0, 1, 1, 1})
    ->Args({1, 1024, 2, 0, 0, 1, 1})
    ->Args({8, 1024, 2, 0, 0, 1, 1})
    ->Args({64, 1024, 2, 0, 0, 1, 1})
    // The GEMV up to 8 rows (from 3 on tensor cores), with graphs, and with overlapped launches.
    ->Args({4, 1024, 8, 0, 1, 0, 1})
    ->Args({8, 1024, 8, 0, 1, 0, 1})
    ->Args({4, 1024, 8, 0, 1, 1, 1})
    ->Args({8, 1024, 8, 0, 1, 1, 1})
    // Without SwiGLU fused into the GEMV (fuse_swiglu = false), with graphs: against the rows
    // above at batch 1 and 2 (GEMV up to 2 rows) and 4 and 8 (up to 8).
    ->Args({1, 1024, 8, 0, 1, 0, 0})
    ->Args({2, 1024, 8, 0, 1, 0, 0})
    ->Args({4, 1024, 8, 0, 1, 0, 0})
    ->Args({8, 1024, 8, 0, 1, 0, 0})
    ->Iterations(20)
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace headway::gpu_test

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  headway::gpu_test::model_instance().reset();
  benchmark::Shutdown();
  return 0;
}
