// Sampling exactly as the core's sampler does it (core/include/headway/core/sampler.h): the
// random draw and the cuts of top-k, top-p and min-p, for a model plugin that samples on its own
// device (hw_model_info.returns_logits = 0) and should pick the tokens the core would pick. The
// engine samples a request on the host instead whenever it asks for what only the host does
// (logprobs, penalties, guided output: docs/sdk.md), so a model that samples otherwise gives a
// request other tokens for the same seed depending on whether it asks for log-probabilities
// (the conformance suite's model.device_sampling compares). Header-only; the draw and the digit
// functions compile for CUDA devices too (__host__ __device__ under nvcc).
//
// The draw. u = uniform(seed, output_index) depends on the request's seed and the index of the
// token among its outputs only, never on batching or order; the token is the first, in token
// order, at which the kept weights summed so far pass u times their total.
//
// The cuts, in vLLM's order (its V1 sampler: temperature, min-p, then top-k and top-p). Weights
// are w = exp((logit - max) / temperature), in [0, 1] (the best token has weight 1; NaN weighs 0).
// Each filter is a threshold, and a token is kept when its weight is at or above every threshold,
// so tokens tied at a cut are all kept:
// - min-p: min_p itself (the best token weighs 1);
// - top-k: the k-th largest weight (min-p's cut commutes with it);
// - top-p: the largest weight t such that the weights >= t (among those min-p and top-k kept)
//   amount to at least ceil(top_p * their total), masses summed in 40-bit fixed point
//   (fixed_mass) so that the cut is the same whatever order a device's threads add them in. The
//   total is what min-p left, as vLLM's top-p renormalises after min-p's mask: applied after
//   top-p (Hugging Face's order), min-p would keep the tokens that top-p kept of the whole row.
// The draw then walks the kept tokens in token order (see sampler.h).
//
// The search. Non-negative floats order like their bit patterns, so a threshold is found on the
// bits: 4 passes of 8-bit digits, most significant first. Each pass histograms the amounts (a
// count for top-k, a fixed-point mass for top-p) of the weights that agree with the digits found
// so far; radix_step() picks this pass's digit. The result is what a bisection on the bits finds,
// in 4 passes over the row instead of about 30. A device kernel builds the histograms itself
// (in shared memory) and calls radix_step(); on the host, radix_cut() does it all.
//
// What the functions below assume of a row, as the core's sampler guarantees: every weight is +0
// or a positive float (no NaN, no -0, whose bits sort above 1), the largest is 1 (so a top-p
// total is never 0 unless every weight is), top_p is in (0, 1].
//
// Threading: pure functions.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>

#if defined(__CUDACC__)
#define HEADWAY_SAMPLING_HD __host__ __device__
#else
#define HEADWAY_SAMPLING_HD
#endif

