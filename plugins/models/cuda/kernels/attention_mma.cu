// Paged attention on tensor cores (mma.sync m16n8k16, BF16 in, FP32 accumulate): the default for
// head dims 16, 32, 64, 128 and 256; attention.cu keeps the FP32 CUDA-core kernel for the exact
// mode and other head dims. Same work units, same outputs (final rows or split partials).
//
// A block of two warps runs one unit for one kv head: the unit's rows (tokens x GQA group, at
// most 32) are 16 per warp, so each K/V tile that the block gathers from the paged cache into
// shared memory serves every query head of the group. Per tile of 32 keys a warp computes
// S = Q K^T (Q kept in registers as A fragments), masks causally by each row's position, updates
// the online softmax in FP32, rounds P to BF16 and adds P V to its FP32 output fragments. The row
// sums use the rounded P, so the weights that multiply V sum to exactly the normaliser.
#include <cmath>

#include "attention_mma.h"
#include "common.cuh"

namespace headway::models::cuda::kernels {
namespace {

constexpr int kTileKeys = 32;  // keys per shared-memory tile: 4 n8 column blocks of S
constexpr int kWarps = 2;      // 16 query rows each: kAttentionTileRows and kAttentionMaxGroup
constexpr int kThreads = 32 * kWarps;
static_assert(16u * kWarps >= kAttentionTileRows && 16u * kWarps >= kAttentionMaxGroup);

// Two BF16 values in one register, the lower index in the low half (the fragments' order).
__device__ __forceinline__ uint32_t pack_bf16(__nv_bfloat16 lo, __nv_bfloat16 hi) {
  return static_cast<uint32_t>(__bfloat16_as_ushort(lo)) |
         (static_cast<uint32_t>(__bfloat16_as_ushort(hi)) << 16);
}

__device__ __forceinline__ uint32_t pack_bf16(float lo, float hi) {
  return pack_bf16(__float2bfloat16_rn(lo), __float2bfloat16_rn(hi));
}

// c += a * b for one 16x8x16 tile. Fragment layouts (g = lane / 4, t = lane % 4):
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

template <int HD>
__global__ void __launch_bounds__(kThreads)
    mma_attention_kernel(AttentionArgs a, const AttentionUnit* units) {
  // Rows padded by 8 elements: the fragment loads of a warp then hit 32 different banks.
  constexpr int kStride = HD + 8;
  __shared__ __align__(16) __nv_bfloat16 ks[kTileKeys * kStride];
  __shared__ __align__(16) __nv_bfloat16 vs[kTileKeys * kStride];

  const AttentionUnit u = units[blockIdx.x];
  const int kvh = blockIdx.y;
  const int group = static_cast<int>(a.heads / a.kv_heads);
  const int rows = u.tokens * group;
  const int lane = threadIdx.x % 32;
  const int warp = threadIdx.x / 32;
  const int g = lane / 4;
  const int t = lane % 4;
  const int row0 = warp * 16;
  const bool warp_has_rows = row0 < rows;
  // Rows are token-major, so the warp's last row has its largest position (uniform per warp).
  const int warp_last_pos = warp_has_rows ? u.first_pos + (min(row0 + 15, rows - 1)) / group : -1;

  // This thread's two rows of every fragment: row0 + g and row0 + g + 8 (-1: no row, sees
  // nothing, never written).
  int pos[2];
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    const int r = row0 + g + 8 * i;
    pos[i] = r < rows ? u.first_pos + r / group : -1;
  }

  // Q as A fragments, one per 16 dims.
  uint32_t qf[HD / 16][4];
#pragma unroll
  for (int kk = 0; kk < HD / 16; ++kk) {
#pragma unroll
    for (int reg = 0; reg < 4; ++reg) {
      const int r = row0 + g + (reg % 2) * 8;
      const int d = kk * 16 + 2 * t + (reg / 2) * 8;
      uint32_t v = 0;
      if (r < rows) {
        const int head = kvh * group + r % group;
        v = *reinterpret_cast<const uint32_t*>(
            a.qkv + static_cast<uint64_t>(u.q_row + r / group) * a.q_stride +
            static_cast<uint64_t>(head) * HD + d);
      }
      qf[kk][reg] = v;
    }
  }

