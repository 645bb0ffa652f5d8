#include <algorithm>

#include "common.cuh"
#include "launch.cuh"
#include "rope_kv.h"

namespace headway::models::cuda::kernels {
namespace {

constexpr int kMaxHalf = 128;  // head_dim <= 256 (checked at load)

constexpr uint32_t kThreads = 128;

// Steps of fewer tokens spread each token over several blocks (a few hundred blocks at most).
constexpr uint32_t kSpreadBelowTokens = 128;

// Heads (q and k) one block rotates when spread: one pair per thread (two at head_dim 128).
uint32_t heads_per_block(uint32_t head_dim) { return std::max(1u, kThreads / (head_dim / 2)); }

// Column `col` of the projection's output row, with its bias where the architecture has one.
__device__ __forceinline__ float projected(const __nv_bfloat16* row, const float* bias,
                                           uint32_t col) {
  const float v = detail::to_float(row[col]);
  return bias != nullptr ? v + bias[col] : v;
}

// Block (t, y): token t, q/k heads [y * H, y * H + H) and v heads y, y + gridDim.y, ... A step
// of few tokens spreads each over many blocks (H = heads_per_block()): with one block per token
// a batch-1 step ran one block that walked all 40 heads of Llama-3-8B one load after another
// (13.7 us on an H200, 6.9-8.2 us spread). A step of many tokens keeps one block per token (H = all
// heads), since each block computes the token's sines and cosines again (spread, 2,048 tokens
// took 41 us against 25 us).
//
// With q/k norms, a prologue gives each of the block's heads its inverse RMS (a warp per head,
// into `inv_rms`, dynamic shared memory of heads_per_block floats); the rotation then scales the
// pair it holds.
template <bool kOverlap>
__global__ void rope_kv_kernel(RopeKvArgs a, uint32_t heads_per_block) {
  detail::wait_for_previous_kernel<kOverlap>();
  __shared__ float cos_s[kMaxHalf];
  __shared__ float sin_s[kMaxHalf];
  extern __shared__ float inv_rms[];
  const uint32_t t = blockIdx.x;
  const uint32_t half = a.head_dim / 2;
  const double pos = a.positions[t];
  for (uint32_t i = threadIdx.x; i < half; i += blockDim.x) {
    double s, c;
    sincos(pos * a.inv_freq[i], &s, &c);
    cos_s[i] = static_cast<float>(c);
    sin_s[i] = static_cast<float>(s);
  }
  const uint32_t width = (a.heads + 2 * a.kv_heads) * a.head_dim;
  __nv_bfloat16* row = a.qkv + static_cast<uint64_t>(t) * width;
  const int64_t slot = a.slot_offsets[t];
  const uint32_t first_head = blockIdx.y * heads_per_block;
  const uint32_t last_head = min(first_head + heads_per_block, a.heads + a.kv_heads);
  if (a.q_norm != nullptr) {
    const uint32_t lane = threadIdx.x % 32;
    for (uint32_t h = first_head + threadIdx.x / 32; h < last_head; h += blockDim.x / 32) {
      float sum = 0.0f;
      for (uint32_t d = lane; d < a.head_dim; d += 32) {
        const float v = projected(row, a.qkv_bias, h * a.head_dim + d);
        sum += v * v;
      }
      sum = detail::warp_sum(sum);
      if (lane == 0) {
        inv_rms[h - first_head] = rsqrtf(sum / static_cast<float>(a.head_dim) + a.norm_eps);
      }
    }
  }
  __syncthreads();
  // Rotate pairs (i, i + half) of this block's q and k heads; k goes to the cache as well.
  for (uint32_t e = threadIdx.x; e < (last_head - first_head) * half; e += blockDim.x) {
    const uint32_t h = first_head + e / half;
    const uint32_t i = e % half;
    __nv_bfloat16* x = row + static_cast<uint64_t>(h) * a.head_dim;
    float x1 = projected(row, a.qkv_bias, h * a.head_dim + i);
    float x2 = projected(row, a.qkv_bias, h * a.head_dim + i + half);
    if (a.q_norm != nullptr) {
      const float* w = h < a.heads ? a.q_norm : a.k_norm;
      const float inv = inv_rms[h - first_head];
      x1 = x1 * inv * w[i];
      x2 = x2 * inv * w[i + half];
    }
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
  // v: copied with its bias (if any), after k in the same block of the cache.
  const uint32_t v0 = (a.heads + a.kv_heads) * a.head_dim;
  for (uint32_t g = blockIdx.y; g < a.kv_heads; g += gridDim.y) {
    for (uint32_t d = threadIdx.x; d < a.head_dim; d += blockDim.x) {
      const uint32_t col = v0 + g * a.head_dim + d;
      a.layer_cache[slot + static_cast<int64_t>(a.kv_heads + g) * a.head_elems + d] =
          a.qkv_bias != nullptr ? detail::to_bf16(projected(row, a.qkv_bias, col)) : row[col];
    }
  }
}

}  // namespace

cudaError_t rope_kv_write(const RopeKvArgs& args, const Launch& on) {
  if (args.tokens == 0) return cudaSuccess;
  if (args.head_dim == 0 || args.head_dim / 2 > kMaxHalf || args.head_dim % 2 != 0 ||
      (args.q_norm == nullptr) != (args.k_norm == nullptr)) {
    return cudaErrorInvalidValue;
  }
  const uint32_t rotated = args.heads + args.kv_heads;
  const uint32_t per_block =
      args.tokens >= kSpreadBelowTokens ? rotated : heads_per_block(args.head_dim);
  const dim3 grid(args.tokens, (rotated + per_block - 1) / per_block);
  const size_t norm_bytes = args.q_norm != nullptr ? per_block * sizeof(float) : 0;
  return detail::launch_kernel(rope_kv_kernel<false>, rope_kv_kernel<true>, grid, kThreads,
                               norm_bytes, on, args, per_block);
}

}  // namespace headway::models::cuda::kernels
