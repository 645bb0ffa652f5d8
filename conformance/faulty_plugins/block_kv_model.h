// A toy model that keeps real KV in the blocks the host gives it: one float per position (a
// function of the token and the position), and logits for a position that read the KV of every
// earlier position through the block table. Right as written; each faulty model built on it
// changes where KV is written or read through one of the two hooks.
//
// Threading: one instance is called from one thread at a time (abi.h).
#pragma once

#include <cmath>
#include <headway/plugin.hpp>
#include <vector>

#include "tiny_logits_model.h"

namespace headway::conformance::faulty {

class BlockKvModel : public headway::sdk::Model {
 public:
  BlockKvModel(const headway::sdk::Host&, const headway::sdk::Options&, const std::string&) {}
  hw_model_info info() const override { return tiny_logits_model_info(); }
  void init_kv(uint32_t block_count, uint32_t block_size) override {
    kv_.assign(size_t{block_count} * kv_block_size(block_size), 0.0f);
  }
  void forward(const hw_model_batch& batch, hw_model_output& out) override {
    const uint32_t size = kv_block_size(batch.block_size);
    // The step's KV first, as a real model writes it before attention reads it.
    for (uint32_t i = 0; i < batch.slice_count; ++i) {
      const hw_model_slice& s = batch.slices[i];
      for (uint32_t k = 0; k < s.tokens; ++k) {
        const uint32_t p = s.start + k;
        slot(s, p, size) = std::sin(0.37f * static_cast<float>(s.token_ids[k]) + 0.011f * p);
      }
      after_slice(s, size);
    }
    uint32_t row = 0;
    for (uint32_t i = 0; i < batch.slice_count; ++i) {
      const hw_model_slice& s = batch.slices[i];
      if (!s.sample && !s.all_logits) continue;
      const uint32_t first = s.all_logits ? s.start : s.start + s.tokens - 1;
      for (uint32_t p = first; p < s.start + s.tokens; ++p) {
        float sum = 0.0f;
        for (uint32_t q = 0; q <= p; ++q) sum += slot(s, q, size) * (1.0f + 0.001f * q);
        for (uint32_t v = 0; v < kTinyVocab; ++v) {
          out.logits[size_t{row} * kTinyVocab + v] =
              std::sin(sum + 0.21f * v) + 0.1f * std::cos(0.5f * v);
        }
        ++row;
      }
    }
    out.seconds = 1e-3;
  }

 protected:
  // The block size the model addresses KV with: the host's (a faulty model keeps its own).
  virtual uint32_t kv_block_size(uint32_t host_block_size) const { return host_block_size; }
  // Runs after a slice's KV is written (a faulty model writes more there).
  virtual void after_slice(const hw_model_slice&, uint32_t) {}
  float& slot(const hw_model_slice& s, uint32_t position, uint32_t block_size) {
    return kv_[size_t{s.block_table[position / block_size]} * block_size + position % block_size];
  }
  std::vector<float> kv_;
};

}  // namespace headway::conformance::faulty
