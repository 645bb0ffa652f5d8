// The host side of one step: checks the engine's batch, then lays out everything the kernels need
// (token ids, positions, KV slot offsets, block tables, attention work units, sampled rows and
// their sampling parameters) in one pinned staging area, so that each GPU receives a step with one
// host-to-device copy.
//
// Attention work: slices of more than one token are cut into prefill tiles of
// prefill_tile_rows / group tokens; a decode token (a 1-token slice) whose context exceeds
// StepLimits::decode_keys_per_split keys is split into up to kMaxSplits key ranges, merged by
// attention_reduce; when the step has too few decode tokens to give
// StepLimits::decode_blocks_wanted blocks (tokens x kv heads) that way, each is split further, down
// to kMinKeysPerSplit keys a range. Prefill tiles deep in a long context may be split the same way
// (StepLimits::prefill_split_min_keys).
//
// Graph steps: when StepLimits::graph_max_batch > 0 and every slice is one token (a decode step)
// of at most that many tokens, the plan is padded to a fixed shape, graph_key(), that a captured
// CUDA graph can replay (step_graphs.h): graph_batch_bucket() rows, the extra rows reading token 0
// at position 0 and writing no KV (slot -1); exactly graph_split_level() decode units per row (the
// real key ranges, then empty ones), merged by one reduce unit per row when that level is above 1;
// and every row a head row, the sampled ones first. Every array but the block tables then has a
// size fixed by the key, and the block tables come last, so each array's offset depends on the key
// alone. A real row's attention is the same arithmetic as unpadded (an empty range adds nothing).
//
// Logits for the host: the sampled rows of the slices the host samples itself (all of them with
// sampling = "host"; with device sampling those hw_model_batch.logits_wanted marks) and every
// position of a slice with all_logits (prompt log-probabilities). A slice's positions other than
// its sampled one become extra head rows after the sampled ones; logits_copies() then says which
// head rows go to which rows of hw_model_output.logits, in the ABI's order (headway::sdk::
// logits_rows). A step with all_logits slices is never a graph step.
//
// Ownership: owns its host vectors and the pinned staging buffer; they grow to the largest step
// seen and are reused (no allocation in steady state). The batch is borrowed during build().
// Threading: one thread at a time (the engine's).
#pragma once

#include <headway/abi.h>

#include <cstddef>
#include <cstdint>
#include <vector>

#include "attention.h"
#include "device_buffer.h"
#include "kv_layout.h"
#include "sampling.h"

