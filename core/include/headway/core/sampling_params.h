// How one request wants its tokens chosen. Shared by the engine (stop conditions), the core sampler
// (for models that return logits) and models that sample on their device.
#pragma once

#include <headway/core/token_guide.h>

#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

namespace headway::core {

// vLLM's default max_logprobs; OpenAI allows 20 top_logprobs on chat, 5 logprobs on completions.
inline constexpr int32_t kMaxLogprobs = 20;

struct SamplingParams {
  float temperature = 0.0f;             // 0: greedy
  float top_p = 1.0f;                   // 1: off
  uint32_t top_k = 0;                   // 0: off
  float min_p = 0.0f;                   // 0: off
  uint64_t seed = 0;                    // same seed, same tokens
  bool ignore_eos = false;              // keep generating past the model's end-of-sequence token
  std::vector<int32_t> stop_token_ids;  // finish (reason "stop") when one is sampled

  // Logits processing before the warpers above, as vLLM and OpenAI define it. Only the core
  // sampler applies these (models that return logits); a model that samples on its device never
  // sees them, so the service refuses them for such a model (uses_host_processing()).
  float presence_penalty = 0.0f;   // [-2, 2]: subtracted once from each token already generated
  float frequency_penalty = 0.0f;  // [-2, 2]: subtracted per time a token was generated
  // > 0; 1: off. A token in the prompt or the output has its logit divided by it when positive,
  // multiplied when negative (CTRL's rule, as Hugging Face and vLLM apply it).
  float repetition_penalty = 1.0f;
  // The end-of-sequence token (unless ignore_eos) and stop_token_ids cannot be chosen, nor end the
  // request, until this many tokens were generated.
  uint32_t min_tokens = 0;
  // (token id, bias) pairs added to the logits; ids unique, biases in [-100, 100].
  std::vector<std::pair<int32_t, float>> logit_bias;
  // vLLM's allowed_token_ids: only these can be chosen (every other logit becomes -inf first).
  // Empty: any token. Sorted and unique (the service makes them so).
  std::vector<int32_t> allowed_token_ids;
  // vLLM's bad_words as token sequences (the service encodes the words: bad_words.h): a sequence's
  // last token cannot be chosen right after the rest of the sequence was generated; a one-token
  // sequence, never. Only generated tokens count, not the prompt's. Empty: none.
  std::vector<std::vector<int32_t>> bad_words_ids;
  // -1: off. Otherwise report each generated token's log-probability and those of the `logprobs`
  // most likely tokens (0 to kMaxLogprobs), from the model's raw logits (token_logprobs.h).
  int32_t logprobs = -1;
  // -1: off. Otherwise report, for each prompt token after the first, its log-probability given
  // the tokens before it, its rank, and the `prompt_logprobs` most likely tokens there (0 to
  // kMaxLogprobs): vLLM's prompt_logprobs. The engine then computes the whole prompt (no prefix
  // cache hit covers a position still to report) and needs a model that returns a logits row per
  // prompt position (hw_model_info.returns_prompt_logits).
  int32_t prompt_logprobs = -1;
  // Guided decoding: tokens the guide does not allow are masked before everything above (the
  // service builds one per request from its grammar; token_guide.h). Null: free text.
  std::shared_ptr<TokenGuide> guide;

  // Whether the request needs its tokens' history (penalties).
  bool uses_penalties() const {
    return presence_penalty != 0.0f || frequency_penalty != 0.0f || repetition_penalty != 1.0f;
  }
  // Whether the sampler reads the tokens generated so far (penalties, bad words).
  bool reads_outputs() const { return uses_penalties() || !bad_words_ids.empty(); }
  // Whether the core sampler changes the logits before the warpers.
  bool changes_logits() const {
    return uses_penalties() || min_tokens > 0 || !logit_bias.empty() ||
           !allowed_token_ids.empty() || !bad_words_ids.empty();
  }
  // Whether the request needs what only the core sampler and the engine on the host do: the
  // processing above, logprobs of either kind, or a guide.
  bool uses_host_processing() const {
    return changes_logits() || logprobs >= 0 || prompt_logprobs >= 0 || guide;
  }
};

}  // namespace headway::core
