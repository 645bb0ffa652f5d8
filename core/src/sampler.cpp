#include "headway/core/sampler.h"

#include <headway/core/error.h>

#include <algorithm>
#include <cmath>
#include <headway/sdk/sampling.hpp>
#include <limits>
#include <string>

#include "logits_scan.h"

namespace headway::core {
namespace {

// The first token with the largest logit, NaN skipped; 0 when every logit is NaN.
int32_t argmax(std::span<const float> logits) {
  return std::max(first_index_of(logits, max_logit(logits)), 0);
}

// The draw: the first token, in token order, at which the weights summed so far pass u * total.
// Whole blocks that leave the sum at or below the target are passed over by their sums
// (`block_sums`, kSumBlock weights each, taken as the weights were written), so a draw adds a few
// hundred sums and at most a block's weights, not the row's (a serial walk of 128k weights took
// about 0.1 ms). No weight to draw from (a +inf logit: inf - inf is NaN; a row of NaN; a
// temperature so small that 1 / T overflows): the greedy token, the only sensible answer.
int32_t draw(std::span<const float> weights, std::span<const double> block_sums, double total,
             double u, int32_t best) {
  if (!(total > 0.0)) return best;
  const size_t n = weights.size();
  // The token at which the sum passes `target`, or n with `walked` the whole row's sum as walked.
  const auto walk = [&](double target, double& walked) -> size_t {
    size_t block = 0;
    double cumulative = 0.0;
    while (block + 1 < block_sums.size() && cumulative + block_sums[block] <= target) {
      cumulative += block_sums[block++];
    }
    for (size_t i = block * kSumBlock; i < n; ++i) {
      cumulative += weights[i];
      if (target < cumulative) return i;
    }
    walked = cumulative;
    return n;
  };
  double walked = 0.0;
  size_t token = walk(u * total, walked);
  // `total` added the walked blocks' float-lane sums where the walk added their weights one by one
  // in double, and came out above the walk's sum: draw again against the walk's sum, so that the
  // target cannot fall past the end (where the fallback below would give the last token of any
  // weight, however unlikely).
  if (token == n && walked > 0.0 && walked < total) {
    double again = 0.0;
    token = walk(u * walked, again);
  }
  if (token < n) return static_cast<int32_t>(token);
  // Rounding left the target past the end: the last token with weight (total > 0 says there is
  // one), never one the filters kept at weight 0.
  for (size_t i = n; i-- > 0;) {
    if (weights[i] > 0.0f) return static_cast<int32_t>(i);
  }
  return best;
}

}  // namespace

double Sampler::uniform(uint64_t seed, uint32_t output_index) {
  return sdk::sampling::uniform(seed, output_index);
}

void Sampler::process(std::span<float> logits, const SamplingParams& p, uint32_t output_index,
                      const SamplingHistory& history) {
  const size_t vocab = logits.size();
  const auto in_vocab = [vocab](int32_t t) { return t >= 0 && static_cast<size_t>(t) < vocab; };
  constexpr float kNever = -std::numeric_limits<float>::infinity();
  if (!p.allowed_token_ids.empty()) {
    // The allowed logits are put aside, every logit masked, and theirs put back: one pass over
    // the vocabulary and two over the list.
    allowed_kept_.clear();
    for (const int32_t t : p.allowed_token_ids)
      allowed_kept_.push_back(in_vocab(t) ? logits[t] : kNever);
    std::fill(logits.begin(), logits.end(), kNever);
    for (size_t i = 0; i < p.allowed_token_ids.size(); ++i) {
      if (in_vocab(p.allowed_token_ids[i])) logits[p.allowed_token_ids[i]] = allowed_kept_[i];
    }
  }
  // A bad word's last token, where the outputs end with the rest of the word (vLLM's rule).
  banned_.clear();
  for (const std::vector<int32_t>& word : p.bad_words_ids) {
    if (word.empty() || !in_vocab(word.back())) continue;
    const size_t rest = word.size() - 1;
    if (rest > history.outputs.size()) continue;
    if (std::equal(word.begin(), word.end() - 1, history.outputs.end() - rest)) {
      logits[word.back()] = kNever;
      banned_.push_back(word.back());
    }
  }
  if (output_index < p.min_tokens) {
    if (!p.ignore_eos && history.eos_token < vocab) logits[history.eos_token] = kNever;
    for (const int32_t t : p.stop_token_ids) {
      if (in_vocab(t)) logits[t] = kNever;
    }
    // An allowed list of end tokens only would leave nothing to choose: the list wins, and such
    // a token does not end the request before min_tokens (the engine's stop check).
    const bool none_left =
        !p.allowed_token_ids.empty() &&
        std::none_of(p.allowed_token_ids.begin(), p.allowed_token_ids.end(),
                     [&](int32_t t) { return in_vocab(t) && logits[t] > kNever; });
    // (Not a token a bad word bans: the service refuses a list they ban whole.)
    for (size_t i = 0; none_left && i < p.allowed_token_ids.size(); ++i) {
      const int32_t t = p.allowed_token_ids[i];
      if (in_vocab(t) && std::find(banned_.begin(), banned_.end(), t) == banned_.end()) {
        logits[t] = allowed_kept_[i];
      }
    }
  }
  for (const auto& [t, bias] : p.logit_bias) {
    if (in_vocab(t)) logits[t] += bias;
  }
  if (!p.uses_penalties()) return;

  // Each penalty that counts a token once marks it in seen_; the marks are cleared at the end by
  // walking the same tokens, so the cost is that of the history, not of the vocabulary.
  if (seen_.size() < vocab) seen_.resize(vocab, 0);  // grows once per vocabulary size
  constexpr uint8_t kRepeated = 1;                   // repetition_penalty applied
  constexpr uint8_t kPresent = 2;                    // presence_penalty applied
  const float repetition = p.repetition_penalty;
  const auto penalise_repeat = [&](int32_t t) {
    if (!in_vocab(t) || (seen_[t] & kRepeated) != 0) return;
    seen_[t] |= kRepeated;
    logits[t] = logits[t] > 0.0f ? logits[t] / repetition : logits[t] * repetition;
  };
  if (repetition != 1.0f) {
    for (const int32_t t : history.prompt) penalise_repeat(t);
    for (const int32_t t : history.outputs) penalise_repeat(t);
  }
  for (const int32_t t : history.outputs) {
    if (!in_vocab(t)) continue;
    logits[t] -= p.frequency_penalty;
    if ((seen_[t] & kPresent) == 0) {
      seen_[t] |= kPresent;
      logits[t] -= p.presence_penalty;
    }
  }
  for (const std::span<const int32_t> tokens : {history.prompt, history.outputs}) {
    for (const int32_t t : tokens) {
      if (in_vocab(t)) seen_[t] = 0;
    }
  }
}

int32_t Sampler::sample(std::span<float> logits, const SamplingParams& p, uint32_t output_index,
                        const SamplingHistory& history) {
  if (logits.empty()) throw Error("sampler: empty logits");
  if (!(p.temperature >= 0.0f) || !std::isfinite(p.temperature)) {
    throw Error("sampler: temperature must be >= 0, got " + std::to_string(p.temperature));
  }
  if (!(p.top_p > 0.0f && p.top_p <= 1.0f)) {
    throw Error("sampler: top_p must be in (0, 1], got " + std::to_string(p.top_p));
  }
  if (!(p.min_p >= 0.0f && p.min_p <= 1.0f)) {
    throw Error("sampler: min_p must be in [0, 1], got " + std::to_string(p.min_p));
  }
  if (!std::isfinite(p.presence_penalty) || !std::isfinite(p.frequency_penalty) ||
      !(p.repetition_penalty > 0.0f) || !std::isfinite(p.repetition_penalty)) {
    throw Error("sampler: penalties must be finite and repetition_penalty > 0");
  }
  if (p.changes_logits()) process(logits, p, output_index, history);
  const int32_t best = argmax(logits);
  if (!std::isfinite(logits[best])) ++rows_without_finite_best_;
  if (p.temperature == 0.0f || p.top_k == 1) return best;

  // Weights relative to the best token: w = exp((l - max) / T), so the best has weight 1 and
  // nothing overflows. NaN, and anything below exp(-87), becomes weight 0 (logits_scan.h).
  const size_t vocab = logits.size();
  if (block_sums_.size() < sum_blocks(vocab)) block_sums_.resize(sum_blocks(vocab));  // grows once
  const std::span<double> sums(block_sums_.data(), sum_blocks(vocab));
  const double u = uniform(p.seed, output_index);
  const bool filtered = (p.top_k > 0 && p.top_k < vocab) || p.top_p < 1.0f || p.min_p > 0.0f;
  // With a filter, the draw takes its block sums from the pass that drops the weights below it.
  const double weight_sum = exp_weights(logits, logits[best], 1.0f / p.temperature,
                                        filtered ? std::span<double>() : sums);
  if (!filtered) return draw(logits, sums, weight_sum, u, best);

  // The filters are one threshold on the weights, found without ranking the vocabulary
  // (sampling.hpp: a few passes over the row, where sorting a flat row's nucleus took
  // milliseconds). Weights below it become 0, which the draw never picks, so the draw walks the
  // kept tokens in token order, as a device sampling with the same header does.
  if (cut_scratch_.size() < vocab) cut_scratch_.resize(vocab);  // grows once per vocabulary size
  const float cut = sdk::sampling::keep_threshold(logits.data(), vocab, p.top_k, p.top_p, p.min_p,
                                                  cut_scratch_.data());
  return draw(logits, sums, drop_below(logits, cut, sums), u, best);
}

}  // namespace headway::core
