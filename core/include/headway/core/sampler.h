// Token sampling from logits, in the core and shared by every model that returns logits
// (hw_model_info.returns_logits). Order, as vLLM applies it: allowed_token_ids masks every other
// token, bad_words masks the tokens that would complete one, min_tokens masks the end tokens,
// logit_bias is added, the repetition, frequency and presence penalties are applied; then the
// warpers in vLLM V1's order (temperature, min-p, top-k, top-p: its sampler applies min-p as a
// logits processor before its top-k/top-p step, so top-p weighs what min-p kept; Hugging Face's
// order, min-p last, keeps more when both are set) and the draw.
//
// The warpers: weights w = exp((logit - max) / temperature); min-p, top-k and top-p are each a
// threshold on the weights, and a token is kept when its weight is at or above all of them, so
// tokens tied at a cut are all kept (headway/sdk/sampling.hpp defines the thresholds, and
// finds them in a few passes over the row, without ranking the vocabulary). The draw walks the
// kept tokens in token order: the first at which the cumulative kept weight passes u times the
// total, u = uniform(seed, output_index). A model sampling on its device with the same header
// picks the same tokens, up to rounding (its exp, its sums: see the cuda model's sampling.h).
//
// Determinism: the random draw depends only on (params.seed, output_index), through a counter-based
// generator (splitmix64), never on call order. A request therefore gets the same tokens for the
// same seed however it is batched, preempted or interleaved with others. Greedy ties between
// equal logits resolve to the lower token id.
//
// Ownership: a Sampler owns scratch buffers sized to the largest vocabulary it has seen, so that
// after the first call it does not allocate. `logits` is borrowed and used as scratch (its
// contents are unspecified after the call); the history's spans are borrowed for the call.
// Threading: one Sampler per thread (an engine owns one); distinct Samplers are independent.
#pragma once

#include <headway/core/sampling_params.h>

#include <cstdint>
#include <span>
#include <vector>

namespace headway::core {

// What a request generated and read so far, for the logits processing that depends on it.
struct SamplingHistory {
  std::span<const int32_t> prompt;   // repetition_penalty counts these
  std::span<const int32_t> outputs;  // every penalty counts these; bad words match their end
  uint32_t eos_token = UINT32_MAX;   // masked with stop_token_ids under min_tokens
};

class Sampler {
 public:
  // Returns the chosen token id in [0, logits.size()). `output_index` is the number of tokens the
  // request generated before this one (min_tokens compares it). Throws Error(HW_INVALID_ARGUMENT)
  // on empty logits or out-of-range parameters (temperature < 0, top_p outside (0, 1], min_p
  // outside [0, 1], non-finite penalties, repetition_penalty <= 0). NaN logits are never chosen
  // unless every logit is NaN (then token 0). Ids outside the vocabulary in the history or in
  // logit_bias are ignored (the service refuses them before they get here).
  int32_t sample(std::span<float> logits, const SamplingParams& params, uint32_t output_index,
                 const SamplingHistory& history = {});

  // The uniform draw in [0, 1) used for (seed, output_index); exposed for tests.
  static double uniform(uint64_t seed, uint32_t output_index);

  // Rows sampled so far whose best logit was not finite (every logit NaN or -inf, or a +inf):
  // a broken model's, whose tokens mean nothing (the engine warns of them).
  uint64_t rows_without_finite_best() const { return rows_without_finite_best_; }

 private:
  // min_tokens, logit_bias and the penalties, in place.
  void process(std::span<float> logits, const SamplingParams& params, uint32_t output_index,
               const SamplingHistory& history);

  std::vector<float> cut_scratch_;  // the weights near a top-k or top-p cut, while it is sought
  std::vector<double> block_sums_;  // the weights' sums by block, for the draw
  std::vector<uint8_t> seen_;       // per token id: which penalties it had (all zero between calls)
  std::vector<float> allowed_kept_;  // the allowed tokens' logits while the row is masked
  std::vector<int32_t> banned_;      // tokens a bad word banned in this call
  uint64_t rows_without_finite_best_ = 0;
};

}  // namespace headway::core
