// Throughput of the reference CPU model (plugins/models/cpu), driven through its C ABI as the
// engine drives it, plus the machine's own ceilings (oneDNN sgemm peak, memory bandwidth) so that
// the model's figures can be read as fractions of what the hardware allows. Figures and commands
// are in docs/cpu_model.md.
//
//   build/bin/cpu_model_benchmark --benchmark_filter=Bar   # the issue-4 bar (56M shape, F16)
//
// Checkpoints are written once under $TMPDIR/headway_bench_<shape> and reused.
#include <benchmark/benchmark.h>
#include <dnnl.h>
#include <omp.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <map>
#include <memory>
#include <numeric>
#include <string>
#include <tuple>
#include <vector>

#include "cpu_model_harness.h"
#include "tiny_checkpoint.h"

namespace headway::models::cpu::bench {
namespace {

using testing::ModelHarness;

enum Shape { kTiny = 0, kBar56M = 1, k100M = 2 };

TinyModelSpec spec_of(Shape shape) {
  TinyModelSpec s;  // the built-in default: 8 layers, hidden 512, 8/4 heads, ffn 1408, vocab 320
  if (shape == kBar56M) {
    s.vocab = 32000;  // issue 4's bar shape: 56M parameters
  } else if (shape == k100M) {
    s.layers = 12;
    s.hidden = 768;
    s.heads = 12;
    s.kv_heads = 4;
    s.ffn = 2048;
    s.vocab = 32000;
    s.tie_word_embeddings = true;  // 100M parameters
  }
  s.dtype = DType::kF16;
  return s;
}

const char* name_of(Shape shape) {
  return shape == kTiny ? "tiny" : shape == kBar56M ? "56m" : "100m";
}

std::filesystem::path checkpoint(Shape shape) {
  const auto dir =
      std::filesystem::temp_directory_path() / (std::string("headway_bench_") + name_of(shape));
  if (!std::filesystem::exists(dir / "model.safetensors")) {
    write_tiny_checkpoint(spec_of(shape), dir);
  }
  return dir;
}

// One model per (shape, threads, mmap), kept for the whole run: loading is not what is measured.
// `mapped`: the model's `mmap` option (weights used in place from the page cache, or copied into
// huge pages).
ModelHarness& model(Shape shape, int threads, bool mapped) {
  static std::map<std::tuple<int, int, bool>, std::unique_ptr<ModelHarness>> models;
  auto& m = models[{shape, threads, mapped}];
  if (!m) {
    // 16-token blocks as in the default deployment; 5000 blocks = 80k tokens of KV.
    m = std::make_unique<ModelHarness>(
        checkpoint(shape),
        ", threads = " + std::to_string(threads) + ", mmap = " + (mapped ? "true" : "false"), 16,
        5000);
  }
  return *m;
}

// range(3), when given: 1 = weights mapped from the checkpoint, 0 = copied into huge pages.
bool mapped_of(const benchmark::State& state) { return state.range(3) != 0; }

std::string label_of(Shape shape, int threads, bool mapped) {
  return std::string(name_of(shape)) + " " + std::to_string(threads) + "T" +
         (mapped ? " mmap" : " huge pages");
}

// Direct access to forward() with reusable buffers, so the loop measures only the model.
class StepRunner {
 public:
  StepRunner(ModelHarness& m, uint32_t block_size) : m_(m), block_size_(block_size) {}

  // `requests` requests, each owning consecutive blocks from `first_block`, with `context`
  // positions already cached; one step computes `tokens` tokens of each at position `context`.
  void prepare(uint32_t requests, uint32_t context, uint32_t tokens) {
    const uint32_t blocks_each = (context + tokens + block_size_ - 1) / block_size_;
    tables_.assign(requests, {});
    ids_.assign(tokens, 65);
    slices_.clear();
    for (uint32_t r = 0; r < requests; ++r) {
      tables_[r].resize(blocks_each);
      std::iota(tables_[r].begin(), tables_[r].end(), r * blocks_each);
    }
    for (uint32_t r = 0; r < requests; ++r) {
      slices_.push_back(hw_model_slice{r, context, tokens, ids_.data(), tables_[r].data(),
                                       blocks_each, 1, 0.0f, 1.0f, 0, 0, 0, 0.0f, 0});
    }
    logits_.resize(static_cast<size_t>(requests) * m_.info().vocab);
    sampled_.resize(requests);
  }
  void run() {
    hw_model_batch batch{sizeof(hw_model_batch), slices_.data(),
                         static_cast<uint32_t>(slices_.size()), block_size_};
    hw_model_output out{sizeof(hw_model_output),
                        sampled_.data(),
                        0.0,
                        logits_.data(),
                        static_cast<uint32_t>(slices_.size()),
                        m_.info().vocab};
    m_.model().forward(batch, out);
  }

