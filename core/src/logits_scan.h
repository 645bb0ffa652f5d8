// Whole-vocabulary passes over a row of logits that the engine's host sampler and the logprobs
// make for every sampled request and step (128k entries for Llama 3): the largest logit, the
// first token holding it, the next one above a bar, the softmax denominator and the sampling
// weights. Written on 4-float vectors (GCC's vector extensions: SSE2 on baseline x86-64, NEON on
// ARM) because the compiler does not vectorize the plain loops: a NaN-skipping max and glibc's
// expf are both scalar.
//
// NaN logits count as absent everywhere. Threading: pure functions.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

namespace headway::core {

// The largest logit that is not NaN; -inf when there is none.
float max_logit(std::span<const float> logits);

// The first index whose logit equals `value` (+0 and -0 are equal); -1 when none does.
int32_t first_index_of(std::span<const float> logits, float value);

// The first index at or after `from` whose logit is above `threshold` (NaN never is);
// logits.size() when none is.
size_t first_above(std::span<const float> logits, size_t from, float threshold);

// The sum of exp(l - shift) over the logits that are not NaN, for a `shift` at least as large as
// every logit (their max): each term is in [0, 1]. Terms below exp(-87) count as exp(-87)
// (1.6e-38), -inf logits included, which changes a sum of at least 1 (the max's own term) by less
// than a float can show. Each exp is a polynomial within 1e-7 relative of exp (Cephes' expf); the
// terms are summed in float by 4 lanes and carried into a double every 256 terms.
double sum_exp_below(std::span<const float> logits, float shift);

// The weight passes below sum a row in blocks of this many entries (64 a lane, in float, then
// into a double), and can hand the blocks' sums out: a draw then skips whole blocks.
inline constexpr size_t kSumBlock = 256;
inline constexpr size_t sum_blocks(size_t entries) { return (entries + kSumBlock - 1) / kSumBlock; }

// Turns each logit l into the sampling weight exp((l - shift) * scale) in place, for a `shift` at
// least as large as every logit (their max) and a `scale` > 0 (1 / temperature), and returns the
// weights' sum. A weight is exactly 0 where the exponent is below -87 (exp would give less than
// 1.6e-38), -inf or NaN, so that a token kept out by -inf (or by nothing but rounding) can never be
// drawn; elsewhere it is within 1e-7 relative of exp. `block_sums`, when not empty, holds
// sum_blocks(logits.size()) entries and gets the sum of each block.
double exp_weights(std::span<float> logits, float shift, float scale,
                   std::span<double> block_sums = {});

// Sets every weight below `cut` to 0 in place and returns the sum of those left, summed as
// exp_weights sums; `block_sums` likewise.
double drop_below(std::span<float> weights, float cut, std::span<double> block_sums = {});

}  // namespace headway::core
