#include <algorithm>

#include "common.cuh"
#include "rope_kv.h"

namespace headway::models::cuda::kernels {
namespace {

constexpr int kMaxHalf = 128;  // head_dim <= 256 (checked at load)

constexpr uint32_t kThreads = 128;

// Steps of fewer tokens spread each token over several blocks (a few hundred blocks at most).
constexpr uint32_t kSpreadBelowTokens = 128;

// Heads (q and k) one block rotates when spread: one pair per thread (two at head_dim 128).
uint32_t heads_per_block(uint32_t head_dim) { return std::max(1u, kThreads / (head_dim / 2)); }

// Block (t, y): token t, q/k heads [y * H, y * H + H) and v heads y, y + gridDim.y, ... A step
// of few tokens spreads each over many blocks (H = heads_per_block()): with one block per token
// a batch-1 step ran one block that walked all 40 heads of Llama-3-8B one load after another
// (13.7 us on an H200, 6.9-8.2 us spread). A step of many tokens keeps one block per token (H = all
// heads), since each block computes the token's sines and cosines again (spread, 2,048 tokens
// took 41 us against 25 us).
__global__ void rope_kv_kernel(RopeKvArgs a, uint32_t heads_per_block) {
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
  // Rotate pairs (i, i + half) of this block's q and k heads; k goes to the cache as well.
  const uint32_t first_head = blockIdx.y * heads_per_block;
  const uint32_t last_head = min(first_head + heads_per_block, a.heads + a.kv_heads);
  for (uint32_t e = threadIdx.x; e < (last_head - first_head) * half; e += blockDim.x) {
    const uint32_t h = first_head + e / half;
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
  for (uint32_t g = blockIdx.y; g < a.kv_heads; g += gridDim.y) {
    for (uint32_t d = threadIdx.x; d < a.head_dim; d += blockDim.x) {
      a.layer_cache[slot + static_cast<int64_t>(a.kv_heads + g) * a.head_elems + d] =
          v[static_cast<uint64_t>(g) * a.head_dim + d];
    }
  }
}

}  // namespace

cudaError_t rope_kv_write(const RopeKvArgs& args, cudaStream_t stream) {
  if (args.tokens == 0) return cudaSuccess;
  if (args.head_dim == 0 || args.head_dim / 2 > kMaxHalf || args.head_dim % 2 != 0) {
    return cudaErrorInvalidValue;
  }
  const uint32_t rotated = args.heads + args.kv_heads;
  const uint32_t per_block =
      args.tokens >= kSpreadBelowTokens ? rotated : heads_per_block(args.head_dim);
  const dim3 grid(args.tokens, (rotated + per_block - 1) / per_block);
  rope_kv_kernel<<<grid, kThreads, 0, stream>>>(args, per_block);
  return cudaGetLastError();
}

}  // namespace headway::models::cuda::kernels
