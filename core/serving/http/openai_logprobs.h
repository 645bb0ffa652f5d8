// A choice's "logprobs", in the two shapes of OpenAI's endpoints (as vLLM serves them):
// - completions: {"tokens": [...], "token_logprobs": [...], "top_logprobs": [{text: logprob}],
//   "text_offset": [...]}; each top_logprobs object holds the `top` most likely tokens and the
//   generated one (up to top + 1 entries, as OpenAI documents), keyed by their text;
// - chat: {"content": [{"token", "logprob", "bytes", "top_logprobs": [{"token", "logprob",
//   "bytes"}]}]}, with `top` entries in each top_logprobs.
// A token's text is its own decoding with invalid UTF-8 replaced by U+FFFD (a byte of a
// character split across tokens shows as U+FFFD); chat's "bytes" keeps the raw bytes.
//
// Threading: one per response, on its handler's thread (it carries the completions' text offset
// from one chunk of a stream to the next).
#pragma once

#include <headway/serving/request_stream.h>

#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <span>

#include "openai_response.h"

namespace headway::serving::http {

class LogprobsJson {
 public:
  // `top` < 0: the client asked for no logprobs, and value() is null.
  LogprobsJson(Endpoint endpoint, int32_t top) : endpoint_(endpoint), top_(top) {}

  // The "logprobs" of a choice whose tokens (since the previous call, for a stream) are `tokens`.
  nlohmann::ordered_json value(std::span<const GeneratedLogprobs> tokens);

  bool asked() const { return top_ >= 0; }

 private:
  nlohmann::ordered_json completions(std::span<const GeneratedLogprobs> tokens);
  nlohmann::ordered_json chat(std::span<const GeneratedLogprobs> tokens) const;

  Endpoint endpoint_;
  int32_t top_;
  size_t text_offset_ = 0;  // completions: characters of the tokens before this call's
};

}  // namespace headway::serving::http
