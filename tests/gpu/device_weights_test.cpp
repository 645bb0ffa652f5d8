// Weights under tensor parallelism, built on one GPU rank by rank (NCCL refuses two ranks on one
// GPU, so the forward pass over ranks needs two; these need one):
// - random weights: what several ranks hold (embeddings, LM head, a kv head replicated over ranks)
//   is drawn equal on each, and what each rank holds alone (its q heads) differs. Ranks whose
//   embeddings differed would add all-reduced layer outputs to different residual streams;
// - a checkpoint's: each rank holds exactly the rows and columns of each projection that one GPU
//   holds for its heads and feed-forward columns, and the replicated tensors whole.
#include "device_weights.h"

#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "cuda_model_config.h"
#include "gpu_test_support.h"
#include "llama_config.h"
#include "safetensors.h"
#include "tiny_bf16_spec.h"

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

std::vector<float> floats_of(const float* device, uint64_t count) {
  std::vector<float> host(count);
  EXPECT_EQ(cudaMemcpy(host.data(), device, 4 * count, cudaMemcpyDeviceToHost), cudaSuccess);
  return host;
}

std::vector<float> floats_of(const DeviceBuffer<float>& device) {
  return floats_of(device.data(), device.size());
}

std::vector<uint16_t> bits_of(const DeviceBuffer<__nv_bfloat16>& device) {
  return bits_of(device.data(), device.size());
}

// Rows [row0, row0 + rows) of a row-major host matrix `width` wide, and columns
// [col0, col0 + cols) of each.
template <class T>
std::vector<T> block_of(const std::vector<T>& matrix, uint64_t width, uint64_t row0, uint64_t rows,
                        uint64_t col0, uint64_t cols) {
  std::vector<T> out;
  out.reserve(rows * cols);
  for (uint64_t r = row0; r < row0 + rows; ++r) {
    const auto first = matrix.begin() + static_cast<std::ptrdiff_t>(r * width + col0);
    out.insert(out.end(), first, first + static_cast<std::ptrdiff_t>(cols));
  }
  return out;
}

template <class T>
std::vector<T> concat(std::vector<T> a, const std::vector<T>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
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

// The tiny BF16 checkpoint as Qwen 3 with attention_bias (biases on q, k, v and o, per-head q/k
// norms: every tensor a rank may hold), split over 2 ranks (one kv head each) and over 4 (each kv
// head on two ranks), against the whole model on one GPU. Each rank's fused [q|k|v] holds its
// heads' rows of q and its kv heads' rows of k and v; [gate|up] its feed-forward rows of each; o
// and down its columns; the biases of q, k and v its entries; everything else is whole.
TEST(DeviceWeights, EachRankOfACheckpointHoldsItsSliceOfTheWholeModel) {
  HW_SKIP_WITHOUT_CUDA();
  gpu_test::TempDir dir;
  cpu::TinyModelSpec spec = gpu_test::tiny_bf16_spec();
  spec.architecture = "qwen3";
  spec.attention_bias = true;
  cpu::write_tiny_checkpoint(spec, dir.path());
  const cpu::Checkpoint checkpoint(dir.path());
  const LlamaConfig c = cpu::load_llama_config(dir.path());
  ASSERT_TRUE(c.qkv_bias && c.o_bias && c.qk_norm);
  const uint64_t hidden = c.hidden_size;
  const uint64_t hd = c.head_dim;
  const uint64_t q_out = uint64_t{c.num_attention_heads} * hd;
  const uint64_t kv_out = uint64_t{c.num_key_value_heads} * hd;
  const uint64_t ffn = c.intermediate_size;

  const DeviceWeights whole(checkpoint, c, plan_tensor_parallel(c, 1), 0);
  for (uint32_t tp : {2u, 4u}) {
    const TensorParallelLayout layout = plan_tensor_parallel(c, tp);
    ASSERT_EQ(layout.kv_replication, tp == 4 ? 2u : 1u);
    for (uint32_t rank = 0; rank < tp; ++rank) {
      SCOPED_TRACE("tp " + std::to_string(tp) + ", rank " + std::to_string(rank));
      const DeviceWeights part(checkpoint, c, layout, rank);
      const uint64_t h0 = layout.first_head(rank) * hd, q_l = layout.heads_per_rank * hd;
      const uint64_t g0 = layout.first_kv_head(rank) * hd, kv_l = layout.kv_heads_per_rank * hd;
      const uint64_t f0 = layout.first_ffn(rank), ffn_l = layout.ffn_per_rank;
      EXPECT_EQ(bits_of(part.embed(), c.vocab_size * hidden),
                bits_of(whole.embed(), c.vocab_size * hidden));
      EXPECT_EQ(bits_of(part.lm_head(), c.vocab_size * hidden),
                bits_of(whole.lm_head(), c.vocab_size * hidden));
      EXPECT_EQ(floats_of(part.final_norm(), hidden), floats_of(whole.final_norm(), hidden));
      for (uint32_t i = 0; i < c.num_hidden_layers; ++i) {
        SCOPED_TRACE("layer " + std::to_string(i));
        const DeviceLayer& p = part.layer(i);
        const DeviceLayer& w = whole.layer(i);
        // [q|k|v] rows: q's at 0, k's at q_out, v's at q_out + kv_out in the whole model.
        const std::vector<uint16_t> qkv = bits_of(w.qkv);
        EXPECT_EQ(bits_of(p.qkv),
                  concat(concat(block_of(qkv, hidden, h0, q_l, 0, hidden),
                                block_of(qkv, hidden, q_out + g0, kv_l, 0, hidden)),
                         block_of(qkv, hidden, q_out + kv_out + g0, kv_l, 0, hidden)));
        EXPECT_EQ(bits_of(p.o), block_of(bits_of(w.o), q_out, 0, hidden, h0, q_l));
        const std::vector<uint16_t> gate_up = bits_of(w.gate_up);
        EXPECT_EQ(bits_of(p.gate_up),
                  concat(block_of(gate_up, hidden, f0, ffn_l, 0, hidden),
                         block_of(gate_up, hidden, ffn + f0, ffn_l, 0, hidden)));
        EXPECT_EQ(bits_of(p.down), block_of(bits_of(w.down), ffn, 0, hidden, f0, ffn_l));
        const std::vector<float> bias = floats_of(w.qkv_bias);
        EXPECT_EQ(floats_of(p.qkv_bias),
                  concat(concat(block_of(bias, 1, h0, q_l, 0, 1),
                                block_of(bias, 1, q_out + g0, kv_l, 0, 1)),
                         block_of(bias, 1, q_out + kv_out + g0, kv_l, 0, 1)));
        EXPECT_EQ(floats_of(p.o_bias), floats_of(w.o_bias));
        EXPECT_EQ(floats_of(p.input_norm), floats_of(w.input_norm));
        EXPECT_EQ(floats_of(p.post_norm), floats_of(w.post_norm));
        EXPECT_EQ(floats_of(p.q_norm), floats_of(w.q_norm));
        EXPECT_EQ(floats_of(p.k_norm), floats_of(w.k_norm));
      }
    }
  }
}

}  // namespace
}  // namespace headway::models::cuda
