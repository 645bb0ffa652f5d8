// SwiGLU on the fused gate|up projection: act[t][i] = silu(gu[t][i]) * gu[t][ffn + i]. Plain C++
// header; the kernel is in swiglu.cu.
//
// Ownership: device pointers borrowed for the launch. Threading: enqueues on `on.stream`.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "launch.h"

namespace headway::models::cuda::kernels {

// gate_up: [tokens][2 * ffn] (gate first, then up); act: [tokens][ffn]. Math in float.
// on.overlap: an overlapped launch (launch.h).
cudaError_t swiglu(const __nv_bfloat16* gate_up, uint32_t tokens, uint32_t ffn, __nv_bfloat16* act,
                   const Launch& on);

}  // namespace headway::models::cuda::kernels
