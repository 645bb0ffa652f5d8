// The cuda model's load-time rules (named shapes, kernel limits, tensor-parallel legality): pure
// C++, tested on every machine.
#include "cuda_model_config.h"

#include <gtest/gtest.h>

#include <headway/sdk/options.hpp>
#include <headway/sdk/status.hpp>
#include <string>
#include <vector>

namespace headway::models::cuda {
namespace {

std::string error_of(const LlamaConfig& c, uint32_t tp) {
  try {
    plan_tensor_parallel(c, tp);
  } catch (const sdk::Error& e) {
    EXPECT_EQ(e.code(), HW_INVALID_ARGUMENT);
    return e.what();
  }
  return "";
}

TEST(CudaModelConfig, NamedShapesAreTheReleasedModels) {
  const LlamaConfig c = named_shape("llama-3.1-8b");
  EXPECT_EQ(c.num_hidden_layers, 32u);
  EXPECT_EQ(c.hidden_size, 4096u);
  EXPECT_EQ(c.intermediate_size, 14336u);
  EXPECT_EQ(c.num_attention_heads, 32u);
  EXPECT_EQ(c.num_key_value_heads, 8u);
  EXPECT_EQ(c.head_dim, 128u);
  EXPECT_EQ(c.vocab_size, 128256u);
  EXPECT_TRUE(c.rope_scaling.llama3);
  EXPECT_EQ(named_shape("llama-3.3-70b").num_hidden_layers, 80u);
  const LlamaConfig qwen2 = named_shape("qwen2.5-7b");
  EXPECT_EQ(qwen2.hidden_size, 3584u);
  EXPECT_EQ(qwen2.num_attention_heads / qwen2.num_key_value_heads, 7u);  // a GQA group of 7
  EXPECT_TRUE(qwen2.qkv_bias);
  EXPECT_FALSE(qwen2.o_bias);
  EXPECT_FALSE(qwen2.qk_norm);
  const LlamaConfig qwen3 = named_shape("qwen3-8b");
  EXPECT_EQ(qwen3.num_hidden_layers, 36u);
  EXPECT_EQ(qwen3.head_dim, 128u);
  EXPECT_EQ(qwen3.vocab_size, 151936u);
  EXPECT_TRUE(qwen3.qk_norm);
  EXPECT_FALSE(qwen3.qkv_bias);
  EXPECT_FALSE(qwen3.rope_scaling.llama3);
  for (const std::string& name : named_shapes()) {
    EXPECT_NO_THROW(check_kernel_limits(named_shape(name))) << name;
  }
  try {
    named_shape("gpt-5");
    FAIL() << "expected an error";
  } catch (const sdk::Error& e) {
    EXPECT_NE(std::string(e.what()).find("unknown shape 'gpt-5' (known: config, llama-3.1-8b"),
              std::string::npos)
        << e.what();
  }
}

TEST(CudaModelConfig, TensorParallelSplitsHeadsAndFeedForward) {
  const LlamaConfig c = named_shape("llama-3.3-70b");  // 64 heads, 8 kv heads
  const TensorParallelLayout l4 = plan_tensor_parallel(c, 4);
  EXPECT_EQ(l4.heads_per_rank, 16u);
  EXPECT_EQ(l4.kv_heads_per_rank, 2u);
  EXPECT_EQ(l4.kv_replication, 1u);
  EXPECT_EQ(l4.ffn_per_rank, 7168u);
  EXPECT_EQ(l4.first_kv_head(3), 6u);
  EXPECT_EQ(l4.first_head(3), 48u);
  // tp > kv_heads: each kv head on tp / kv_heads ranks, and the rank's q heads all use it.
  const TensorParallelLayout l16 = plan_tensor_parallel(c, 16);
  EXPECT_EQ(l16.heads_per_rank, 4u);
  EXPECT_EQ(l16.kv_heads_per_rank, 1u);
  EXPECT_EQ(l16.kv_replication, 2u);
  for (uint32_t r = 0; r < 16; ++r) {
    EXPECT_EQ(l16.first_kv_head(r), l16.first_head(r) / (64 / 8)) << "rank " << r;
  }
  // A token's KV for the model counts each of the 8 kv heads once: a rank's is 1 head at tp 16,
  // 2 at tp 4, 8 at tp 1; all three give the same model figure.
  const uint64_t head_bytes = 80ull * 2 * 128 * 2;
  EXPECT_EQ(l16.model_kv_bytes(head_bytes), 8 * head_bytes);
  EXPECT_EQ(l4.model_kv_bytes(2 * head_bytes), 8 * head_bytes);
  EXPECT_EQ(plan_tensor_parallel(c, 1).model_kv_bytes(8 * head_bytes), 8 * head_bytes);
}

TEST(CudaModelConfig, TensorParallelLegalityIsCheckedWithAClearError) {
  LlamaConfig c = named_shape("llama-3.1-8b");  // 32 heads, 8 kv heads
  EXPECT_NE(error_of(c, 3).find("num_attention_heads 32 is not a multiple of it"),
            std::string::npos);
  EXPECT_NE(error_of(c, 0).find("must be at least 1"), std::string::npos);
  c.num_attention_heads = 24;
  c.num_key_value_heads = 6;
  EXPECT_NE(error_of(c, 4).find("num_key_value_heads 6 is not a multiple of it"),
            std::string::npos);
  c.num_attention_heads = 36;
  c.num_key_value_heads = 4;
  c.intermediate_size = 36 * 100;
  EXPECT_NE(error_of(c, 6).find("not a multiple of num_key_value_heads 4"), std::string::npos)
      << error_of(c, 6);
  EXPECT_EQ(error_of(c, 2), "");
  c.intermediate_size = 1001;
  EXPECT_NE(error_of(c, 2).find("intermediate_size 1001"), std::string::npos);
}

TEST(CudaModelConfig, KernelLimitsAreChecked) {
  LlamaConfig c = named_shape("llama-3.1-8b");
  EXPECT_NO_THROW(check_kernel_limits(c));
  c.head_dim = 512;
  EXPECT_THROW(check_kernel_limits(c), sdk::Error);
  c.head_dim = 128;
  c.num_attention_heads = 64;
  c.num_key_value_heads = 1;
  EXPECT_THROW(check_kernel_limits(c), sdk::Error);
}

// Attention biases (Qwen 2; Llama and Qwen 3 with attention_bias) and Qwen 3's q/k norms are
// computed on the device: their configs pass the kernel limits.
TEST(CudaModelConfig, AttentionBiasesAndQkNormsAreWithinTheKernelLimits) {
  LlamaConfig llama = named_shape("llama-3.1-8b");
  llama.qkv_bias = llama.o_bias = true;
  EXPECT_NO_THROW(check_kernel_limits(llama));
  LlamaConfig qwen3 = named_shape("llama-3.1-8b");
  qwen3.model_type = "qwen3";
  qwen3.qk_norm = true;
  qwen3.qkv_bias = qwen3.o_bias = true;
  EXPECT_NO_THROW(check_kernel_limits(qwen3));
  qwen3.head_dim = 258;  // the limits that remain still hold
  EXPECT_THROW(check_kernel_limits(qwen3), sdk::Error);
}

// The values the host hands create() for an 8B named shape with these settings (the schema's
// defaults for the rest), read by parse_options.
CudaModelOptions parse(int64_t cuda_graph_max_batch, int64_t tensor_parallel, bool phase_timing,
                       bool split_prefill_attention = false,
                       const char* attention_tiling = "128x64",
                       bool programmatic_dependent_launch = false, bool deterministic = false) {
  const auto str = [](const char* key, const char* value, int32_t type) {
    return hw_option_value{{key, std::char_traits<char>::length(key)},
                           type,
                           0,
                           0.0,
                           {value, std::char_traits<char>::length(value)}};
  };
  const auto num = [](const char* key, int64_t value, int32_t type) {
    return hw_option_value{{key, std::char_traits<char>::length(key)}, type, value, 0.0, {"", 0}};
  };
  const auto real = [](const char* key, double value) {
    return hw_option_value{
        {key, std::char_traits<char>::length(key)}, HW_OPTION_DOUBLE, 0, value, {"", 0}};
  };
  const std::vector<hw_option_value> values = {
      str("path", "", HW_OPTION_STRING),
      str("shape", "llama-3.1-8b", HW_OPTION_ENUM),
      num("random_weights", 1, HW_OPTION_BOOL),
      num("seed", 0, HW_OPTION_INT),
      num("device", 0, HW_OPTION_INT),
      num("tensor_parallel", tensor_parallel, HW_OPTION_INT),
      num("max_model_len", 0, HW_OPTION_INT),
      real("kv_cache_gb", 0.0),
      real("gpu_memory_fraction", 0.9),
      str("sampling", "device", HW_OPTION_ENUM),
      num("max_batch_tokens", 8192, HW_OPTION_INT),
      num("deterministic", deterministic ? 1 : 0, HW_OPTION_BOOL),
      num("decode_gemv", 1, HW_OPTION_BOOL),
      num("decode_gemv_max_rows", 2, HW_OPTION_INT),
      num("fuse_swiglu", 1, HW_OPTION_BOOL),
      num("phase_timing", phase_timing ? 1 : 0, HW_OPTION_BOOL),
      str("attention_tiling", attention_tiling, HW_OPTION_ENUM),
      num("split_prefill_attention", split_prefill_attention ? 1 : 0, HW_OPTION_BOOL),
      num("programmatic_dependent_launch", programmatic_dependent_launch ? 1 : 0, HW_OPTION_BOOL),
      num("cuda_graph_max_batch", cuda_graph_max_batch, HW_OPTION_INT)};
  const hw_options options{values.data(), static_cast<uint32_t>(values.size())};
  return parse_options(sdk::Options(&options), "");
}

// cuda_graph_max_batch = -1 (the default) takes graphs up to kAutoCudaGraphMaxBatch rows where
// they work and leaves them off, without an error, where they do not; a number is taken as set.
TEST(CudaModelConfig, CudaGraphsAreOnByDefaultOnlyWhereTheyWork) {
  EXPECT_EQ(parse(-1, 1, false).cuda_graph_max_batch, kAutoCudaGraphMaxBatch);
  EXPECT_EQ(parse(-1, 2, false).cuda_graph_max_batch, 0u);
  EXPECT_EQ(parse(-1, 1, true).cuda_graph_max_batch, 0u);
  EXPECT_EQ(parse(0, 1, false).cuda_graph_max_batch, 0u);
  EXPECT_EQ(parse(64, 1, false).cuda_graph_max_batch, 64u);
  EXPECT_EQ(parse(0, 2, true).cuda_graph_max_batch, 0u);
  try {
    parse(8, 2, false);
    ADD_FAILURE() << "graphs asked for with tensor parallelism should be refused";
  } catch (const sdk::Error& e) {
    EXPECT_NE(std::string(e.what()).find("needs tensor_parallel = 1"), std::string::npos)
        << e.what();
  }
  const CudaModelOptions defaults = parse(-1, 1, false);
  EXPECT_TRUE(defaults.decode_gemv);
  EXPECT_EQ(defaults.attention_tiling, kernels::MmaTiling::k128x64);
  EXPECT_FALSE(defaults.split_prefill_attention);
  EXPECT_TRUE(parse(-1, 1, false, true).split_prefill_attention);
  EXPECT_FALSE(defaults.programmatic_dependent_launch);
  EXPECT_EQ(defaults.decode_gemv_max_rows, 2u);  // kGemvRoutedRows, gemm.h
  EXPECT_TRUE(defaults.fuse_swiglu);
  EXPECT_TRUE(parse(-1, 1, false, false, "128x64", true).programmatic_dependent_launch);
}

// NCCL's all-reduce adds the ranks' outputs in an order that follows the step's size: deterministic
// arithmetic is refused under tensor parallelism, naming both options.
TEST(CudaModelConfig, DeterministicNeedsOneGpu) {
  EXPECT_TRUE(parse(0, 1, false, false, "128x64", false, true).deterministic);
  try {
    parse(0, 2, false, false, "128x64", false, true);
    ADD_FAILURE() << "deterministic with tensor_parallel = 2 should be refused";
  } catch (const sdk::Error& e) {
    EXPECT_NE(std::string(e.what()).find("deterministic = true needs tensor_parallel = 1"),
              std::string::npos)
        << e.what();
  }
}

// Every tiling is read back from its name, the lean candidates included.
TEST(CudaModelConfig, EachAttentionTilingIsReadByItsName) {
  for (const kernels::MmaTiling t : kernels::kMmaTilings) {
    EXPECT_EQ(parse(-1, 1, false, false, kernels::mma_tiling_name(t)).attention_tiling, t)
        << kernels::mma_tiling_name(t);
  }
  EXPECT_TRUE(
      kernels::mma_tiling_is_lean(parse(-1, 1, false, false, "lean-64x32").attention_tiling));
  EXPECT_FALSE(kernels::mma_tiling_is_lean(parse(-1, 1, false, false, "64x32").attention_tiling));
}

}  // namespace
}  // namespace headway::models::cuda
