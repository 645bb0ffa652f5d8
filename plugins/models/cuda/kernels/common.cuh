// Device-side helpers shared by the kernels (warp and block reductions, bf16 conversions). Only
// .cu files include this; host code sees the launchers' plain headers.
#pragma once

#include <cuda_bf16.h>

#include <cfloat>
#include <cstdint>

namespace headway::models::cuda::kernels::detail {

constexpr unsigned kFullMask = 0xffffffffu;

__device__ __forceinline__ float warp_sum(float v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(kFullMask, v, o);
  return v;
}

__device__ __forceinline__ double warp_sum(double v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(kFullMask, v, o);
  return v;
}

__device__ __forceinline__ int warp_sum(int v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(kFullMask, v, o);
  return v;
}

__device__ __forceinline__ unsigned long long warp_sum(unsigned long long v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(kFullMask, v, o);
  return v;
}

__device__ __forceinline__ float warp_max(float v) {
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(kFullMask, v, o));
  return v;
}

// Sum over the whole block; every thread gets the result. `scratch` holds 32 values of T and is
// reused, so consecutive calls need the barrier this function ends with.
template <class T>
__device__ __forceinline__ T block_sum(T v, T* scratch) {
  const int lane = threadIdx.x % 32;
  const int warp = threadIdx.x / 32;
  const int warps = (blockDim.x + 31) / 32;
  v = warp_sum(v);
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  T total = lane < warps ? scratch[lane] : T(0);
  total = warp_sum(total);
  __syncthreads();
  return total;
}

// c += a * b for one 16x8x16 tile on tensor cores (mma.sync, BF16 in, FP32 accumulate). Fragment
// layouts (g = lane / 4, t = lane % 4):
// a[0] = A[g][2t..2t+1], a[1] = A[g+8][2t..], a[2] = A[g][2t+8..], a[3] = A[g+8][2t+8..];
// b0 = B[2t..2t+1][g], b1 = B[2t+8..2t+9][g]; c = C[g][2t], C[g][2t+1], C[g+8][2t], C[g+8][2t+1].
__device__ __forceinline__ void mma(float (&c)[4], const uint32_t (&a)[4], uint32_t b0,
                                    uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
      "{%8,%9}, {%0,%1,%2,%3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// Asks L2 for the line holding `p`, without a register to wait on. Kernels launched overlapped
// (launch.h) issue it for weights before they wait for the previous kernel: loads into registers
// there are moved past the wait by the compiler (seen in the SASS of add_rms_norm, nvcc 13.0,
// sm_90a) or hold registers across it.
__device__ __forceinline__ void prefetch_l2(const void* p) {
  asm volatile("prefetch.global.L2 [%0];" ::"l"(p));
}

__device__ __forceinline__ float to_float(__nv_bfloat16 v) { return __bfloat162float(v); }
__device__ __forceinline__ __nv_bfloat16 to_bf16(float v) { return __float2bfloat16_rn(v); }

// SwiGLU of one element from the gate and up values as BF16 holds them: silu(gate) * up, in float.
// swiglu() and the GEMV's fused SwiGLU (gemv_swiglu()) both call this, so that they give the same
// bits.
__device__ __forceinline__ __nv_bfloat16 silu_times(__nv_bfloat16 gate, __nv_bfloat16 up) {
  const float g = to_float(gate);
  return to_bf16(g / (1.0f + expf(-g)) * to_float(up));
}

}  // namespace headway::models::cuda::kernels::detail
