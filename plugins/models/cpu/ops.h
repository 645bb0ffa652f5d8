// The small element-wise steps of a Llama layer, as plain loops the compiler vectorises.
//
// Threading: each function splits its rows over `threads` OpenMP threads; buffers are borrowed.
#pragma once

#include <cstdint>

#include "weights.h"

namespace headway::models::cpu {

// out[r] = x[r] / sqrt(mean(x[r]^2) + eps) * weight, for `rows` rows of `width` floats.
void rms_norm(const float* x, uint32_t rows, uint32_t width, const float* weight, float eps,
              float* out, int threads);

// The same for one row, on the calling thread (inside a loop that is parallel already).
void rms_norm_row(const float* x, uint32_t width, const float* weight, float eps, float* out);

// x[r] += bias, for `rows` rows of `width` floats (a projection's bias).
void add_bias(float* x, uint32_t rows, uint32_t width, const float* bias, int threads);
// The same for one row, on the calling thread.
void add_bias_row(float* x, uint32_t width, const float* bias);

// gate[r] = silu(gate[r]) * up[r] in place (SwiGLU), for rows x width floats.
void swiglu(float* gate, const float* up, uint32_t rows, uint32_t width, int threads);

// out[t] = float(embedding row ids[t]); ids must be checked by the caller.
void embed(const Matrix& table, const int32_t* ids, uint32_t count, float* out, int threads);

}  // namespace headway::models::cpu
