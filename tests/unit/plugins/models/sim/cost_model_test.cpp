// Behaviour of the roofline cost model: which resource bounds which step, how time scales with the
// batch, and which deployments fit in memory. Expected values are derived from the model's inputs
// (bandwidths, FLOP/s, sizes), never copied from its output.
#include "cost_model.h"

#include <gtest/gtest.h>

#include <stdexcept>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "presets.h"

namespace headway::models::sim {
namespace {

CostModel make(std::string_view gpu, std::string_view model, uint32_t tp) {
  return CostModel(preset_config(gpu, model, tp));
}

StepLoad decode_batch(uint32_t batch, uint32_t context) {
  StepLoad load;
  for (uint32_t i = 0; i < batch; ++i) load.add(context, 1, true);
  return load;
}

StepLoad prefill(uint32_t start, uint32_t tokens, bool sample = true) {
  StepLoad load;
  load.add(start, tokens, sample);
  return load;
}

double hbm_rate(const CostConfig& c) { return c.gpu.hbm_bytes_per_s * c.hbm_efficiency; }

TEST(SimCostModel, DecodeIsDominatedByWeightReads) {
  const CostModel model = make("h200", "llama-3.1-8b", 1);
  const CostConfig& c = model.config();
  const uint32_t batch = 8, context = 128;
  const StepCost cost = model.step_cost(decode_batch(batch, context));

  // Reading every weight once, at the achievable HBM rate, plus the fixed step cost.
  const double expected = model.weight_bytes() / hbm_rate(c) + c.step_overhead_s;
  // What that estimate leaves out, bounded from the inputs: the input embedding is gathered rather
  // than streamed (so it is not read), and the KV of batch * (context + 1) positions is.
  const double embedding_s = double(c.model.vocab) * c.model.hidden * kEmbeddingBytes / hbm_rate(c);
  const double kv_s = double(batch) * (context + 1) * model.kv_bytes_per_token() / hbm_rate(c);
  EXPECT_NEAR(cost.total(), expected, embedding_s + kv_s);
  // Memory-bound: the linear layers take the weight-read time, not the (much smaller) FLOP time.
  const double flop_s = 2 * model.parameters() * batch / (c.gpu.peak_flops * c.gemm_efficiency);
  EXPECT_GT(cost.linear_s, 10 * flop_s);
  EXPECT_GT(cost.linear_s, 0.9 * (cost.total() - cost.overhead_s));
  EXPECT_EQ(cost.allreduce_s, 0.0);  // one GPU
}

TEST(SimCostModel, DecodeTimeBarelyDependsOnBatchWhileMemoryBound) {
  const CostModel model = make("h200", "llama-3.1-8b", 1);
  const double one = model.step_seconds(decode_batch(1, 128));
  const double sixteen = model.step_seconds(decode_batch(16, 128));
  EXPECT_GE(sixteen, one);
  EXPECT_LT(sixteen, 1.05 * one);  // 16x the work for < 5% more time: the point of batching
}

TEST(SimCostModel, PrefillGrowsLinearlyOnceComputeBound) {
  const CostModel model = make("h200", "llama-3.1-8b", 1);
  const CostConfig& c = model.config();
  // Past the ridge point (weight read time == GEMM time) the linear part is pure FLOPs.
  const double gemm_s_per_token = 2 * model.parameters() / (c.gpu.peak_flops * c.gemm_efficiency);
  const double ridge_tokens = (model.weight_bytes() / hbm_rate(c)) / gemm_s_per_token;
  ASSERT_LT(ridge_tokens, 1024);

  const StepCost a = model.step_cost(prefill(0, 2048));
  const StepCost b = model.step_cost(prefill(0, 4096));
  const StepCost d = model.step_cost(prefill(0, 8192));
  EXPECT_NEAR(b.linear_s / a.linear_s, 2.0, 0.01);
  EXPECT_NEAR(d.linear_s / b.linear_s, 2.0, 0.01);
  // The whole step is close to linear too; causal attention adds a slowly growing quadratic term,
  // so the ratio sits a little above 2.
  const double ratio = (d.total() - c.step_overhead_s) / (b.total() - c.step_overhead_s);
  EXPECT_GT(ratio, 2.0);
  EXPECT_LT(ratio, 2.3);
}

TEST(SimCostModel, AttentionGrowsWithContext) {
  const CostModel model = make("h200", "llama-3.1-8b", 1);
  double previous_decode = 0, previous_chunk = 0;
  for (uint32_t context : {0u, 1024u, 8192u, 32768u, 131071u - 512u}) {
    const StepCost decode = model.step_cost(decode_batch(32, context));
    const StepCost chunk = model.step_cost(prefill(context, 512, false));
    EXPECT_GT(decode.attention_s, previous_decode) << "context " << context;
    EXPECT_GT(chunk.attention_s, previous_chunk) << "context " << context;
    previous_decode = decode.attention_s;
    previous_chunk = chunk.attention_s;
  }
  // At long context decode reads more KV than weights: 32 x 32k tokens of KV is ~137 GB.
  const StepCost long_decode = model.step_cost(decode_batch(32, 32768));
  EXPECT_GT(long_decode.attention_s, long_decode.linear_s);
}

TEST(SimCostModel, ChunkedPrefillCostsAboutTheSameAsWholePrefill) {
  const CostModel model = make("h100", "llama-3.1-8b", 1);
  const StepLoad whole = prefill(0, 8192);
  StepLoad chunks[4];
  double chunked = 0;
  for (uint32_t i = 0; i < 4; ++i) {
    chunks[i].add(i * 2048, 2048, i == 3);
    chunked += model.step_seconds(chunks[i]) - model.config().step_overhead_s;
  }
  const double single = model.step_seconds(whole) - model.config().step_overhead_s;
  // Same FLOPs (the causal pairs add up exactly); chunks re-read the weights and the earlier KV.
  EXPECT_GE(chunked, single * 0.999);
  EXPECT_LT(chunked, single * 1.1);
}

TEST(SimCostModel, TensorParallelSpeedsUpPrefillButPaysForAllReduce) {
  const CostModel tp1 = make("h100", "llama-3.1-8b", 1);
  const CostModel tp4 = make("h100", "llama-3.1-8b", 4);
  const StepCost one = tp1.step_cost(prefill(0, 8192));
  const StepCost four = tp4.step_cost(prefill(0, 8192));
  EXPECT_LT(four.total(), one.total());
  EXPECT_EQ(one.allreduce_s, 0.0);
  EXPECT_GT(four.allreduce_s, 0.0);
  // Not a perfect 4x: the all-reduces and the fixed overhead do not shrink with more GPUs.
  EXPECT_GT(four.total(), one.total() / 4);
  EXPECT_NEAR(four.linear_s + four.attention_s, (one.linear_s + one.attention_s) / 4,
              0.02 * one.total());
  // Ring all-reduce volume from the inputs: 2 per layer of tokens * hidden * dtype bytes, moving
  // 2 (tp - 1) / tp of it at half the bidirectional link bandwidth.
  const CostConfig& c = tp4.config();
  const double bytes = 8192.0 * c.model.hidden * kActivationBytes;
  const double expected =
      2 * c.model.layers *
      (2.0 * 3 / 4 * bytes / (c.gpu.link_bytes_per_s / 2) + c.allreduce_latency_s);
  EXPECT_NEAR(four.allreduce_s, expected, 1e-9);
}

TEST(SimCostModel, Llama70bFitsOnFourH100sNotOne) {
  const CostModel tp4 = make("h100", "llama-3.3-70b", 4);
  const CostConfig& c = tp4.config();
  EXPECT_GT(tp4.kv_capacity_tokens(), c.model.max_model_len);
  // The capacity uses exactly the memory left after weights and the activation reserve.
  const double usable = c.gpu.hbm_bytes * c.gpu_memory_utilization;
  const double used = tp4.weight_bytes_per_gpu() + c.activation_reserve_bytes +
                      double(tp4.kv_capacity_tokens()) * tp4.kv_bytes_per_token_per_gpu();
  EXPECT_LE(used, usable);
  EXPECT_GT(used + tp4.kv_bytes_per_token_per_gpu(), usable);
  // 8 kv heads over 4 GPUs: each holds a quarter of the KV.
  EXPECT_EQ(tp4.kv_bytes_per_token_per_gpu() * 4, tp4.kv_bytes_per_token());

  try {
    make("h100", "llama-3.3-70b", 1);
    FAIL() << "140 GB of bf16 weights cannot fit in one 80 GB GPU";
  } catch (const std::invalid_argument& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find("tensor_parallel=1"), std::string::npos) << message;
    EXPECT_NE(message.find("hbm_gb=80"), std::string::npos) << message;
  }
}

// Out of memory, the refusal names the share that would leave room for KV when one would: the
// default 0.9 is what stops Llama-3.3-70B bf16 on two H100s, and it said only "raise
// tensor_parallel or use a GPU with more memory" (the operator's walkthrough).
TEST(SimCostModel, OutOfMemoryNamesTheGpuMemoryUtilizationThatWouldFit) {
  const auto refusal = [](uint32_t tp, double utilization) {
    CostConfig config = preset_config("h100", "llama-3.3-70b", tp);
    config.gpu_memory_utilization = utilization;
    try {
      CostModel{config};
    } catch (const std::invalid_argument& e) {
      return std::string(e.what());
    }
    ADD_FAILURE() << "tp " << tp << " at " << utilization << " loaded";
    return std::string();
  };
  // 70.55 GB of weights and 2 GB of activation reserve: 72.55 of 80 GB.
  std::string message = refusal(2, 0.9);
  EXPECT_NE(message.find("gpu_memory_utilization=0.90 leaves only 72.0 GB: raise "
                         "gpu_memory_utilization above 0.907, raise tensor_parallel, or use a GPU "
                         "with more memory"),
            std::string::npos)
      << message;
  // Past it, the next refusal is the KV's: 131,072 tokens do not fit in what is left.
  message = refusal(2, 0.95);
  EXPECT_NE(message.find("fewer than max_model_len=131072"), std::string::npos) << message;
  // 141 GB of weights on one 80 GB GPU: no share is enough, and it says so.
  message = refusal(1, 0.9);
  EXPECT_NE(message.find("raise tensor_parallel or use a GPU with more memory (no "
                         "gpu_memory_utilization is enough)"),
            std::string::npos)
      << message;
}

TEST(SimCostModel, KvHeadsAreReplicatedBeyondTheirCount) {
  // 16 GPUs for 8 kv heads: each GPU still holds one whole kv head.
  const CostModel tp16 = make("h100", "llama-3.3-70b", 16);
  EXPECT_EQ(tp16.kv_bytes_per_token_per_gpu() * 8, tp16.kv_bytes_per_token());
  const CostModel tp8 = make("h100", "llama-3.3-70b", 8);
  EXPECT_EQ(tp8.kv_bytes_per_token_per_gpu(), tp16.kv_bytes_per_token_per_gpu());
}

TEST(SimCostModel, RejectsIllegalTensorParallelAndShapes) {
  EXPECT_THROW(make("h100", "llama-3.1-8b", 3), std::invalid_argument);   // 32 heads
  EXPECT_THROW(make("h100", "llama-3.1-8b", 64), std::invalid_argument);  // > 32 heads
  CostConfig bad = preset_config("h100", "llama-3.1-8b", 1);
  bad.model.kv_heads = 5;  // does not divide 32 query heads
  EXPECT_THROW(CostModel{bad}, std::invalid_argument);
  bad = preset_config("h100", "llama-3.1-8b", 1);
  bad.model.max_model_len = 10'000'000;  // more KV than the GPU holds
  try {
    CostModel{bad};
    FAIL() << "a 10M-token request does not fit in the KV cache";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("max_model_len"), std::string::npos) << e.what();
  }
  bad = preset_config("h100", "llama-3.1-8b", 1);
  bad.hbm_efficiency = 0;
  EXPECT_THROW(CostModel{bad}, std::invalid_argument);
  EXPECT_THROW(preset_config("a100", "llama-3.1-8b", 1), std::invalid_argument);
}

