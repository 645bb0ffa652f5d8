// Headway's own matrix-vector product for projections of steps with few rows (decode batches of
// up to kGemvMaxRows): out[m][n] = x[m][k] * w[n][k]^T, BF16 in, FP32 accumulation, BF16 or FP32
// out, the same contract as Gemm (gemm.h). At such m the product only streams the weights, and
// cuBLASLt's kernels read the narrower projections (4,096 or 6,144 rows of 4,096) at 41-44% of an
// H200's bandwidth (docs/performance.md); this kernel gives a few output rows (one at m = 1) to
// each warp, which reads them in 16-byte pieces that bypass L1, so every SM keeps many loads in
// flight. From kGemvMmaFromRows rows it runs on tensor cores instead (16 weight rows per mma, the
// activation rows as its 8 columns), where one dot product per row and output cost more L1 loads
// than weight loads.
//
// A row's sum runs in an order fixed by k and by the kernel alone (kGemvMmaFromRows; on tensor
// cores also n, which sets how many warps split k): its result does not depend on the other rows,
// nor on m on either side of that bound (but it differs from cuBLASLt's in the last bits, so
// deterministic mode, which must agree with the m > kGemvMaxRows steps, does not use it). Plain C++
// header; kernels in gemv.cu.
//
// Ownership: device pointers borrowed for the launch. Threading: enqueues on `on.stream`.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "launch.h"

namespace headway::models::cuda::kernels {

inline constexpr uint32_t kGemvMaxRows = 8;
// From this many rows (and k a multiple of 32) gemv() runs on tensor cores (gemv.cu); below it, and
// for other k, a warp's lanes sum dot products. The two sum a row in different orders, so a row's
// result depends on which side of this bound m is, and on nothing else.
inline constexpr uint32_t kGemvMmaFromRows = 3;

// Whether gemv() takes this product: 1 <= m <= kGemvMaxRows, k a multiple of 8 and x, w and out
// 16-byte aligned (rows are read in 16-byte pieces).
bool gemv_applies(uint32_t m, uint32_t k, const void* x, const void* w, const void* out);

// cudaErrorInvalidValue when gemv_applies() is false. With on.overlap the launch may start while
// the previous kernel finishes, and loads its first weights meanwhile (launch.h).
cudaError_t gemv(const __nv_bfloat16* x, const __nv_bfloat16* w, void* out, bool out_f32,
                 uint32_t m, uint32_t n, uint32_t k, const Launch& on);

// The gate|up projection and SwiGLU in one kernel: act[m][ffn] = silu(g) * u, where g and u are
// gemv()'s BF16 results for gate_up's row i and row ffn + i ([2 * ffn][k], gate rows first, the
// model's fused layout). The same bits as gemv() into a BF16 [m][2 * ffn] buffer followed by
// swiglu() (swiglu.h): each sum runs in the order gemv() gives it for 2 * ffn rows, and both round
// g and u to BF16 and share the element's formula. Saves a kernel and the gate|up buffer's round
// trip per layer. cudaErrorInvalidValue when gemv_applies(m, k, x, gate_up, act) is false.
cudaError_t gemv_swiglu(const __nv_bfloat16* x, const __nv_bfloat16* gate_up, __nv_bfloat16* act,
                        uint32_t m, uint32_t ffn, uint32_t k, const Launch& on);

}  // namespace headway::models::cuda::kernels
