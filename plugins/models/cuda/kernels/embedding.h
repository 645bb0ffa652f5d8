// Embedding gather: the step's token ids -> rows of the (bf16) embedding table, widened to the
// float residual stream. Plain C++ header; the kernel is in embedding.cu.
//
// Ownership: every pointer is device memory borrowed for the launch. Threading: enqueues on
// `stream` and returns; any host thread.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

namespace headway::models::cuda::kernels {

// out[t][:] = float(table[ids[t]][:]) for t < tokens. ids must already be checked to lie in
// [0, vocab): the kernel does not bounds-check them (the host does, once per step).
cudaError_t embedding_gather(const __nv_bfloat16* table, uint32_t hidden, const int32_t* ids,
                             uint32_t tokens, float* out, cudaStream_t stream);

}  // namespace headway::models::cuda::kernels
