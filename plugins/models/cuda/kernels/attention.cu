#include <cmath>

#include "attention.h"
#include "attention_mma.h"
#include "common.cuh"
#include "launch.cuh"

namespace headway::models::cuda::kernels {
namespace {

constexpr int kChunk = static_cast<int>(kAttentionChunk);

uint32_t max_rows(uint32_t group, AttentionKind kind) {
  if (kind == AttentionKind::kDecode) return group;
  const uint32_t tile_tokens = group >= kAttentionTileRows ? 1 : kAttentionTileRows / group;
  return tile_tokens * group;
}

// The most threads a launch of paged_attention_kernel<RPW, ...> uses (max_rows() of any kind, a
// warp per RPW rows): the compiler keeps registers within what that many threads may hold, so a
// 1024-thread decode launch (GQA group 32) cannot fail with cudaErrorLaunchOutOfResources after
// a change that needs more registers.
constexpr int max_attention_threads(int rows_per_warp) {
  const int rows = static_cast<int>(kAttentionTileRows > kAttentionMaxGroup ? kAttentionTileRows
                                                                            : kAttentionMaxGroup);
  return 32 * ((rows + rows_per_warp - 1) / rows_per_warp);
}

// RPW: query rows per warp; DPL: head_dim elements per lane (head_dim <= 32 * DPL).
template <int RPW, int DPL>
__global__ void __launch_bounds__(max_attention_threads(RPW))
    paged_attention_kernel(AttentionArgs a, const AttentionUnit* units) {
  extern __shared__ float smem[];
  const AttentionUnit u = units[blockIdx.x];
  const int g = blockIdx.y;
  const int hd = static_cast<int>(a.head_dim);
  const int group = static_cast<int>(a.heads / a.kv_heads);
  const int rows = u.tokens * group;
  const int kstride = hd + 1;  // padded: lane j reads key j's row without bank conflicts
  float* qs = smem;            // rows x hd, pre-scaled
  float* ks = qs + static_cast<size_t>(rows) * hd;         // kChunk x (hd + 1)
  float* vs = ks + static_cast<size_t>(kChunk) * kstride;  // kChunk x hd
  const int lane = threadIdx.x % 32;
  const int warp = threadIdx.x / 32;

  for (int e = threadIdx.x; e < rows * hd; e += blockDim.x) {
    const int r = e / hd;
    const int d = e % hd;
    const int t = r / group;
    const int head = g * group + r % group;
    qs[e] = detail::to_float(a.qkv[static_cast<uint64_t>(u.q_row + t) * a.q_stride +
                                   static_cast<uint64_t>(head) * hd + d]) *
            a.scale;
  }

  float acc[RPW][DPL];
  float m[RPW];
  float l[RPW];
  int pos[RPW];
#pragma unroll
  for (int i = 0; i < RPW; ++i) {
    const int r = warp * RPW + i;
    pos[i] = r < rows ? u.first_pos + r / group : -1;  // -1: no row, sees nothing
    m[i] = -INFINITY;
    l[i] = 0.0f;
#pragma unroll
    for (int k = 0; k < DPL; ++k) acc[i][k] = 0.0f;
  }

  const int32_t* table = a.block_tables + u.table;
  const int bs = static_cast<int>(a.block_size);
  const __nv_bfloat16* kbase = a.layer_cache + static_cast<uint64_t>(g) * a.head_elems;
  const uint64_t v_offset = static_cast<uint64_t>(a.kv_heads) * a.head_elems;
  for (int c = u.key_begin; c < u.key_end; c += kChunk) {
    const int n = min(kChunk, u.key_end - c);
    __syncthreads();  // the previous chunk (and the q tile, first time) is no longer being read
    for (int e = threadIdx.x; e < kChunk * hd; e += blockDim.x) {
      const int j = e / hd;
      const int d = e % hd;
      float kv = 0.0f;
      float vv = 0.0f;
      if (j < n) {
        const int key = c + j;
        const uint64_t off = static_cast<uint64_t>(table[key / bs]) * a.block_elems +
                             static_cast<uint64_t>(key % bs) * hd + d;
        kv = detail::to_float(kbase[off]);
        vv = detail::to_float(kbase[off + v_offset]);
      }
      ks[j * kstride + d] = kv;
      vs[j * hd + d] = vv;
    }
    __syncthreads();
#pragma unroll
    for (int i = 0; i < RPW; ++i) {
      const int r = warp * RPW + i;
      if (pos[i] < c) continue;  // warp-uniform: the row sees no key of this chunk
      const int key = c + lane;
      float s = -INFINITY;
      if (lane < n && key <= pos[i]) {
        const float* q = qs + static_cast<size_t>(r) * hd;
        const float* k = ks + lane * kstride;
        float dot = 0.0f;
        for (int d = 0; d < hd; ++d) dot = fmaf(q[d], k[d], dot);
        s = dot;
      }
      const float chunk_max = detail::warp_max(s);
      const float new_max = fmaxf(m[i], chunk_max);
      const float p = s == -INFINITY ? 0.0f : expf(s - new_max);
      const float correction = m[i] == -INFINITY ? 0.0f : expf(m[i] - new_max);
      l[i] = l[i] * correction + detail::warp_sum(p);
      m[i] = new_max;
#pragma unroll
      for (int k = 0; k < DPL; ++k) acc[i][k] *= correction;
      for (int j = 0; j < n; ++j) {
        const float pj = __shfl_sync(detail::kFullMask, p, j);
#pragma unroll
        for (int k = 0; k < DPL; ++k) {
          const int d = lane + 32 * k;
          if (d < hd) acc[i][k] = fmaf(pj, vs[j * hd + d], acc[i][k]);
        }
      }
    }
  }

#pragma unroll
  for (int i = 0; i < RPW; ++i) {
    const int r = warp * RPW + i;
    if (r >= rows) continue;
    const int t = r / group;
    const int head = g * group + r % group;
    if (u.partial < 0) {
      const float inv = l[i] > 0.0f ? 1.0f / l[i] : 0.0f;
      __nv_bfloat16* o = a.out + static_cast<uint64_t>(u.q_row + t) * a.heads * hd +
                         static_cast<uint64_t>(head) * hd;
#pragma unroll
      for (int k = 0; k < DPL; ++k) {
        const int d = lane + 32 * k;
        if (d < hd) o[d] = detail::to_bf16(acc[i][k] * inv);
      }
    } else {
      const uint64_t rec =
          static_cast<uint64_t>(u.partial) + static_cast<uint64_t>(t) * a.heads + head;
      float* pa = a.partial_acc + rec * hd;
#pragma unroll
      for (int k = 0; k < DPL; ++k) {
        const int d = lane + 32 * k;
        if (d < hd) pa[d] = acc[i][k];
      }
      if (lane == 0) {
        a.partial_ml[2 * rec] = m[i];
        a.partial_ml[2 * rec + 1] = l[i];
      }
    }
  }
}

template <bool kOverlap>
__global__ void attention_reduce_kernel(AttentionArgs a, const AttentionReduceUnit* units) {
  detail::wait_for_previous_kernel<kOverlap>();
  const AttentionReduceUnit u = units[blockIdx.x];
  const uint32_t head = blockIdx.y;
  const int hd = static_cast<int>(a.head_dim);
  const uint64_t split_stride = static_cast<uint64_t>(u.tokens) * a.heads;
  for (int t = 0; t < u.tokens; ++t) {
    const uint64_t rec0 =
        static_cast<uint64_t>(u.partial) + static_cast<uint64_t>(t) * a.heads + head;
    float best = -INFINITY;
    for (int s = 0; s < u.splits; ++s)
      best = fmaxf(best, a.partial_ml[2 * (rec0 + s * split_stride)]);
    float total = 0.0f;
    for (int s = 0; s < u.splits; ++s) {
      const uint64_t rec = rec0 + s * split_stride;
      const float ms = a.partial_ml[2 * rec];
      if (ms != -INFINITY) total += a.partial_ml[2 * rec + 1] * expf(ms - best);
    }
    const float inv = total > 0.0f ? 1.0f / total : 0.0f;
    __nv_bfloat16* o = a.out + static_cast<uint64_t>(u.q_row + t) * a.heads * hd +
                       static_cast<uint64_t>(head) * hd;
    for (int d = threadIdx.x; d < hd; d += blockDim.x) {
      float v = 0.0f;
      for (int s = 0; s < u.splits; ++s) {
        const uint64_t rec = rec0 + s * split_stride;
        const float ms = a.partial_ml[2 * rec];
        if (ms != -INFINITY) v += a.partial_acc[rec * hd + d] * expf(ms - best);
      }
      o[d] = detail::to_bf16(v * inv);
    }
  }
}

template <int RPW, int DPL>
cudaError_t launch(const AttentionArgs& a, const AttentionUnit* units, uint32_t count,
                   uint32_t rows, cudaStream_t stream) {
  const size_t smem =
      (static_cast<size_t>(rows) * a.head_dim + kChunk * (a.head_dim + 1) + kChunk * a.head_dim) *
      sizeof(float);
  const int threads = 32 * static_cast<int>((rows + RPW - 1) / RPW);
  // Per launch rather than once: the attribute belongs to the current device's context, and
  // tensor-parallel shards launch on several devices.
  cudaError_t err =
      cudaFuncSetAttribute(paged_attention_kernel<RPW, DPL>,
                           cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem));
  if (err != cudaSuccess) return err;
  paged_attention_kernel<RPW, DPL><<<dim3(count, a.kv_heads), threads, smem, stream>>>(a, units);
  return cudaGetLastError();
}

template <int RPW>
cudaError_t dispatch_dpl(const AttentionArgs& a, const AttentionUnit* units, uint32_t count,
                         uint32_t rows, cudaStream_t stream) {
  if (a.head_dim <= 32) return launch<RPW, 1>(a, units, count, rows, stream);
  if (a.head_dim <= 64) return launch<RPW, 2>(a, units, count, rows, stream);
  if (a.head_dim <= 128) return launch<RPW, 4>(a, units, count, rows, stream);
  return launch<RPW, 8>(a, units, count, rows, stream);
}

}  // namespace

