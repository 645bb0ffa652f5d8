// What the core sampler's logits processing and the log-probabilities cost per sampled row, at a
// Llama-3 vocabulary (128,256): the engine pays it on its thread once per request and step.
// - BM_SampleGreedy / BM_SampleTemperature / BM_SampleTopP / BM_SampleTopKTopP / BM_SampleMinP:
//   the baseline of a request that asks for none of it, and the filters.
// - BM_SamplePenalised: repetition, frequency and presence penalties over a history of N tokens
//   (prompt + outputs): linear in N, nothing per vocabulary entry beyond the argmax.
// - BM_SampleWithLogprobs: the engine's copy of the raw row and log-softmax + top-20.
// - BM_PromptTokenFigures: what the engine does per prompt position for prompt_logprobs: the
//   log-softmax and top-N of the position's row and the prompt token's rank (N = 0, 5, 20).
// See docs/performance.md, "Logits processing".
#include <benchmark/benchmark.h>
#include <headway/core/sampler.h>
#include <headway/core/token_logprobs.h>

#include <random>
#include <vector>

namespace {

constexpr size_t kVocab = 128256;

std::vector<float> random_logits() {
  std::mt19937 generator(7);
  std::normal_distribution<float> normal(0.0f, 3.0f);
  std::vector<float> logits(kVocab);
  for (float& l : logits) l = normal(generator);
  return logits;
}

std::vector<int32_t> random_tokens(size_t count) {
  std::mt19937 generator(11);
  std::uniform_int_distribution<int32_t> token(0, static_cast<int32_t>(kVocab) - 1);
  std::vector<int32_t> tokens(count);
  for (int32_t& t : tokens) t = token(generator);
  return tokens;
}

void run(benchmark::State& state, const headway::core::SamplingParams& params,
         const headway::core::SamplingHistory& history) {
  const std::vector<float> logits = random_logits();
  std::vector<float> row(kVocab);
  headway::core::Sampler sampler;
  uint32_t index = 0;
  for (auto _ : state) {
    row = logits;  // the sampler uses the row as scratch, as the engine's logits buffer
    benchmark::DoNotOptimize(sampler.sample(row, params, index++, history));
  }
}

void BM_SampleGreedy(benchmark::State& state) { run(state, {}, {}); }

void BM_SampleTemperature(benchmark::State& state) {
  headway::core::SamplingParams params;
  params.temperature = 0.8f;
  run(state, params, {});
}

void BM_SampleTopP(benchmark::State& state) {
  headway::core::SamplingParams params;
  params.temperature = 0.8f;
  params.top_p = 0.95f;
  run(state, params, {});
}

// top-k 50 and top-p 0.9: a common pair (and the device sampler's benchmark figure).
void BM_SampleTopKTopP(benchmark::State& state) {
  headway::core::SamplingParams params;
  params.temperature = 0.8f;
  params.top_k = 50;
  params.top_p = 0.9f;
  run(state, params, {});
}

void BM_SampleMinP(benchmark::State& state) {
  headway::core::SamplingParams params;
  params.temperature = 0.8f;
  params.min_p = 0.05f;
  run(state, params, {});
}

void BM_SamplePenalised(benchmark::State& state) {
  const std::vector<int32_t> tokens = random_tokens(static_cast<size_t>(state.range(0)));
  const std::span<const int32_t> all(tokens);
  const size_t outputs = all.size() / 8;  // an eighth generated, the rest prompt
  headway::core::SamplingParams params;
  params.repetition_penalty = 1.1f;
  params.frequency_penalty = 0.5f;
  params.presence_penalty = 0.5f;
  run(state, params,
      headway::core::SamplingHistory{all.first(all.size() - outputs), all.last(outputs)});
  state.SetItemsProcessed(state.iterations() * state.range(0));  // items: history tokens
}

void BM_SampleWithLogprobs(benchmark::State& state) {
  const std::vector<float> logits = random_logits();
  std::vector<float> row(kVocab);
  std::vector<float> raw;
  std::vector<headway::core::TokenLogprob> top(static_cast<size_t>(state.range(0)));
  headway::core::Sampler sampler;
  headway::core::LogprobCalculator calculator;
  for (auto _ : state) {
    row = logits;
    raw.assign(row.begin(), row.end());  // what the engine does before sampling
    const int32_t token = sampler.sample(row, {}, 0);
    benchmark::DoNotOptimize(calculator.compute(raw, token, top));
  }
}

}  // namespace

void BM_PromptTokenFigures(benchmark::State& state) {
  const std::vector<float> logits = random_logits();
  const std::vector<int32_t> tokens = random_tokens(64);
  std::vector<headway::core::TokenLogprob> top(static_cast<size_t>(state.range(0)));
  headway::core::LogprobCalculator calculator;
  size_t position = 0;
  for (auto _ : state) {
    const int32_t token = tokens[position++ % tokens.size()];
    benchmark::DoNotOptimize(calculator.compute(logits, token, top));
    benchmark::DoNotOptimize(headway::core::rank_of(logits, token));
  }
}

BENCHMARK(BM_SampleGreedy)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_SampleTemperature)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_SampleTopP)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_SampleTopKTopP)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_SampleMinP)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_SamplePenalised)->Arg(1024)->Arg(32768)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_SampleWithLogprobs)->Arg(0)->Arg(20)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_PromptTokenFigures)->Arg(0)->Arg(5)->Arg(20)->Unit(benchmark::kMicrosecond);
BENCHMARK_MAIN();