namespace headway::sdk::sampling {

// splitmix64's finaliser.
HEADWAY_SAMPLING_HD inline uint64_t mix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

// The draw's uniform number in [0, 1): two rounds, the first decorrelating nearby seeds, the
// second nearby output indices; the top 53 bits.
HEADWAY_SAMPLING_HD inline double uniform(uint64_t seed, uint32_t output_index) {
  const uint64_t bits =
      mix64(mix64(seed) ^ (0xd1b54a32d192ed03ULL * (static_cast<uint64_t>(output_index) + 1)));
  return static_cast<double>(bits >> 11) * 0x1.0p-53;
}

inline constexpr int kRadixBins = 256;
inline constexpr int kRadixPasses = 4;

// The digit of `bits` that pass `pass` (0 = the most significant 8 bits) histograms.
HEADWAY_SAMPLING_HD inline uint32_t radix_digit(uint32_t bits, int pass) {
  return (bits >> (24 - 8 * pass)) & 0xffu;
}

// Whether `bits` agrees with `prefix` on the digits that the passes before `pass` fixed.
HEADWAY_SAMPLING_HD inline bool radix_matches(uint32_t bits, uint32_t prefix, int pass) {
  if (pass == 0) return true;
  const int shift = 32 - 8 * pass;
  return (bits >> shift) == (prefix >> shift);
}

// One pass of the search. bins[d]: the amount of the values that match `prefix` and have digit d
// in this pass; `above`: the amount of the values greater than every value matching `prefix`.
// Picks the highest digit d at which above + bins[255] + ... + bins[d] reaches `need`, writes it
// into `prefix` and adds bins[255] + ... + bins[d + 1] to `above`. When no digit reaches `need`
// (rounding: the whole row falls short), picks digit 0, so the search ends at the smallest value
// and keeps every value, as a bisection that starts from threshold 0 does.
template <class Amount>
HEADWAY_SAMPLING_HD inline void radix_step(const Amount* bins, int pass, Amount need, Amount& above,
                                           uint32_t& prefix) {
  Amount running = above;
  int digit = -1;
  for (int d = kRadixBins - 1; d >= 0; --d) {
    if (running + bins[d] >= need) {
      digit = d;
      break;
    }
    running += bins[d];
  }
  if (digit < 0) {
    digit = 0;
    running -= bins[0];
  }
  above = running;
  prefix |= static_cast<uint32_t>(digit) << (24 - 8 * pass);
}

// A weight in [0, 1] as a fixed-point mass with 40 fraction bits: masses are summed as integers,
// so the top-p cut does not depend on the order in which they are added, and a row of 2^23
// weights of 1 still fits in 64 bits.
HEADWAY_SAMPLING_HD inline uint64_t fixed_mass(float weight) {
  // Scaling by a power of two is exact in float, and the product (at most 2^40) converts to a
  // signed integer in one instruction where an unsigned conversion takes several.
  return static_cast<uint64_t>(static_cast<int64_t>(weight * 0x1.0p40f));
}

// The amount top-p must keep of a kept `total`: ceil(top_p * total), at most the total.
HEADWAY_SAMPLING_HD inline uint64_t top_p_need(float top_p, uint64_t total) {
  // ::ceil, not std::ceil: the global one is the overload CUDA declares for device code.
  const double wanted = ::ceil(static_cast<double>(top_p) * static_cast<double>(total));
  return wanted >= static_cast<double>(total) ? total : static_cast<uint64_t>(wanted);
}

namespace detail {
inline uint32_t bits_of(float w) {
  uint32_t bits = 0;
  std::memcpy(&bits, &w, sizeof bits);
  return bits;
}
}  // namespace detail

// The largest threshold t such that the weights w[0, n) at or above t, among those `admit(w)`
// lets in, amount to at least need_of(total) (amounts are `amount(w)`, total the amount of every
// weight admitted: the first pass's histogram gives it, so top-p needs no pass of its own);
// 0 when the whole row falls short. Weights must be non-negative and not NaN. `scratch` holds n
// floats the search may overwrite. Host side: the first pass and a copy of the weights it leaves
// in play go over the whole row, without a branch on the data (a flat row's digits are random, and
// mispredicted branches cost more than the passes' work); the other passes only over those.
template <class Amount, class NeedOf, class AmountOf, class Admit>
float radix_cut(const float* weights, size_t n, NeedOf need_of, AmountOf amount, Admit admit,
                float* scratch) {
  // Four histograms, a weight's by its index: neighbours often share a digit, and an add into
  // one bin waits for the add before it.
  constexpr size_t kCopies = 4;
  Amount copies[kCopies][kRadixBins] = {};
  size_t i = 0;
  for (; i + kCopies <= n; i += kCopies) {
    for (size_t c = 0; c < kCopies; ++c) {
      const float w = weights[i + c];
      copies[c][radix_digit(detail::bits_of(w), 0)] += admit(w) ? amount(w) : Amount{0};
    }
  }
  for (; i < n; ++i) {
    const float w = weights[i];
    copies[0][radix_digit(detail::bits_of(w), 0)] += admit(w) ? amount(w) : Amount{0};
  }
  Amount bins[kRadixBins] = {};
  Amount total = 0;
  for (int d = 0; d < kRadixBins; ++d) {
    for (const auto& copy : copies) bins[d] += copy[d];
    total += bins[d];
  }
  const Amount need = need_of(total);
  uint32_t prefix = 0;
  Amount above = 0;
  radix_step(bins, 0, need, above, prefix);
  // Only the admitted weights with the digit just found stay in play: copied, each written and
  // kept by advancing the end or not. (For the thresholds keep_threshold() admits by, a weight
  // with that digit is admitted anyway; another `admit` need not be a threshold.)
  size_t in_play = 0;
  for (size_t i = 0; i < n; ++i) {
    const float w = weights[i];
    scratch[in_play] = w;
    in_play += (radix_matches(detail::bits_of(w), prefix, 1) && admit(w)) ? 1 : 0;
  }
  for (int pass = 1; pass < kRadixPasses; ++pass) {
    Amount pass_bins[kRadixBins] = {};
    size_t still = 0;
    for (size_t i = 0; i < in_play; ++i) {
      const float w = scratch[i];
      const uint32_t bits = detail::bits_of(w);
      if (radix_matches(bits, prefix, pass)) {
        pass_bins[radix_digit(bits, pass)] += amount(w);
        scratch[still++] = w;
      }
    }
    in_play = still;
    radix_step(pass_bins, pass, need, above, prefix);
  }
  float cut = 0.0f;
  std::memcpy(&cut, &prefix, sizeof cut);
  return cut;
}

// The threshold at which the core keeps a token: its weight >= the returned value, for
// min_p (0 = off), top_k (0 = off) and top_p (1 = off) applied in that order; 0 keeps every
// token. `scratch` holds n floats the search may overwrite. Host side: two passes over the row
// for each of top-k and top-p asked for, and a few over the weights near the cut.
inline float keep_threshold(const float* weights, size_t n, uint32_t top_k, float top_p,
                            float min_p, float* scratch) {
  float cut = min_p;
  if (top_k > 0 && top_k < n) {
    const float top_k_cut = radix_cut<uint64_t>(
        weights, n, [top_k](uint64_t) { return uint64_t{top_k}; },
        [](float) { return uint64_t{1}; }, [](float) { return true; }, scratch);
    cut = top_k_cut > cut ? top_k_cut : cut;
  }
  if (top_p < 1.0f) {
    const float kept_cut = cut;  // min-p's and top-k's: top-p weighs what they kept
    const float top_p_cut = radix_cut<uint64_t>(
        weights, n,
        // A total of 0 (every weight 0: a row of NaN logits) leaves nothing to cut: a need of 1,
        // which nothing reaches, keeps every token (a need of 0 would end the search at the
        // largest bit pattern, a NaN).
        [top_p](uint64_t total) { return total == 0 ? 1 : top_p_need(top_p, total); },
        [](float w) { return fixed_mass(w); }, [kept_cut](float w) { return w >= kept_cut; },
        scratch);
    cut = top_p_cut > kept_cut ? top_p_cut : kept_cut;
  }
  return cut;
}

}  // namespace headway::sdk::sampling
