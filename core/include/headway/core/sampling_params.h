// How one request wants its tokens chosen. Shared by the engine (stop conditions), the core sampler
// (for models that return logits) and models that sample on their device.
#pragma once

#include <cstdint>
#include <vector>

namespace headway::core {

struct SamplingParams {
  float temperature = 0.0f;             // 0: greedy
  float top_p = 1.0f;                   // 1: off
  uint32_t top_k = 0;                   // 0: off
  float min_p = 0.0f;                   // 0: off
  uint64_t seed = 0;                    // same seed, same tokens
  bool ignore_eos = false;              // keep generating past the model's end-of-sequence token
  std::vector<int32_t> stop_token_ids;  // finish (reason "stop") when one is sampled
};

}  // namespace headway::core
