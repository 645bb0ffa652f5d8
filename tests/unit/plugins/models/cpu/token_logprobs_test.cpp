// core::LogprobCalculator: log-softmax of the raw logits, the most likely tokens in order, and
// impossible or NaN logits reported at the floor rather than as -inf.
#include "headway/core/token_logprobs.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>
#include <vector>

namespace headway::core {
namespace {

TEST(LogprobCalculator, GivesTheLogSoftmaxAndTheMostLikelyTokensInOrder) {
  const std::vector<double> probabilities = {0.1, 0.4, 0.2, 0.3};
  std::vector<float> logits;
  for (double p : probabilities) logits.push_back(static_cast<float>(std::log(p) + 7.0));
  LogprobCalculator calculator;
  std::vector<TokenLogprob> top(3);
  EXPECT_NEAR(calculator.compute(logits, 2, top), std::log(0.2), 1e-5);
  ASSERT_EQ(top.size(), 3u);
  EXPECT_EQ(top[0].token, 1);
  EXPECT_NEAR(top[0].logprob, std::log(0.4), 1e-5);
  EXPECT_EQ(top[1].token, 3);
  EXPECT_NEAR(top[1].logprob, std::log(0.3), 1e-5);
  EXPECT_EQ(top[2].token, 2);
  // None asked: only the chosen token's.
  EXPECT_NEAR(calculator.compute(logits, 0, {}), std::log(0.1), 1e-5);
}

TEST(LogprobCalculator, TiesGoToTheLowerIdAndImpossibleTokensSitAtTheFloor) {
  const std::vector<float> logits = {1.0f, -INFINITY, NAN, 1.0f};
  LogprobCalculator calculator;
  std::vector<TokenLogprob> top(4);
  EXPECT_EQ(calculator.compute(logits, 1, top), kMinLogprob);
  EXPECT_EQ(top[0].token, 0);
  EXPECT_NEAR(top[0].logprob, std::log(0.5), 1e-6);
  EXPECT_EQ(top[1].token, 3);
  EXPECT_EQ(top[2].logprob, kMinLogprob);
  EXPECT_EQ(top[3].logprob, kMinLogprob);
  // An id outside the row (never from the sampler) is at the floor, not a read past the end.
  EXPECT_EQ(calculator.compute(logits, 9, {}), kMinLogprob);
}

TEST(LogprobCalculator, LargeLogitsDoNotOverflow) {
  const std::vector<float> logits = {1e30f, 1e30f - 1e24f, -1e30f};
  LogprobCalculator calculator;
  std::vector<TokenLogprob> top(1);
  // exp(1e30) would overflow (and -9999 would hide it): the most likely token is all but certain.
  EXPECT_NEAR(calculator.compute(logits, 0, top), 0.0f, 1e-6);
  EXPECT_EQ(top[0].token, 0);
  EXPECT_NEAR(top[0].logprob, 0.0f, 1e-6);
  EXPECT_EQ(calculator.compute(logits, 2, {}), kMinLogprob);
}

// Rows long enough for the vectorised scans, with ties, NaN and -inf anywhere: the top tokens are
// those of a full stable sort, and each log-probability that of a double-precision softmax.
TEST(LogprobCalculator, LongRowsAgreeWithAFullSortAndADoubleSoftmax) {
  std::mt19937 rng(9);
  std::normal_distribution<float> normal(0.0f, 3.0f);
  LogprobCalculator calculator;
  for (const size_t vocab : {21u, 64u, 1000u, 32003u}) {
    std::vector<float> logits(vocab);
    for (float& l : logits) {
      const unsigned kind = rng() % 20;
      l = kind == 0 ? NAN : kind == 1 ? -INFINITY : kind < 5 ? 2.0f : normal(rng);
    }
    double sum = 0.0;
    for (const float l : logits) {
      if (!std::isnan(l)) sum += std::exp(static_cast<double>(l));
    }
    std::vector<int32_t> order(vocab);
    std::iota(order.begin(), order.end(), 0);
    const auto rank = [&](int32_t t) { return std::isnan(logits[t]) ? -INFINITY : logits[t]; };
    std::stable_sort(order.begin(), order.end(),
                     [&](int32_t a, int32_t b) { return rank(a) > rank(b); });
    std::vector<TokenLogprob> top(20);
    const auto chosen = static_cast<int32_t>(rng() % vocab);
    const float logprob = calculator.compute(logits, chosen, top);
    const auto expected = [&](int32_t t) {
      const double l = std::log(std::exp(static_cast<double>(logits[t])) / sum);
      return std::isfinite(l) ? std::max(l, double{kMinLogprob}) : double{kMinLogprob};
    };
    EXPECT_NEAR(logprob, expected(chosen), 1e-5) << vocab;
    for (size_t i = 0; i < top.size(); ++i) {
      ASSERT_EQ(top[i].token, order[i]) << "vocab " << vocab << " rank " << i;
      EXPECT_NEAR(top[i].logprob, expected(order[i]), 1e-5) << "vocab " << vocab << " rank " << i;
    }
  }
}

}  // namespace
}  // namespace headway::core
