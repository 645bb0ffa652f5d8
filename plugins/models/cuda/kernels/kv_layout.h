// The device KV cache's layout, shared by the kernels that write it (rope_kv) and read it
// (attention) and by the host code that hands out its memory. Plain C++.
//
// Block-major, so one KV block is one contiguous range a transport can copy (hw_memory_desc: block
// b at base + b * block_bytes). Inside a block, per layer: K then V, each [kv_head][slot][head_dim]
// in bf16: a token's head vector is contiguous (one 256-byte row for head_dim 128), which is what
// the attention kernel loads per key.
#pragma once

#include <cstdint>

namespace headway::models::cuda::kernels {

struct KvLayout {
  uint32_t layers = 0;
  uint32_t kv_heads = 0;  // heads held by this device (after tensor-parallel sharding)
  uint32_t head_dim = 0;
  uint32_t block_size = 0;

  // Elements of one kv head's K (or V) in one block.
  uint64_t head_elems() const { return uint64_t{block_size} * head_dim; }
  // Elements of one layer's K and V in one block.
  uint64_t layer_elems() const { return 2 * uint64_t{kv_heads} * head_elems(); }
  // Elements of one block, all layers.
  uint64_t block_elems() const { return uint64_t{layers} * layer_elems(); }
  // Bytes per token across all layers, K and V (bf16).
  uint64_t bytes_per_token() const { return uint64_t{layers} * 2 * kv_heads * head_dim * 2; }
};

}  // namespace headway::models::cuda::kernels
