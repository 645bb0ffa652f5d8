// Turns a request's output token ids into text as they arrive: holds back bytes of an incomplete
// UTF-8 sequence and any tail that could still become a stop string, and reports when a stop string
// matched (the matched text and everything after it is never returned).
//
// Ownership/threading: one decoder per request, used by one thread at a time (the consumer of the
// request's RequestStream).
#pragma once

#include <algorithm>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <variant>

namespace headway::serving {

// What ended a request, as vLLM's stop_reason reports it: the stop string that matched, or the
// entry of stop_token_ids the request ended on; monostate for anything else (EOS, max_tokens, not
// ended yet).
using StopReason = std::variant<std::monostate, std::string, int32_t>;

// The stop token id that `ids` ends on, if any. A stop token ends the request, so only the last id
// of a request's output can be one; every decoder checks the same way. `before`: outputs that came
// before `ids`; a stop token id does not count among the first `min_tokens` outputs (the engine
// does not end a request on it there either).
inline std::optional<int32_t> trailing_stop_token(std::span<const int32_t> ids,
                                                  std::span<const int32_t> stop_token_ids,
                                                  size_t before = 0, uint32_t min_tokens = 0) {
  if (ids.empty() || before + ids.size() <= min_tokens ||
      std::find(stop_token_ids.begin(), stop_token_ids.end(), ids.back()) == stop_token_ids.end()) {
    return std::nullopt;
  }
  return ids.back();
}

class IncrementalDecoder {
 public:
  virtual ~IncrementalDecoder() = default;
  // Appends generated tokens; returns the text that became final. After a stop string matched,
  // returns only the text before it, and nothing on later calls.
  virtual std::string append(std::span<const int32_t> ids) = 0;
  // The stop string that matched or the stop token id that arrived, once either happened.
  virtual StopReason stop_reason() const = 0;
  // True once a stop string matched (the request must then be ended upstream).
  bool stopped() const { return std::holds_alternative<std::string>(stop_reason()); }
  // At the end of the request: the text still held back (empty after a stop string matched).
  virtual std::string flush() = 0;
  // The bytes of one token's text decoded alone (logprobs name tokens by it); not necessarily
  // valid UTF-8. Empty without a tokenizer.
  virtual std::string token_bytes(int32_t id) const = 0;
};

}  // namespace headway::serving
