#include "common.cuh"
#include "launch.cuh"
#include "swiglu.h"

namespace headway::models::cuda::kernels {
namespace {

template <bool kOverlap>
__global__ void swiglu_kernel(const __nv_bfloat16* gate_up, uint64_t n, uint32_t ffn,
                              __nv_bfloat16* act) {
  detail::wait_for_previous_kernel<kOverlap>();
  for (uint64_t e = blockIdx.x * static_cast<uint64_t>(blockDim.x) + threadIdx.x; e < n;
       e += static_cast<uint64_t>(gridDim.x) * blockDim.x) {
    const uint64_t t = e / ffn;
    const uint64_t i = e % ffn;
    const float g = detail::to_float(gate_up[t * 2 * ffn + i]);
    const float u = detail::to_float(gate_up[t * 2 * ffn + ffn + i]);
    act[e] = detail::to_bf16(g / (1.0f + expf(-g)) * u);
  }
}

}  // namespace

cudaError_t swiglu(const __nv_bfloat16* gate_up, uint32_t tokens, uint32_t ffn, __nv_bfloat16* act,
                   const Launch& on) {
  const uint64_t n = static_cast<uint64_t>(tokens) * ffn;
  if (n == 0) return cudaSuccess;
  const uint64_t blocks = (n + 255) / 256;
  // A grid-stride loop: enough blocks to fill an H200 several times over, no more.
  return detail::launch_kernel(swiglu_kernel<false>, swiglu_kernel<true>,
                               static_cast<unsigned>(blocks < 8192 ? blocks : 8192), 256, 0, on,
                               gate_up, n, ffn, act);
}

}  // namespace headway::models::cuda::kernels
