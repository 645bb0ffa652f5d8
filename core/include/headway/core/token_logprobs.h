// Log-probabilities of generated tokens, for clients that ask for them (OpenAI's logprobs and
// top_logprobs). They are those of the model's raw logits, before min_tokens, logit_bias, the
// penalties, temperature and the filters change them: vLLM's default ("raw_logprobs"), so that
// they describe the model, not the sampling settings.
//
// Ownership: a LogprobCalculator owns scratch sized to the largest top count asked of it; after
// the first such call it does not allocate. Threading: one per thread (an engine owns one).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace headway::core {

struct TokenLogprob {
  int32_t token = 0;
  float logprob = 0.0f;  // natural log; never below kMinLogprob (JSON has no -inf)
};

// What a -inf (or NaN) log-probability is reported as: vLLM's floor.
inline constexpr float kMinLogprob = -9999.0f;

// One generated token's figures, as the engine hands them to its listener.
struct SampledLogprobs {
  float logprob = 0.0f;               // of the generated token
  std::span<const TokenLogprob> top;  // the most likely tokens, most likely first
};

// A prompt token's figures (SamplingParams::prompt_logprobs), as the engine hands them to its
// listener: how likely the model found the token after the ones before it.
struct PromptTokenLogprobs {
  uint32_t position = 0;  // in the prompt; from 1, since the first token has nothing before it
  int32_t token = 0;
  float logprob = 0.0f;
  uint32_t rank = 0;                  // rank_of(): 1 for the most likely token
  std::span<const TokenLogprob> top;  // the most likely tokens there, most likely first
};

// The token's rank under `logits`: how many tokens are at least as likely, itself included (1 for
// the single most likely token; ties count against it, as vLLM counts). NaN logits are
// impossible: they are never counted, and a NaN token ranks after every other.
uint32_t rank_of(std::span<const float> logits, int32_t token);

class LogprobCalculator {
 public:
  // The log-probability of `chosen` under softmax(`logits`), and the `top_count` most likely
  // tokens (fewer when the vocabulary is smaller) written to `top`, most likely first, ties to the
  // lower id. NaN logits count as impossible. `top` must hold top_count entries.
  float compute(std::span<const float> logits, int32_t chosen, std::span<TokenLogprob> top);

 private:
  std::vector<int32_t> order_;
};

}  // namespace headway::core