  float o[HD / 8][4];
#pragma unroll
  for (int n = 0; n < HD / 8; ++n) o[n][0] = o[n][1] = o[n][2] = o[n][3] = 0.0f;
  float m[2] = {-INFINITY, -INFINITY};
  float l[2] = {0.0f, 0.0f};

  const int32_t* table = a.block_tables + u.table;
  const int bs = static_cast<int>(a.block_size);
  const __nv_bfloat16* kbase = a.layer_cache + static_cast<uint64_t>(kvh) * a.head_elems;
  const uint64_t v_offset = static_cast<uint64_t>(a.kv_heads) * a.head_elems;
  constexpr int kVecsPerKey = HD / 8;  // 16-byte pieces of one key's row
  for (int c = u.key_begin; c < u.key_end; c += kTileKeys) {
    __syncthreads();  // the previous tile is no longer being read
#pragma unroll
    for (int e = threadIdx.x; e < kTileKeys * kVecsPerKey; e += kThreads) {
      const int j = e / kVecsPerKey;
      const int d = (e % kVecsPerKey) * 8;
      const int key = c + j;
      uint4 kv = make_uint4(0, 0, 0, 0);
      uint4 vv = make_uint4(0, 0, 0, 0);
      if (key < u.key_end) {  // keys past the unit may lie beyond the block table
        const uint64_t off = static_cast<uint64_t>(table[key / bs]) * a.block_elems +
                             static_cast<uint64_t>(key % bs) * HD + d;
        kv = *reinterpret_cast<const uint4*>(kbase + off);
        vv = *reinterpret_cast<const uint4*>(kbase + off + v_offset);
      }
      *reinterpret_cast<uint4*>(ks + j * kStride + d) = kv;
      *reinterpret_cast<uint4*>(vs + j * kStride + d) = vv;
    }
    __syncthreads();
    if (warp_last_pos < c) continue;  // every row of the warp is before this tile

    float s[4][4];
#pragma unroll
    for (int n = 0; n < 4; ++n) {
      s[n][0] = s[n][1] = s[n][2] = s[n][3] = 0.0f;
      const __nv_bfloat16* krow = ks + (n * 8 + g) * kStride + 2 * t;
#pragma unroll
      for (int kk = 0; kk < HD / 16; ++kk) {
        const uint32_t b0 = *reinterpret_cast<const uint32_t*>(krow + kk * 16);
        const uint32_t b1 = *reinterpret_cast<const uint32_t*>(krow + kk * 16 + 8);
        mma(s[n], qf[kk], b0, b1);
      }
    }

    // Scale, mask (a key is visible to a row at or after its position, inside the unit's range),
    // and update each row's running max; the four threads of a row hold its 32 keys.
    float correction[2];
#pragma unroll
    for (int i = 0; i < 2; ++i) {
      float chunk_max = -INFINITY;
#pragma unroll
      for (int n = 0; n < 4; ++n) {
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          const int key = c + n * 8 + 2 * t + e;
          float& v = s[n][2 * i + e];
          v = (key <= pos[i] && key < u.key_end) ? v * a.scale : -INFINITY;
          chunk_max = fmaxf(chunk_max, v);
        }
      }
      chunk_max = fmaxf(chunk_max, __shfl_xor_sync(detail::kFullMask, chunk_max, 1));
      chunk_max = fmaxf(chunk_max, __shfl_xor_sync(detail::kFullMask, chunk_max, 2));
      const float new_max = fmaxf(m[i], chunk_max);
      correction[i] = m[i] == -INFINITY ? 0.0f : expf(m[i] - new_max);
      m[i] = new_max;
    }

