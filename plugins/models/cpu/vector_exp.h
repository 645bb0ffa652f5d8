// exp(x) for float as a plain function the compiler vectorises inside `#pragma omp simd` loops.
// glibc only declares its vector expf (libmvec) under -ffast-math, which the attention cannot use
// (it relies on -inf), so the scalar libm call was 16% of a 4k-token prefill.
//
// Cody-Waite range reduction (x = n ln2 + r) and the Cephes degree-6 polynomial for exp(r): max
// relative error 1e-7 over [-87, 88] (measured against double exp). Inputs below -87 return
// ~1.6e-38 instead of 0; callers only pass x <= 0 values of softmax or SiLU arguments, where that
// difference is far below float resolution of the sums. Needs -fno-trapping-math to vectorise.
//
// Threading: pure function.
#pragma once

#include <cstdint>
#include <cstring>

namespace headway::models::cpu {

inline float vector_exp(float x) {
  x = x < -87.0f ? -87.0f : x;
  x = x > 88.0f ? 88.0f : x;
  const float t = x * 1.44269504088896341f;
  const int32_t n = static_cast<int32_t>(t + (t >= 0.0f ? 0.5f : -0.5f));
  const float nf = static_cast<float>(n);
  const float r = x - nf * 0.693359375f + nf * 2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  const float y = p * r * r + r + 1.0f;
  const uint32_t bits = static_cast<uint32_t>(n + 127) << 23;
  float scale;
  std::memcpy(&scale, &bits, 4);
  return y * scale;
}

}  // namespace headway::models::cpu
