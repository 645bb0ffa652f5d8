#include "common.cuh"
#include "gemv.h"
#include "launch.cuh"

namespace headway::models::cuda::kernels {
namespace {

constexpr int kWarpsPerBlock = 4;

// What a kernel writes for its n output rows: out[m][n] in BF16 or in FP32, or, with w a gate|up
// projection of 2n weight rows (gate first), act[m][n] = SwiGLU of each output's gate and up sums,
// each rounded to BF16 first as gemv() into BF16 would store them (gemv_swiglu()).
enum class Out { kBF16, kF32, kSwiglu };

// 16 bytes of weights, read once: not kept in L1 (the activations x are, for every warp).
__device__ __forceinline__ uint4 load_streaming(const uint4* p) {
  uint4 v;
  asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%4];"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "l"(p));
  return v;
}

// acc += the dot product of 8 bf16 weights and 8 bf16 activations.
__device__ __forceinline__ float dot8(const uint4& w, const uint4& x, float acc) {
  const auto* wp = reinterpret_cast<const __nv_bfloat162*>(&w);
  const auto* xp = reinterpret_cast<const __nv_bfloat162*>(&x);
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const float2 wf = __bfloat1622float2(wp[i]);
    const float2 xf = __bfloat1622float2(xp[i]);
    acc = fmaf(wf.x, xf.x, acc);
    acc = fmaf(wf.y, xf.y, acc);
  }
  return acc;
}

// Output rows per warp for M activation rows: each activation piece a lane loads from L1 then
// serves R weight rows, so L1 carries M / R times the weights' bytes, and each lane keeps R weight
// loads in flight. With one row per warp, M = 8 took 1.5-2.1 times cuBLASLt's time on an H200
// (docs/performance.md), where eight activation loads per weight load make L1 the likely bound;
// with four, 1.0-1.7 times.
constexpr int rows_per_warp(int m) { return m == 1 ? 1 : (m == 2 ? 2 : 4); }
// With the SwiGLU, a warp's weight rows are its output rows' gate rows, then their up rows: as many
// weight rows as without it (two at m = 1).
constexpr int weight_rows_per_warp(int m, Out out) {
  return out == Out::kSwiglu ? 2 * (rows_per_warp(m) > 1 ? rows_per_warp(m) / 2 : 1)
                             : rows_per_warp(m);
}

// Pieces of each of its rows a lane prefetches into L2 before waiting for the previous kernel, in
// an overlapped launch (launch.h): the weights are written by no kernel, so their first reads can
// be in flight while the previous kernel finishes. One unrolled round of the loop below. Into L2
// rather than registers: loads held across the wait took the one-row kernel from 34 to 56
// registers a thread (ptxas, sm_90a), which would cost it resident warps.
constexpr int kEarlyPieces = 4;

using detail::prefetch_l2;

