#include "common.cuh"
#include "rms_norm.h"

namespace headway::models::cuda::kernels {
namespace {

__global__ void add_rms_norm_kernel(float* x, const __nv_bfloat16* add, const float* weight,
                                    const int32_t* rows, uint32_t hidden, float eps,
                                    __nv_bfloat16* out) {
  __shared__ float scratch[32];
  const uint64_t src = rows != nullptr ? static_cast<uint64_t>(rows[blockIdx.x]) : blockIdx.x;
  float* xr = x + src * hidden;
  float sum = 0.0f;
  for (uint32_t i = threadIdx.x; i < hidden; i += blockDim.x) {
    float v = xr[i];
    if (add != nullptr) {
      v += detail::to_float(add[src * hidden + i]);
      xr[i] = v;
    }
    sum += v * v;
  }
  sum = detail::block_sum(sum, scratch);
  const float inv = rsqrtf(sum / static_cast<float>(hidden) + eps);
  __nv_bfloat16* o = out + static_cast<uint64_t>(blockIdx.x) * hidden;
  // Each thread rereads only the elements it wrote, so no barrier is needed for x.
  for (uint32_t i = threadIdx.x; i < hidden; i += blockDim.x) {
    o[i] = detail::to_bf16(xr[i] * inv * weight[i]);
  }
}

}  // namespace

cudaError_t add_rms_norm(float* x, const __nv_bfloat16* add, const float* weight,
                         const int32_t* rows, uint32_t count, uint32_t hidden, float eps,
                         __nv_bfloat16* out, cudaStream_t stream) {
  if (count == 0) return cudaSuccess;
  const int threads = hidden >= 4096 ? 1024 : hidden >= 1024 ? 512 : 128;
  add_rms_norm_kernel<<<count, threads, 0, stream>>>(x, add, weight, rows, hidden, eps, out);
  return cudaGetLastError();
}

}  // namespace headway::models::cuda::kernels
