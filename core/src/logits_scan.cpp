#include "logits_scan.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

namespace headway::core {
namespace {

// 16 bytes: a native register on baseline x86-64 (SSE2) and ARM (NEON), so that the vectors pass
// between the helpers in registers.
constexpr size_t kLanes = 4;
using Floats = float __attribute__((vector_size(kLanes * sizeof(float))));
using Ints = int32_t __attribute__((vector_size(kLanes * sizeof(int32_t))));
using Uints = uint32_t __attribute__((vector_size(kLanes * sizeof(uint32_t))));

Floats load(const float* at) {
  Floats v;
  std::memcpy(&v, at, sizeof v);  // unaligned: one movups per half on x86-64
  return v;
}

Floats splat(float x) { return Floats{} + x; }

// The last `n` (< kLanes) floats at `at`, the lanes past them `pad`: tails go through the same
// arithmetic as the vectors before them.
Floats load_tail(const float* at, size_t n, float pad) {
  Floats v = splat(pad);
  for (size_t k = 0; k < n; ++k) v[k] = at[k];
  return v;
}

// exp(x) for x in [-87, 0] (Cephes' expf: Cody-Waite reduction by ln 2, a degree-6 polynomial,
// the exponent added to the bits).
Floats exp_nonpositive(Floats x) {
  const Floats round = splat(12582912.0f);  // 1.5 * 2^23: adding it rounds to an integer
  const Floats shifted = x * 1.44269504088896341f + round;
  const Floats n = shifted - round;
  // n as the integer the rounding left in the low bits (unsigned: wraps, never overflows).
  const Uints exponent = reinterpret_cast<Uints>(shifted) - reinterpret_cast<Uints>(round);
  const Floats r = x - n * 0.693359375f + n * 2.12194440e-4f;
  Floats p = splat(1.9875691500e-4f);
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  const Floats y = p * r * r + r + 1.0f;
  const Uints scale = (exponent + 127u) << 23;  // 2^n: n >= -126 for x >= -87
  return y * reinterpret_cast<Floats>(scale);
}

}  // namespace

float max_logit(std::span<const float> logits) {
  const float lowest = -std::numeric_limits<float>::infinity();
  // Four running maxima, so that each comparison does not wait for the one before.
  Floats best[4] = {splat(lowest), splat(lowest), splat(lowest), splat(lowest)};
  size_t i = 0;
  for (; i + 4 * kLanes <= logits.size(); i += 4 * kLanes) {
    for (size_t k = 0; k < 4; ++k) {
      const Floats v = load(logits.data() + i + k * kLanes);
      best[k] = v > best[k] ? v : best[k];  // NaN compares false: kept out
    }
  }
  float out = lowest;
  for (const Floats& lanes : best) {
    for (size_t k = 0; k < kLanes; ++k) out = lanes[k] > out ? lanes[k] : out;
  }
  for (; i < logits.size(); ++i) out = logits[i] > out ? logits[i] : out;
  return out;
}

int32_t first_index_of(std::span<const float> logits, float value) {
  const Floats target = splat(value);
  size_t i = 0;
  for (; i + 4 * kLanes <= logits.size(); i += 4 * kLanes) {
    const float* at = logits.data() + i;
    const Ints equal = (load(at) == target) | (load(at + kLanes) == target) |
                       (load(at + 2 * kLanes) == target) | (load(at + 3 * kLanes) == target);
    if (((equal[0] | equal[1]) | (equal[2] | equal[3])) != 0) break;  // the first is in these
  }
  for (; i < logits.size(); ++i) {
    if (logits[i] == value) return static_cast<int32_t>(i);
  }
  return -1;
}

size_t first_above(std::span<const float> logits, size_t from, float threshold) {
  const Floats bar = splat(threshold);
  size_t i = from;
  for (; i + 4 * kLanes <= logits.size(); i += 4 * kLanes) {
    const float* at = logits.data() + i;
    const Ints above = (load(at) > bar) | (load(at + kLanes) > bar) |
                       (load(at + 2 * kLanes) > bar) | (load(at + 3 * kLanes) > bar);
    if (((above[0] | above[1]) | (above[2] | above[3])) != 0) break;  // the first is in these
  }
  for (; i < logits.size(); ++i) {
    if (logits[i] > threshold) return i;
  }
  return logits.size();
}

double sum_exp_below(std::span<const float> logits, float shift) {
  constexpr size_t kStep = 2 * kLanes;  // two vectors per iteration, summed apart
  constexpr size_t kBlock = 256;        // terms per block: 32 per lane sum before the double
  const Floats low = splat(-87.0f);
  const Floats any = splat(-std::numeric_limits<float>::infinity());
  const auto term = [&](Floats v) {
    Floats x = v - shift;
    x = x < low ? low : x;
    const Ints present = v >= any;  // all ones unless NaN (which compares false)
    return reinterpret_cast<Floats>(reinterpret_cast<Ints>(exp_nonpositive(x)) & present);
  };
  double sum = 0.0;
  const size_t whole = logits.size() - logits.size() % kStep;
  size_t i = 0;
  while (i < whole) {
    Floats lanes[2] = {};
    for (const size_t end = std::min(whole, i + kBlock); i < end; i += kStep) {
      lanes[0] += term(load(logits.data() + i));
      lanes[1] += term(load(logits.data() + i + kLanes));
    }
    for (size_t k = 0; k < kLanes; ++k) sum += static_cast<double>(lanes[0][k]) + lanes[1][k];
  }
  for (; i < logits.size(); i += kLanes) {
    const size_t n = std::min(kLanes, logits.size() - i);
    // Padding with NaN adds nothing.
    const Floats lanes = term(load_tail(logits.data() + i, n, std::nanf("")));
    for (size_t k = 0; k < kLanes; ++k) sum += lanes[k];
  }
  return sum;
}

namespace {

// Rewrites a row in place, each entry v into f(v) on 4-float vectors (the last entries padded with
// `pad` to a vector), and returns the sum of what it wrote: each block of kSumBlock entries summed
// 64 a lane in float, the lanes into a double, the blocks in order into the result; `block_sums`,
// when not empty, gets each block's sum, so that adding them in order gives the result exactly.
template <class F>
double rewrite_and_sum(std::span<float> row, F f, float pad, std::span<double> block_sums) {
  double sum = 0.0;
  const size_t whole = row.size() - row.size() % kLanes;
  for (size_t first = 0; first < row.size(); first += kSumBlock) {
    Floats lanes{};
    const size_t end = std::min(whole, first + kSumBlock);
    for (size_t i = first; i < end; i += kLanes) {
      const Floats w = f(load(row.data() + i));
      std::memcpy(row.data() + i, &w, sizeof w);
      lanes += w;
    }
    double block = 0.0;
    for (size_t k = 0; k < kLanes; ++k) block += lanes[k];
    if (end == whole && whole < row.size() && whole < first + kSumBlock) {
      // The row's last entries, fewer than a vector: the end of this block.
      const size_t n = row.size() - whole;
      const Floats w = f(load_tail(row.data() + whole, n, pad));
      for (size_t k = 0; k < n; ++k) {
        row[whole + k] = w[k];
        block += w[k];
      }
    }
    if (!block_sums.empty()) block_sums[first / kSumBlock] = block;
    sum += block;
  }
  return sum;
}

}  // namespace

double exp_weights(std::span<float> logits, float shift, float scale,
                   std::span<double> block_sums) {
  const Floats low = splat(-87.0f);
  const auto weight = [&](Floats v) {
    const Floats x = (v - shift) * scale;
    const Ints kept = x >= low;  // false below -87, at -inf and for NaN
    return reinterpret_cast<Floats>(reinterpret_cast<Ints>(exp_nonpositive(kept ? x : low)) & kept);
  };
  return rewrite_and_sum(logits, weight, std::nanf(""), block_sums);  // NaN pads weigh 0
}

double drop_below(std::span<float> weights, float cut, std::span<double> block_sums) {
  const Floats bar = splat(cut);
  const auto kept = [&](Floats w) {
    return reinterpret_cast<Floats>(reinterpret_cast<Ints>(w) & (w >= bar));
  };
  return rewrite_and_sum(weights, kept, 0.0f, block_sums);
}

}  // namespace headway::core
