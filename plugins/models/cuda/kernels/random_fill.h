// Deterministic random weights generated on the device, for models built from a named shape
// without a checkpoint (benchmarks of Llama-3.1-8B-sized models need no 16 GB download). Plain
// C++ header; kernels in random_fill.cu.
//
// Ownership: device pointers borrowed for the launch. Threading: enqueues on `stream`.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

namespace headway::models::cuda::kernels {

// out[i] = bf16(uniform(-scale, scale)) from a counter-based hash of (seed, first + i): the same
// seed gives the same weights on any device and launch shape, and filling [0, n) in parts (each
// with its `first`) gives the bits of filling it at once.
cudaError_t fill_uniform_bf16(__nv_bfloat16* out, uint64_t count, float scale, uint64_t seed,
                              cudaStream_t stream, uint64_t first = 0);

// out[i] = value.
cudaError_t fill_float(float* out, uint64_t count, float value, cudaStream_t stream);

}  // namespace headway::models::cuda::kernels
