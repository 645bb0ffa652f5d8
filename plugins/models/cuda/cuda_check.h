// Turns CUDA, cuBLAS and NCCL failures into sdk::Error statuses that name the failing call, so
// that no device error is ever dropped or crashes the process. Host code only.
//
// Threading: pure functions.
#pragma once

#include <cuda_runtime.h>

#include <headway/sdk/status.hpp>
#include <string>

namespace headway::models::cuda {

// Out-of-memory becomes HW_RESOURCE_EXHAUSTED, anything else HW_INTERNAL; the message is
// "cuda model: <what>: <cuda error name>: <description>".
inline void check_cuda(cudaError_t err, const char* what) {
  if (err == cudaSuccess) return;
  const hw_status_code code =
      err == cudaErrorMemoryAllocation ? HW_RESOURCE_EXHAUSTED : HW_INTERNAL;
  throw sdk::Error(code, std::string("cuda model: ") + what + ": " + cudaGetErrorName(err) + ": " +
                             cudaGetErrorString(err));
}

}  // namespace headway::models::cuda

// Names the call in the message: CUDA_CHECK(cudaMalloc(&p, n)) -> "cuda model: cudaMalloc(&p, n):
// ...".
#define HW_CUDA_CHECK(call) ::headway::models::cuda::check_cuda((call), #call)
