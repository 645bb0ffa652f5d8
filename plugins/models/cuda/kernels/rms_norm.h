// Fused residual add + RMSNorm: the float residual stream absorbs a layer's (bf16) output and the
// normalised row is written in bf16 for the next matrix multiply. One kernel instead of two
// passes over the residual. Plain C++ header; the kernel is in rms_norm.cu.
//
// Ownership: device pointers borrowed for the launch. Threading: enqueues on `on.stream`.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "launch.h"

namespace headway::models::cuda::kernels {

// For each output row i < count, with source row s = rows ? rows[i] : i:
//   if add: x[s][:] += float(add[s][:]), then += add_bias[:] if add_bias   (x updated in place)
//   out[i][:] = bf16(x[s][:] / sqrt(mean(x[s]^2) + eps) * weight[:])
// `rows` lets the final norm run only on the rows that are sampled. `add_bias` ([hidden], or
// null) is the bias of the projection that produced `add` (o_proj with attention_bias): added
// here, once, it is also right under tensor parallelism, where `add` is the all-reduced sum.
// on.overlap: an overlapped launch (launch.h).
cudaError_t add_rms_norm(float* x, const __nv_bfloat16* add, const float* add_bias,
                         const float* weight, const int32_t* rows, uint32_t count, uint32_t hidden,
                         float eps, __nv_bfloat16* out, const Launch& on);

}  // namespace headway::models::cuda::kernels