namespace headway::models::cuda {

// StepLimits::decode_keys_per_split by default.
inline constexpr uint32_t kDecodeKeysPerSplit = 256;

struct StepLimits {
  uint32_t vocab = 0;
  uint32_t max_model_len = 0;
  uint32_t kv_blocks = 0;  // blocks in the cache (ids must be below)
  uint32_t group = 0;      // query heads per kv head (per GPU)
  bool sample_on_device = false;
  // Split long decodes (split-K attention). Off in deterministic mode: a split changes the
  // arithmetic of a row compared with the same position computed in a prefill chunk.
  bool split_decode = true;
  // Query rows (tokens x group) per prefill tile: kernels::attention_prefill_tile_rows() of the
  // kernel that will run the plan.
  uint32_t prefill_tile_rows = kernels::kAttentionTileRows;
  // Decode steps of at most this many tokens are padded for a CUDA graph (above); 0 = never.
  uint32_t graph_max_batch = 0;
  // Decode attention blocks (units x kv heads) below which a step's decodes are split further, so
  // that a small batch still occupies the GPU: a batch-1 decode at context 1,024 is otherwise 4
  // units x 8 kv heads = 32 blocks on 132 SMs, each streaming 256 keys in turn. The model sets
  // kDecodeBlocksPerSm per SM; 0 = split by context alone.
  uint32_t decode_blocks_wanted = 0;
  // Prefill tiles too: when a step's prefill tiles give fewer than decode_blocks_wanted blocks
  // (tiles x kv heads), each tile of at least twice this many keys is split into key ranges, at
  // most one per this many keys (whole 32-key chunks, the last range what is left), merged by
  // attention_reduce like split decodes. A 32-token chunk at context 16,384 is otherwise one tile
  // per kv head, 8 blocks streaming every key in turn (43.9 ms on an H200 against 9.2 ms predicted
  // by the cost model's linear fit, docs/performance.md). 0 = off (the cuda model's
  // split_prefill_attention option; off until measured on a GPU).
  uint32_t prefill_split_min_keys = 0;
  // A decode's keys are split into ranges of about this many (at most kMaxSplits of them) whatever
  // the batch; 0 = not by context (decode_blocks_wanted may still split a small batch). The model
  // keeps the default; cuda_benchmark varies it to measure coarser ranges for large batches, whose
  // blocks fill the GPU unsplit (batch 64 x 8 kv heads = 512 blocks).
  uint32_t decode_keys_per_split = kDecodeKeysPerSplit;
  // Prefill units ordered by their number of keys, most first, instead of slice by slice in
  // position order. A GPU starts blocks in grid order, so in position order a long prompt's
  // deepest tiles, the longest blocks, start last and run on while other SMs idle: a 2,048-token
  // prefill's attention by a list-scheduling model of 132 SMs (scripts/prefill_block_order.py)
  // takes 1.31 times its even share in position order and 1.02 longest first. Only the lean
  // tilings' grid (kv heads fastest) starts every kv head of a unit together; the model sets this
  // for them (kernels::attention_prefill_longest_first(): not in deterministic mode).
  bool prefill_longest_first = false;
};

// StepLimits::prefill_split_min_keys when the cuda model's split_prefill_attention is on.
inline constexpr uint32_t kPrefillSplitMinKeys = 256;

// StepLimits::decode_blocks_wanted per SM. On an H200 (decode attention of Llama-3.1-8B's shape,
// docs/performance.md) 2 per SM cut a batch-1 step's attention at context 1,024 from 27 to 22 us
// against splitting by context alone and cost batch 8 1-2 us (30-31 against 32 us), where 4 per
// SM was 19% slower.
inline constexpr uint32_t kDecodeBlocksPerSm = 2;

// Rows a graph step of `tokens` tokens is padded to: 1, 2, 4, then multiples of 8, never above
// `max`; 0 when tokens is 0 or above max.
uint32_t graph_batch_bucket(uint32_t tokens, uint32_t max);

// head_rows consecutive head rows [head_row, head_row + rows) of the logits buffer go to the
// host's rows [out_row, out_row + rows).
struct LogitsCopy {
  uint32_t head_row = 0;
  uint32_t out_row = 0;
  uint32_t rows = 0;
  bool operator==(const LogitsCopy&) const = default;
};

// Where each array starts in the staging area (bytes), identical on the device copy.
struct StepOffsets {
  size_t token_ids = 0, positions = 0, slot_offsets = 0, block_tables = 0, sample_rows = 0,
         sample_params = 0, prefill_units = 0, decode_units = 0, reduce_units = 0, total = 0;
};

class StepPlan {
 public:
  static constexpr uint32_t kMinKeysPerSplit = 64;  // one tile of the decode kernel
  static constexpr uint32_t kMaxSplits = 16;

  // Checks the batch and builds the plan: layout(), then the copy into pinned staging memory.
  void build(const hw_model_batch& batch, const kernels::KvLayout& kv, const StepLimits& limits);
  // The plan without the staging copy (what tests on machines without a GPU inspect). Throws
  // sdk::Error(HW_INVALID_ARGUMENT) naming the slice (index and request) and what is wrong, before
  // anything reaches a device.
  void layout(const hw_model_batch& batch, const kernels::KvLayout& kv, const StepLimits& limits);

