// The device sampler's top-k and top-p search (plugins/models/cuda/kernels/radix_cut.h), run on
// the host: for rows of weights with ties, zeros, a weight of 1 and long tails, the 4-pass radix
// search must find exactly the threshold that the bisection on the weight's bits (what the kernel
// did before, about 30 passes) finds, for counts (top-k) and fixed-point masses (top-p, among the
// weights a top-k cut kept). Needs no GPU; the histograms the kernel builds in shared memory are
// built here with the same digit functions.
#include <gtest/gtest.h>
#include <radix_cut.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <random>
#include <vector>

namespace headway::models::cuda::kernels {
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

// The kernel's passes, histograms built on the host.
float radix_cut_on_host(const std::vector<float>& row, uint64_t need, const AmountOf& amount,
                        const Admit& admit) {
  uint32_t prefix = 0;
  uint64_t above = 0;
  for (int pass = 0; pass < kRadixPasses; ++pass) {
    std::vector<uint64_t> bins(kRadixBins, 0);
    for (float w : row) {
      const uint32_t bits = bits_of(w);
      if (admit(w) && radix_matches(bits, prefix, pass)) bins[radix_digit(bits, pass)] += amount(w);
    }
    radix_step(bins.data(), pass, need, above, prefix);
  }
  return float_of(prefix);
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
      const float radix = radix_cut_on_host(row, k, one, all);
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
        top_k_cut = radix_cut_on_host(
            row, k, [](float) { return uint64_t{1}; }, [](float) { return true; });
      const Admit kept = [top_k_cut](float w) { return w >= top_k_cut; };
      const uint64_t total = amount_at_or_above(row, 0.0f, mass, kept);
      for (const double p : {0.05, 0.5, 0.9, 0.999}) {
        SCOPED_TRACE("n " + std::to_string(row.size()) + ", k " + std::to_string(k) + ", p " +
                     std::to_string(p));
        const uint64_t need = std::min<uint64_t>(
            total, static_cast<uint64_t>(std::ceil(p * static_cast<double>(total))));
        const float radix = radix_cut_on_host(row, need, mass, kept);
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
  EXPECT_EQ(radix_cut_on_host(row, 4, one, all), 0.0f);
  EXPECT_EQ(bisection_cut(row, 4, one, all), 0.0f);
}

TEST(RadixCut, FixedMassesOfAFullRowFitAndOrderLikeTheWeights) {
  EXPECT_EQ(fixed_mass(1.0f), uint64_t{1} << 40);
  EXPECT_EQ(fixed_mass(0.0f), 0u);
  EXPECT_LT(fixed_mass(0.25f), fixed_mass(0.5f));
  // A 128k-token vocabulary of weights of 1 sums far below 2^64.
  EXPECT_LT(static_cast<double>(fixed_mass(1.0f)) * 131072.0, 0x1.0p64);
}

}  // namespace
}  // namespace headway::models::cuda::kernels
