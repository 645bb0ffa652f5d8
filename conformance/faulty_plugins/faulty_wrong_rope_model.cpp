// Faulty on purpose: the CPU reference model with a wrong rotary embedding. Everything in this file
// is plugins/models/cpu/rope.cpp except Rope::apply(), which pairs dimensions GPT-J style (2i with
// 2i + 1) instead of Hugging Face Llama's rotate_half (i with i + head_dim/2): a classic porting
// bug that chunking and batching tests cannot see, since the model stays consistent with itself.
// The suite must report model.reference_logits as FAIL.
#include <cmath>
#include <numbers>

#include "rope.h"

namespace headway::models::cpu {

Rope::Rope(const LlamaConfig& c) {
  const uint32_t half = c.head_dim / 2;
  inv_freq_.resize(half);
  for (uint32_t i = 0; i < half; ++i) {
    inv_freq_[i] = 1.0 / std::pow(c.rope_theta, (2.0 * i) / c.head_dim);
  }
  if (c.rope_scaling.llama3) {
    // transformers' _compute_llama3_parameters: wavelengths longer than the original context /
    // low_freq_factor are slowed down by `factor`, shorter than original / high_freq_factor are
    // kept, and the band between is interpolated smoothly.
    const RopeScaling& s = c.rope_scaling;
    const double low_wavelen = s.original_max_position_embeddings / s.low_freq_factor;
    const double high_wavelen = s.original_max_position_embeddings / s.high_freq_factor;
    for (double& f : inv_freq_) {
      const double wavelen = 2.0 * std::numbers::pi / f;
      if (wavelen < high_wavelen) continue;
      if (wavelen > low_wavelen) {
        f /= s.factor;
        continue;
      }
      const double smooth = (s.original_max_position_embeddings / wavelen - s.low_freq_factor) /
                            (s.high_freq_factor - s.low_freq_factor);
      f = (1.0 - smooth) * f / s.factor + smooth * f;
    }
  }
}

void Rope::table(const uint32_t* positions, uint32_t count, float* cos_out, float* sin_out) const {
  const uint32_t h = half();
  for (uint32_t t = 0; t < count; ++t) {
    const double p = positions[t];
    for (uint32_t i = 0; i < h; ++i) {
      const double a = p * inv_freq_[i];
      cos_out[static_cast<size_t>(t) * h + i] = static_cast<float>(std::cos(a));
      sin_out[static_cast<size_t>(t) * h + i] = static_cast<float>(std::sin(a));
    }
  }
}

void Rope::apply(float* x, uint32_t heads, uint32_t head_dim, const float* cos_row,
                 const float* sin_row) {
  const uint32_t half = head_dim / 2;
  for (uint32_t h = 0; h < heads; ++h) {
    float* a = x + static_cast<size_t>(h) * head_dim;
    for (uint32_t i = 0; i < half; ++i) {
      const size_t even = size_t{2} * i;
      const float x1 = a[even];
      const float x2 = a[even + 1];
      a[even] = x1 * cos_row[i] - x2 * sin_row[i];
      a[even + 1] = x2 * cos_row[i] + x1 * sin_row[i];
    }
  }
}

}  // namespace headway::models::cpu
