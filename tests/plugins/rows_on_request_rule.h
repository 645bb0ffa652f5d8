// The arithmetic of test_rows_on_request_model, shared with the tests that predict its tokens.
#pragma once

#include <cstdint>

namespace headway::test::rows_on_request {

inline constexpr uint32_t kVocab = 64;
// Every other token's logit is 0: a host sampler at temperature 1 draws another token with a
// probability of 63 e^-20 (about 1e-7) per token, and with a fixed seed never in the tests.
inline constexpr float kFavouriteLogit = 20.0f;

// The most likely token after `token` at `position`: the greedy choice.
inline int32_t favourite(int32_t token, uint32_t position) {
  return static_cast<int32_t>((static_cast<uint32_t>(token) * 5u + position + 3u) % kVocab);
}

// What the model's own ("device") sampler picks there: the favourite when greedy, and at any
// temperature the token after it (which a host sampler would practically never draw), so that a
// test tells which side sampled a token.
inline int32_t device_pick(int32_t token, uint32_t position, float temperature) {
  const int32_t best = favourite(token, position);
  return temperature == 0.0f ? best
                             : static_cast<int32_t>((static_cast<uint32_t>(best) + 1u) % kVocab);
}

}  // namespace headway::test::rows_on_request
