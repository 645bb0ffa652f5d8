// Token sampling from logits, in the core and shared by every model that returns logits
// (hw_model_info.returns_logits): greedy, temperature, top-k, top-p (nucleus) and min-p, applied in
// the order of Hugging Face's warpers (temperature, top-k, top-p, min-p).
//
// Determinism: the random draw depends only on (params.seed, output_index), through a counter-based
// generator (splitmix64), never on call order. A request therefore gets the same tokens for the
// same seed however it is batched, preempted or interleaved with others. Ties between equal
// logits resolve to the lower token id.
//
// Ownership: a Sampler owns scratch buffers sized to the largest vocabulary it has seen, so that
// after the first call it does not allocate. `logits` is borrowed and used as scratch (its
// contents are unspecified after the call).
// Threading: one Sampler per thread (an engine owns one); distinct Samplers are independent.
#pragma once

#include <headway/core/sampling_params.h>

#include <cstdint>
#include <span>
#include <vector>

namespace headway::core {

class Sampler {
 public:
  // Returns the chosen token id in [0, logits.size()). Throws Error(HW_INVALID_ARGUMENT) on empty
  // logits or out-of-range parameters (temperature < 0, top_p outside (0, 1], min_p outside
  // [0, 1]). NaN logits are never chosen unless every logit is NaN (then token 0).
  int32_t sample(std::span<float> logits, const SamplingParams& params, uint32_t output_index);

  // The uniform draw in [0, 1) used for (seed, output_index); exposed for tests.
  static double uniform(uint64_t seed, uint32_t output_index);

 private:
  std::vector<int32_t> candidates_;
};

}  // namespace headway::core
