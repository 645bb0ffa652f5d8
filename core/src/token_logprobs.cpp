#include "headway/core/token_logprobs.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "logits_scan.h"

namespace headway::core {
namespace {

float floored(double logprob) {
  return std::isfinite(logprob) ? static_cast<float>(std::max<double>(logprob, kMinLogprob))
                                : kMinLogprob;
}

}  // namespace

float LogprobCalculator::compute(std::span<const float> logits, int32_t chosen,
                                 std::span<TokenLogprob> top) {
  // log softmax: l - (max + log(sum(exp(l - max)))), NaN logits left out (logits_scan.h).
  const float max = max_logit(logits);
  const double normaliser =
      std::isfinite(max) ? max + std::log(sum_exp_below(logits, max)) : static_cast<double>(max);
  const auto logprob_of = [&](int32_t t) {
    const float l = logits[static_cast<size_t>(t)];
    return std::isnan(l) ? kMinLogprob : floored(l - normaliser);
  };

  // The most likely tokens in one pass: a sorted list of at most `count`, which a token enters
  // only when it beats the last (so nearly every token costs one comparison).
  const size_t count = std::min(top.size(), logits.size());
  if (count > 0) {
    const auto value = [&](int32_t t) {
      const float l = logits[static_cast<size_t>(t)];
      return std::isnan(l) ? -std::numeric_limits<float>::infinity() : l;
    };
    const auto likelier = [&](int32_t a, int32_t b) {
      return value(a) > value(b) || (value(a) == value(b) && a < b);
    };
    if (order_.capacity() < count) order_.reserve(count);  // grows once per largest count
    order_.clear();
    const auto insert = [&](size_t t) {
      const auto token = static_cast<int32_t>(t);
      order_.insert(std::upper_bound(order_.begin(), order_.end(), token, likelier), token);
    };
    size_t t = 0;
    for (; order_.size() < count; ++t) insert(t);
    // Once the list is full, a token must beat the last kept one's logit: ids only grow, so an
    // equal one (or a NaN) never does. Such tokens are few, and the scan skips to them.
    for (t = first_above(logits, t, value(order_.back())); t < logits.size();
         t = first_above(logits, t + 1, value(order_.back()))) {
      order_.pop_back();
      insert(t);
    }
    for (size_t i = 0; i < count; ++i) top[i] = TokenLogprob{order_[i], logprob_of(order_[i])};
  }
  return chosen >= 0 && static_cast<size_t>(chosen) < logits.size() ? logprob_of(chosen)
                                                                    : kMinLogprob;
}

uint32_t rank_of(std::span<const float> logits, int32_t token) {
  if (token < 0 || static_cast<size_t>(token) >= logits.size()) return 0;
  const float own = logits[static_cast<size_t>(token)];
  if (std::isnan(own)) return static_cast<uint32_t>(logits.size());
  uint32_t at_least = 0;
  for (const float l : logits) at_least += l >= own ? 1u : 0u;  // NaN compares false
  return at_least;
}

}  // namespace headway::core
