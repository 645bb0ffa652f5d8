// The SDK's sampling (sdk/include/headway/sdk/sampling.hpp), which the core's sampler and the
// cuda model's device sampler both use: the draw's uniform numbers are splitmix64's; for rows of
// weights with ties, zeros, a weight of 1 and long tails, the 4-pass radix search finds exactly
// the threshold a bisection on the weight's bits finds (what the device kernel did before, about
// 30 passes), for counts (top-k) and fixed-point masses (top-p, among the weights a top-k cut
// kept); keep_threshold() keeps what ranking the whole row would keep.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <headway/sdk/sampling.hpp>
#include <random>
#include <vector>

namespace headway::sdk::sampling {
namespace {

uint32_t bits_of(float v) {
  uint32_t b = 0;
  std::memcpy(&b, &v, sizeof b);
  return b;
}

float float_of(uint32_t b) {
  float v = 0.0f;
  std::memcpy(&v, &b, sizeof v);
  return v;
}

using AmountOf = std::function<uint64_t(float)>;
using Admit = std::function<bool(float)>;

// Sum of amount(w) over the admitted weights >= t.
uint64_t amount_at_or_above(const std::vector<float>& row, float t, const AmountOf& amount,
                            const Admit& admit) {
  uint64_t sum = 0;
  for (float w : row) {
    if (admit(w) && w >= t) sum += amount(w);
  }
  return sum;
}

// The bisection the kernel used to run: the largest bit pattern t in [0, 1] whose amount reaches
// `need`, taking t = 0 to reach it.
float bisection_cut(const std::vector<float>& row, uint64_t need, const AmountOf& amount,
                    const Admit& admit) {
  uint32_t lo = 0;
  uint32_t hi = 0x3f800001u;
  while (hi - lo > 1) {
    const uint32_t mid = lo + (hi - lo) / 2;
    if (amount_at_or_above(row, float_of(mid), amount, admit) >= need) {
      lo = mid;
    } else {
      hi = mid;
    }
  }
  return float_of(lo);
}

float radix_cut_of(const std::vector<float>& row, uint64_t need, const AmountOf& amount,
                   const Admit& admit) {
  std::vector<float> scratch(row.size());
  return radix_cut<uint64_t>(
      row.data(), row.size(), [need](uint64_t) { return need; }, amount, admit, scratch.data());
}

// Rows of several shapes: softmax-like tails, ties, zeros, the best token at exactly 1.
std::vector<std::vector<float>> rows() {
  std::mt19937_64 rng(7);
  std::vector<std::vector<float>> out;
  for (int shape = 0; shape < 6; ++shape) {
    const size_t n = 500 + 700 * shape;
    std::vector<float> row(n);
    for (size_t i = 0; i < n; ++i) {
      const double x = std::uniform_real_distribution<double>(0.0, 1.0)(rng);
      switch (shape) {
        case 0:  // uniform weights
          row[i] = static_cast<float>(x);
          break;
        case 1:  // logits spread over 20 nats: a long tail of tiny weights
          row[i] = static_cast<float>(std::exp(-20.0 * x));
          break;
        case 2:  // few distinct values: many ties at every cut
          row[i] = static_cast<float>(std::floor(x * 8.0) / 8.0);
          break;
        case 3:  // mostly zeros (NaN logits weigh 0), some mass
          row[i] = x < 0.9 ? 0.0f : static_cast<float>(x);
          break;
        case 4:  // sharply peaked: exp(-(l_max - l) / T) with a small temperature
          row[i] = static_cast<float>(std::exp(-200.0 * x));
          break;
        default:  // all equal
          row[i] = 0.25f;
      }
    }
    row[n / 3] = 1.0f;  // the best token
    out.push_back(std::move(row));
  }
  return out;
}

TEST(RadixCut, TopKFindsTheKthLargestWeightAsBisectionDoes) {
  const AmountOf one = [](float) { return uint64_t{1}; };
  const Admit all = [](float) { return true; };
  for (const std::vector<float>& row : rows()) {
    for (const uint64_t k : {uint64_t{1}, uint64_t{2}, uint64_t{40}, uint64_t{row.size() / 2},
                             uint64_t{row.size() - 1}}) {
      SCOPED_TRACE("n " + std::to_string(row.size()) + ", k " + std::to_string(k));
      const float radix = radix_cut_of(row, k, one, all);
      EXPECT_EQ(bits_of(radix), bits_of(bisection_cut(row, k, one, all)));
      std::vector<float> sorted = row;
      std::sort(sorted.begin(), sorted.end(), std::greater<>());
      EXPECT_EQ(radix, sorted[k - 1]) << "the k-th largest weight";
    }
  }
}

TEST(RadixCut, TopPFindsTheBisectionCutAmongTheWeightsTopKKept) {
  const AmountOf mass = [](float w) { return fixed_mass(w); };
  for (const std::vector<float>& row : rows()) {
    for (const uint64_t k : {uint64_t{0}, uint64_t{50}}) {
      float top_k_cut = 0.0f;
      if (k > 0)
        top_k_cut = radix_cut_of(
            row, k, [](float) { return uint64_t{1}; }, [](float) { return true; });
      const Admit kept = [top_k_cut](float w) { return w >= top_k_cut; };
      const uint64_t total = amount_at_or_above(row, 0.0f, mass, kept);
      for (const double p : {0.05, 0.5, 0.9, 0.999}) {
        SCOPED_TRACE("n " + std::to_string(row.size()) + ", k " + std::to_string(k) + ", p " +
                     std::to_string(p));
        const uint64_t need = std::min<uint64_t>(
            total, static_cast<uint64_t>(std::ceil(p * static_cast<double>(total))));
        const float radix = radix_cut_of(row, need, mass, kept);
        EXPECT_EQ(bits_of(radix), bits_of(bisection_cut(row, need, mass, kept)));
        EXPECT_GE(amount_at_or_above(row, radix, mass, kept), need) << "the kept mass reaches p";
      }
    }
  }
}

TEST(RadixCut, ANeedNoDigitReachesKeepsEverything) {
  // Rounding can leave the whole row short of `need`: the cut falls to 0, as bisection's does.
  const std::vector<float> row = {0.5f, 0.25f, 1.0f};
  const AmountOf one = [](float) { return uint64_t{1}; };
  const Admit all = [](float) { return true; };
  EXPECT_EQ(radix_cut_of(row, 4, one, all), 0.0f);
  EXPECT_EQ(bisection_cut(row, 4, one, all), 0.0f);
}

TEST(RadixCut, FixedMassesOfAFullRowFitAndOrderLikeTheWeights) {
  EXPECT_EQ(fixed_mass(1.0f), uint64_t{1} << 40);
  EXPECT_EQ(fixed_mass(0.0f), 0u);
  EXPECT_LT(fixed_mass(0.25f), fixed_mass(0.5f));
  // A 128k-token vocabulary of weights of 1 sums far below 2^64.
  EXPECT_LT(static_cast<double>(fixed_mass(1.0f)) * 131072.0, 0x1.0p64);
}

float keep_threshold_of(const std::vector<float>& row, uint32_t top_k, float top_p, float min_p) {
  std::vector<float> scratch(row.size());
  return keep_threshold(row.data(), row.size(), top_k, top_p, min_p, scratch.data());
}

// What ranking the whole row keeps, in vLLM's order: min-p's cut is min_p; top-k's is the k-th
// largest weight; top-p then walks the weights both kept from the heaviest, a group of equal
// weights at a time, until their fixed-point mass reaches ceil(top_p * their total). A token is
// kept at or above all three.
float ranked_threshold(std::vector<float> row, uint32_t top_k, float top_p, float min_p) {
  std::sort(row.begin(), row.end(), std::greater<>());
  float cut = min_p;
  if (top_k > 0 && top_k < row.size()) cut = std::max(cut, row[top_k - 1]);
  if (top_p < 1.0f) {
    uint64_t total = 0;
    for (float w : row) total += w >= cut ? fixed_mass(w) : 0;
    const auto need = std::min<uint64_t>(
        total, static_cast<uint64_t>(std::ceil(static_cast<double>(top_p) * total)));
    uint64_t mass = 0;
    for (size_t i = 0; i < row.size() && row[i] >= cut;) {
      const float w = row[i];
      for (; i < row.size() && row[i] == w; ++i) mass += fixed_mass(w);
      if (mass >= need) {
        cut = w;
        break;
      }
    }
  }
  return cut;
}

TEST(KeepThreshold, KeepsWhatRankingTheRowKeeps) {
  for (const std::vector<float>& row : rows()) {
    const auto n = static_cast<uint32_t>(row.size());
    for (const uint32_t k : {0u, 1u, 50u, n / 2, n}) {
      for (const float p : {1.0f, 0.05f, 0.5f, 0.9f, 0.999f}) {
        for (const float min_p : {0.0f, 0.3f}) {
          SCOPED_TRACE("n " + std::to_string(n) + ", k " + std::to_string(k) + ", p " +
                       std::to_string(p) + ", min_p " + std::to_string(min_p));
          EXPECT_EQ(bits_of(keep_threshold_of(row, k, p, min_p)),
                    bits_of(ranked_threshold(row, k, p, min_p)));
        }
      }
    }
  }
}

TEST(KeepThreshold, TokensTiedAtACutAreAllKept) {
  const std::vector<float> row = {0.5f, 1.0f, 0.5f, 0.1f, 0.5f};
  // Top-k 2 cuts at the second largest weight, 0.5, which three tokens have.
  EXPECT_EQ(keep_threshold_of(row, 2, 1.0f, 0.0f), 0.5f);
  // Top-p 0.5 of 2.6: the best token alone has 1 < 1.3, the tied group reaches it.
  EXPECT_EQ(keep_threshold_of(row, 0, 0.5f, 0.0f), 0.5f);
  // Top-p 0.3: the best token alone reaches 0.78.
  EXPECT_EQ(keep_threshold_of(row, 0, 0.3f, 0.0f), 1.0f);
}

TEST(KeepThreshold, NoFilterKeepsEveryTokenAndARowWithoutMassIsNotCut) {
  const std::vector<float> row = {0.5f, 1.0f, 0.0f};
  EXPECT_EQ(keep_threshold_of(row, 0, 1.0f, 0.0f), 0.0f);
  EXPECT_EQ(keep_threshold_of(row, 3, 1.0f, 0.0f), 0.0f) << "top-k = vocabulary";
  // Every weight 0 (a row of NaN logits): top-p has nothing to weigh and leaves the cut alone.
  const std::vector<float> empty = {0.0f, 0.0f};
  EXPECT_EQ(keep_threshold_of(empty, 0, 0.9f, 0.0f), 0.0f);
}

TEST(Draw, IsSplitmix64OfTheSeedAndTheOutputIndex) {
  // Values from an independent Python implementation: a plugin that writes the formula out
  // itself, in any language, draws the same numbers.
  EXPECT_EQ(uniform(0, 0), 8492793375000289 * 0x1.0p-53);
  EXPECT_EQ(uniform(1, 0), 1254537779894954 * 0x1.0p-53);
  EXPECT_EQ(uniform(42, 7), 2693444827377324 * 0x1.0p-53);
  EXPECT_EQ(uniform(0xdeadbeefcafe, 1000000), 7758431568821475 * 0x1.0p-53);
}

}  // namespace
}  // namespace headway::sdk::sampling
