#include "linear.h"

#include <dnnl.h>
#include <omp.h>

#include <algorithm>
#include <headway/sdk/status.hpp>
#include <string>

#include "half_kernels.h"

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
  convert_half_row(w.dtype, static_cast<const uint16_t*>(w.data) + row * w.cols, out, w.cols);
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

void Linear::run_fused(const float* x, uint32_t m, std::initializer_list<Projection> projections) {
  constexpr size_t kMaxFused = 4;
  bool single_half_row = m == 1 && projections.size() <= kMaxFused;
  uint32_t total_rows = 0;
  for (const Projection& p : projections) {
    single_half_row = single_half_row && p.w->dtype != DType::kF32;
    total_rows += p.w->rows;
  }
  if (!single_half_row) {
    for (const Projection& p : projections) run(x, m, *p.w, p.y, p.ldy, false);
    return;
  }
  const Projection* list = projections.begin();
  const size_t count = projections.size();
#pragma omp parallel for num_threads(threads_) schedule(static)
  for (uint32_t global = 0; global < total_rows; ++global) {
    // Which projection this row belongs to: at most kMaxFused comparisons.
    uint32_t n = global;
    size_t i = 0;
    while (n >= list[i].w->rows && i + 1 < count) n -= list[i++].w->rows;
    const Matrix& w = *list[i].w;
    list[i].y[n] = dot_half_row(
        w.dtype, x, static_cast<const uint16_t*>(w.data) + static_cast<size_t>(n) * w.cols, w.cols);
  }
}

// Four weight rows per iteration of the several-inputs kernel: four independent FMA chains hide
// the FMA latency that a single reduction would be bound by, and each input row is loaded once for
// the four of them.
constexpr uint32_t kRowsPerIteration = 4;

void Linear::gemv_half(const float* x, uint32_t m, const Matrix& w, float* y, uint32_t ldy,
                       bool accumulate) {
  const uint32_t k = w.cols;
  const uint16_t* weights = static_cast<const uint16_t*>(w.data);
  if (m == 1) {
    // Single stream: each thread reads a contiguous range of weight rows front to back (the
    // access the hardware prefetcher follows best), converting inside the dot; nothing is stored.
#pragma omp parallel for num_threads(threads_) schedule(static)
    for (uint32_t n = 0; n < w.rows; ++n) {
      const float sum = dot_half_row(w.dtype, x, weights + static_cast<size_t>(n) * k, k);
      y[n] = accumulate ? y[n] + sum : sum;
    }
    return;
  }
  float* scratch = row_scratch_.data();
  const size_t stride = static_cast<size_t>(max_cols_) * kRowsPerIteration;
  const uint32_t groups = (w.rows + kRowsPerIteration - 1) / kRowsPerIteration;
#pragma omp parallel for num_threads(threads_) schedule(static)
  for (uint32_t group = 0; group < groups; ++group) {
    const uint32_t n0 = group * kRowsPerIteration;
    float* r0 = scratch + stride * static_cast<size_t>(omp_get_thread_num());
    if (n0 + kRowsPerIteration > w.rows) {
      // Tail rows: one at a time.
      for (uint32_t n = n0; n < w.rows; ++n) {
        to_float(w, n, r0);
        for (uint32_t i = 0; i < m; ++i) {
          const float* xi = x + static_cast<size_t>(i) * k;
          float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
          for (uint32_t j = 0; j < k; ++j) sum += xi[j] * r0[j];
          float& out = y[static_cast<size_t>(i) * ldy + n];
          out = accumulate ? out + sum : sum;
        }
      }
      continue;
    }
    // Convert the four weight rows once into L1, then dot them with each input.
    float* r1 = r0 + k;
    float* r2 = r1 + k;
    float* r3 = r2 + k;
    to_float(w, n0, r0);
    to_float(w, n0 + 1, r1);
    to_float(w, n0 + 2, r2);
    to_float(w, n0 + 3, r3);
    for (uint32_t i = 0; i < m; ++i) {
      const float* xi = x + static_cast<size_t>(i) * k;
      float s0 = 0.0f, s1 = 0.0f, s2 = 0.0f, s3 = 0.0f;
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