// Each warp takes R consecutive output rows n (R / 2 with the SwiGLU, each with its gate and up
// weight rows): lane l sums the 16-byte pieces l, l + 32, ... of its R weight rows against the
// same pieces of each of the M activation rows, then the warp adds the lanes' sums. The order of a
// row's sum depends on k alone.
template <int M, int R, Out kOut, bool kOverlap>
__global__ void __launch_bounds__(kWarpsPerBlock * 32)
    gemv_kernel(const __nv_bfloat16* __restrict__ x, const __nv_bfloat16* __restrict__ w,
                void* __restrict__ out, uint32_t n, uint32_t k) {
  constexpr int kOutRows = kOut == Out::kSwiglu ? R / 2 : R;  // output rows per warp
  const uint32_t lane = threadIdx.x % 32;
  const uint32_t row0 = (blockIdx.x * kWarpsPerBlock + threadIdx.x / 32) * kOutRows;
  if constexpr (!kOverlap) {
    if (row0 >= n) return;
  }
  const uint32_t pieces = k / 8;
  const auto* x_rows = reinterpret_cast<const uint4*>(x);
  const uint4* w_rows[R];
#pragma unroll
  for (int j = 0; j < R; ++j) {
    // Rows past n read row n - 1 again (never written): no branch in the loop. Weight rows
    // j >= kOutRows are the up rows, n further on (only with the SwiGLU).
    const uint64_t row = min(row0 + j % kOutRows, n - 1) + static_cast<uint64_t>(j / kOutRows) * n;
    w_rows[j] = reinterpret_cast<const uint4*>(w + row * k);
  }
  float acc[M][R];
#pragma unroll
  for (int r = 0; r < M; ++r) {
#pragma unroll
    for (int j = 0; j < R; ++j) acc[r][j] = 0.0f;
  }
  if constexpr (kOverlap) {
#pragma unroll
    for (int e = 0; e < kEarlyPieces; ++e) {
      const uint32_t p = lane + 32 * e;
#pragma unroll
      for (int j = 0; j < R; ++j) {
        if (row0 < n && p < pieces) prefetch_l2(w_rows[j] + p);
      }
    }
    // Every warp waits, also one past n: none returns before it (launch.cuh).
    detail::wait_for_previous_kernel<true>();
    if (row0 >= n) return;
  }
#pragma unroll 4
  for (uint32_t p = lane; p < pieces; p += 32) {
    uint4 wv[R];
#pragma unroll
    for (int j = 0; j < R; ++j) wv[j] = load_streaming(w_rows[j] + p);
#pragma unroll
    for (int r = 0; r < M; ++r) {
      const uint4 xv = __ldg(x_rows + r * pieces + p);
#pragma unroll
      for (int j = 0; j < R; ++j) acc[r][j] = dot8(wv[j], xv, acc[r][j]);
    }
  }
#pragma unroll
  for (int r = 0; r < M; ++r) {
    float sum[R];
#pragma unroll
    for (int j = 0; j < R; ++j) sum[j] = detail::warp_sum(acc[r][j]);
    if (lane != 0) continue;
#pragma unroll
    for (int j = 0; j < kOutRows; ++j) {
      if (row0 + j >= n) continue;
      const uint64_t at = static_cast<uint64_t>(r) * n + row0 + j;
      if constexpr (kOut == Out::kSwiglu) {
        static_cast<__nv_bfloat16*>(out)[at] =
            detail::silu_times(detail::to_bf16(sum[j]), detail::to_bf16(sum[j + kOutRows]));
      } else if constexpr (kOut == Out::kF32) {
        static_cast<float*>(out)[at] = sum[j];
      } else {
        static_cast<__nv_bfloat16*>(out)[at] = detail::to_bf16(sum[j]);
      }
    }
  }
}

template <int M, Out kOut>
cudaError_t launch(const __nv_bfloat16* x, const __nv_bfloat16* w, void* out, uint32_t n,
                   uint32_t k, const Launch& on) {
  constexpr int R = weight_rows_per_warp(M, kOut);
  const uint32_t rows_per_block = kWarpsPerBlock * (kOut == Out::kSwiglu ? R / 2 : R);
  const dim3 grid((n + rows_per_block - 1) / rows_per_block);
  const dim3 block(kWarpsPerBlock * 32);
  return detail::launch_kernel(gemv_kernel<M, R, kOut, false>, gemv_kernel<M, R, kOut, true>, grid,
                               block, 0, on, x, w, out, n, k);
}

// ---- Three to eight rows: on tensor cores ---------------------------------------------------
//
// With one dot product per output and row (above), eight activation rows cost eight L1 loads per
// weight load, and on an H200 the kernel took 1.5-2.1 times cuBLASLt's time at m = 8 (four rows a
// warp: 1.0-1.7). Here the weights are the A operand of mma.sync m16n8k16 and the activation rows
// the B operand's eight columns (rows past m are zeros), so a warp streams 16 weight rows and each
// 16-byte weight load is matched by half an activation load, however many rows up to eight.
//
// A lane reads 16 bytes (8 k) of rows g and g + 8 of its warp's 16 and of activation row g, per
// chunk of 32 k. The mma's fragments want, per lane t, k = 2t, 2t + 1, 2t + 8, 2t + 9 of a k16
// step; since a sum over k does not depend on which k a slot holds, as long as A and B put the
// same k in the same slot, lane t gives its slots k 8t .. 8t + 3 for the first step and
// 8t + 4 .. 8t + 7 for the second, straight from its 16-byte loads: a[0] / b0 = k 8t, 8t + 1,
// a[2] / b1 = k 8t + 2, 8t + 3 (registers x and y of the loads; z and w for the second step).
//
// The block's WARPS warps take the same 16 rows and split k, chunk c to warp c % WARPS (adjacent
// chunks on adjacent warps, so a block reads each row in 64 x WARPS-byte runs), and add their
// accumulators in a fixed order through shared memory: a row's result depends on k and WARPS
// alone, not on m or on the other rows. Eight warps where the rows are few (n <= 8,192: the o and
// down projections of the 8B shape, 256 blocks), four elsewhere.
//
// With the SwiGLU, a block's 16 weight rows are the gate rows of 8 output rows (the mma's rows g)
// and their up rows (g + 8), so that each lane holds both sums of its outputs (acc[i], acc[i + 2]);
// the warps are chosen by the 2n weight rows, as gemv() into gate|up would choose them, and each
// row's sum is the same.
constexpr uint32_t kMmaRows = 16;   // weight rows a block computes (the mma's M)
constexpr uint32_t kMmaChunk = 32;  // k a warp takes per step (two k16 mma steps)
constexpr uint32_t kMmaFewRows = 8192;

