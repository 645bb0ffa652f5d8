// Token sampling on the device: greedy, temperature, top-k, top-p and min-p, with the semantics
// and the random draw of the core's Sampler (core/include/headway/core/sampler.h), so that the
// same seed gives the same kind of stream whichever side samples:
// - weights w = exp((logit - max) / temperature) (the best token has weight 1; NaN weighs 0);
// - top-k keeps the k heaviest, top-p the shortest heaviest prefix reaching top_p of the kept mass,
//   min-p the weights >= min_p, applied in that order;
// - the draw u = uniform(seed, output_index) * kept mass picks the first token, in token order,
//   at which the cumulative kept mass exceeds u.
// Differences from the core, documented because they can change a token: ties at a top-k or top-p
// cut are all kept (the core keeps the lower ids), and the core walks the candidates in the order
// its partial sort left them when top-k or top-p ranked them, the device always in token order.
// With temperature and min-p alone both pick the same token for the same logits.
//
// One block per row; cuts are found by a radix search on the weight's bit pattern (radix_cut.h: 4
// passes over the row each, histograms in shared memory; top-p masses summed in fixed point, so
// the cut is the same run to run) rather than by sorting, so no scratch memory is needed. Only the
// sampled ids go back to the host. Plain C++ header; kernel in sampling.cu.
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

// The uniform draw in [0, 1) for (seed, output_index): bit-identical to core::Sampler::uniform.
double sample_uniform(uint64_t seed, uint32_t output_index);

}  // namespace headway::models::cuda::kernels
