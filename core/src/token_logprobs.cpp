#include "headway/core/token_logprobs.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace headway::core {
namespace {

float floored(double logprob) {
  return std::isfinite(logprob) ? static_cast<float>(std::max<double>(logprob, kMinLogprob))
                                : kMinLogprob;
}

}  // namespace

float LogprobCalculator::compute(std::span<const float> logits, int32_t chosen,
                                 std::span<TokenLogprob> top) {
  // log softmax: l - (max + log(sum(exp(l - max)))). Each term in float (glibc's expf is several
  // times faster than exp), summed in double so that a large vocabulary of small terms is not
  // lost.
  float max_logit = -std::numeric_limits<float>::infinity();
  for (const float l : logits) {
    if (l > max_logit) max_logit = l;  // NaN compares false: skipped
  }
  double sum = 0.0;
  if (std::isfinite(max_logit)) {
    // Four sums, so that the additions do not wait on each other.
    double partial[4] = {0.0, 0.0, 0.0, 0.0};
    const size_t n = logits.size();
    size_t i = 0;
    const auto term = [&](float l) {
      return std::isnan(l) ? 0.0 : static_cast<double>(std::exp(l - max_logit));
    };
    for (; i + 4 <= n; i += 4) {
      for (size_t k = 0; k < 4; ++k) partial[k] += term(logits[i + k]);
    }
    for (; i < n; ++i) partial[0] += term(logits[i]);
    sum = (partial[0] + partial[1]) + (partial[2] + partial[3]);
  }
  const double normaliser = std::isfinite(max_logit) ? max_logit + std::log(sum) : max_logit;
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
    // Once the list is full, a token must beat the last kept one's logit: ids only grow, so an
    // equal one (or a NaN) never does.
    float threshold = -std::numeric_limits<float>::infinity();
    for (int32_t t = 0; t < static_cast<int32_t>(logits.size()); ++t) {
      if (order_.size() == count) {
        if (!(logits[static_cast<size_t>(t)] > threshold)) continue;
        order_.pop_back();
      }
      order_.insert(std::upper_bound(order_.begin(), order_.end(), t, likelier), t);
      if (order_.size() == count) threshold = value(order_.back());
    }
    for (size_t i = 0; i < count; ++i) top[i] = TokenLogprob{order_[i], logprob_of(order_[i])};
  }
  return chosen >= 0 && static_cast<size_t>(chosen) < logits.size() ? logprob_of(chosen)
                                                                    : kMinLogprob;
}

}  // namespace headway::core
