// The cuda model's load-time rules (named shapes, kernel limits, tensor-parallel legality): pure
// C++, tested on every machine.
#include "cuda_model_config.h"

#include <gtest/gtest.h>

#include <headway/sdk/status.hpp>
#include <string>

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

// What the device kernels do not compute is refused, naming it, rather than served wrongly.
TEST(CudaModelConfig, AttentionBiasesAndQkNormsAreRefused) {
  const auto message = [](const LlamaConfig& c) {
    try {
      check_kernel_limits(c);
    } catch (const sdk::Error& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  LlamaConfig llama = named_shape("llama-3.1-8b");
  llama.qkv_bias = llama.o_bias = true;  // a Llama config.json without model_type
  EXPECT_NE(message(llama).find("model_type llama with attention_bias"), std::string::npos)
      << message(llama);
  LlamaConfig qwen2 = named_shape("llama-3.1-8b");
  qwen2.model_type = "qwen2";
  qwen2.qkv_bias = true;
  EXPECT_NE(message(qwen2).find("attention biases (model_type qwen2)"), std::string::npos)
      << message(qwen2);
  LlamaConfig qwen3 = named_shape("llama-3.1-8b");
  qwen3.model_type = "qwen3";
  qwen3.qk_norm = true;
  EXPECT_NE(message(qwen3).find("q/k norm of model_type qwen3"), std::string::npos)
      << message(qwen3);
}

}  // namespace
}  // namespace headway::models::cuda
