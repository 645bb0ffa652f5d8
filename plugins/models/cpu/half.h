// Conversions between IEEE half (F16), bfloat16 (BF16) and float, written as plain integer/float
// loops so that GCC vectorises them (GCC 12 does not vectorise _Float16 casts, and the project
// avoids hand-written intrinsics). Exact: every F16 and BF16 value is representable in float.
//
// Threading: pure functions.
#pragma once

#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>

namespace headway::models::cpu {

// Exact F16 -> float: the exponent is rebased by multiplying with 2^112, which also turns F16
// subnormals into normal floats; Inf/NaN (exponent all ones) are patched with a mask. Written with
// memcpy and masks rather than std::bit_cast and a branch: GCC 12 only vectorises this form.
inline float f16_to_f32(uint16_t h) {
  const uint32_t x = h;
  const uint32_t magnitude = (x & 0x7fffu) << 13;
  float f;
  std::memcpy(&f, &magnitude, 4);
  f *= 0x1.0p112f;
  uint32_t bits;
  std::memcpy(&bits, &f, 4);
  const uint32_t special = 0u - static_cast<uint32_t>((x & 0x7c00u) == 0x7c00u);
  bits = (bits & ~special) | ((magnitude | 0x7f800000u) & special);
  bits |= (x & 0x8000u) << 16;
  float out;
  std::memcpy(&out, &bits, 4);
  return out;
}

inline float bf16_to_f32(uint16_t h) {
  const uint32_t bits = static_cast<uint32_t>(h) << 16;
  float out;
  std::memcpy(&out, &bits, 4);
  return out;
}

// Round-to-nearest-even float -> F16 (used by the checkpoint writer and weight conversion at load,
// never on the hot path).
uint16_t f32_to_f16(float f);
// Round-to-nearest-even float -> BF16; NaN stays NaN.
uint16_t f32_to_bf16(float f);

inline void f16_to_f32(const uint16_t* __restrict in, float* __restrict out, size_t n) {
#pragma omp simd
  for (size_t i = 0; i < n; ++i) out[i] = f16_to_f32(in[i]);
}
inline void bf16_to_f32(const uint16_t* __restrict in, float* __restrict out, size_t n) {
#pragma omp simd
  for (size_t i = 0; i < n; ++i) out[i] = bf16_to_f32(in[i]);
}

}  // namespace headway::models::cpu
