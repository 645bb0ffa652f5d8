// The host side of one step: checks the engine's batch, then lays out everything the kernels need
// (token ids, positions, KV slot offsets, block tables, attention work units, sampled rows and
// their sampling parameters) in one pinned staging area, so that each GPU receives a step with one
// host-to-device copy.
//
// Attention work: slices of more than one token are cut into prefill tiles of
// prefill_tile_rows / group tokens; a decode token (a 1-token slice) whose context exceeds
// kKeysPerSplit keys is split into up to kMaxSplits key ranges, merged by attention_reduce.
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
};

// Where each array starts in the staging area (bytes), identical on the device copy.
struct StepOffsets {
  size_t token_ids = 0, positions = 0, slot_offsets = 0, block_tables = 0, sample_rows = 0,
         sample_params = 0, prefill_units = 0, decode_units = 0, reduce_units = 0, total = 0;
};

class StepPlan {
 public:
  static constexpr uint32_t kKeysPerSplit = 256;
  static constexpr uint32_t kMaxSplits = 16;

  // Checks the batch and builds the plan. Throws sdk::Error(HW_INVALID_ARGUMENT) naming the slice
  // (index and request) and what is wrong, before anything reaches a device.
  void build(const hw_model_batch& batch, const kernels::KvLayout& kv, const StepLimits& limits);

  uint32_t tokens() const { return static_cast<uint32_t>(token_ids_.size()); }
  uint32_t sample_count() const { return static_cast<uint32_t>(sample_rows_.size()); }
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

  const StepOffsets& offsets() const { return offsets_; }
  const std::byte* staging() const { return staging_.data(); }

 private:
  void pack();

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
  uint32_t heads_ = 0;
  StepOffsets offsets_;
  PinnedBuffer<std::byte> staging_;
};

}  // namespace headway::models::cuda
