// The two half-precision loops decode is bound by: converting a weight row to float and the dot
// product of a float vector with a half-precision weight row. On CPUs with F16C (x86-64-v3: every
// AVX2 CPU) F16 rows are converted with vcvtph2ps, one instruction per 8 values; the portable
// conversion of half.h costs ~10 vector operations per 8 values, which made the single-stream
// decode compute-bound (perf: 72% of a decode step in the weight kernel, most of it in the
// conversion's shifts and masks) instead of bound by reading the weights.
//
// These are the only intrinsics in the plugin; builds for CPUs without F16C
// (HEADWAY_CPU_MODEL_ARCH=x86-64) fall back to half.h. Defined in half_kernels.cpp, which is
// compiled only into the plugin, with the plugin's -march.
//
// Threading: pure functions.
#pragma once

#include <cstdint>

#include "weights.h"

namespace headway::models::cpu {

// out[0..n) = float(in[0..n)); `dtype` is kF16 or kBF16.
void convert_half_row(DType dtype, const uint16_t* in, float* out, uint32_t n);

// sum over j < n of x[j] * float(w[j]); `dtype` is kF16 or kBF16. The summation order is fixed by
// n alone (never by the caller's batch), so a request's result does not depend on its neighbours.
float dot_half_row(DType dtype, const float* x, const uint16_t* w, uint32_t n);

}  // namespace headway::models::cpu
