#include "common.cuh"
#include "random_fill.h"

namespace headway::models::cuda::kernels {
namespace {

__device__ uint64_t hash64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

__global__ void fill_uniform_kernel(__nv_bfloat16* out, uint64_t count, float scale, uint64_t seed,
                                    uint64_t first) {
  const uint64_t key = hash64(seed);
  for (uint64_t i = blockIdx.x * static_cast<uint64_t>(blockDim.x) + threadIdx.x; i < count;
       i += static_cast<uint64_t>(gridDim.x) * blockDim.x) {
    const uint64_t bits = hash64(key ^ (first + i));
    const float u = static_cast<float>(bits >> 40) * 0x1.0p-24f;  // [0, 1)
    out[i] = detail::to_bf16((2.0f * u - 1.0f) * scale);
  }
}

__global__ void fill_float_kernel(float* out, uint64_t count, float value) {
  for (uint64_t i = blockIdx.x * static_cast<uint64_t>(blockDim.x) + threadIdx.x; i < count;
       i += static_cast<uint64_t>(gridDim.x) * blockDim.x) {
    out[i] = value;
  }
}

unsigned grid_for(uint64_t count) {
  const uint64_t blocks = (count + 255) / 256;
  return static_cast<unsigned>(blocks < 16384 ? (blocks == 0 ? 1 : blocks) : 16384);
}

}  // namespace

cudaError_t fill_uniform_bf16(__nv_bfloat16* out, uint64_t count, float scale, uint64_t seed,
                              cudaStream_t stream, uint64_t first) {
  if (count == 0) return cudaSuccess;
  fill_uniform_kernel<<<grid_for(count), 256, 0, stream>>>(out, count, scale, seed, first);
  return cudaGetLastError();
}

cudaError_t fill_float(float* out, uint64_t count, float value, cudaStream_t stream) {
  if (count == 0) return cudaSuccess;
  fill_float_kernel<<<grid_for(count), 256, 0, stream>>>(out, count, value);
  return cudaGetLastError();
}

}  // namespace headway::models::cuda::kernels
