#include "common.cuh"
#include "embedding.h"

namespace headway::models::cuda::kernels {
namespace {

__global__ void embedding_kernel(const __nv_bfloat16* table, uint32_t hidden, const int32_t* ids,
                                 float* out) {
  const uint64_t row = static_cast<uint64_t>(ids[blockIdx.x]) * hidden;
  float* o = out + static_cast<uint64_t>(blockIdx.x) * hidden;
  for (uint32_t i = threadIdx.x; i < hidden; i += blockDim.x)
    o[i] = detail::to_float(table[row + i]);
}

}  // namespace

cudaError_t embedding_gather(const __nv_bfloat16* table, uint32_t hidden, const int32_t* ids,
                             uint32_t tokens, float* out, cudaStream_t stream) {
  if (tokens == 0) return cudaSuccess;
  embedding_kernel<<<tokens, 256, 0, stream>>>(table, hidden, ids, out);
  return cudaGetLastError();
}

}  // namespace headway::models::cuda::kernels
