#include "headway/serving/bench/completion_request.h"

#include <fmt/format.h>
#include <headway/core/error.h>

#include <limits>
#include <nlohmann/json.hpp>

namespace headway::serving::bench {

namespace {

// SplitMix64 (Steele, Lea, Flood 2014): a tiny, well-mixed generator whose output is the same on
// every platform, unlike std:: distributions.
uint64_t splitmix64(uint64_t& state) {
  uint64_t z = (state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

}  // namespace

TokenIdRange token_id_range(std::optional<uint32_t> vocab) {
  if (!vocab) return TokenIdRange{};
  if (*vocab == 0 || *vocab > static_cast<uint32_t>(std::numeric_limits<int32_t>::max())) {
    throw core::Error(fmt::format("vocabulary size {} is out of range [1, {}]", *vocab,
                                  std::numeric_limits<int32_t>::max()));
  }
  const auto end = static_cast<int32_t>(*vocab);
  return TokenIdRange{end > 64 ? 32 : 0, end};
}

std::vector<int32_t> synthetic_prompt(uint64_t seed, uint64_t request_id, uint32_t length,
                                      TokenIdRange range) {
  uint64_t state = seed * 0x2545F4914F6CDD1Dull ^ request_id;
  const auto span = static_cast<uint64_t>(range.end - range.first);
  std::vector<int32_t> ids(length);
  for (int32_t& id : ids) id = range.first + static_cast<int32_t>(splitmix64(state) % span);
  return ids;
}

std::string completion_body(const core::WorkloadRequest& request, std::string_view class_name,
                            std::string_view model, const std::vector<int32_t>& prompt) {
  nlohmann::json body = {
      {"prompt", prompt},
      {"max_tokens", request.output_tokens},
      {"ignore_eos", true},
      // Token ids per chunk (vLLM's extension): tokens are counted even when they have no text,
      // as with random weights, whose ids mostly lie outside the byte tokenizer.
      {"return_token_ids", true},
      {"stream", true},
      {"stream_options", {{"include_usage", true}}},
      {"request_class", class_name},
  };
  if (!model.empty()) body["model"] = model;
  // vLLM's and Headway's extension; sent only when the workload sets one, so that a server
  // without priority scheduling is not asked for it.
  if (request.priority != 0) body["priority"] = request.priority;
  return body.dump();
}

}  // namespace headway::serving::bench
