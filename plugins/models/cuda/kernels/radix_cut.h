// The digit-by-digit search behind the device sampler's top-k and top-p cuts (sampling.cu): the
// largest threshold t such that the values >= t amount to at least `need` (a count for top-k, a
// fixed-point mass for top-p). Weights are non-negative floats, whose bit patterns order like the
// values, so t is found on the bits: 4 passes of 8-bit digits, most significant first. Each pass
// histograms the values that agree with the digits found so far (the kernel, in shared memory);
// radix_step() then picks this pass's digit from the histogram. The result is exactly what a
// bisection on the bits finds (the value of the element at which the amount reaches `need`), in 4
// passes over the row instead of about 30.
//
// Plain C++ (host and device), so that the search itself is tested on a machine without a GPU
// (tests/gpu/radix_cut_test.cpp). Threading: pure functions.
#pragma once

#include <cstdint>

#if defined(__CUDACC__)
#define HEADWAY_RADIX_HD __host__ __device__
#else
#define HEADWAY_RADIX_HD
#endif

namespace headway::models::cuda::kernels {

inline constexpr int kRadixBins = 256;
inline constexpr int kRadixPasses = 4;

// The digit of `bits` that pass `pass` (0 = the most significant 8 bits) histograms.
HEADWAY_RADIX_HD inline uint32_t radix_digit(uint32_t bits, int pass) {
  return (bits >> (24 - 8 * pass)) & 0xffu;
}

// Whether `bits` agrees with `prefix` on the digits that the passes before `pass` fixed.
HEADWAY_RADIX_HD inline bool radix_matches(uint32_t bits, uint32_t prefix, int pass) {
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
HEADWAY_RADIX_HD inline void radix_step(const Amount* bins, int pass, Amount need, Amount& above,
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
// so the top-p cut does not depend on the order in which threads add them (run to run the same
// cut for the same row), and a row of 2^23 weights of 1 still fits in 64 bits.
HEADWAY_RADIX_HD inline uint64_t fixed_mass(float weight) {
  return static_cast<uint64_t>(static_cast<double>(weight) * 0x1.0p40);
}

}  // namespace headway::models::cuda::kernels
