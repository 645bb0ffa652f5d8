// Causal grouped-query attention over the paged KV cache, for one layer of one step. Plain C++
// header; kernels in attention.cu (FP32 on CUDA cores) and attention_mma.cu (tensor cores).
//
// The host cuts the step into work units. A unit is a tile of consecutive tokens of one slice
// (prefill) or one decode token, and a range of keys [key_begin, key_end) of its request; a block
// runs one unit for one kv head (grid.y, or for the lean tilings a 1-D grid with kv heads fastest),
// so it loads each K/V chunk once for all the query heads that share it (GQA). A token at position
// p sees keys [0, p]: the cached prefix and the keys its own slice has just written (rope_kv_write
// runs first). Keys are visited in chunks of 32 with an online softmax; on the FP32 kernel the
// chunks are aligned to absolute positions, so a row's arithmetic does not depend on how its prompt
// was chunked into steps (the deterministic mode relies on it).
//
// Prefill: tiles of up to attention_prefill_tile_rows() query rows (tokens x group: 32 on the FP32
// kernel, 64 or 128 on tensor cores), all keys in one unit, or, when the plan splits prefill tiles
// (StepLimits::prefill_split_min_keys), in several. Decode: one token per unit, and long contexts
// split into several units (split-K). Split units write partial results (max, sum, unnormalised
// output) per token and head, which attention_reduce merges; a row before a unit's first key
// writes max -inf, which the merge skips. On the FP32 kernel a warp takes 4 prefill rows or
// one decode head; on the tensor-core kernel (attention_mma.h) a warp takes 16 rows.
//
// Ownership: device pointers borrowed for the launch. Threading: enqueues on `on.stream`.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "launch.h"
#include "mma_tiling.h"

namespace headway::models::cuda::kernels {

// Keys per chunk: one per lane of a warp.
inline constexpr uint32_t kAttentionChunk = 32;
// Query rows (tokens x group) per prefill tile: the FP32 kernel's, and the tensor-core kernel's
// (which takes 16 rows per warp).
inline constexpr uint32_t kAttentionTileRows = 32;
inline constexpr uint32_t kAttentionMmaTileRows = 64;  // of the default tiling, k64x32

// Largest head_dim and GQA group the kernels support (checked at load).
inline constexpr uint32_t kAttentionMaxHeadDim = 256;
inline constexpr uint32_t kAttentionMaxGroup = 32;

struct AttentionUnit {
  int32_t q_row;      // row of the unit's first token in qkv / out
  int32_t first_pos;  // its position
  int32_t tokens;     // tokens in the tile (1 for decode)
  int32_t table;      // offset of the request's block table in AttentionArgs::block_tables
  int32_t key_begin;  // multiple of kAttentionChunk
  int32_t key_end;    // exclusive; <= first_pos + tokens
  int32_t partial;    // first partial record, or -1 to write `out` directly
  int32_t reserved;
};

// Merges the partial records of one split token: record of split s, token t, head h is
// partial + s * tokens * heads + t * heads + h.
struct AttentionReduceUnit {
  int32_t q_row;
  int32_t tokens;
  int32_t partial;
  int32_t splits;
};

struct AttentionArgs {
  const __nv_bfloat16* qkv = nullptr;          // rotated q at the start of each row
  uint32_t q_stride = 0;                       // elements per row of qkv
  __nv_bfloat16* out = nullptr;                // [rows][heads * head_dim]
  const __nv_bfloat16* layer_cache = nullptr;  // cache base + layer * layer_elems
  uint64_t block_elems = 0;                    // KvLayout::block_elems()
  uint64_t head_elems = 0;                     // KvLayout::head_elems()
  uint32_t block_size = 0;
  const int32_t* block_tables = nullptr;
  uint32_t heads = 0;
  uint32_t kv_heads = 0;
  uint32_t head_dim = 0;
  float scale = 0.0f;            // 1 / sqrt(head_dim)
  float* partial_acc = nullptr;  // [records][head_dim]
  float* partial_ml = nullptr;   // [records][2]: running max, running sum
  // false (default): head dims 32, 64, 128 and 256 run on tensor cores (attention_mma.cu:
  // BF16 scores and probabilities, FP32 accumulation), others on the FP32 kernel. true: every
  // unit on the FP32 kernel, whose arithmetic for a row is the same in a prefill tile and in a
  // decode (the model's deterministic mode).
  bool exact_fp32 = false;
  // Query rows (tokens x group) of the largest prefill unit launched (StepPlan::max_prefill_rows):
  // a kPrefill launch is refused unless 0 < max_prefill_rows <= attention_prefill_tile_rows(),
  // so that a plan cut for one kernel never runs on the other (it would skip or overrun rows).
  uint32_t max_prefill_rows = 0;
  // Prefill blocks of the tensor-core kernel (ignored by the FP32 one); the plan's tiles must be
  // cut for it: attention_prefill_tile_rows(head_dim, exact_fp32, mma_tiling).
  MmaTiling mma_tiling = MmaTiling::k64x32;
};

enum class AttentionKind { kPrefill, kDecode };

// Whether paged_attention runs these arguments on tensor cores (attention_mma.cu).
bool attention_uses_tensor_cores(uint32_t head_dim, bool exact_fp32);

// Rows of a prefill tile for these arguments: mma_tiling_rows(tiling) on tensor cores, else
// kAttentionTileRows. The step plan cuts prefill slices into tiles of
// max(1, rows / group) tokens.
uint32_t attention_prefill_tile_rows(uint32_t head_dim, bool exact_fp32,
                                     MmaTiling tiling = MmaTiling::k64x32);

// Whether a plan for these arguments should order its prefill units longest first
// (StepLimits::prefill_longest_first): for the lean tilings, whose grid starts every kv head of a
// unit together; not on the FP32 kernel.
bool attention_prefill_longest_first(uint32_t head_dim, bool exact_fp32, MmaTiling tiling);

// Runs `unit_count` units (device array). For kPrefill every unit has at most
// attention_prefill_tile_rows() / group tokens (at least 1); for kDecode exactly 1. on.overlap
// (launch.h) is honoured by the tensor-core decode kernel of groups up to 16; the others are
// launched as usual.
cudaError_t paged_attention(const AttentionArgs& args, const AttentionUnit* units,
                            uint32_t unit_count, AttentionKind kind, const Launch& on);

// Writes out for every split token from its partial records. on.overlap: an overlapped launch.
cudaError_t attention_reduce(const AttentionArgs& args, const AttentionReduceUnit* units,
                             uint32_t unit_count, const Launch& on);

// Dynamic shared memory one block of `kind` needs for this head_dim and group (for tests and
// benchmarks; paged_attention sets the attribute itself).
size_t paged_attention_smem_bytes(uint32_t head_dim, uint32_t group, AttentionKind kind);

}  // namespace headway::models::cuda::kernels
