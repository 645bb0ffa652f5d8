// The calibrated cost model against figures published for real deployments. Each scenario runs the
// production engine on the virtual clock (core::simulate) with the sim model plugin loaded from the
// build, configured only through its TOML options and the shipped defaults: what `headway
// simulate` would predict. A prediction more than 20% away from the published figure fails.
//
// The figures, their sources and the constants tuned to meet them are in docs/performance.md,
// "The cost model"; the constants were chosen once for all scenarios, never per scenario.
#include <gtest/gtest.h>
#include <headway/core/deployment_config.h>
#include <headway/core/percentiles.h>
#include <headway/core/simulator.h>
#include <headway/core/workload.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "../../../test_support/built_plugins.h"

namespace headway::models::sim {
namespace {

using core::RequestRecord;
using core::SimulationResult;
using core::Workload;
using core::WorkloadRequest;

constexpr double kTolerance = 0.20;

core::DeploymentConfig deployment(const std::string& model_options, uint32_t engines,
                                  const std::string& scheduler_options,
                                  const std::string& router = "least_loaded") {
  const std::string text = "name = \"published\"\n[model]\nplugin = \"sim\"\noptions = { " +
                           model_options + " }\n[[engines]]\ncount = " + std::to_string(engines) +
                           "\nscheduler = { plugin = \"chunked\", options = { " +
                           scheduler_options + " } }\n[router]\nplugin = \"" + router + "\"\n";
  return core::parse_deployment(text, "published_figures.toml", test::built_plugins());
}

Workload one_class(std::vector<WorkloadRequest> requests) {
  Workload w;
  w.source = "published_figures_test";
  w.classes.push_back(core::RequestClass{.name = "published"});
  for (size_t i = 0; i < requests.size(); ++i) requests[i].id = i;
  w.requests = std::move(requests);
  return w;
}

// |predicted / published - 1| <= 20%, with both figures in the failure message.
void expect_within(double predicted, double published, const char* what) {
  std::printf("  %-48s published %10.2f  predicted %10.2f  error %+6.1f%%\n", what, published,
              predicted, 100 * (predicted / published - 1));
  EXPECT_LE(std::abs(predicted / published - 1), kTolerance)
      << what << ": predicted " << predicted << ", published " << published;
}

double ms(double seconds) { return seconds * 1e3; }

// NVIDIA NIM 1.8.0 benchmarks, Llama-3.3-70B-Instruct, fp8, TP2 on 2 x H100 SXM 80GB, 5,000 input
// and 500 output tokens at concurrency 1: TTFT 406.77 ms, ITL 18.58 ms. One request at a time, so
// the TTFT is one whole-prompt prefill step (TensorRT-LLM does not chunk a lone 5k prompt) and the
// ITL is a batch-1 decode at 5-5.5k tokens of context.
TEST(PublishedFigures, NimLlama70bFp8Tp2OnH100Concurrency1) {
  const core::DeploymentConfig config =
      deployment("gpu = \"h100\", model = \"llama-3.3-70b\", tensor_parallel = 2, dtype = \"fp8\"",
                 1, "max_num_batched_tokens = 8192, max_num_seqs = 256");
  const SimulationResult result = core::simulate(
      config,
      one_class({WorkloadRequest{.arrival = 0, .prompt_tokens = 5000, .output_tokens = 500}}));
  ASSERT_EQ(result.records.size(), 1u);
  const RequestRecord& r = result.records[0];
  ASSERT_TRUE(r.finished);
  ASSERT_EQ(r.token_times.size(), 500u);
  const double ttft = r.first_token - r.arrival;
  // genai-perf's ITL: (end-to-end - TTFT) / (output tokens - 1).
  const double itl = (r.finish - r.first_token) / (r.token_times.size() - 1);
  expect_within(ms(ttft), 406.77, "NIM 70B fp8 TP2 H100: TTFT (ms)");
  expect_within(ms(itl), 18.58, "NIM 70B fp8 TP2 H100: ITL (ms)");
}

// vLLM's performance CI (buildkite vllm/performance-benchmark), latency_llama8B_tp1 on H200:
// Llama-3.1-8B bf16, batch 8 of 32 input / 128 output tokens, mean end-to-end latency 833.42 ms,
// i.e. about 6.5 ms per decode step.
TEST(PublishedFigures, VllmCiLlama8bBatch8OnH200) {
  const core::DeploymentConfig config =
      deployment("gpu = \"h200\", model = \"llama-3.1-8b\", tensor_parallel = 1", 1,
                 "max_num_batched_tokens = 8192, max_num_seqs = 256");
  std::vector<WorkloadRequest> batch(8, WorkloadRequest{.prompt_tokens = 32, .output_tokens = 128});
  const SimulationResult result = core::simulate(config, one_class(batch));
  double latency = 0;
  for (const RequestRecord& r : result.records) {
    ASSERT_TRUE(r.finished);
    latency += (r.finish - r.arrival) / result.records.size();
  }
  expect_within(ms(latency), 833.42, "vLLM CI 8B H200 batch 8: e2e latency (ms)");
  expect_within(ms(latency) / 128, 833.42 / 128, "vLLM CI 8B H200 batch 8: per step (ms)");
}

// MLPerf Inference v4.1 closed, NVIDIA 8 x H100-SXM-80GB, llama2-70b Server: 21,605 tokens/s
// with p99 TTFT 461 ms and p99 TPOT 175 ms. NVIDIA's submission (configs/llama2-70b/Server,
// H100_SXM_80GB_TP2x4) ran four TP2 fp8 replicas, gpu_batch_size 1024, target 75 queries/s.
// Dataset: OpenOrca prompts capped at 1,024 tokens, 294.45 output tokens per sample (the reference
// implementation's README). Prompt lengths are assumed uniform in [256, 1024] (mean 640); the mean
// was not found in a source.
//
// The sim replays a Poisson stream at the rate that offers 21.6k output tokens/s. What it can be
// held to is the throughput side: the steady-state output throughput at that offered load within
// 20% of it, and the capacity within MLPerf's server latency limits (TTFT p99 <= 2 s, TPOT p99 <=
// 200 ms) within 20% of it: met at 0.8 x the load, missed at 1.2 x. The
// published p99 latencies come from TensorRT-LLM's in-flight batcher tuned to sit just under the
// TPOT limit; the chunked scheduler batches differently, so they are printed, not asserted.
struct MlperfRun {
  double output_tokens_per_s = 0;
  double p99_ttft = 0;
  double p99_tpot = 0;
};

MlperfRun run_mlperf(double load) {
  const core::DeploymentConfig config =
      deployment("gpu = \"h100\", model = \"llama-2-70b\", tensor_parallel = 2, dtype = \"fp8\"", 4,
                 "max_num_batched_tokens = 8192, max_num_seqs = 1024");
  constexpr size_t kRequests = 8000;
  std::mt19937_64 rng(42);
  std::uniform_int_distribution<uint32_t> prompt(256, 1024);
  std::lognormal_distribution<double> output(std::log(294.45) - 0.5 * 0.6 * 0.6, 0.6);
  std::vector<WorkloadRequest> requests(kRequests);
  double output_tokens = 0;
  for (WorkloadRequest& r : requests) {
    r.prompt_tokens = prompt(rng);
    r.output_tokens =
        std::clamp<uint32_t>(static_cast<uint32_t>(std::lround(output(rng))), 1, 1024);
    output_tokens += r.output_tokens;
  }
  // Arrival rate that offers load * 21.6k output tokens/s with this sample's mean output length.
  const double rate = load * 21605.0 / (output_tokens / kRequests);
  std::exponential_distribution<double> gap(rate);
  double t = 0;
  for (WorkloadRequest& r : requests) {
    r.arrival = t;
    t += gap(rng);
  }
  const double last_arrival = requests.back().arrival;
  const SimulationResult result = core::simulate(config, one_class(requests));
  std::vector<double> ttft, tpot;
  // Steady-state throughput: tokens emitted in the last two thirds of the arrival span. The first
  // third is the ramp (a request lives tens of seconds, ~300 tokens at 50-200 ms each, before the
  // batch is full), and after the last arrival the system only drains.
  const double window_start = last_arrival / 3;
  double tokens_in_window = 0;
  for (const RequestRecord& r : result.records) {
    EXPECT_TRUE(r.finished);
    ttft.push_back(r.first_token - r.arrival);
    if (r.token_times.size() > 1) {
      tpot.push_back((r.finish - r.first_token) / (r.token_times.size() - 1));
    }
    for (double t : r.token_times) tokens_in_window += t >= window_start && t <= last_arrival;
  }
  return MlperfRun{.output_tokens_per_s = tokens_in_window / (last_arrival - window_start),
                   .p99_ttft = core::percentile(ttft, 99),
                   .p99_tpot = core::percentile(tpot, 99)};
}

bool meets_server_limits(const MlperfRun& run) {
  return run.p99_ttft <= 2.0 && run.p99_tpot <= 0.2;
}

TEST(PublishedFigures, MlperfLlama2_70bServerOn8H100) {
  const MlperfRun at_published = run_mlperf(1.0);
  std::printf(
      "  MLPerf offered 21.6k tok/s (not asserted): %.0f tok/s, p99 TTFT %.0f ms (published "
      "461), p99 TPOT %.0f ms (published 175)\n",
      at_published.output_tokens_per_s, ms(at_published.p99_ttft), ms(at_published.p99_tpot));

  // The capacity within MLPerf's server limits must lie within 20% of the published throughput:
  // 20% less load is served within them, 20% more is not. Between the two, bisect to 2.5% for
  // the figure in docs/performance.md.
  double meets = 1.0 - kTolerance, misses = 1.0 + kTolerance;
  const MlperfRun below = run_mlperf(meets);
  const MlperfRun above = run_mlperf(misses);
  for (const auto& [load, run] : {std::pair{meets, below}, std::pair{misses, above}}) {
    std::printf("  MLPerf offered %.2f x 21.6k: %.0f tok/s, p99 TTFT %.0f ms, p99 TPOT %.0f ms\n",
                load, run.output_tokens_per_s, ms(run.p99_ttft), ms(run.p99_tpot));
  }
  ASSERT_TRUE(meets_server_limits(below))
      << "the simulated 8 x H100 misses MLPerf's limits at 0.8 x the published throughput";
  ASSERT_FALSE(meets_server_limits(above))
      << "the simulated 8 x H100 still meets MLPerf's limits at 1.2 x the published throughput";
  for (int i = 0; i < 4; ++i) {
    const double mid = 0.5 * (meets + misses);
    (meets_server_limits(run_mlperf(mid)) ? meets : misses) = mid;
  }
  expect_within(meets * 21605, 21605, "MLPerf server 8xH100: capacity (tok/s)");
}

}  // namespace
}  // namespace headway::models::sim
