// A choice's "logprobs", in the two shapes of OpenAI's endpoints (as vLLM serves them):
// - completions: {"tokens": [...], "token_logprobs": [...], "top_logprobs": [{text: logprob}],
//   "text_offset": [...]}; each top_logprobs object holds the `top` most likely tokens and the
//   generated one (up to top + 1 entries, as OpenAI documents), keyed by their text;
// - chat: {"content": [{"token", "logprob", "bytes", "top_logprobs": [{"token", "logprob",
//   "bytes"}]}]}, with `top` entries in each top_logprobs;
// - responses: the list chat has under "content" (an output_text's "logprobs").
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

// vLLM's "prompt_logprobs": null for the first prompt token, then for each one an object keyed by
// token id (as a string) of {"logprob", "rank", "decoded_token"}: the prompt token's own entry
// first, then the `top` most likely tokens there (a token already listed is not repeated).
nlohmann::ordered_json prompt_logprobs_json(std::span<const PromptLogprobs> prompt, int32_t top);

class LogprobsJson {
 public:
  // `top` < 0: the client asked for no logprobs, and value() is null.
  LogprobsJson(Endpoint endpoint, int32_t top) : endpoint_(endpoint), top_(top) {}

  // The "logprobs" of a choice whose tokens (since the previous call, for a stream) are `tokens`.
  nlohmann::ordered_json value(std::span<const GeneratedLogprobs> tokens);
  // Completions with echo: the prompt's tokens first (the first with null figures, as it has no
  // tokens before it), then the generated ones; text offsets run over the prompt's text.
  nlohmann::ordered_json echoed(std::span<const PromptLogprobs> prompt,
                                std::span<const GeneratedLogprobs> tokens);

  bool asked() const { return top_ >= 0; }

 private:
  // Completions' four arrays, to which add() appends a token.
  struct CompletionsArrays {
    nlohmann::ordered_json texts = nlohmann::ordered_json::array();
    nlohmann::ordered_json logprobs = nlohmann::ordered_json::array();
    nlohmann::ordered_json tops = nlohmann::ordered_json::array();
    nlohmann::ordered_json offsets = nlohmann::ordered_json::array();
    nlohmann::ordered_json json();
  };
  // A token and its `top` most likely ones; without figures (a prompt's first token), nulls.
  void add(CompletionsArrays& arrays, const TokenCandidate& token,
           std::span<const TokenCandidate> top, bool has_figures);
  nlohmann::ordered_json completions(std::span<const GeneratedLogprobs> tokens);
  nlohmann::ordered_json chat(std::span<const GeneratedLogprobs> tokens) const;

  Endpoint endpoint_;
  int32_t top_;
  size_t text_offset_ = 0;  // completions: characters of the tokens before this call's
};

}  // namespace headway::serving::http