  // Rows of the step (padding rows included).
  uint32_t tokens() const { return static_cast<uint32_t>(token_ids_.size()); }
  // Sampled rows: the first sample_count() head rows, in slice order.
  uint32_t sample_count() const { return static_cast<uint32_t>(sample_slices_.size()); }
  // Rows the LM head runs on: the sampled ones, then the other positions of all_logits slices, or
  // in a graph step every other row.
  uint32_t head_rows() const { return static_cast<uint32_t>(sample_rows_.size()); }
  // 0 for a step run launch by launch; otherwise the shape of a graph step (rows and split level),
  // the same for every step whose device arrays sit at the same offsets with the same sizes.
  uint64_t graph_key() const { return graph_key_; }
  uint32_t graph_split_level() const { return graph_splits_; }
  uint32_t prefill_unit_count() const { return static_cast<uint32_t>(prefill_.size()); }
  // Query rows (tokens x group) of the largest prefill unit: AttentionArgs::max_prefill_rows.
  uint32_t max_prefill_rows() const { return max_prefill_rows_; }
  uint32_t decode_unit_count() const { return static_cast<uint32_t>(decode_.size()); }
  uint32_t reduce_unit_count() const { return static_cast<uint32_t>(reduce_.size()); }
  // Partial records per kv-head-independent record space: splits x tokens x heads (all heads of
  // the model per GPU, i.e. group * kv heads).
  uint32_t partial_records() const { return partial_records_; }
  // Slice index of each sampled row, in order.
  const std::vector<uint32_t>& sample_slices() const { return sample_slices_; }
  // The logits rows the host gets (hw_model_output.logits_rows) and where each comes from, in
  // output order, adjacent runs merged.
  uint32_t logits_rows() const { return logits_rows_; }
  const std::vector<LogitsCopy>& logits_copies() const { return logits_copies_; }

  const StepOffsets& offsets() const { return offsets_; }
  const std::byte* staging() const { return staging_.data(); }

  // The host arrays, for tests.
  const std::vector<int64_t>& slot_offsets() const { return slot_offsets_; }
  const std::vector<int32_t>& head_row_indices() const { return sample_rows_; }
  const std::vector<kernels::AttentionUnit>& decode_units() const { return decode_; }
  const std::vector<kernels::AttentionUnit>& prefill_units() const { return prefill_; }
  const std::vector<kernels::AttentionReduceUnit>& reduce_units() const { return reduce_; }

 private:
  // Pads a decode-only plan to `rows` rows of `splits` units each (see "Graph steps" above).
  void pad_for_graph(uint32_t rows, uint32_t splits);
  // Appends the attention units of `tokens` rows from `row` (the first at position `pos`) over
  // keys [0, keys): one unit writing the output, or, when `splits` (at least 1) is more, the keys
  // cut into about that many ranges of whole chunks, each writing partial records, and a reduce
  // unit that merges them. Returns the number of ranges made.
  uint32_t add_units(std::vector<kernels::AttentionUnit>& units, int32_t row, int32_t pos,
                     uint32_t tokens, int32_t table, uint32_t keys, uint32_t splits);
  // Adds the all_logits slices' other positions as head rows and lays out logits_copies_.
  void plan_logits_rows(const hw_model_batch& batch, bool every_sampled_row);
  void add_copy(uint32_t head_row, uint32_t rows);
  void place_arrays();
  void stage();

  std::vector<int32_t> token_ids_;
  std::vector<int32_t> positions_;
  std::vector<int64_t> slot_offsets_;
  std::vector<int32_t> block_tables_;
  std::vector<int32_t> sample_rows_;
  std::vector<uint32_t> sample_slices_;
  std::vector<kernels::SampleParams> sample_params_;
  std::vector<kernels::AttentionUnit> prefill_;
  std::vector<kernels::AttentionUnit> decode_;
  std::vector<kernels::AttentionReduceUnit> reduce_;
  uint32_t partial_records_ = 0;
  uint32_t max_prefill_rows_ = 0;
  uint32_t max_splits_ = 0;  // most decode units of one row
  uint32_t heads_ = 0;
  uint64_t graph_key_ = 0;
  uint32_t graph_splits_ = 0;
  // pad_for_graph()'s scratch, kept to reuse its capacity.
  std::vector<kernels::AttentionUnit> padded_units_;
  std::vector<uint8_t> is_head_row_;
  // Per slice: its index among the sampled rows, or -1.
  std::vector<int32_t> sample_index_;
  std::vector<LogitsCopy> logits_copies_;
  uint32_t logits_rows_ = 0;
  StepOffsets offsets_;
  PinnedBuffer<std::byte> staging_;
};

}  // namespace headway::models::cuda
