// The weights of a Llama-family model in the dtype the forward pass computes with. Matrices whose
// stored dtype is the compute dtype are views into the checkpoint's memory mapping (no copy); the
// others are converted once at load. Norm weights and biases are always converted to float (they
// are tiny and read for every token).
//
// Ownership: LlamaWeights borrows the Checkpoint (which must outlive it) and owns converted copies.
// Threading: immutable after construction; read concurrently by the forward pass's threads.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "aligned_buffer.h"
#include "llama_config.h"
#include "safetensors.h"

namespace headway::models::cpu {

// A row-major [rows x cols] weight: rows = output features, cols = input features (the Hugging
// Face nn.Linear layout), so y = x * W^T.
struct Matrix {
  DType dtype = DType::kF32;
  uint32_t rows = 0;
  uint32_t cols = 0;
  const void* data = nullptr;
};

struct LayerWeights {
  const float* input_norm = nullptr;
  const float* post_attention_norm = nullptr;
  Matrix q, k, v, o, gate, up, down;
  // Biases of the projections (LlamaConfig::qkv_bias, o_bias) and Qwen 3's per-head norms of q and
  // k ([head_dim], LlamaConfig::qk_norm); null where the architecture has none.
  const float* q_bias = nullptr;
  const float* k_bias = nullptr;
  const float* v_bias = nullptr;
  const float* o_bias = nullptr;
  const float* q_norm = nullptr;
  const float* k_norm = nullptr;
};

class LlamaWeights {
 public:
  // Throws sdk::Error naming the file and tensor on any missing or malformed tensor. With
  // `map_weights` false every matrix is copied into huge-page memory even when the mapping could
  // be used in place (decode reads it faster; see aligned_buffer.h).
  LlamaWeights(const Checkpoint& checkpoint, const LlamaConfig& config, DType compute,
               bool map_weights);

  const Matrix& embed() const { return embed_; }
  const Matrix& lm_head() const { return lm_head_; }
  const float* final_norm() const { return final_norm_; }
  const LayerWeights& layer(uint32_t i) const { return layers_[i]; }
  DType compute_dtype() const { return compute_; }
  // Bytes of weight memory the forward pass reads (mapped or owned).
  uint64_t bytes() const { return bytes_; }
  // Bytes copied or converted at load (0 when everything is mapped).
  uint64_t converted_bytes() const { return converted_bytes_; }

 private:
  Matrix matrix(const Checkpoint& checkpoint, const std::string& name, uint32_t rows,
                uint32_t cols);
  const float* vector(const Checkpoint& checkpoint, const std::string& name, uint32_t size);
  // `bytes` of owned memory, 64-byte aligned, carved from 64 MiB huge-page chunks so that small
  // matrices (a 512 x 512 projection is 0.5 MB) share huge pages too.
  std::byte* allocate(uint64_t bytes);

  DType compute_;
  bool map_weights_;
  Matrix embed_;
  Matrix lm_head_;
  const float* final_norm_ = nullptr;
  std::vector<LayerWeights> layers_;
  std::vector<AlignedBuffer<std::byte>> owned_;
  uint64_t chunk_used_ = 0;
  uint64_t chunk_size_ = 0;
  uint64_t bytes_ = 0;
  uint64_t converted_bytes_ = 0;
};

}  // namespace headway::models::cpu
