// Rotary position embeddings as Hugging Face Llama applies them ("rotate_half": dimension i pairs
// with i + head_dim/2), with the llama3 frequency scaling of Llama 3.1+.
//
// Ownership: owns its frequency table; tables and vectors passed in are borrowed.
// Threading: const methods are safe from any thread.
#pragma once

#include <cstdint>
#include <vector>

#include "llama_config.h"

namespace headway::models::cpu {

class Rope {
 public:
  explicit Rope(const LlamaConfig& config);

  uint32_t half() const { return static_cast<uint32_t>(inv_freq_.size()); }

  // Writes cos and sin of position * inv_freq for `count` positions: [count x half] each. Angles
  // are computed in double so that long positions keep full float accuracy.
  void table(const uint32_t* positions, uint32_t count, float* cos_out, float* sin_out) const;

  // Rotates `heads` heads of `head_dim` floats (contiguous) in place for one token, given that
  // token's cos/sin rows.
  static void apply(float* x, uint32_t heads, uint32_t head_dim, const float* cos_row,
                    const float* sin_row);

  const std::vector<double>& inverse_frequencies() const { return inv_freq_; }

 private:
  std::vector<double> inv_freq_;
};

}  // namespace headway::models::cpu