TEST(SimCostModel, StepTimeIsMonotonic) {
  for (const char* gpu : {"h100", "h200"}) {
    const CostModel model = make(gpu, "llama-3.3-70b", 4);
    double previous = 0;
    for (uint32_t tokens = 1; tokens <= 16384; tokens *= 2) {
      const double t = model.step_seconds(prefill(0, tokens));
      EXPECT_GT(t, previous) << gpu << " prefill " << tokens;
      previous = t;
    }
    previous = 0;
    for (uint32_t batch = 1; batch <= 512; batch *= 2) {
      const double t = model.step_seconds(decode_batch(batch, 2048));
      EXPECT_GT(t, previous) << gpu << " decode batch " << batch;
      previous = t;
    }
  }
  // A faster memory system never makes a step slower; for memory-bound decode it makes it faster.
  const double h100 = make("h100", "llama-3.3-70b", 4).step_seconds(decode_batch(64, 2048));
  const double h200 = make("h200", "llama-3.3-70b", 4).step_seconds(decode_batch(64, 2048));
  EXPECT_LT(h200, h100);
}

TEST(SimCostModel, SamplingAddsTheLmHead) {
  const CostModel model = make("h100", "llama-3.1-8b", 1);
  EXPECT_GT(model.step_seconds(prefill(0, 4096, true)),
            model.step_seconds(prefill(0, 4096, false)));
}

