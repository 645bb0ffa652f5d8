#include <cstring>
#include <headway/sdk/sampling.hpp>

#include "common.cuh"
#include "sampling.h"

namespace headway::models::cuda::kernels {
namespace {

using sdk::sampling::fixed_mass;
using sdk::sampling::kRadixBins;
using sdk::sampling::kRadixPasses;
using sdk::sampling::radix_digit;
using sdk::sampling::radix_matches;
using sdk::sampling::radix_step;
using sdk::sampling::top_p_need;
using sdk::sampling::uniform;

constexpr int kThreads = 1024;

struct Row {
  const float* logits;
  uint32_t vocab;
  float max_logit;
  float inv_t;
  __device__ float weight(uint32_t i) const {
    const float w = expf((logits[i] - max_logit) * inv_t);
    return isnan(w) ? 0.0f : w;
  }
};

// The largest threshold t such that the row's weights >= t (among those `admit` lets in) amount
// to at least `need`, by sampling.hpp's search: 4 passes, each histogramming `amount(w)` by the
// weight's next 8 bits into `bins` (shared memory) and letting every thread pick the same digit.
template <class Amount, class AmountOf, class Admit>
__device__ float radix_cut(const Row& row, Amount need, Amount* bins, AmountOf amount,
                           Admit admit) {
  uint32_t prefix = 0;
  Amount above = 0;
  for (int pass = 0; pass < kRadixPasses; ++pass) {
    for (int b = threadIdx.x; b < kRadixBins; b += blockDim.x) bins[b] = 0;
    __syncthreads();
    for (uint32_t i = threadIdx.x; i < row.vocab; i += blockDim.x) {
      const float w = row.weight(i);
      const uint32_t bits = __float_as_uint(w);
      if (admit(w) && radix_matches(bits, prefix, pass)) {
        atomicAdd(&bins[radix_digit(bits, pass)], amount(w));
      }
    }
    __syncthreads();
    radix_step(bins, pass, need, above, prefix);
    __syncthreads();  // every thread has read the bins before the next pass clears them
  }
  return __uint_as_float(prefix);
}

// Launched with kThreads threads: the bound keeps its registers within what they may hold.
__global__ void __launch_bounds__(kThreads)
    sample_kernel(const float* logits, uint32_t vocab, const SampleParams* params, int32_t* out) {
  __shared__ float best_value[32];
  __shared__ int best_index[32];
  __shared__ double dscratch[32];
  __shared__ double seg_base[kThreads];
  __shared__ unsigned long long mass_scratch[32];
  __shared__ unsigned int count_bins[kRadixBins];
  __shared__ unsigned long long mass_bins[kRadixBins];
  __shared__ int chosen;
  const SampleParams p = params[blockIdx.x];
  const float* lg = logits + static_cast<uint64_t>(blockIdx.x) * vocab;
  const int lane = threadIdx.x % 32;
  const int warp = threadIdx.x / 32;

  // Argmax, NaN skipped, ties to the lower id.
  float bv = -INFINITY;
  int bi = -1;
  for (uint32_t i = threadIdx.x; i < vocab; i += blockDim.x) {
    const float v = lg[i];
    if (isnan(v)) continue;
    if (bi < 0 || v > bv) {
      bv = v;
      bi = static_cast<int>(i);
    }
  }
  for (int o = 16; o > 0; o >>= 1) {
    const float ov = __shfl_xor_sync(detail::kFullMask, bv, o);
    const int oi = __shfl_xor_sync(detail::kFullMask, bi, o);
    if (oi >= 0 && (bi < 0 || ov > bv || (ov == bv && oi < bi))) {
      bv = ov;
      bi = oi;
    }
  }
  if (lane == 0) {
    best_value[warp] = bv;
    best_index[warp] = bi;
  }
  __syncthreads();
  if (warp == 0) {
    const int warps = blockDim.x / 32;
    bv = lane < warps ? best_value[lane] : -INFINITY;
    bi = lane < warps ? best_index[lane] : -1;
    for (int o = 16; o > 0; o >>= 1) {
      const float ov = __shfl_xor_sync(detail::kFullMask, bv, o);
      const int oi = __shfl_xor_sync(detail::kFullMask, bi, o);
      if (oi >= 0 && (bi < 0 || ov > bv || (ov == bv && oi < bi))) {
        bv = ov;
        bi = oi;
      }
    }
    if (lane == 0) {
      best_value[0] = bv;
      best_index[0] = bi < 0 ? 0 : bi;
    }
  }
  __syncthreads();
  const int best = best_index[0];
  if (p.temperature == 0.0f || p.top_k == 1) {
    if (threadIdx.x == 0) out[blockIdx.x] = best;
    return;
  }
  const Row row{lg, vocab, lg[best], 1.0f / p.temperature};

  // Min-p, top-k, then top-p over what they kept (sampling.hpp's keep_threshold, vLLM's order).
  float cut = p.min_p;
  if (p.top_k > 0 && p.top_k < vocab) {
    // The k-th largest weight: every weight counts 1.
    cut = fmaxf(cut, radix_cut(
                         row, static_cast<unsigned int>(p.top_k), count_bins,
                         [](float) { return 1u; }, [](float) { return true; }));
  }
  if (p.top_p < 1.0f) {
    // Masses in fixed point (sampling.hpp): integer sums, the same whatever the threads' order.
    unsigned long long total = 0;
    for (uint32_t i = threadIdx.x; i < vocab; i += blockDim.x) {
      const float w = row.weight(i);
      if (w >= cut) total += fixed_mass(w);
    }
    total = detail::block_sum(total, mass_scratch);
    const unsigned long long need = top_p_need(p.top_p, total);
    const float kept_cut = cut;
    cut = radix_cut(
        row, need, mass_bins,
        [](float w) { return static_cast<unsigned long long>(fixed_mass(w)); },
        [kept_cut](float w) { return w >= kept_cut; });
    cut = fmaxf(cut, kept_cut);
  }

  // Draw in token order: each thread owns a contiguous segment; an exclusive scan of the segment
  // masses finds the segment holding u, whose owner walks it.
  const uint32_t seg = (vocab + blockDim.x - 1) / blockDim.x;
  const uint32_t begin = min(vocab, threadIdx.x * seg);
  const uint32_t end = min(vocab, begin + seg);
  double mine = 0.0;
  for (uint32_t i = begin; i < end; ++i) {
    const float w = row.weight(i);
    if (w >= cut) mine += w;
  }
  seg_base[threadIdx.x] = mine;
  if (threadIdx.x == 0) chosen = -1;
  __syncthreads();
  if (threadIdx.x == 0) {
    // blockDim.x partial sums: a serial scan is a few microseconds and keeps the order exact.
    double run = 0.0;
    for (uint32_t t = 0; t < blockDim.x; ++t) {
      const double v = seg_base[t];
      seg_base[t] = run;
      run += v;
    }
    dscratch[0] = run;
  }
  __syncthreads();
  const double u = uniform(p.seed, p.output_index) * dscratch[0];
  const double base = seg_base[threadIdx.x];
  if (u >= base && u < base + mine) {
    // Summed in another association than `mine`: if rounding leaves u past the walk, take this
    // segment's last kept token with weight (u < base + mine says there is one).
    double cumulative = base;
    int pick = -1;
    for (uint32_t i = begin; i < end; ++i) {
      const float w = row.weight(i);
      if (!(w > 0.0f) || w < cut) continue;  // a token of no weight is never drawn
      pick = static_cast<int>(i);
      cumulative += w;
      if (u < cumulative) break;
    }
    chosen = pick;
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    int c = chosen;
    // With no mass at all (a +inf logit, a row of NaN, 1 / T overflowing) the greedy token, as
    // the core's sampler gives.
    if (c < 0 && dscratch[0] > 0.0) {
      // Rounding put u past the last kept token: take that token (the core does the same).
      for (uint32_t i = vocab; i-- > 0;) {
        const float w = row.weight(i);
        if (w > 0.0f && w >= cut) {
          c = static_cast<int>(i);
          break;
        }
      }
    }
    out[blockIdx.x] = c < 0 ? best : c;
  }
}

}  // namespace

cudaError_t sample_tokens(const float* logits, uint32_t rows, uint32_t vocab,
                          const SampleParams* params, int32_t* out, cudaStream_t stream) {
  if (rows == 0) return cudaSuccess;
  if (vocab == 0) return cudaErrorInvalidValue;
  sample_kernel<<<rows, kThreads, 0, stream>>>(logits, vocab, params, out);
  return cudaGetLastError();
}

}  // namespace headway::models::cuda::kernels