    // P = exp(S - max) rounded to BF16, as A fragments of P V (keys 0-15, 16-31).
    uint32_t pf[2][4];
    float row_sum[2] = {0.0f, 0.0f};
#pragma unroll
    for (int n = 0; n < 4; ++n) {
#pragma unroll
      for (int i = 0; i < 2; ++i) {
        const float v0 = s[n][2 * i], v1 = s[n][2 * i + 1];
        const __nv_bfloat16 p0 = __float2bfloat16_rn(v0 == -INFINITY ? 0.0f : expf(v0 - m[i]));
        const __nv_bfloat16 p1 = __float2bfloat16_rn(v1 == -INFINITY ? 0.0f : expf(v1 - m[i]));
        row_sum[i] += __bfloat162float(p0) + __bfloat162float(p1);
        // n = 2 * kk2 + half: half 0 gives registers 0 (row g) and 1 (row g + 8), half 1 gives
        // registers 2 and 3.
        pf[n / 2][(n % 2) * 2 + i] = pack_bf16(p0, p1);
      }
    }
#pragma unroll
    for (int i = 0; i < 2; ++i) {
      row_sum[i] += __shfl_xor_sync(detail::kFullMask, row_sum[i], 1);
      row_sum[i] += __shfl_xor_sync(detail::kFullMask, row_sum[i], 2);
      l[i] = l[i] * correction[i] + row_sum[i];
    }
#pragma unroll
    for (int n = 0; n < HD / 8; ++n) {
      o[n][0] *= correction[0];
      o[n][1] *= correction[0];
      o[n][2] *= correction[1];
      o[n][3] *= correction[1];
    }
#pragma unroll
    for (int kk2 = 0; kk2 < 2; ++kk2) {
      const __nv_bfloat16* v0 = vs + (kk2 * 16 + 2 * t) * kStride + g;
#pragma unroll
      for (int n = 0; n < HD / 8; ++n) {
        const __nv_bfloat16* vcol = v0 + n * 8;
        const uint32_t b0 = pack_bf16(vcol[0], vcol[kStride]);
        const uint32_t b1 = pack_bf16(vcol[8 * kStride], vcol[9 * kStride]);
        mma(o[n], pf[kk2], b0, b1);
      }
    }
  }

#pragma unroll
  for (int i = 0; i < 2; ++i) {
    const int r = row0 + g + 8 * i;
    if (r >= rows) continue;
    const int token = r / group;
    const int head = kvh * group + r % group;
    if (u.partial < 0) {
      const float inv = l[i] > 0.0f ? 1.0f / l[i] : 0.0f;
      __nv_bfloat16* out = a.out + static_cast<uint64_t>(u.q_row + token) * a.heads * HD +
                           static_cast<uint64_t>(head) * HD + 2 * t;
#pragma unroll
      for (int n = 0; n < HD / 8; ++n) {
        *reinterpret_cast<uint32_t*>(out + n * 8) =
            pack_bf16(o[n][2 * i] * inv, o[n][2 * i + 1] * inv);
      }
    } else {
      const uint64_t rec =
          static_cast<uint64_t>(u.partial) + static_cast<uint64_t>(token) * a.heads + head;
      float* acc = a.partial_acc + rec * HD + 2 * t;
#pragma unroll
      for (int n = 0; n < HD / 8; ++n) {
        acc[n * 8] = o[n][2 * i];
        acc[n * 8 + 1] = o[n][2 * i + 1];
      }
      if (t == 0) {
        a.partial_ml[2 * rec] = m[i];
        a.partial_ml[2 * rec + 1] = l[i];
      }
    }
  }
}

template <int HD>
cudaError_t launch(const AttentionArgs& a, const AttentionUnit* units, uint32_t count,
                   cudaStream_t stream) {
  mma_attention_kernel<HD><<<dim3(count, a.kv_heads), kThreads, 0, stream>>>(a, units);
  return cudaGetLastError();
}

}  // namespace

bool mma_attention_supports(uint32_t head_dim) {
  return head_dim == 16 || head_dim == 32 || head_dim == 64 || head_dim == 128 || head_dim == 256;
}

cudaError_t mma_paged_attention(const AttentionArgs& a, const AttentionUnit* units,
                                uint32_t unit_count, cudaStream_t stream) {
  switch (a.head_dim) {
    case 16:
      return launch<16>(a, units, unit_count, stream);
    case 32:
      return launch<32>(a, units, unit_count, stream);
    case 64:
      return launch<64>(a, units, unit_count, stream);
    case 128:
      return launch<128>(a, units, unit_count, stream);
    case 256:
      return launch<256>(a, units, unit_count, stream);
    default:
      return cudaErrorInvalidValue;
  }
}

}  // namespace headway::models::cuda::kernels
