// The paged KV cache's memory. The engine owns the block ids (which block belongs to which
// request); this class owns the bytes behind them.
//
// Layout: block-major, so that one block is one contiguous range a KV transport can copy
// (hw_memory_desc: block b at base + b * block_bytes). Inside a block, per layer:
//   K: [kv_head][head_dim][block_size]  (transposed: a query's scores over a block's keys are a
//                                        loop over block_size that the compiler vectorises)
//   V: [kv_head][block_size][head_dim]  (the weighted sum over keys vectorises over head_dim)
// Values are float: the reference model keeps full precision so that chunked and whole prefills
// agree to rounding.
//
// Ownership: owns the memory. Threading: not synchronised; the forward pass writes disjoint
// positions and reads them after the write phase.
#pragma once

#include <cstdint>

#include "aligned_buffer.h"

namespace headway::models::cpu {

class KvCache {
 public:
  KvCache(uint32_t layers, uint32_t kv_heads, uint32_t head_dim)
      : layers_(layers), kv_heads_(kv_heads), head_dim_(head_dim) {}

  // Bytes of K and V for one token across all layers.
  uint64_t bytes_per_token() const { return uint64_t{layers_} * 2 * kv_heads_ * head_dim_ * 4; }

  // Allocates block_count blocks of block_size tokens, zeroed. Throws sdk::Error:
  // HW_INVALID_ARGUMENT for a zero block size, HW_RESOURCE_EXHAUSTED when it does not fit (more
  // than the host has available: host_memory()).
  void init(uint32_t block_count, uint32_t block_size);

  bool initialised() const { return block_size_ != 0; }
  uint32_t block_count() const { return block_count_; }
  uint32_t block_size() const { return block_size_; }
  uint64_t block_bytes() const { return bytes_per_token() * block_size_; }
  void* base() { return memory_.data(); }
  uint64_t total_bytes() const { return block_bytes() * block_count_; }

  // K of (block, layer, kv head): [head_dim][block_size].
  float* keys(uint32_t block, uint32_t layer, uint32_t kv_head) {
    return memory_.data() + block_floats_ * block + layer_floats_ * layer + head_floats_ * kv_head;
  }
  // V of (block, layer, kv head): [block_size][head_dim].
  float* values(uint32_t block, uint32_t layer, uint32_t kv_head) {
    return keys(block, layer, 0) + head_floats_ * kv_heads_ + head_floats_ * kv_head;
  }

 private:
  uint32_t layers_;
  uint32_t kv_heads_;
  uint32_t head_dim_;
  uint32_t block_count_ = 0;
  uint32_t block_size_ = 0;
  uint64_t head_floats_ = 0;   // head_dim * block_size
  uint64_t layer_floats_ = 0;  // 2 * kv_heads * head_floats
  uint64_t block_floats_ = 0;  // layers * layer_floats
  AlignedBuffer<float> memory_;
};

}  // namespace headway::models::cpu
