// Token sampling on the device: greedy, temperature, top-k, top-p and min-p, with the semantics
// and the random draw of the core's Sampler (core/include/headway/core/sampler.h), so that the
// same seed gives the same token whichever side samples:
// - weights w = exp((logit - max) / temperature) (the best token has weight 1; NaN weighs 0);
// - min-p, top-k and top-p (vLLM's order) are thresholds on the weights, found as sampling.hpp
//   defines them (ties at a cut all kept), by the same radix search on the weight's bit pattern
//   (4 passes over the row each, histograms in shared memory; top-p masses summed in fixed point,
//   so the cut is the same run to run) rather than by sorting, so no scratch memory is needed;
// - the draw u = uniform(seed, output_index) * kept mass (sampling.hpp's uniform, the core's)
//   picks the first token, in token order, at which the cumulative kept mass exceeds u.
// What differs from the core is rounding: the device's expf against the core's polynomial exp
// (last bits of a weight), weights below exp(-87) (denormals here, 0 in the core), and the draw's
// total summed in double here and in float lanes there. Each changes a token only when a weight
// or the draw's target lies within that rounding of a cut or a boundary. One block per row; only
// the sampled ids go back to the host. Plain C++ header; kernel in sampling.cu.
//
// Ownership: device pointers borrowed for the launch. Threading: enqueues on `stream`.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace headway::models::cuda::kernels {

struct SampleParams {
  float temperature;  // 0 = greedy
  float top_p;        // 1 = off
  float min_p;        // 0 = off
  uint32_t top_k;     // 0 = off
  uint64_t seed;
  uint32_t output_index;
  uint32_t reserved;
};

// logits: [rows][vocab] float; params: [rows]; out: [rows]. Parameters must already be checked
// (temperature >= 0 and finite, top_p in (0, 1], min_p in [0, 1]).
cudaError_t sample_tokens(const float* logits, uint32_t rows, uint32_t vocab,
                          const SampleParams* params, int32_t* out, cudaStream_t stream);

}  // namespace headway::models::cuda::kernels
