#include "headway/core/sampler.h"

#include <headway/core/error.h>

#include <algorithm>
#include <cmath>
#include <headway/sdk/sampling_cut.hpp>
#include <limits>
#include <string>

#include "logits_scan.h"

namespace headway::core {
namespace {

uint64_t mix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

// The first token with the largest logit, NaN skipped; 0 when every logit is NaN.
int32_t argmax(std::span<const float> logits) {
  return std::max(first_index_of(logits, max_logit(logits)), 0);
}

}  // namespace

double Sampler::uniform(uint64_t seed, uint32_t output_index) {
  // Two rounds: the first decorrelates nearby seeds, the second nearby output indices.
  const uint64_t bits = mix64(mix64(seed) ^ (0xd1b54a32d192ed03ULL * (uint64_t{output_index} + 1)));
  return static_cast<double>(bits >> 11) * 0x1.0p-53;
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
  const double weight_sum = exp_weights(logits, logits[best], 1.0f / p.temperature);
  const size_t vocab = logits.size();
  const double u = uniform(p.seed, output_index);
  // The draw: the first candidate whose cumulative weight passes u * total, in the candidates'
  // order. No weight left to draw from (a +inf logit: inf - inf is NaN; a row of NaN; a
  // temperature so small that 1 / T overflows): the greedy token is the only sensible answer.
  const auto draw = [&](auto&& token_at, size_t count, double total) -> int32_t {
    if (!(total > 0.0)) return best;
    double target = u * total;
    double cumulative = 0.0;
    for (size_t i = 0; i < count; ++i) {
      cumulative += logits[token_at(i)];
      if (target < cumulative) return static_cast<int32_t>(token_at(i));
    }
    // `total` was summed in another order (logits_scan.h's lanes) and came out above the walk's
    // own sum: draw again against the walk's sum, so that the target cannot fall past the end
    // (where the fallback below would give the last token of any weight, however unlikely).
    if (cumulative > 0.0 && cumulative < total) {
      target = u * cumulative;
      double again = 0.0;
      for (size_t i = 0; i < count; ++i) {
        again += logits[token_at(i)];
        if (target < again) return static_cast<int32_t>(token_at(i));
      }
    }
    // Rounding left the target past the end: the last candidate with weight (total > 0 says
    // there is one), never one the filters kept at weight 0.
    for (size_t i = count; i-- > 0;) {
      if (logits[token_at(i)] > 0.0f) return static_cast<int32_t>(token_at(i));
    }
    return best;
  };
  const bool filtered = (p.top_k > 0 && p.top_k < vocab) || p.top_p < 1.0f || p.min_p > 0.0f;
  if (!filtered) return draw([](size_t i) { return i; }, vocab, weight_sum);

  // The filters are one threshold on the weights, found without ranking the vocabulary
  // (sampling_cut.hpp: a few passes over the row, where sorting a flat row's nucleus took
  // milliseconds). Weights below it become 0, which the draw never picks, so the draw walks the
  // kept tokens in token order, as a device sampling with the same header does.
  if (cut_scratch_.size() < vocab) cut_scratch_.resize(vocab);  // grows once per vocabulary size
  const float cut = sdk::sampling::keep_threshold(logits.data(), vocab, p.top_k, p.top_p, p.min_p,
                                                  cut_scratch_.data());
  return draw([](size_t i) { return i; }, vocab, drop_below(logits, cut));
}

}  // namespace headway::core
