// Causal grouped-query attention over the paged KV cache, for one layer of one step.
//
// A slice's token at position p attends to positions [0, p] of its own request: what earlier steps
// cached plus the slice's own keys, which the caller has already written. Each query row's
// arithmetic depends only on its own position and key blocks (an online softmax over whole KV
// blocks, in block order), so a prompt gives the same result however it is split into chunks and
// whatever else is in the step.
//
// Work is split into items of (slice, kv head, tile of consecutive tokens); a tile's rows are the
// tile's tokens times the query heads sharing that kv head, so each K/V block is loaded once per
// tile for all of them. Two kernels:
// - prefill tiles (slices of kGemmTokens tokens or more): keys are gathered in chunks of kChunk
//   positions (aligned to absolute positions) and Q*K^T and P*V are sgemm calls, so attention runs
//   near the GEMM peak instead of at the speed of dot products;
// - decode and short slices: a vector kernel with an online softmax over single KV blocks.
// Both keep a row's arithmetic independent of how the prompt was chunked and of the other rows;
// they differ from each other only by rounding (the tests bound it at 1e-5 relative).
//
// Ownership: owns its per-thread scratch and item list (grown rarely, never shrunk). The cache,
// queries, outputs and slice descriptions are borrowed per call.
// Threading: one caller at a time; each call fans out over `threads` OpenMP threads.
#pragma once

#include <headway/abi.h>

#include <algorithm>
#include <cstdint>
#include <vector>

#include "aligned_buffer.h"
#include "kv_cache.h"

namespace headway::models::cpu {

struct AttentionShape {
  uint32_t heads = 0;
  uint32_t kv_heads = 0;
  uint32_t head_dim = 0;
};

// Where a slice's tokens sit in the step's token-major activations.
struct SliceSpan {
  uint32_t first_row = 0;  // row of the slice's first token in q/out
  uint32_t start = 0;      // position of that token
  uint32_t tokens = 0;
  const uint32_t* block_table = nullptr;
};

class Attention {
 public:
  Attention(const AttentionShape& shape, int threads);

  // out[row][head][d] for every token of `slices`; q is [rows x heads x head_dim], rotated.
  void run(KvCache& cache, uint32_t layer, const std::vector<SliceSpan>& slices, const float* q,
           float* out);

  // Tokens per work item of the vector kernel; 8 keeps a tile's accumulators in L1.
  static constexpr uint32_t kTile = 8;
  // Slices with at least this many tokens take the sgemm kernel.
  static constexpr uint32_t kGemmTokens = 16;
  // Query rows (tokens x group) per sgemm tile, and keys per chunk: S = 64 x 256 floats (64 KB)
  // stays in L2 next to the gathered K and V chunks.
  static constexpr uint32_t kGemmRows = 64;
  static constexpr uint32_t kChunk = 256;

 private:
  struct Item {
    uint32_t slice;
    uint32_t kv_head;
    uint32_t first;  // token index inside the slice
    uint32_t count;
  };
  void run_item(KvCache& cache, uint32_t layer, const SliceSpan& span, const Item& item,
                const float* q, float* out, float* scratch);
  void run_gemm_item(KvCache& cache, uint32_t layer, const SliceSpan& span, const Item& item,
                     const float* q, float* out, float* scratch);
  uint32_t gemm_tile_tokens() const { return std::max<uint32_t>(1, kGemmRows / group_); }

  AttentionShape shape_;
  int threads_;
  uint32_t group_;
  std::vector<Item> items_;
  AlignedBuffer<float> scratch_;
  size_t scratch_stride_ = 0;
  uint32_t scratch_block_size_ = 0;
};

}  // namespace headway::models::cpu
