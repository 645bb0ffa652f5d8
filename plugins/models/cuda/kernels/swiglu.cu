#include "common.cuh"
#include "launch.cuh"
#include "swiglu.h"

namespace headway::models::cuda::kernels {
namespace {

// Any shape: one element per thread, a grid-stride loop over tokens x ffn.
template <bool kOverlap>
__global__ void swiglu_kernel(const __nv_bfloat16* gate_up, uint64_t n, uint32_t ffn,
                              __nv_bfloat16* act) {
  detail::wait_for_previous_kernel<kOverlap>();
  for (uint64_t e = blockIdx.x * static_cast<uint64_t>(blockDim.x) + threadIdx.x; e < n;
       e += static_cast<uint64_t>(gridDim.x) * blockDim.x) {
    const uint64_t t = e / ffn;
    const uint64_t i = e % ffn;
    act[e] = detail::silu_times(gate_up[t * 2 * ffn + i], gate_up[t * 2 * ffn + ffn + i]);
  }
}

// ffn a multiple of 8 and 16-byte aligned rows: 8 elements per thread, from one 16-byte load of
// the gate and one of the up values to one 16-byte store; blockIdx.x picks the thread's piece of a
// row, blockIdx.y (striding past the grid's 65,535 rows) the token, so no thread divides. The
// one-element kernel above spent a 64-bit division and modulo per element on its indices and read
// 2 bytes at a time: 0.100 ms a layer at 2,048 tokens of Llama-3.1-8B on an H200 (1.76 TB/s,
// docs/performance.md), some 6% of a prefill step. Each element's value is the same
// (detail::silu_times).
constexpr uint32_t kPiece = 8;
constexpr uint32_t kVectorThreads = 128;

template <bool kOverlap>
__global__ void __launch_bounds__(kVectorThreads)
    swiglu_vector_kernel(const __nv_bfloat16* __restrict__ gate_up, uint32_t tokens, uint32_t ffn,
                         __nv_bfloat16* __restrict__ act) {
  detail::wait_for_previous_kernel<kOverlap>();
  const uint32_t pieces = ffn / kPiece;
  const uint32_t piece = blockIdx.x * kVectorThreads + threadIdx.x;
  if (piece >= pieces) return;
  for (uint32_t t = blockIdx.y; t < tokens; t += gridDim.y) {
    const auto* row = reinterpret_cast<const uint4*>(gate_up + uint64_t{t} * 2 * ffn);
    const uint4 g = row[piece];
    const uint4 u = row[pieces + piece];
    const auto* gh = reinterpret_cast<const __nv_bfloat16*>(&g);
    const auto* uh = reinterpret_cast<const __nv_bfloat16*>(&u);
    uint4 out;
    auto* oh = reinterpret_cast<__nv_bfloat16*>(&out);
#pragma unroll
    for (uint32_t j = 0; j < kPiece; ++j) oh[j] = detail::silu_times(gh[j], uh[j]);
    reinterpret_cast<uint4*>(act + uint64_t{t} * ffn)[piece] = out;
  }
}

bool aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

}  // namespace

cudaError_t swiglu(const __nv_bfloat16* gate_up, uint32_t tokens, uint32_t ffn, __nv_bfloat16* act,
                   const Launch& on) {
  const uint64_t n = static_cast<uint64_t>(tokens) * ffn;
  if (n == 0) return cudaSuccess;
  if (ffn % kPiece == 0 && aligned16(gate_up) && aligned16(act)) {
    const uint32_t pieces = ffn / kPiece;
    const dim3 grid((pieces + kVectorThreads - 1) / kVectorThreads,
                    tokens < 65535 ? tokens : 65535);
    return detail::launch_kernel(swiglu_vector_kernel<false>, swiglu_vector_kernel<true>, grid,
                                 kVectorThreads, 0, on, gate_up, tokens, ffn, act);
  }
  const uint64_t blocks = (n + 255) / 256;
  // A grid-stride loop: enough blocks to fill an H200 several times over, no more.
  return detail::launch_kernel(swiglu_kernel<false>, swiglu_kernel<true>,
                               static_cast<unsigned>(blocks < 8192 ? blocks : 8192), 256, 0, on,
                               gate_up, n, ffn, act);
}

}  // namespace headway::models::cuda::kernels
