#include "step_plan.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <headway/sdk/model.hpp>
#include <headway/sdk/status.hpp>
#include <string>

namespace headway::models::cuda {
namespace {

[[noreturn]] void bad_slice(uint32_t index, const hw_model_slice& s, const std::string& what) {
  throw sdk::Error(HW_INVALID_ARGUMENT, "cuda model: slice " + std::to_string(index) +
                                            " (request " + std::to_string(s.request_id) +
                                            "): " + what);
}

size_t align16(size_t n) { return (n + 15) / 16 * 16; }

template <class T>
size_t place(size_t& at, const std::vector<T>& v) {
  const size_t here = at;
  at = align16(at + v.size() * sizeof(T));
  return here;
}

// Decode units per row in a graph step: the next power of two of the most any row needs, so that
// a batch's split-K level changes (and a new graph is captured) only when its longest context
// doubles.
uint32_t split_level_for(uint32_t splits) {
  uint32_t level = 1;
  while (level < splits) level *= 2;
  return level;
}

// Splits each of `units` attention units may take so that units x kv heads blocks reach `wanted`
// (1: they do already, or nothing is wanted).
uint32_t splits_to_fill(uint64_t units, uint32_t kv_heads, uint32_t wanted) {
  const uint64_t blocks = units * kv_heads;
  return blocks == 0 ? 1
                     : static_cast<uint32_t>(std::max<uint64_t>(1, (wanted + blocks - 1) / blocks));
}

}  // namespace

uint32_t graph_batch_bucket(uint32_t tokens, uint32_t max) {
  if (tokens == 0 || tokens > max) return 0;
  const uint32_t bucket = tokens <= 4 ? (tokens <= 1   ? 1
                                         : tokens <= 2 ? 2
                                                       : 4)
                                      : (tokens + 7) / 8 * 8;
  return std::min(bucket, max);
}

void StepPlan::build(const hw_model_batch& batch, const kernels::KvLayout& kv,
                     const StepLimits& limits) {
  layout(batch, kv, limits);
  stage();
}

void StepPlan::layout(const hw_model_batch& batch, const kernels::KvLayout& kv,
                      const StepLimits& limits) {
  if (batch.slice_count > 0 && batch.slices == nullptr) {
    throw sdk::Error(HW_INVALID_ARGUMENT, "cuda model: batch.slices is NULL");
  }
  if (batch.block_size != kv.block_size) {
    throw sdk::Error(HW_INVALID_ARGUMENT,
                     "cuda model: batch block_size " + std::to_string(batch.block_size) +
                         " differs from init_kv's " + std::to_string(kv.block_size));
  }
  token_ids_.clear();
  positions_.clear();
  slot_offsets_.clear();
  block_tables_.clear();
  sample_rows_.clear();
  sample_slices_.clear();
  sample_params_.clear();
  prefill_.clear();
  decode_.clear();
  reduce_.clear();
  partial_records_ = 0;
  max_prefill_rows_ = 0;
  max_splits_ = 0;
  graph_key_ = 0;
  graph_splits_ = 0;
  sample_index_.assign(batch.slice_count, -1);
  bool any_all_logits = false;

  const uint32_t bs = kv.block_size;
  const uint32_t group = limits.group;
  heads_ = group * kv.kv_heads;
  const uint32_t tile = group >= limits.prefill_tile_rows ? 1 : limits.prefill_tile_rows / group;
  const uint64_t block_elems = kv.block_elems();
  // Splits each decode token, and each prefill tile, may take to reach
  // limits.decode_blocks_wanted blocks (1: none). The two kinds run as separate launches.
  uint64_t decode_tokens = 0;
  uint64_t prefill_tiles = 0;
  for (uint32_t i = 0; i < batch.slice_count; ++i) {
    const uint32_t tokens = batch.slices[i].tokens;
    if (tokens == 1) ++decode_tokens;
    if (tokens > 1) prefill_tiles += (tokens + tile - 1) / tile;
  }
  const uint32_t decode_splits_to_fill =
      splits_to_fill(decode_tokens, kv.kv_heads, limits.decode_blocks_wanted);
  const uint32_t prefill_splits_to_fill =
      limits.split_decode && limits.prefill_split_min_keys > 0
          ? splits_to_fill(prefill_tiles, kv.kv_heads, limits.decode_blocks_wanted)
          : 1;
  for (uint32_t i = 0; i < batch.slice_count; ++i) {
    const hw_model_slice& s = batch.slices[i];
    if (s.tokens == 0) bad_slice(i, s, "has no tokens");
    const uint64_t end = uint64_t{s.start} + s.tokens;
    if (end > limits.max_model_len) {
      bad_slice(i, s,
                "positions up to " + std::to_string(end) + " exceed max_model_len " +
                    std::to_string(limits.max_model_len));
    }
    if (s.token_ids == nullptr) bad_slice(i, s, "token_ids is NULL (the model needs ids)");
    if (s.block_table == nullptr || uint64_t{s.block_count} * bs < end) {
      bad_slice(i, s,
                "block table of " + std::to_string(s.block_count) + " blocks of " +
                    std::to_string(bs) + " does not cover position " + std::to_string(end - 1));
    }
    const uint32_t needed = static_cast<uint32_t>((end + bs - 1) / bs);
    const int32_t table = static_cast<int32_t>(block_tables_.size());
    for (uint32_t b = 0; b < needed; ++b) {
      if (s.block_table[b] >= limits.kv_blocks) {
        bad_slice(i, s,
                  "block id " + std::to_string(s.block_table[b]) + " is beyond the " +
                      std::to_string(limits.kv_blocks) + " blocks of the cache");
      }
      block_tables_.push_back(static_cast<int32_t>(s.block_table[b]));
    }
    const int32_t first_row = static_cast<int32_t>(token_ids_.size());
    for (uint32_t t = 0; t < s.tokens; ++t) {
      const int32_t id = s.token_ids[t];
      if (id < 0 || static_cast<uint32_t>(id) >= limits.vocab) {
        bad_slice(i, s,
                  "token id " + std::to_string(id) + " at position " + std::to_string(s.start + t) +
                      " is outside the vocabulary of " + std::to_string(limits.vocab));
      }
      const uint32_t pos = s.start + t;
      token_ids_.push_back(id);
      positions_.push_back(static_cast<int32_t>(pos));
      slot_offsets_.push_back(static_cast<int64_t>(s.block_table[pos / bs] * block_elems +
                                                   uint64_t{pos % bs} * kv.head_dim));
    }
    any_all_logits = any_all_logits || s.all_logits != 0;
    if (s.sample) {
      sample_index_[i] = static_cast<int32_t>(sample_rows_.size());
      if (limits.sample_on_device) {
        if (!(s.temperature >= 0.0f) || !std::isfinite(s.temperature)) {
          bad_slice(i, s, "temperature must be >= 0, got " + std::to_string(s.temperature));
        }
        if (!(s.top_p > 0.0f && s.top_p <= 1.0f)) {
          bad_slice(i, s, "top_p must be in (0, 1], got " + std::to_string(s.top_p));
        }
        if (!(s.min_p >= 0.0f && s.min_p <= 1.0f)) {
          bad_slice(i, s, "min_p must be in [0, 1], got " + std::to_string(s.min_p));
        }
      }
      sample_rows_.push_back(first_row + static_cast<int32_t>(s.tokens) - 1);
      sample_slices_.push_back(i);
      sample_params_.push_back(kernels::SampleParams{s.temperature, s.top_p, s.min_p, s.top_k,
                                                     s.seed, s.output_index, 0});
    }

    if (s.tokens == 1) {
      // Decode: split long contexts so that a small batch still fills the GPU.
      const uint32_t keys = s.start + 1;
      uint32_t splits = 1;
      if (limits.split_decode) {
        const uint32_t per_split = limits.decode_keys_per_split;
        const uint32_t by_context = per_split == 0 ? 1 : (keys + per_split - 1) / per_split;
        const uint32_t finest = (keys + kMinKeysPerSplit - 1) / kMinKeysPerSplit;
        splits = std::min(kMaxSplits,
                          std::max(by_context, std::min<uint32_t>(decode_splits_to_fill, finest)));
      }
      const uint32_t made =
          add_units(decode_, first_row, static_cast<int32_t>(s.start), 1, table, keys, splits);
      max_splits_ = std::max(max_splits_, made);
    } else {
      for (uint32_t t0 = 0; t0 < s.tokens; t0 += tile) {
        const uint32_t n = std::min(tile, s.tokens - t0);
        max_prefill_rows_ = std::max(max_prefill_rows_, n * group);
        const uint32_t keys = s.start + t0 + n;  // the tile's last row sees them all
        uint32_t splits = 1;
        if (prefill_splits_to_fill > 1) {
          splits =
              std::min({kMaxSplits, prefill_splits_to_fill, keys / limits.prefill_split_min_keys});
        }
        add_units(prefill_, first_row + static_cast<int32_t>(t0),
                  static_cast<int32_t>(s.start + t0), n, table, keys, std::max(1u, splits));
      }
    }
  }
  if (limits.prefill_longest_first) {
    // In place: std::sort takes no memory (std::stable_sort may); the units are independent, so
    // the order of equal ones does not matter.
    std::sort(prefill_.begin(), prefill_.end(),
              [](const kernels::AttentionUnit& a, const kernels::AttentionUnit& b) {
                return a.key_end - a.key_begin > b.key_end - b.key_begin;
              });
  }
  plan_logits_rows(batch, !limits.sample_on_device);
  if (prefill_.empty() && !any_all_logits) {
    const uint32_t rows = graph_batch_bucket(tokens(), limits.graph_max_batch);
    if (rows > 0) pad_for_graph(rows, split_level_for(max_splits_));
  }
  place_arrays();
}

void StepPlan::plan_logits_rows(const hw_model_batch& batch, bool every_sampled_row) {
  logits_copies_.clear();
  logits_rows_ = 0;
  const uint8_t* wanted = sdk::logits_wanted(batch);
  int32_t first_row = 0;  // the slice's first row in the step
  for (uint32_t i = 0; i < batch.slice_count; ++i) {
    const hw_model_slice& s = batch.slices[i];
    const bool sampled_row_wanted =
        s.sample != 0 && (every_sampled_row || (wanted != nullptr && wanted[i] != 0));
    if (s.all_logits != 0) {
      // Its positions before the sampled one (all of them when it does not sample) are head rows
      // of their own, greedy like graph padding rows, whose ids nobody reads.
      const uint32_t others = s.tokens - (s.sample != 0 ? 1u : 0u);
      if (others > 0) {
        add_copy(static_cast<uint32_t>(sample_rows_.size()), others);
        for (uint32_t t = 0; t < others; ++t) {
          sample_rows_.push_back(first_row + static_cast<int32_t>(t));
          sample_params_.push_back(kernels::SampleParams{0.0f, 1.0f, 0.0f, 0, 0, 0, 0});
        }
      }
      if (s.sample != 0) add_copy(static_cast<uint32_t>(sample_index_[i]), 1);
    } else if (sampled_row_wanted) {
      add_copy(static_cast<uint32_t>(sample_index_[i]), 1);
    }
    first_row += static_cast<int32_t>(s.tokens);
  }
}

void StepPlan::add_copy(uint32_t head_row, uint32_t rows) {
  if (!logits_copies_.empty()) {
    LogitsCopy& last = logits_copies_.back();
    if (last.head_row + last.rows == head_row) {
      last.rows += rows;
      logits_rows_ += rows;
      return;
    }
  }
  logits_copies_.push_back(LogitsCopy{head_row, logits_rows_, rows});
  logits_rows_ += rows;
}

uint32_t StepPlan::add_units(std::vector<kernels::AttentionUnit>& units, int32_t row, int32_t pos,
                             uint32_t tokens, int32_t table, uint32_t keys, uint32_t splits) {
  const uint32_t chunks = (keys + kernels::kAttentionChunk - 1) / kernels::kAttentionChunk;
  const uint32_t per_split = (chunks + splits - 1) / splits;  // chunks per range
  splits = (chunks + per_split - 1) / per_split;
  const auto t = static_cast<int32_t>(tokens);
  if (splits == 1) {
    units.push_back({row, pos, t, table, 0, static_cast<int32_t>(keys), -1, 0});
    return 1;
  }
  // Range p's records: tokens x heads from partial + p * tokens * heads, as attention_reduce
  // reads them.
  const int32_t partial = static_cast<int32_t>(partial_records_);
  for (uint32_t p = 0; p < splits; ++p) {
    const uint32_t begin = p * per_split * kernels::kAttentionChunk;
    const uint32_t stop = std::min(keys, (p + 1) * per_split * kernels::kAttentionChunk);
    units.push_back({row, pos, t, table, static_cast<int32_t>(begin), static_cast<int32_t>(stop),
                     static_cast<int32_t>(partial_records_), 0});
    partial_records_ += tokens * heads_;
  }
  reduce_.push_back({row, t, partial, static_cast<int32_t>(splits)});
  return splits;
}

void StepPlan::pad_for_graph(uint32_t rows, uint32_t splits) {
  const uint32_t real = tokens();
  token_ids_.resize(rows, 0);
  positions_.resize(rows, 0);
  slot_offsets_.resize(rows, -1);

  // Head rows: the sampled rows, then every other row once (the final norm adds the last layer's
  // output into x in place, so a row listed twice would be added twice). Those extra rows sample
  // greedily and nobody reads their ids.
  is_head_row_.assign(rows, 0);
  for (const int32_t r : sample_rows_) is_head_row_[static_cast<size_t>(r)] = 1;
  for (uint32_t r = 0; r < rows; ++r) {
    if (is_head_row_[r] != 0) continue;
    sample_rows_.push_back(static_cast<int32_t>(r));
    sample_params_.push_back(kernels::SampleParams{0.0f, 1.0f, 0.0f, 0, 0, 0, 0});
  }

  // Exactly `splits` decode units per row: a row's own units (in row order, as build() made them),
  // then empty key ranges; above level 1 all of them write partial records, merged per row.
  padded_units_.clear();
  reduce_.clear();
  partial_records_ = 0;
  size_t next = 0;
  for (uint32_t r = 0; r < rows; ++r) {
    const int32_t row = static_cast<int32_t>(r);
    const int32_t first = static_cast<int32_t>(partial_records_);
    const auto record = [&](uint32_t p) {
      return splits > 1 ? first + static_cast<int32_t>(p * heads_) : -1;
    };
    uint32_t p = 0;
    for (; next < decode_.size() && decode_[next].q_row == row; ++next, ++p) {
      kernels::AttentionUnit u = decode_[next];
      u.partial = record(p);
      padded_units_.push_back(u);
    }
    const int32_t pos = r < real ? positions_[r] : 0;
    for (; p < splits; ++p) padded_units_.push_back({row, pos, 1, 0, 0, 0, record(p), 0});
    if (splits > 1) {
      reduce_.push_back({row, 1, first, static_cast<int32_t>(splits)});
      partial_records_ += splits * heads_;
    }
  }
  decode_.swap(padded_units_);
  graph_splits_ = splits;
  graph_key_ = (uint64_t{rows} << 8) | splits;
}

void StepPlan::place_arrays() {
  size_t at = 0;
  offsets_.token_ids = place(at, token_ids_);
  offsets_.positions = place(at, positions_);
  offsets_.slot_offsets = place(at, slot_offsets_);
  offsets_.sample_rows = place(at, sample_rows_);
  offsets_.sample_params = place(at, sample_params_);
  offsets_.prefill_units = place(at, prefill_);
  offsets_.decode_units = place(at, decode_);
  offsets_.reduce_units = place(at, reduce_);
  // Last: the one array whose size a graph step's key does not fix.
  offsets_.block_tables = place(at, block_tables_);
  offsets_.total = at;
}

void StepPlan::stage() {
  const size_t at = offsets_.total;
  if (staging_.size() < at) staging_.reserve(std::max(at, staging_.size() + staging_.size() / 2));
  std::byte* base = staging_.data();
  const auto copy = [&](size_t offset, const auto& v) {
    if (!v.empty()) std::memcpy(base + offset, v.data(), v.size() * sizeof(v[0]));
  };
  copy(offsets_.token_ids, token_ids_);
  copy(offsets_.positions, positions_);
  copy(offsets_.slot_offsets, slot_offsets_);
  copy(offsets_.block_tables, block_tables_);
  copy(offsets_.sample_rows, sample_rows_);
  copy(offsets_.sample_params, sample_params_);
  copy(offsets_.prefill_units, prefill_);
  copy(offsets_.decode_units, decode_);
  copy(offsets_.reduce_units, reduce_);
}

}  // namespace headway::models::cuda
