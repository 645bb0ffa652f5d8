// Random weights under tensor parallelism, built on one GPU rank by rank: what several ranks hold
// (embeddings, LM head, a kv head replicated over ranks) is drawn equal on each, and what each rank
// holds alone (its q heads) differs. Ranks whose embeddings differed would add all-reduced layer
// outputs to different residual streams.
#include "device_weights.h"

#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <vector>

#include "cuda_model_config.h"
#include "gpu_test_support.h"

namespace headway::models::cuda {
namespace {

// 8 heads over 2 kv heads: at tp = 4 each kv head lives on two ranks.
LlamaConfig small_config() {
  LlamaConfig c;
  c.hidden_size = 256;
  c.intermediate_size = 512;
  c.num_hidden_layers = 1;
  c.num_attention_heads = 8;
  c.num_key_value_heads = 2;
  c.head_dim = 32;
  c.vocab_size = 1000;
  c.max_position_embeddings = 1024;
  c.model_type = "llama";
  return c;
}

std::vector<uint16_t> bits_of(const __nv_bfloat16* device, uint64_t count) {
  std::vector<uint16_t> host(count);
  EXPECT_EQ(cudaMemcpy(host.data(), device, 2 * count, cudaMemcpyDeviceToHost), cudaSuccess);
  return host;
}

TEST(DeviceWeights, RandomWeightsAreEqualWhereRanksHoldTheSameTensor) {
  HW_SKIP_WITHOUT_CUDA();
  const LlamaConfig c = small_config();
  const TensorParallelLayout tp = plan_tensor_parallel(c, 4);
  ASSERT_EQ(tp.kv_replication, 2u);
  std::vector<std::unique_ptr<DeviceWeights>> ranks;
  for (uint32_t r = 0; r < 4; ++r) ranks.push_back(std::make_unique<DeviceWeights>(c, tp, r, 7));
  const uint64_t embed = uint64_t{c.vocab_size} * c.hidden_size;
  const uint64_t q = uint64_t{tp.heads_per_rank} * c.head_dim * c.hidden_size;
  const uint64_t kv = 2 * uint64_t{tp.kv_heads_per_rank} * c.head_dim * c.hidden_size;
  const auto embed_of = [&](uint32_t r) { return bits_of(ranks[r]->embed(), embed); };
  const auto q_of = [&](uint32_t r) { return bits_of(ranks[r]->layer(0).qkv.data(), q); };
  const auto kv_of = [&](uint32_t r) { return bits_of(ranks[r]->layer(0).qkv.data() + q, kv); };
  EXPECT_EQ(embed_of(0), embed_of(3));
  EXPECT_EQ(bits_of(ranks[1]->lm_head(), embed), bits_of(ranks[2]->lm_head(), embed));
  EXPECT_EQ(kv_of(0), kv_of(1));  // kv head 0
  EXPECT_EQ(kv_of(2), kv_of(3));  // kv head 1
  EXPECT_NE(kv_of(0), kv_of(2));
  EXPECT_NE(q_of(0), q_of(1));  // each rank's own q heads
}

}  // namespace
}  // namespace headway::models::cuda
