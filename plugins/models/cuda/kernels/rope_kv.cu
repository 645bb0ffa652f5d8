#include "common.cuh"
#include "rope_kv.h"

namespace headway::models::cuda::kernels {
namespace {

constexpr int kMaxHalf = 128;  // head_dim <= 256 (checked at load)

__global__ void rope_kv_kernel(RopeKvArgs a) {
  __shared__ float cos_s[kMaxHalf];
  __shared__ float sin_s[kMaxHalf];
  const uint32_t t = blockIdx.x;
  const uint32_t half = a.head_dim / 2;
  const double pos = a.positions[t];
  for (uint32_t i = threadIdx.x; i < half; i += blockDim.x) {
    double s, c;
    sincos(pos * a.inv_freq[i], &s, &c);
    cos_s[i] = static_cast<float>(c);
    sin_s[i] = static_cast<float>(s);
  }
  __syncthreads();
  const uint32_t width = (a.heads + 2 * a.kv_heads) * a.head_dim;
  __nv_bfloat16* row = a.qkv + static_cast<uint64_t>(t) * width;
  const int64_t slot = a.slot_offsets[t];
  // Rotate pairs (i, i + half) of every q and k head; k goes to the cache as well.
  const uint32_t pairs = (a.heads + a.kv_heads) * half;
  for (uint32_t e = threadIdx.x; e < pairs; e += blockDim.x) {
    const uint32_t h = e / half;
    const uint32_t i = e % half;
    __nv_bfloat16* x = row + static_cast<uint64_t>(h) * a.head_dim;
    const float x1 = detail::to_float(x[i]);
    const float x2 = detail::to_float(x[i + half]);
    const __nv_bfloat16 r1 = detail::to_bf16(x1 * cos_s[i] - x2 * sin_s[i]);
    const __nv_bfloat16 r2 = detail::to_bf16(x2 * cos_s[i] + x1 * sin_s[i]);
    x[i] = r1;
    x[i + half] = r2;
    if (h >= a.heads && slot >= 0) {
      __nv_bfloat16* k = a.layer_cache + slot + (h - a.heads) * a.head_elems;
      k[i] = r1;
      k[i + half] = r2;
    }
  }
  if (slot < 0) return;
  // v: copied as is, after k in the same block of the cache.
  const __nv_bfloat16* v = row + static_cast<uint64_t>(a.heads + a.kv_heads) * a.head_dim;
  for (uint32_t e = threadIdx.x; e < a.kv_heads * a.head_dim; e += blockDim.x) {
    const uint32_t g = e / a.head_dim;
    const uint32_t d = e % a.head_dim;
    a.layer_cache[slot + static_cast<int64_t>(a.kv_heads + g) * a.head_elems + d] = v[e];
  }
}

}  // namespace

cudaError_t rope_kv_write(const RopeKvArgs& args, cudaStream_t stream) {
  if (args.tokens == 0) return cudaSuccess;
  if (args.head_dim / 2 > kMaxHalf || args.head_dim % 2 != 0) return cudaErrorInvalidValue;
  rope_kv_kernel<<<args.tokens, 128, 0, stream>>>(args);
  return cudaGetLastError();
}

}  // namespace headway::models::cuda::kernels
