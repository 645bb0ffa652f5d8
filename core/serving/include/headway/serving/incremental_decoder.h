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
#include <vector>

namespace headway::serving {

// What ended a request, as vLLM's stop_reason reports it: the stop string that matched, or the
// entry of stop_token_ids the request ended on; monostate for anything else (EOS, max_tokens, not
// ended yet).
using StopReason = std::variant<std::monostate, std::string, int32_t>;

// What a request's decoder ends on, holds back and leaves out (vLLM's detokenization parameters).
struct DecodeOptions {
  // Text that ends the request. Its matched text is left out unless keep_stop_string (vLLM's
  // include_stop_str_in_output). Empty strings are ignored.
  std::vector<std::string> stop_strings;
  // Token ids that end the request: the one it ends on gives no text, and is its stop_reason.
  std::vector<int32_t> stop_token_ids;
  bool keep_stop_string = false;
  // Neither stop strings nor stop token ids count in the text of the first min_tokens outputs
  // (vLLM's min_tokens): a stop string must end in the text of a later id, though it may begin
  // before it, as vLLM's check looks back len(stop) - 1 characters before the new text.
  uint32_t min_tokens = 0;
  // vLLM's skip_special_tokens: false writes special tokens as their text
  // (Tokenizer::decode_with_special_tokens).
  bool skip_special_tokens = true;
  // The end-of-sequence token, when it is among stop_token_ids: a request that ends on it has no
  // stop_reason, as vLLM reports none for EOS. -1: none.
  int32_t end_of_sequence = -1;
  // The ids before the first output (the prompt's last few, then any generated ids a continued
  // request brings). A tokenizer that decodes like SentencePiece drops the space that begins the
  // first piece it decodes; decoded after these, the first output's text is what it adds to them
  // (" Paris" after "The capital of France is"), as vLLM's detokenizer primes its stream with the
  // prompt. The other tokenizers decode by concatenation and ignore them.
  std::vector<int32_t> context;
};

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

// The stop_reason of a request whose last id was `stop_token` (a stop token id, or none): that id,
// except the end-of-sequence token, which ends a request without one.
inline StopReason stop_reason_of(std::optional<int32_t> stop_token, int32_t end_of_sequence) {
  if (!stop_token || *stop_token == end_of_sequence) return {};
  return *stop_token;
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
  // Once stopped(): how many ids, over every append(), belong to the answer, up to and including
  // the one whose text completed the stop string. The ids after it, in the same append() or a
  // later one, were generated before the stop reached the engine; they are not the answer's (as
  // in vLLM, which checks stop strings token by token). 0 before a stop string matched.
  virtual size_t ids_before_stop() const = 0;
  // At the end of the request: the text still held back (empty after a stop string matched).
  virtual std::string flush() = 0;
  // The bytes of one token's text decoded alone (logprobs name tokens by it); not necessarily
  // valid UTF-8. A special token's is its written form ("<|eot_id|>"). Empty without a
  // tokenizer.
  virtual std::string token_bytes(int32_t id) const = 0;
};

}  // namespace headway::serving
