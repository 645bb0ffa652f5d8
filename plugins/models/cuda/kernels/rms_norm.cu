#include <algorithm>
#include <cstdint>

#include "common.cuh"
#include "launch.cuh"
#include "rms_norm.h"

namespace headway::models::cuda::kernels {
namespace {

template <bool kOverlap>
__global__ void add_rms_norm_kernel(float* x, const __nv_bfloat16* add, const float* add_bias,
                                    const float* weight, const int32_t* rows, uint32_t hidden,
                                    float eps, __nv_bfloat16* out) {
  __shared__ float scratch[32];
  detail::wait_for_previous_kernel<kOverlap>();
  const uint64_t src = rows != nullptr ? static_cast<uint64_t>(rows[blockIdx.x]) : blockIdx.x;
  float* xr = x + src * hidden;
  float sum = 0.0f;
  for (uint32_t i = threadIdx.x; i < hidden; i += blockDim.x) {
    float v = xr[i];
    if (add != nullptr) {
      v += detail::to_float(add[src * hidden + i]);
      if (add_bias != nullptr) v += add_bias[i];
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

// Rows of a multiple of 4 (every model's hidden size) up to 4 x 4 x 1,024: each thread keeps its
// pieces of 4 in registers from the sum to the scaling, and loads its weights before the sum, so
// a row costs one round trip to memory instead of three (x and add; the weights; x again). Decode
// steps have a row or a few, where that latency is the kernel's time (8.3 us per launch on an
// H200 with the loop above, at 1 and at 64 rows alike). In an overlapped launch (launch.h) the
// weights, which no kernel writes, are asked into L2 before the wait for the previous kernel.
//
// A thread takes up to kMaxPieces pieces (256 threads at hidden 4,096): with a piece each, 1,024
// threads of 53 registers (ptxas, sm_90a) left one block an SM, which waits for its row's loads,
// then its barriers, then its stores, with no other block to fill the gaps; 2,048 rows took 42.4
// us on an H200 (2.4 TB/s; docs/performance.md). Four blocks of 256 fit an SM and each thread
// keeps four loads in flight.
constexpr uint32_t kMaxPieces = 4;

// Launched with up to 1,024 threads (hidden 16,384): the bound makes ptxas keep a thread within
// 64 registers (53 without it today), where an edit that took more would fail only at that size,
// on a GPU, with "too many resources requested for launch".
template <bool kOverlap>
__global__ void __launch_bounds__(1024)
    add_rms_norm_vec4_kernel(float* x, const __nv_bfloat16* add, const float* add_bias,
                             const float* weight, const int32_t* rows, uint32_t hidden, float eps,
                             __nv_bfloat16* out) {
  __shared__ float scratch[32];
  const uint64_t src = rows != nullptr ? static_cast<uint64_t>(rows[blockIdx.x]) : blockIdx.x;
  const uint32_t pieces = hidden / 4;
  auto* xr = reinterpret_cast<float4*>(x + src * hidden);
  const auto* add_row =
      add != nullptr ? reinterpret_cast<const uint2*>(add + src * hidden) : nullptr;
  const auto* w4 = reinterpret_cast<const float4*>(weight);
  const auto* b4 = reinterpret_cast<const float4*>(add_bias);
  float4 v[kMaxPieces];
  float4 w[kMaxPieces];
  float sum = 0.0f;
  if constexpr (kOverlap) {
    // Into L2 while the previous kernel finishes (loads into w[] here were moved past the wait).
#pragma unroll
    for (uint32_t j = 0; j < kMaxPieces; ++j) {
      const uint32_t p = threadIdx.x + j * blockDim.x;
      if (p < pieces) detail::prefetch_l2(w4 + p);
    }
    detail::wait_for_previous_kernel<true>();
  }
#pragma unroll
  for (uint32_t j = 0; j < kMaxPieces; ++j) {
    const uint32_t p = threadIdx.x + j * blockDim.x;
    if (p >= pieces) continue;
    w[j] = __ldg(w4 + p);
    v[j] = xr[p];
    if (add_row != nullptr) {
      const uint2 a = add_row[p];
      const float2 a01 = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&a.x));
      const float2 a23 = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&a.y));
      v[j].x += a01.x;
      v[j].y += a01.y;
      v[j].z += a23.x;
      v[j].w += a23.y;
      if (b4 != nullptr) {
        const float4 b = __ldg(b4 + p);
        v[j].x += b.x;
        v[j].y += b.y;
        v[j].z += b.z;
        v[j].w += b.w;
      }
      xr[p] = v[j];
    }
    sum += v[j].x * v[j].x + v[j].y * v[j].y + v[j].z * v[j].z + v[j].w * v[j].w;
  }
  sum = detail::block_sum(sum, scratch);
  const float inv = rsqrtf(sum / static_cast<float>(hidden) + eps);
  auto* o = reinterpret_cast<uint2*>(out + static_cast<uint64_t>(blockIdx.x) * hidden);
#pragma unroll
  for (uint32_t j = 0; j < kMaxPieces; ++j) {
    const uint32_t p = threadIdx.x + j * blockDim.x;
    if (p >= pieces) continue;
    const __nv_bfloat162 lo = __floats2bfloat162_rn(v[j].x * inv * w[j].x, v[j].y * inv * w[j].y);
    const __nv_bfloat162 hi = __floats2bfloat162_rn(v[j].z * inv * w[j].z, v[j].w * inv * w[j].w);
    uint2 packed;
    packed.x = *reinterpret_cast<const uint32_t*>(&lo);
    packed.y = *reinterpret_cast<const uint32_t*>(&hi);
    o[p] = packed;
  }
}

bool aligned(const void* p, uintptr_t bytes) { return reinterpret_cast<uintptr_t>(p) % bytes == 0; }

}  // namespace

cudaError_t add_rms_norm(float* x, const __nv_bfloat16* add, const float* add_bias,
                         const float* weight, const int32_t* rows, uint32_t count, uint32_t hidden,
                         float eps, __nv_bfloat16* out, const Launch& on) {
  if (count == 0) return cudaSuccess;
  const uint32_t pieces = hidden / 4;
  if (hidden % 4 == 0 && pieces <= kMaxPieces * 1024 && aligned(x, 16) && aligned(weight, 16) &&
      aligned(add, 8) && aligned(add_bias, 16) && aligned(out, 8) && hidden > 0) {
    // kMaxPieces pieces a thread (fewer in the last ones), in whole warps.
    const uint32_t threads =
        std::min(1024u, (pieces + kMaxPieces * 32 - 1) / (kMaxPieces * 32) * 32);
    return detail::launch_kernel(add_rms_norm_vec4_kernel<false>, add_rms_norm_vec4_kernel<true>,
                                 count, threads, 0, on, x, add, add_bias, weight, rows, hidden, eps,
                                 out);
  }
  const int threads = hidden >= 4096 ? 1024 : hidden >= 1024 ? 512 : 128;
  return detail::launch_kernel(add_rms_norm_kernel<false>, add_rms_norm_kernel<true>, count,
                               threads, 0, on, x, add, add_bias, weight, rows, hidden, eps, out);
}

}  // namespace headway::models::cuda::kernels
