// One GPU's share of a Llama model's weights, in BF16 (norm weights in float), laid out for the
// forward pass: q, k and v fused into one [q|k|v] matrix and gate and up into one [gate|up] matrix
// so that each is a single matrix multiply. Under tensor parallelism the fused matrices hold this
// rank's heads and feed-forward columns, o and down this rank's input columns; embeddings, norms
// and the LM head are replicated.
//
// Built either from a checkpoint (any of F32/F16/BF16, converted to BF16 on the host while
// uploading) or from a deterministic random fill on the device (named shapes, benchmarks).
//
// Ownership: owns its device memory. Threading: built on one thread with the shard's device
// current; read-only afterwards.
#pragma once

#include <cuda_bf16.h>

#include <cstdint>
#include <vector>

#include "cuda_model_config.h"
#include "device_buffer.h"
#include "safetensors.h"

namespace headway::models::cuda {

// The buffers of what an architecture may lack (biases, q/k norms) stay empty, data() null, where
// it has none.
struct DeviceLayer {
  DeviceBuffer<float> input_norm;       // [hidden]
  DeviceBuffer<float> post_norm;        // [hidden]
  DeviceBuffer<__nv_bfloat16> qkv;      // [(heads_l + 2 * kv_heads_l) * head_dim][hidden]
  DeviceBuffer<__nv_bfloat16> o;        // [hidden][heads_l * head_dim]
  DeviceBuffer<__nv_bfloat16> gate_up;  // [2 * ffn_l][hidden]
  DeviceBuffer<__nv_bfloat16> down;     // [hidden][ffn_l]
  DeviceBuffer<float> qkv_bias;         // [(heads_l + 2 * kv_heads_l) * head_dim] (qkv_bias)
  DeviceBuffer<float> o_bias;           // [hidden], whole on every rank (o_bias)
  DeviceBuffer<float> q_norm;           // [head_dim] (qk_norm)
  DeviceBuffer<float> k_norm;           // [head_dim] (qk_norm)
};

class DeviceWeights {
 public:
  // From a checkpoint. Throws sdk::Error naming the file and tensor on a missing or malformed
  // tensor, or a CUDA error naming the call.
  DeviceWeights(const cpu::Checkpoint& checkpoint, const LlamaConfig& config,
                const TensorParallelLayout& tp, uint32_t rank);
  // Random, uniform in +-1/sqrt(fan_in), seeded by (seed, rank, tensor); what several ranks hold
  // (embeddings, LM head, a replicated kv head) is equal on each. Norms are ones, biases zeros.
  DeviceWeights(const LlamaConfig& config, const TensorParallelLayout& tp, uint32_t rank,
                uint64_t seed);

  const __nv_bfloat16* embed() const { return embed_.data(); }
  const __nv_bfloat16* lm_head() const {
    return lm_head_.data() != nullptr ? lm_head_.data() : embed_.data();
  }
  const float* final_norm() const { return final_norm_.data(); }
  const DeviceLayer& layer(uint32_t i) const { return layers_[i]; }
  uint64_t bytes() const { return bytes_; }

 private:
  void allocate(const LlamaConfig& config, const TensorParallelLayout& tp, bool tied);

  DeviceBuffer<__nv_bfloat16> embed_;
  DeviceBuffer<__nv_bfloat16> lm_head_;  // empty when tied to embed_
  DeviceBuffer<float> final_norm_;
  std::vector<DeviceLayer> layers_;
  uint64_t bytes_ = 0;
};

}  // namespace headway::models::cuda
