// logits_scan.h: the vectorised passes over a row of logits agree with the plain loops they
// replaced, at every length (vector bodies and scalar tails), with NaN, infinities, signed zeros
// and ties anywhere in a row.
#include "logits_scan.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <vector>

namespace headway::core {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();

// The plain loops: the first non-NaN maximum, and exp summed in double.
int32_t reference_argmax(const std::vector<float>& logits) {
  int32_t best = -1;
  for (size_t i = 0; i < logits.size(); ++i) {
    if (std::isnan(logits[i])) continue;
    if (best < 0 || logits[i] > logits[best]) best = static_cast<int32_t>(i);
  }
  return best;
}

double reference_sum(const std::vector<float>& logits, float shift) {
  double sum = 0.0;
  for (const float l : logits) {
    if (!std::isnan(l)) sum += std::exp(static_cast<double>(l) - shift);
  }
  return sum;
}

std::vector<float> random_row(std::mt19937& rng, size_t size) {
  std::normal_distribution<float> normal(0.0f, 4.0f);
  std::vector<float> row(size);
  for (float& l : row) {
    switch (rng() % 16) {
      case 0:
        l = std::numeric_limits<float>::quiet_NaN();
        break;
      case 1:
        l = -kInf;
        break;
      case 2:
        l = rng() % 2 == 0 ? 0.0f : -0.0f;
        break;
      case 3:
        l = 3.0f;  // ties
        break;
      default:
        l = normal(rng);
    }
  }
  return row;
}

// Each block's sum is its weights' sum (to float-lane rounding), and the row's sum is the blocks'
// summed in order: a draw that skips blocks by their sums lands where one walking them would.
void expect_block_sums(const std::vector<float>& weights, const std::vector<double>& blocks,
                       double sum) {
  double in_order = 0.0;
  for (size_t b = 0; b < blocks.size(); ++b) {
    double block = 0.0;
    for (size_t t = b * kSumBlock; t < std::min(weights.size(), (b + 1) * kSumBlock); ++t) {
      block += weights[t];
    }
    EXPECT_NEAR(blocks[b], block, 1e-6 * block + 1e-30) << "block " << b << " of " << blocks.size();
    in_order += blocks[b];
  }
  EXPECT_EQ(in_order, sum) << weights.size() << " weights";
}

TEST(LogitsScan, MaxAndFirstIndexAgreeWithThePlainLoopAtEveryLength) {
  std::mt19937 rng(3);
  for (size_t size = 0; size <= 70; ++size) {
    for (int round = 0; round < 200; ++round) {
      const std::vector<float> row = random_row(rng, size);
      const int32_t expected = reference_argmax(row);
      const float max = max_logit(row);
      if (expected < 0) {
        EXPECT_EQ(max, -kInf) << size;  // nothing but NaN (or nothing)
        continue;
      }
      ASSERT_EQ(max, row[expected]) << "size " << size << " round " << round;
      ASSERT_EQ(first_index_of(row, max), expected) << "size " << size << " round " << round;
    }
  }
}

TEST(LogitsScan, FirstAboveAgreesWithThePlainLoopFromEveryStart) {
  std::mt19937 rng(4);
  for (int round = 0; round < 300; ++round) {
    const std::vector<float> row = random_row(rng, 1 + rng() % 90);
    const float bar = static_cast<float>(static_cast<int>(rng() % 13) - 4);
    for (size_t from = 0; from <= row.size(); ++from) {
      size_t expected = from;
      while (expected < row.size() && !(row[expected] > bar)) ++expected;
      ASSERT_EQ(first_above(row, from, bar), expected)
          << "round " << round << " from " << from << " bar " << bar;
    }
  }
}

TEST(LogitsScan, FindsNothingWhereNothingMatches) {
  const std::vector<float> row(37, 1.0f);
  EXPECT_EQ(first_index_of(row, 2.0f), -1);
  EXPECT_EQ(first_index_of(std::vector<float>(37, NAN), NAN), -1);
  EXPECT_EQ(max_logit(std::vector<float>(37, NAN)), -kInf);
  EXPECT_EQ(max_logit({}), -kInf);
  std::vector<float> late(37, -1.0f);
  late[36] = 5.0f;  // in the scalar tail
  EXPECT_EQ(first_index_of(late, max_logit(late)), 36);
}

TEST(LogitsScan, SumOfExpIsTheSoftmaxDenominatorWithinFloatPrecision) {
  std::mt19937 rng(5);
  for (const size_t size : {1u, 7u, 8u, 9u, 31u, 257u, 1000u, 128256u}) {
    for (int round = 0; round < 5; ++round) {
      std::vector<float> row = random_row(rng, size);
      row[rng() % size] = 2.5f;  // at least one finite logit
      const float max = max_logit(row);
      const double expected = reference_sum(row, max);
      EXPECT_NEAR(sum_exp_below(row, max), expected, 1e-6 * expected)
          << "size " << size << " round " << round;
    }
  }
  // Every term alone, across the range a term can take: within 2e-7 of exp.
  for (float x = -87.0f; x <= 0.0f; x += 0.37f) {
    const std::vector<float> eight(8, x);
    const double expected = 8.0 * std::exp(static_cast<double>(x));
    EXPECT_NEAR(sum_exp_below(eight, 0.0f), expected, 2e-7 * expected) << x;
  }
}

TEST(LogitsScan, SamplingWeightsAreExpOrExactlyZero) {
  std::mt19937 rng(6);
  for (const size_t size : {1u, 3u, 4u, 5u, 17u, 1000u, 32003u}) {
    for (const float scale : {0.5f, 1.0f, 1.25f, 20.0f}) {
      const std::vector<float> row = random_row(rng, size);
      const float max = max_logit(row);
      if (!std::isfinite(max)) continue;
      std::vector<float> weights = row;
      std::vector<double> blocks(sum_blocks(size), -1.0);
      const double sum = exp_weights(weights, max, scale, blocks);
      expect_block_sums(weights, blocks, sum);
      double written = 0.0;
      for (size_t t = 0; t < size; ++t) {
        const float x = (row[t] - max) * scale;
        if (std::isnan(x) || x < -87.0f) {
          ASSERT_EQ(weights[t], 0.0f) << "size " << size << " token " << t << " logit " << row[t];
        } else {
          const double expected = std::exp(static_cast<double>(x));
          ASSERT_NEAR(weights[t], expected, 2e-7 * expected) << "size " << size << " token " << t;
        }
        written += weights[t];
      }
      // Summed in float lanes, carried into a double every 256 terms.
      EXPECT_NEAR(sum, written, 1e-6 * written) << size;
    }
  }
}

TEST(LogitsScan, DroppingWeightsBelowACutZeroesExactlyThoseAndSumsTheRest) {
  std::mt19937 rng(9);
  std::uniform_real_distribution<float> unit(0.0f, 1.0f);
  for (const size_t size : {1u, 3u, 4u, 5u, 17u, 1000u, 32003u}) {
    for (const float cut : {0.0f, 0.25f, 0.5f, 1.0f}) {
      std::vector<float> weights(size);
      for (float& w : weights) w = rng() % 8 == 0 ? 0.5f : unit(rng);  // ties at a cut of 0.5
      std::vector<float> dropped = weights;
      std::vector<double> blocks(sum_blocks(size), -1.0);
      const double sum = drop_below(dropped, cut, blocks);
      expect_block_sums(dropped, blocks, sum);
      double kept = 0.0;
      for (size_t t = 0; t < size; ++t) {
        ASSERT_EQ(dropped[t], weights[t] >= cut ? weights[t] : 0.0f)
            << "size " << size << " token " << t << " cut " << cut;
        kept += dropped[t];
      }
      EXPECT_NEAR(sum, kept, 1e-6 * kept + 1e-30) << size;
    }
  }
}

}  // namespace
}  // namespace headway::core