template <int WARPS, Out kOut, bool kOverlap>
__global__ void __launch_bounds__(WARPS * 32)
    gemv_mma_kernel(const __nv_bfloat16* __restrict__ x, const __nv_bfloat16* __restrict__ w,
                    void* __restrict__ out, uint32_t m, uint32_t n, uint32_t k) {
  constexpr bool kSwiglu = kOut == Out::kSwiglu;
  __shared__ float partial[WARPS - 1][32][4];  // warps 1.. hand their accumulators to warp 0
  const uint32_t lane = threadIdx.x % 32;
  const uint32_t warp = threadIdx.x / 32;
  const uint32_t g = lane / 4;
  const uint32_t t = lane % 4;
  const uint32_t row0 = blockIdx.x * (kSwiglu ? kMmaRows / 2 : kMmaRows);
  // Rows past n read row n - 1 again (never written): no branch in the loop.
  const uint64_t lo_row = min(row0 + g, n - 1);
  const uint64_t hi_row = kSwiglu ? lo_row + n : min(row0 + g + 8, n - 1);
  const auto* w_lo = reinterpret_cast<const uint4*>(w + lo_row * k);
  const auto* w_hi = reinterpret_cast<const uint4*>(w + hi_row * k);
  const bool has_x = g < m;  // activation rows past m are the zero columns of B
  const auto* x_row = reinterpret_cast<const uint4*>(x + uint64_t{has_x ? g : 0} * k);
  const uint32_t chunks = k / kMmaChunk;
  if constexpr (kOverlap) {
    // As the one-row kernel: the first weights into L2 while the previous kernel finishes.
#pragma unroll
    for (uint32_t i = 0; i < kEarlyPieces; ++i) {
      const uint32_t c = warp + i * WARPS;
      if (c < chunks) {
        prefetch_l2(w_lo + c * 4 + t);
        prefetch_l2(w_hi + c * 4 + t);
      }
    }
    detail::wait_for_previous_kernel<true>();
  }
  float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
#pragma unroll 4
  for (uint32_t c = warp; c < chunks; c += WARPS) {
    const uint32_t piece = c * 4 + t;
    const uint4 lo = load_streaming(w_lo + piece);
    const uint4 hi = load_streaming(w_hi + piece);
    // Loaded by every lane (x_row is row 0 past m) and zeroed after: no divergence before the
    // warp-wide mma.
    uint4 xv = __ldg(x_row + piece);
    if (!has_x) xv = make_uint4(0, 0, 0, 0);
    const uint32_t a0[4] = {lo.x, hi.x, lo.y, hi.y};
    detail::mma(acc, a0, xv.x, xv.y);
    const uint32_t a1[4] = {lo.z, hi.z, lo.w, hi.w};
    detail::mma(acc, a1, xv.z, xv.w);
  }
  if (warp > 0) {
#pragma unroll
    for (int i = 0; i < 4; ++i) partial[warp - 1][lane][i] = acc[i];
  }
  __syncthreads();
  if (warp != 0) return;
#pragma unroll
  for (int p = 0; p < WARPS - 1; ++p) {
#pragma unroll
    for (int i = 0; i < 4; ++i) acc[i] += partial[p][lane][i];
  }
  // acc[i]: weight row lo (hi for i >= 2), activation row 2t + i % 2.
  if constexpr (kSwiglu) {
#pragma unroll
    for (int i = 0; i < 2; ++i) {
      const uint32_t row = row0 + g;
      const uint32_t col = 2 * t + i;
      if (row >= n || col >= m) continue;
      static_cast<__nv_bfloat16*>(out)[uint64_t{col} * n + row] =
          detail::silu_times(detail::to_bf16(acc[i]), detail::to_bf16(acc[i + 2]));
    }
  } else {
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const uint32_t row = row0 + g + (i / 2) * 8;
      const uint32_t col = 2 * t + i % 2;
      if (row >= n || col >= m) continue;
      const uint64_t at = uint64_t{col} * n + row;
      if constexpr (kOut == Out::kF32) {
        static_cast<float*>(out)[at] = acc[i];
      } else {
        static_cast<__nv_bfloat16*>(out)[at] = detail::to_bf16(acc[i]);
      }
    }
  }
}

