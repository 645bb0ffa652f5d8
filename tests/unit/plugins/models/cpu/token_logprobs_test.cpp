// core::LogprobCalculator: log-softmax of the raw logits, the most likely tokens in order, and
// impossible or NaN logits reported at the floor rather than as -inf.
#include "headway/core/token_logprobs.h"

#include <gtest/gtest.h>

#include <cmath>
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

}  // namespace
}  // namespace headway::core
