#include "linear.h"

#include <dnnl.h>
#include <omp.h>

#include <algorithm>
#include <headway/sdk/status.hpp>
#include <string>

#include "half.h"

namespace headway::models::cpu {
namespace {

// Converted panel size: ~4 MB of floats keeps the panel in L2/L3 while sgemm streams over it.
constexpr uint64_t kPanelFloats = 1u << 20;

void sgemm(const float* x, uint32_t m, uint32_t n, uint32_t k, const float* w, uint32_t ldw,
           float* y, uint32_t ldy, bool accumulate) {
  // Row-major: C[m x n] = A[m x k] * B^T with B stored [n x k].
  const dnnl_status_t status =
      dnnl_sgemm('N', 'T', m, n, k, 1.0f, x, k, w, ldw, accumulate ? 1.0f : 0.0f, y, ldy);
  if (status != dnnl_success) {
    throw sdk::Error(HW_INTERNAL, "cpu model: dnnl_sgemm failed with status " +
                                      std::to_string(static_cast<int>(status)));
  }
}

inline void to_float(const Matrix& w, uint64_t row, float* out) {
  const uint16_t* src = static_cast<const uint16_t*>(w.data) + row * w.cols;
  if (w.dtype == DType::kF16) {
    f16_to_f32(src, out, w.cols);
  } else {
    bf16_to_f32(src, out, w.cols);
  }
}

}  // namespace

Linear::Linear(int threads, uint32_t max_cols) : threads_(threads), max_cols_(max_cols) {
  row_scratch_.reserve(static_cast<size_t>(threads) * max_cols * 4);
}

void Linear::run(const float* x, uint32_t m, const Matrix& w, float* y, uint32_t ldy,
                 bool accumulate) {
  if (m == 0) return;
  if (w.dtype == DType::kF32) {
    sgemm(x, m, w.rows, w.cols, static_cast<const float*>(w.data), w.cols, y, ldy, accumulate);
  } else if (m < kGemmRows) {
    gemv_half(x, m, w, y, ldy, accumulate);
  } else {
    gemm_half(x, m, w, y, ldy, accumulate);
  }
}

// Four weight rows per iteration: four independent FMA chains hide the FMA latency that a single
// reduction would be bound by, and each input row is loaded once for the four of them.
constexpr uint32_t kRowsPerIteration = 4;
// Partial sums per row in the single-stream kernel: 4 AVX2 vectors.
constexpr uint32_t kLanes = 32;

void Linear::gemv_half(const float* x, uint32_t m, const Matrix& w, float* y, uint32_t ldy,
                       bool accumulate) {
  const uint32_t k = w.cols;
  float* scratch = row_scratch_.data();
  const size_t stride = static_cast<size_t>(max_cols_) * kRowsPerIteration;
  const bool f16 = w.dtype == DType::kF16;
  const uint16_t* weights = static_cast<const uint16_t*>(w.data);
  const uint32_t groups = (w.rows + kRowsPerIteration - 1) / kRowsPerIteration;
#pragma omp parallel for num_threads(threads_) schedule(static)
  for (uint32_t group = 0; group < groups; ++group) {
    const uint32_t n0 = group * kRowsPerIteration;
    if (n0 + kRowsPerIteration > w.rows) {
      // Tail rows: one at a time.
      float* row = scratch + stride * static_cast<size_t>(omp_get_thread_num());
      for (uint32_t n = n0; n < w.rows; ++n) {
        to_float(w, n, row);
        for (uint32_t i = 0; i < m; ++i) {
          const float* xi = x + static_cast<size_t>(i) * k;
          float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
          for (uint32_t j = 0; j < k; ++j) sum += xi[j] * row[j];
          float& out = y[static_cast<size_t>(i) * ldy + n];
          out = accumulate ? out + sum : sum;
        }
      }
      continue;
    }
    float s0 = 0.0f, s1 = 0.0f, s2 = 0.0f, s3 = 0.0f;
    if (m == 1 && k % kLanes == 0) {
      // Single stream: one weight row at a time (a purely sequential read, which the hardware
      // prefetcher follows best), converted inside the dot and never stored. The 32 partial sums
      // are four independent vector accumulators, enough to hide the FMA latency.
      for (uint32_t n = n0; n < n0 + kRowsPerIteration; ++n) {
        const uint16_t* wn = weights + static_cast<size_t>(n) * k;
        float acc[kLanes] = {};
        for (uint32_t j = 0; j < k; j += kLanes) {
          // Two rows ahead: the next rows' lines are in flight while this one is summed.
          __builtin_prefetch(wn + j + 2 * static_cast<size_t>(k));
          if (f16) {
#pragma omp simd
            for (uint32_t l = 0; l < kLanes; ++l) acc[l] += x[j + l] * f16_to_f32(wn[j + l]);
          } else {
#pragma omp simd
            for (uint32_t l = 0; l < kLanes; ++l) acc[l] += x[j + l] * bf16_to_f32(wn[j + l]);
          }
        }
        float sum = 0.0f;
        for (uint32_t l = 0; l < kLanes; ++l) sum += acc[l];
        y[n] = accumulate ? y[n] + sum : sum;
      }
      continue;
    }
    if (m == 1) {
      // Single stream: convert inside the dot; the weights are read once and never stored.
      const uint16_t* w0 = weights + static_cast<size_t>(n0) * k;
      const uint16_t* w1 = w0 + k;
      const uint16_t* w2 = w1 + k;
      const uint16_t* w3 = w2 + k;
      if (f16) {
#pragma omp simd reduction(+ : s0, s1, s2, s3)
        for (uint32_t j = 0; j < k; ++j) {
          s0 += x[j] * f16_to_f32(w0[j]);
          s1 += x[j] * f16_to_f32(w1[j]);
          s2 += x[j] * f16_to_f32(w2[j]);
          s3 += x[j] * f16_to_f32(w3[j]);
        }
      } else {
#pragma omp simd reduction(+ : s0, s1, s2, s3)
        for (uint32_t j = 0; j < k; ++j) {
          s0 += x[j] * bf16_to_f32(w0[j]);
          s1 += x[j] * bf16_to_f32(w1[j]);
          s2 += x[j] * bf16_to_f32(w2[j]);
          s3 += x[j] * bf16_to_f32(w3[j]);
        }
      }
      float* out = y + n0;
      out[0] = accumulate ? out[0] + s0 : s0;
      out[1] = accumulate ? out[1] + s1 : s1;
      out[2] = accumulate ? out[2] + s2 : s2;
      out[3] = accumulate ? out[3] + s3 : s3;
      continue;
    }
    // Several rows: convert the four weight rows once into L1, then dot them with each input.
    float* r0 = scratch + stride * static_cast<size_t>(omp_get_thread_num());
    float* r1 = r0 + k;
    float* r2 = r1 + k;
    float* r3 = r2 + k;
    to_float(w, n0, r0);
    to_float(w, n0 + 1, r1);
    to_float(w, n0 + 2, r2);
    to_float(w, n0 + 3, r3);
    for (uint32_t i = 0; i < m; ++i) {
      const float* xi = x + static_cast<size_t>(i) * k;
      s0 = s1 = s2 = s3 = 0.0f;
#pragma omp simd reduction(+ : s0, s1, s2, s3)
      for (uint32_t j = 0; j < k; ++j) {
        s0 += xi[j] * r0[j];
        s1 += xi[j] * r1[j];
        s2 += xi[j] * r2[j];
        s3 += xi[j] * r3[j];
      }
      float* out = y + static_cast<size_t>(i) * ldy + n0;
      out[0] = accumulate ? out[0] + s0 : s0;
      out[1] = accumulate ? out[1] + s1 : s1;
      out[2] = accumulate ? out[2] + s2 : s2;
      out[3] = accumulate ? out[3] + s3 : s3;
    }
  }
}

void Linear::gemm_half(const float* x, uint32_t m, const Matrix& w, float* y, uint32_t ldy,
                       bool accumulate) {
  const uint32_t k = w.cols;
  const uint32_t panel_rows =
      std::max<uint32_t>(1, std::min<uint64_t>(w.rows, kPanelFloats / std::max<uint32_t>(k, 1)));
  panel_scratch_.reserve(static_cast<size_t>(panel_rows) * k);
  float* panel = panel_scratch_.data();
  for (uint32_t n0 = 0; n0 < w.rows; n0 += panel_rows) {
    const uint32_t rows = std::min(panel_rows, w.rows - n0);
#pragma omp parallel for num_threads(threads_) schedule(static)
    for (uint32_t r = 0; r < rows; ++r) to_float(w, n0 + r, panel + static_cast<size_t>(r) * k);
    sgemm(x, m, rows, k, panel, k, y + n0, ldy, accumulate);
  }
}

}  // namespace headway::models::cpu