template <int WARPS, Out kOut>
cudaError_t launch_mma(const __nv_bfloat16* x, const __nv_bfloat16* w, void* out, uint32_t m,
                       uint32_t n, uint32_t k, const Launch& on) {
  const uint32_t rows_per_block = kOut == Out::kSwiglu ? kMmaRows / 2 : kMmaRows;
  const dim3 grid((n + rows_per_block - 1) / rows_per_block);
  const dim3 block(WARPS * 32);
  return detail::launch_kernel(gemv_mma_kernel<WARPS, kOut, false>,
                               gemv_mma_kernel<WARPS, kOut, true>, grid, block, 0, on, x, w, out, m,
                               n, k);
}

// gemv()'s choice of kernel for every output: the same for n output rows (2n weight rows with the
// SwiGLU) as for n weight rows written out, so that each row's sum is the same.
template <Out kOut>
cudaError_t dispatch(const __nv_bfloat16* x, const __nv_bfloat16* w, void* out, uint32_t m,
                     uint32_t n, uint32_t k, const Launch& on) {
  const uint64_t weight_rows = kOut == Out::kSwiglu ? uint64_t{2} * n : n;
  if (m >= kGemvMmaFromRows && k % kMmaChunk == 0) {
    return weight_rows <= kMmaFewRows ? launch_mma<8, kOut>(x, w, out, m, n, k, on)
                                      : launch_mma<4, kOut>(x, w, out, m, n, k, on);
  }
  switch (m) {
    case 1:
      return launch<1, kOut>(x, w, out, n, k, on);
    case 2:
      return launch<2, kOut>(x, w, out, n, k, on);
    case 3:
      return launch<3, kOut>(x, w, out, n, k, on);
    case 4:
      return launch<4, kOut>(x, w, out, n, k, on);
    case 5:
      return launch<5, kOut>(x, w, out, n, k, on);
    case 6:
      return launch<6, kOut>(x, w, out, n, k, on);
    case 7:
      return launch<7, kOut>(x, w, out, n, k, on);
    default:
      return launch<8, kOut>(x, w, out, n, k, on);
  }
}

bool aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

}  // namespace

bool gemv_applies(uint32_t m, uint32_t k, const void* x, const void* w, const void* out) {
  return m >= 1 && m <= kGemvMaxRows && k > 0 && k % 8 == 0 && aligned16(x) && aligned16(w) &&
         aligned16(out);
}

cudaError_t gemv(const __nv_bfloat16* x, const __nv_bfloat16* w, void* out, bool out_f32,
                 uint32_t m, uint32_t n, uint32_t k, const Launch& on) {
  if (!gemv_applies(m, k, x, w, out)) return cudaErrorInvalidValue;
  if (n == 0) return cudaSuccess;
  return out_f32 ? dispatch<Out::kF32>(x, w, out, m, n, k, on)
                 : dispatch<Out::kBF16>(x, w, out, m, n, k, on);
}

cudaError_t gemv_swiglu(const __nv_bfloat16* x, const __nv_bfloat16* gate_up, __nv_bfloat16* act,
                        uint32_t m, uint32_t ffn, uint32_t k, const Launch& on) {
  if (!gemv_applies(m, k, x, gate_up, act)) return cudaErrorInvalidValue;
  if (ffn == 0) return cudaSuccess;
  return dispatch<Out::kSwiglu>(x, gate_up, act, m, ffn, k, on);
}

}  // namespace headway::models::cuda::kernels
