// y = x * W^T for every projection of a step: all of the step's tokens go through one matrix
// multiply. F32 weights go straight to oneDNN's sgemm. F16/BF16 weights take one of two paths:
// - few rows (decode): a weight-streaming kernel that converts each weight row once into an
//   L1-resident float row and dots it with every input row; it reads the 2-byte weights exactly
//   once, which is what bounds decode;
// - many rows (prefill): weight panels are converted to float and multiplied with sgemm, so the
//   conversion (O(N*K)) is amortised over the rows (O(M*N*K)).
//
// Ownership: a Linear owns its conversion scratch; inputs and outputs are borrowed per call.
// Threading: one caller at a time; each call fans out over `threads` OpenMP threads.
#pragma once

#include <cstdint>
#include <initializer_list>

#include "aligned_buffer.h"
#include "weights.h"

namespace headway::models::cpu {

class Linear {
 public:
  // `max_cols`: the largest input width of any matrix it will see.
  Linear(int threads, uint32_t max_cols);

  // y[m x w.rows] = x[m x w.cols] * W^T, or += when `accumulate` (used to add the attention and
  // MLP outputs into the residual stream without another pass). ldy is y's row stride.
  void run(const float* x, uint32_t m, const Matrix& w, float* y, uint32_t ldy, bool accumulate);

  // One projection of a fused call: y[m x w.rows] = x * W^T with row stride ldy.
  struct Projection {
    const Matrix* w;
    float* y;
    uint32_t ldy;
  };
  // Several projections of the same input (q/k/v, gate/up). For a single half-precision input row
  // (decode of one stream) they share one parallel region, so each thread streams one contiguous
  // range across the matrices and the threads meet once instead of once per matrix; otherwise it
  // is run() for each.
  void run_fused(const float* x, uint32_t m, std::initializer_list<Projection> projections);

  // Rows from which half-precision weights take the convert + sgemm path.
  static constexpr uint32_t kGemmRows = 16;

 private:
  void gemv_half(const float* x, uint32_t m, const Matrix& w, float* y, uint32_t ldy,
                 bool accumulate);
  void gemm_half(const float* x, uint32_t m, const Matrix& w, float* y, uint32_t ldy,
                 bool accumulate);

  int threads_;
  uint32_t max_cols_;
  AlignedBuffer<float> row_scratch_;    // threads x 4 x max_cols: converted weight rows
  AlignedBuffer<float> panel_scratch_;  // a converted weight panel for the sgemm path
};

}  // namespace headway::models::cpu
