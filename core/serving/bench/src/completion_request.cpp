#include "headway/serving/bench/completion_request.h"

#include <fmt/format.h>
#include <headway/core/error.h>

#include <limits>
#include <nlohmann/json.hpp>

namespace headway::serving::bench {

TokenIdRange token_id_range(std::optional<uint32_t> vocab) {
  if (!vocab) return TokenIdRange{};
  if (*vocab == 0 || *vocab > static_cast<uint32_t>(std::numeric_limits<int32_t>::max())) {
    throw core::Error(fmt::format("vocabulary size {} is out of range [1, {}]", *vocab,
                                  std::numeric_limits<int32_t>::max()));
  }
  const auto end = static_cast<int32_t>(*vocab);
  return TokenIdRange{end > 64 ? 32 : 0, end};
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