 private:
  ModelHarness& m_;
  uint32_t block_size_;
  std::vector<std::vector<uint32_t>> tables_;
  std::vector<int32_t> ids_;
  std::vector<hw_model_slice> slices_;
  std::vector<float> logits_;
  std::vector<int32_t> sampled_;
};

// Prefill of one prompt of range(2) tokens as one step (the whole prompt through each GEMM).
void BM_Prefill(benchmark::State& state) {
  const auto shape = static_cast<Shape>(state.range(0));
  const int threads = static_cast<int>(state.range(1));
  const uint32_t tokens = static_cast<uint32_t>(state.range(2));
  const bool mapped = mapped_of(state);
  StepRunner runner(model(shape, threads, mapped), 16);
  runner.prepare(1, 0, tokens);
  runner.run();  // warm-up: grows the activation buffers once
  for (auto _ : state) runner.run();
  state.counters["tokens_per_s"] = benchmark::Counter(
      static_cast<double>(tokens), benchmark::Counter::kIsIterationInvariantRate);
  state.SetLabel(label_of(shape, threads, mapped));
}

// One decode step of range(2) requests, each with 128 cached tokens (the step rewrites position
// 128, so the context stays fixed across iterations).
void BM_Decode(benchmark::State& state) {
  const auto shape = static_cast<Shape>(state.range(0));
  const int threads = static_cast<int>(state.range(1));
  const uint32_t batch = static_cast<uint32_t>(state.range(2));
  const bool mapped = mapped_of(state);
  StepRunner runner(model(shape, threads, mapped), 16);
  runner.prepare(batch, 128, 1);
  runner.run();
  for (auto _ : state) runner.run();
  state.counters["tokens_per_s"] =
      benchmark::Counter(static_cast<double>(batch), benchmark::Counter::kIsIterationInvariantRate);
  state.SetLabel(label_of(shape, threads, mapped));
}

void ModelArgs(benchmark::internal::Benchmark* b, std::vector<int64_t> sizes) {
  for (int shape : {kTiny, k100M}) {
    for (int threads : {1, 2}) {
      for (int64_t n : sizes) b->Args({shape, threads, n, 1});
    }
  }
}

BENCHMARK(BM_Prefill)->Apply([](auto* b) {
                       ModelArgs(b, {64, 512, 4096});
                     }) -> Unit(benchmark::kMillisecond) -> MinTime(2.0) -> UseRealTime();
BENCHMARK(BM_Decode)->Apply([](auto* b) {
                      ModelArgs(b, {1, 8, 32});
                    }) -> Unit(benchmark::kMillisecond) -> MinTime(2.0) -> UseRealTime();

// The issue-4 bar: 56M shape, F16 weights, 2 threads: prefill of 3,500 tokens (~1,400 tokens/s)
// and single-stream decode (~270 tokens/s, 3.7 ms/token); weights mapped and in huge pages.
BENCHMARK(BM_Prefill)
    ->Name("Bar/prefill_3500")
    ->Args({kBar56M, 2, 3500, 1})
    ->Args({kBar56M, 2, 3500, 0})
    ->Unit(benchmark::kMillisecond)
    ->MinTime(5.0)
    ->UseRealTime();
BENCHMARK(BM_Decode)
    ->Name("Bar/decode_1")
    ->Args({kBar56M, 2, 1, 1})
    ->Args({kBar56M, 2, 1, 0})
    ->Unit(benchmark::kMillisecond)
    ->MinTime(3.0)
    ->UseRealTime();

// The GEMM ceiling: oneDNN's sgemm on a large square problem (F32; oneDNN 2.6 has no fast F16
// GEMM on AVX2 CPUs, so F16 weights are converted to F32 panels and multiplied with this).
void BM_GemmPeak(benchmark::State& state) {
  const int n = static_cast<int>(state.range(0));
  omp_set_num_threads(static_cast<int>(state.range(1)));
  std::vector<float> a(static_cast<size_t>(n) * n, 0.5f), b(a), c(a.size());
  for (auto _ : state) {
    dnnl_sgemm('N', 'T', n, n, n, 1.0f, a.data(), n, b.data(), n, 0.0f, c.data(), n);
    benchmark::DoNotOptimize(c.data());
  }
  state.counters["GFLOPS"] =
      benchmark::Counter(2.0 * n * n * n / 1e9, benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(BM_GemmPeak)
    ->Args({2048, 1})
    ->Args({2048, 2})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

// The memory ceiling: a streaming read (sum) of 1 GiB. 32 partial sums per thread (4 AVX2
// accumulators) so that the sum is bound by memory, not by the latency of one add chain.
void BM_MemoryRead(benchmark::State& state) {
  const int threads = static_cast<int>(state.range(0));
  constexpr size_t kLanes = 32;
  const size_t n = (size_t{1} << 30) / sizeof(float);
  std::vector<float> a(n, 1.0f);
  for (auto _ : state) {
    float total = 0.0f;
#pragma omp parallel for num_threads(threads) reduction(+ : total)
    for (size_t block = 0; block < n / kLanes; block += 1024) {
      float acc[kLanes] = {};
      const size_t end = std::min(n / kLanes, block + 1024);
      for (size_t b = block; b < end; ++b) {
#pragma omp simd
        for (size_t l = 0; l < kLanes; ++l) acc[l] += a[b * kLanes + l];
      }
      for (size_t l = 0; l < kLanes; ++l) total += acc[l];
    }
    benchmark::DoNotOptimize(total);
  }
  state.counters["GB_per_s"] = benchmark::Counter(static_cast<double>(n * sizeof(float)) / 1e9,
                                                  benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(BM_MemoryRead)->Arg(1)->Arg(2)->Unit(benchmark::kMillisecond)->UseRealTime();

void BM_Memcpy(benchmark::State& state) {
  const size_t bytes = size_t{512} << 20;
  std::vector<char> a(bytes, 1), b(bytes, 0);
  for (auto _ : state) {
    std::memcpy(b.data(), a.data(), bytes);
    benchmark::DoNotOptimize(b.data());
  }
  // Read + write traffic.
  state.counters["GB_per_s"] = benchmark::Counter(2.0 * static_cast<double>(bytes) / 1e9,
                                                  benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(BM_Memcpy)->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace
}  // namespace headway::models::cpu::bench

BENCHMARK_MAIN();