TEST(SimCostModel, Llama70bPrefillOnFourH100sIsPlausible) {
  const CostModel model = make("h100", "llama-3.3-70b", 4);
  // 2 * 70.6e9 params * 8192 tokens = 1.16e15 FLOP over 4 x 989 TFLOP/s is 0.29 s at 100% MFU;
  // prefill in vLLM/TensorRT-LLM reaches roughly 40-70% MFU including attention and all-reduces,
  // i.e. 0.4-0.75 s. Anything outside [0.3, 1.0] s means a unit or formula error.
  const double t = model.step_seconds(prefill(0, 8192));
  EXPECT_GT(t, 0.3);
  EXPECT_LT(t, 1.0);
}

TEST(SimCostModel, SpanAndLoadAgree) {
  const CostModel model = make("h200", "llama-3.1-8b", 1);
  std::vector<SliceShape> slices = {{0, 512, false}, {1000, 1, true}, {70000, 1, true}};
  StepLoad load;
  for (const SliceShape& s : slices) load.add(s);
  EXPECT_DOUBLE_EQ(model.step_seconds(slices), model.step_seconds(load));
  EXPECT_DOUBLE_EQ(model.step_seconds(StepLoad{}), model.config().step_overhead_s);
}

TEST(SimCostModel, Fp8WeightsHalveLayerReadsAndRunOnFp8TensorCores) {
  CostConfig config = preset_config("h100", "llama-3.3-70b", 4);
  const CostModel bf16(config);
  config.weight_bytes = 1;
  config.kv_bytes = 1;
  const CostModel fp8(config);
  const double hbm = hbm_rate(config);
  // Per GPU at TP4: 80 * ((2*8192*8192 + 3*8192*28672) / 4 + 2*8192*2*128) = 17,112,760,320 layer
  // parameters; LM head 8192 * 128256 / 4 = 262,668,288, bf16 in both.
  const double layers = 17'112'760'320.0, lm_head = 262'668'288.0;
  const StepCost decode_bf16 = bf16.step_cost(decode_batch(1, 16));
  const StepCost decode_fp8 = fp8.step_cost(decode_batch(1, 16));
  EXPECT_NEAR(decode_bf16.linear_s, (2 * layers + 2 * lm_head) / hbm, 1e-9);
  EXPECT_NEAR(decode_fp8.linear_s, (layers + 2 * lm_head) / hbm, 1e-9);
  // fp8 KV: 80 layers * 2 * 2 kv heads * 128 * 1 byte.
  EXPECT_EQ(fp8.kv_bytes_per_token_per_gpu(), 40'960u);
  EXPECT_EQ(bf16.kv_bytes_per_token_per_gpu(), 81'920u);

  // A long prefill is compute-bound: layers at the fp8 peak and efficiency, the one sampled row's
  // LM head at bf16's.
  const StepCost prefill_fp8 = fp8.step_cost(prefill(0, 8192));
  const double expected =
      2 * layers * 8192 / (config.gpu.peak_fp8_flops * config.fp8_gemm_efficiency) +
      2 * lm_head / (config.gpu.peak_flops * config.gemm_efficiency);
  EXPECT_NEAR(prefill_fp8.linear_s, expected, 1e-9);
  // Hopper: fp8 = 2 x bf16 (the datasheet rounds 989.4 and 1,978.9 TFLOP/s).
  EXPECT_NEAR(config.gpu.peak_fp8_flops / config.gpu.peak_flops, 2.0, 0.002);
  // The all-reduce payload is bf16 activations whatever the weights.
  EXPECT_DOUBLE_EQ(prefill_fp8.allreduce_s, bf16.step_cost(prefill(0, 8192)).allreduce_s);

  // fp8 needs the fp8 peak; a custom GPU without one is refused, naming the key.
  config.gpu.peak_fp8_flops = 0;
  try {
    CostModel{config};
    FAIL() << "fp8 weights accepted without an fp8 peak";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("peak_fp8_tflops"), std::string::npos) << e.what();
  }
}

TEST(SimCostModel, Llama2_70bPresetIsTheMlperfShape) {
  const CostModel model = make("h100", "llama-2-70b", 2);
  // 80 * 855,638,016 layer parameters + 2 * 8192 * 32000 embedding and LM head.
  EXPECT_DOUBLE_EQ(model.parameters(), 80.0 * 855'638'016 + 2.0 * 8192 * 32000);
  EXPECT_EQ(model.config().model.max_model_len, 4096u);
}

// The engine costs every step, up to millions per simulation: accumulation must be a plain value
// that cannot allocate, and costing must not throw.
static_assert(std::is_trivially_copyable_v<StepLoad>);
static_assert(std::is_trivially_destructible_v<StepLoad>);
static_assert(noexcept(std::declval<StepLoad&>().add(0u, 0u, false)));
static_assert(noexcept(std::declval<const CostModel&>().step_cost(StepLoad{})));

}  // namespace
}  // namespace headway::models::sim
