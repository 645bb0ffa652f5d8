#include "half_kernels.h"

#if defined(__F16C__) && defined(__FMA__) && defined(__AVX2__)
#include <immintrin.h>
#define HEADWAY_HAVE_F16C 1
#endif

#include "half.h"

namespace headway::models::cpu {
namespace {

// Values per step of the vector loops: four 8-wide accumulators, enough independent FMA chains to
// hide the FMA latency on current x86 cores.
constexpr uint32_t kStep = 32;

#ifdef HEADWAY_HAVE_F16C
inline __m256 load_f16(const uint16_t* w) {
  return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(w)));
}

inline __m256 load_bf16(const uint16_t* w) {
  const __m256i wide = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(w)));
  return _mm256_castsi256_ps(_mm256_slli_epi32(wide, 16));
}

inline float horizontal_sum(__m256 v) {
  const __m128 folded = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  const __m128 pairs = _mm_add_ps(folded, _mm_movehl_ps(folded, folded));
  return _mm_cvtss_f32(_mm_add_ss(pairs, _mm_movehdup_ps(pairs)));
}

template <__m256 (*Load)(const uint16_t*)>
float dot_vector(const float* x, const uint16_t* w, uint32_t n, uint32_t* done) {
  __m256 a0 = _mm256_setzero_ps(), a1 = _mm256_setzero_ps();
  __m256 a2 = _mm256_setzero_ps(), a3 = _mm256_setzero_ps();
  uint32_t j = 0;
  for (; j + kStep <= n; j += kStep) {
    a0 = _mm256_fmadd_ps(_mm256_loadu_ps(x + j), Load(w + j), a0);
    a1 = _mm256_fmadd_ps(_mm256_loadu_ps(x + j + 8), Load(w + j + 8), a1);
    a2 = _mm256_fmadd_ps(_mm256_loadu_ps(x + j + 16), Load(w + j + 16), a2);
    a3 = _mm256_fmadd_ps(_mm256_loadu_ps(x + j + 24), Load(w + j + 24), a3);
  }
  for (; j + 8 <= n; j += 8) a0 = _mm256_fmadd_ps(_mm256_loadu_ps(x + j), Load(w + j), a0);
  *done = j;
  return horizontal_sum(_mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3)));
}
#endif

}  // namespace

void convert_half_row(DType dtype, const uint16_t* in, float* out, uint32_t n) {
  uint32_t j = 0;
#ifdef HEADWAY_HAVE_F16C
  if (dtype == DType::kF16) {
    for (; j + 8 <= n; j += 8) _mm256_storeu_ps(out + j, load_f16(in + j));
  }
#endif
  if (dtype == DType::kF16) {
    f16_to_f32(in + j, out + j, n - j);
  } else {
    bf16_to_f32(in + j, out + j, n - j);
  }
}

float dot_half_row(DType dtype, const float* x, const uint16_t* w, uint32_t n) {
  uint32_t j = 0;
  float sum = 0.0f;
#ifdef HEADWAY_HAVE_F16C
  sum =
      dtype == DType::kF16 ? dot_vector<load_f16>(x, w, n, &j) : dot_vector<load_bf16>(x, w, n, &j);
#endif
  // The tail (and the whole row without F16C), vectorised by the compiler.
  if (dtype == DType::kF16) {
#pragma omp simd reduction(+ : sum)
    for (uint32_t i = j; i < n; ++i) sum += x[i] * f16_to_f32(w[i]);
  } else {
#pragma omp simd reduction(+ : sum)
    for (uint32_t i = j; i < n; ++i) sum += x[i] * bf16_to_f32(w[i]);
  }
  return sum;
}

}  // namespace headway::models::cpu
