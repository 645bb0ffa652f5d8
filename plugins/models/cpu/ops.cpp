#include "ops.h"

#include <cmath>
#include <cstring>

#include "half_kernels.h"
#include "vector_exp.h"

namespace headway::models::cpu {

void rms_norm_row(const float* x, uint32_t width, const float* weight, float eps, float* out) {
  float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
  for (uint32_t i = 0; i < width; ++i) sum += x[i] * x[i];
  const float inv = 1.0f / std::sqrt(sum / static_cast<float>(width) + eps);
#pragma omp simd
  for (uint32_t i = 0; i < width; ++i) out[i] = x[i] * inv * weight[i];
}

void rms_norm(const float* x, uint32_t rows, uint32_t width, const float* weight, float eps,
              float* out, int threads) {
#pragma omp parallel for num_threads(threads) schedule(static) if (rows > 16)
  for (uint32_t r = 0; r < rows; ++r) {
    rms_norm_row(x + static_cast<size_t>(r) * width, width, weight, eps,
                 out + static_cast<size_t>(r) * width);
  }
}

void add_bias_row(float* x, uint32_t width, const float* bias) {
#pragma omp simd
  for (uint32_t i = 0; i < width; ++i) x[i] += bias[i];
}

void add_bias(float* x, uint32_t rows, uint32_t width, const float* bias, int threads) {
#pragma omp parallel for num_threads(threads) schedule(static) if (rows > 16)
  for (uint32_t r = 0; r < rows; ++r) add_bias_row(x + static_cast<size_t>(r) * width, width, bias);
}

void swiglu(float* gate, const float* up, uint32_t rows, uint32_t width, int threads) {
  const size_t n = static_cast<size_t>(rows) * width;
#pragma omp parallel for simd num_threads(threads) schedule(static) if (n > 65536)
  for (size_t i = 0; i < n; ++i) {
    const float g = gate[i];
    gate[i] = g / (1.0f + vector_exp(-g)) * up[i];
  }
}

void embed(const Matrix& table, const int32_t* ids, uint32_t count, float* out, int threads) {
  const uint32_t width = table.cols;
#pragma omp parallel for num_threads(threads) schedule(static) if (count > 64)
  for (uint32_t t = 0; t < count; ++t) {
    float* o = out + static_cast<size_t>(t) * width;
    const size_t offset = static_cast<size_t>(ids[t]) * width;
    switch (table.dtype) {
      case DType::kF32:
        std::memcpy(o, static_cast<const float*>(table.data) + offset, width * sizeof(float));
        break;
      case DType::kF16:
      case DType::kBF16:
        convert_half_row(table.dtype, static_cast<const uint16_t*>(table.data) + offset, o, width);
        break;
    }
  }
}

}  // namespace headway::models::cpu