size_t paged_attention_smem_bytes(uint32_t head_dim, uint32_t group, AttentionKind kind) {
  return (static_cast<size_t>(max_rows(group, kind)) * head_dim + kChunk * (head_dim + 1) +
          kChunk * head_dim) *
         sizeof(float);
}

bool attention_uses_tensor_cores(uint32_t head_dim, bool exact_fp32) {
  return !exact_fp32 && mma_attention_supports(head_dim);
}

uint32_t attention_prefill_tile_rows(uint32_t head_dim, bool exact_fp32, MmaTiling tiling) {
  return attention_uses_tensor_cores(head_dim, exact_fp32)
             ? mma_tiling_rows(effective_mma_tiling(head_dim, tiling))
             : kAttentionTileRows;
}

bool attention_prefill_longest_first(uint32_t head_dim, bool exact_fp32, MmaTiling tiling) {
  return attention_uses_tensor_cores(head_dim, exact_fp32) &&
         mma_tiling_is_lean(effective_mma_tiling(head_dim, tiling));
}

cudaError_t paged_attention(const AttentionArgs& a, const AttentionUnit* units, uint32_t unit_count,
                            AttentionKind kind, const Launch& on) {
  if (unit_count == 0) return cudaSuccess;
  if (a.kv_heads == 0 || a.heads % a.kv_heads != 0 || a.head_dim == 0 ||
      a.head_dim > kAttentionMaxHeadDim || a.heads / a.kv_heads > kAttentionMaxGroup) {
    return cudaErrorInvalidValue;
  }
  if (kind == AttentionKind::kPrefill &&
      (a.max_prefill_rows == 0 ||
       a.max_prefill_rows > attention_prefill_tile_rows(a.head_dim, a.exact_fp32, a.mma_tiling))) {
    return cudaErrorInvalidValue;
  }
  if (attention_uses_tensor_cores(a.head_dim, a.exact_fp32)) {
    return mma_paged_attention(a, units, unit_count, kind, on);
  }
  // The FP32 kernel (deterministic mode, other head dims) is launched as usual.
  const uint32_t rows = max_rows(a.heads / a.kv_heads, kind);
  if (kind == AttentionKind::kDecode) return dispatch_dpl<1>(a, units, unit_count, rows, on.stream);
  return dispatch_dpl<4>(a, units, unit_count, rows, on.stream);
}

cudaError_t attention_reduce(const AttentionArgs& a, const AttentionReduceUnit* units,
                             uint32_t unit_count, const Launch& on) {
  if (unit_count == 0) return cudaSuccess;
  return detail::launch_kernel(attention_reduce_kernel<false>, attention_reduce_kernel<true>,
                               dim3(unit_count, a.heads), 64, 0, on, a, units);
}

}  // namespace headway::models::cuda::kernels
