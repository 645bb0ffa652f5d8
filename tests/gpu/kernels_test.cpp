// Every CUDA kernel of the cuda model against a CPU reference computed in double from the same
// BF16 inputs. Skips (with the reason) where no CUDA device is visible.
#include <gtest/gtest.h>
#include <headway/core/sampler.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <string>
#include <utility>

#include "attention.h"
#include "embedding.h"
#include "gemm.h"
#include "gemv.h"
#include "gpu_test_support.h"
#include "kv_layout.h"
#include "launch.h"
#include "phase_timer.h"
#include "rms_norm.h"
#include "rope.h"
#include "rope_kv.h"
#include "sampling.h"
#include "step_plan.h"
#include "swiglu.h"

namespace headway::gpu_test {
namespace {

namespace k = models::cuda::kernels;
using models::cuda::Gemm;
using models::cuda::GemmOut;
using models::cuda::StepLimits;
using models::cuda::StepOffsets;
using models::cuda::StepPlan;

TEST(CudaKernels, EmbeddingGatherCopiesRows) {
  HW_SKIP_WITHOUT_CUDA();
  const uint32_t vocab = 50, hidden = 96;
  const auto table = random_bf16(size_t{vocab} * hidden, 1.0f, 1);
  const std::vector<int32_t> ids = {3, 49, 0, 3};
  Dev<__nv_bfloat16> d_table(table);
  Dev<int32_t> d_ids(ids);
  Dev<float> d_out(ids.size() * hidden);
  ASSERT_EQ(k::embedding_gather(d_table.get(), hidden, d_ids.get(), 4, d_out.get(), nullptr),
            cudaSuccess);
  const auto out = d_out.download();
  for (size_t t = 0; t < ids.size(); ++t) {
    for (uint32_t i = 0; i < hidden; ++i) {
      ASSERT_EQ(out[t * hidden + i], bf(table[ids[t] * hidden + i])) << t << " " << i;
    }
  }
}

// `with_bias`: the added rows are a projection's output with a bias (o_proj's, attention_bias).
void check_rms_norm(uint32_t hidden, bool with_rows, bool with_bias = false) {
  const uint32_t T = 5;
  const float eps = 1e-5f;
  auto x = random_floats(size_t{T} * hidden, -2.0f, 2.0f, 2);
  const auto add = random_bf16(size_t{T} * hidden, 1.0f, 3);
  const auto w = random_floats(hidden, 0.5f, 1.5f, 4);
  const auto bias = random_floats(hidden, -1.0f, 1.0f, 5);
  const std::vector<int32_t> rows = {3, 1};
  Dev<float> d_x(x);
  Dev<__nv_bfloat16> d_add(add);
  Dev<float> d_w(w);
  Dev<float> d_bias(bias);
  Dev<int32_t> d_rows(rows);
  const uint32_t count = with_rows ? 2 : T;
  Dev<__nv_bfloat16> d_out(size_t{count} * hidden);
  ASSERT_EQ(
      k::add_rms_norm(d_x.get(), d_add.get(), with_bias ? d_bias.get() : nullptr, d_w.get(),
                      with_rows ? d_rows.get() : nullptr, count, hidden, eps, d_out.get(), nullptr),
      cudaSuccess);
  const auto out = d_out.download();
  const auto x_after = d_x.download();
  for (uint32_t i = 0; i < count; ++i) {
    const uint32_t src = with_rows ? rows[i] : i;
    double sum = 0.0;
    std::vector<double> row(hidden);
    for (uint32_t j = 0; j < hidden; ++j) {
      float v = x[src * hidden + j] + bf(add[src * hidden + j]);
      if (with_bias) v += bias[j];
      row[j] = v;
      sum += row[j] * row[j];
      ASSERT_EQ(x_after[src * hidden + j], static_cast<float>(row[j])) << "residual row " << src;
    }
    const double inv = 1.0 / std::sqrt(sum / hidden + eps);
    for (uint32_t j = 0; j < hidden; ++j) {
      const double ref = row[j] * inv * w[j];
      ASSERT_NEAR(bf(out[i * hidden + j]), ref, 1e-2 * std::abs(ref) + 1e-3) << i << " " << j;
    }
  }
  if (with_rows) {  // rows not listed keep their residual untouched
    for (uint32_t j = 0; j < hidden; ++j) ASSERT_EQ(x_after[0 * hidden + j], x[j]);
  }
}

// Rows of a multiple of 4 take the vectorised kernel (up to three pieces a thread on 32 threads
// at 320, four on 256 at 4,096 and on 1,024 at 16,384); 322 takes the element loop. Each with and
// without a bias on the added rows.
TEST(CudaKernels, AddRmsNormMatchesReference) {
  HW_SKIP_WITHOUT_CUDA();
  for (const bool with_bias : {false, true}) {
    SCOPED_TRACE(with_bias ? "with a bias" : "without a bias");
    check_rms_norm(320, false, with_bias);
    check_rms_norm(322, false, with_bias);
    check_rms_norm(4096, false, with_bias);
    check_rms_norm(4096, true, with_bias);
    check_rms_norm(16384, true, with_bias);
  }
}

// Against the double reference: ffn 1,000 (a multiple of 8: the 16-byte kernel, its last block of
// pieces partly past the row), 1,001 (the one-element kernel), and 8 with 70,000 tokens, more than
// the 16-byte kernel's grid has rows (65,535). Both kernels give every element the same bits.
TEST(CudaKernels, SwigluMatchesReference) {
  HW_SKIP_WITHOUT_CUDA();
  // 14,336: Llama-3.1-8B's ffn, 1,792 pieces of 8 over several blocks of the 16-byte kernel.
  for (const auto& [T, ffn] : {std::pair{3u, 1000u}, {3u, 1001u}, {70000u, 8u}, {4u, 14336u}}) {
    SCOPED_TRACE("tokens " + std::to_string(T) + ", ffn " + std::to_string(ffn));
    const auto gu = random_bf16(size_t{T} * 2 * ffn, 4.0f, 5);
    Dev<__nv_bfloat16> d_gu(gu);
    Dev<__nv_bfloat16> d_act(size_t{T} * ffn);
    ASSERT_EQ(k::swiglu(d_gu.get(), T, ffn, d_act.get(), nullptr), cudaSuccess);
    const auto act = d_act.download();
    for (uint32_t t = 0; t < T; ++t) {
      for (uint32_t i = 0; i < ffn; ++i) {
        const double g = bf(gu[size_t{t} * 2 * ffn + i]);
        const double u = bf(gu[size_t{t} * 2 * ffn + ffn + i]);
        const double ref = g / (1.0 + std::exp(-g)) * u;
        ASSERT_NEAR(bf(act[size_t{t} * ffn + i]), ref, 8e-3 * std::abs(ref) + 1e-4)
            << t << " " << i;
      }
    }
  }
  // The same values through both kernels: 1,000 elements of a row read as 125 rows of 8 (16-byte
  // kernel) and as 1,000 rows of 1 (one-element kernel) give the same bits.
  const auto gu = random_bf16(2000, 4.0f, 6);
  std::vector<__nv_bfloat16> one_wide(2000);
  for (uint32_t i = 0; i < 1000; ++i) {
    one_wide[2 * i] = gu[(i / 8) * 16 + i % 8];          // gate of row i / 8, element i % 8
    one_wide[2 * i + 1] = gu[(i / 8) * 16 + 8 + i % 8];  // its up value
  }
  Dev<__nv_bfloat16> d_wide(gu), d_narrow(one_wide);
  Dev<__nv_bfloat16> d_a(1000), d_b(1000);
  ASSERT_EQ(k::swiglu(d_wide.get(), 125, 8, d_a.get(), nullptr), cudaSuccess);
  ASSERT_EQ(k::swiglu(d_narrow.get(), 1000, 1, d_b.get(), nullptr), cudaSuccess);
  const auto a = d_a.download();
  const auto b = d_b.download();
  EXPECT_EQ(std::memcmp(a.data(), b.data(), a.size() * sizeof(a[0])), 0);
}

// What an architecture does between the projection and RoPE: biases on q, k and v (Qwen 2), an
// RMSNorm of each head of q and k (Qwen 3).
struct BeforeRope {
  bool bias = false;
  bool norm = false;
};

// `positions`: one token each; the last is a graph step's padding row (rotated, no KV slot).
void check_rope_kv(const std::vector<int32_t>& positions, uint32_t heads, uint32_t kv_heads,
                   BeforeRope before = {}, uint32_t hd = 64) {
  models::cpu::LlamaConfig c;
  c.head_dim = hd;
  c.rope_theta = 500000.0;
  c.rope_scaling.llama3 = true;
  c.rope_scaling.factor = 8.0;
  const models::cpu::Rope rope(c);
  const uint32_t half = hd / 2;
  k::KvLayout layout{1, kv_heads, hd, 16};
  const uint32_t T = static_cast<uint32_t>(positions.size());
  const uint32_t blocks = 3 * T;
  const uint32_t width = (heads + 2 * kv_heads) * hd;
  const auto qkv = random_bf16(size_t{T} * width, 1.0f, 6);
  const auto bias = random_floats(width, -1.0f, 1.0f, 7);
  const auto q_norm = random_floats(hd, 0.5f, 1.5f, 8);
  const auto k_norm = random_floats(hd, 0.5f, 1.5f, 9);
  const float eps = 1e-6f;
  std::vector<int64_t> slots(T);
  for (uint32_t t = 0; t < T; ++t) {
    slots[t] = static_cast<int64_t>(((t * 3) % blocks) * layout.block_elems() +
                                    (positions[t] % layout.block_size) * hd);
  }
  slots[T - 1] = -1;
  std::vector<int64_t> sorted_slots(slots.begin(), slots.end() - 1);
  std::sort(sorted_slots.begin(), sorted_slots.end());
  ASSERT_EQ(std::adjacent_find(sorted_slots.begin(), sorted_slots.end()), sorted_slots.end())
      << "each token needs a slot of its own";
  Dev<__nv_bfloat16> d_qkv(qkv);
  Dev<int32_t> d_pos(positions);
  Dev<int64_t> d_slots(slots);
  Dev<double> d_freq(rope.inverse_frequencies());
  Dev<__nv_bfloat16> d_cache(layout.block_elems() * blocks);
  check(cudaMemset(d_cache.get(), 0xff, layout.block_elems() * blocks * 2), "poison");  // NaN
  Dev<float> d_bias(bias);
  Dev<float> d_q_norm(q_norm);
  Dev<float> d_k_norm(k_norm);
  k::RopeKvArgs a;
  a.qkv = d_qkv.get();
  a.tokens = T;
  a.heads = heads;
  a.kv_heads = kv_heads;
  a.head_dim = hd;
  a.positions = d_pos.get();
  a.slot_offsets = d_slots.get();
  a.inv_freq = d_freq.get();
  a.layer_cache = d_cache.get();
  a.head_elems = layout.head_elems();
  if (before.bias) a.qkv_bias = d_bias.get();
  if (before.norm) {
    a.q_norm = d_q_norm.get();
    a.k_norm = d_k_norm.get();
    a.norm_eps = eps;
  }
  ASSERT_EQ(k::rope_kv_write(a, nullptr), cudaSuccess);
  const auto out = d_qkv.download();
  const auto cache = d_cache.download();
  for (uint32_t t = 0; t < T; ++t) {
    std::vector<float> cs(half), sn(half);
    const uint32_t p = static_cast<uint32_t>(positions[t]);
    rope.table(&p, 1, cs.data(), sn.data());
    // Bias and norm as the cpu model does them.
    std::vector<float> row(width);
    for (uint32_t i = 0; i < width; ++i) {
      row[i] = bf(qkv[t * width + i]);
      if (before.bias) row[i] += bias[i];
    }
    for (uint32_t h = 0; before.norm && h < heads + kv_heads; ++h) {
      float* head = row.data() + size_t{h} * hd;
      const float* w = h < heads ? q_norm.data() : k_norm.data();
      double sum = 0.0;
      for (uint32_t d = 0; d < hd; ++d) sum += double{head[d]} * head[d];
      const double inv = 1.0 / std::sqrt(sum / hd + eps);
      for (uint32_t d = 0; d < hd; ++d) head[d] = static_cast<float>(head[d] * inv * w[d]);
    }
    const std::vector<float> v_row(row.begin() + (heads + kv_heads) * hd, row.end());
    models::cpu::Rope::apply(row.data(), heads + kv_heads, hd, cs.data(), sn.data());
    for (uint32_t i = 0; i < (heads + kv_heads) * hd; ++i) {
      ASSERT_NEAR(bf(out[t * width + i]), row[i], 1e-2 + 4e-3 * std::abs(row[i]))
          << "token " << t << " element " << i;
    }
    if (slots[t] < 0) continue;
    for (uint32_t g = 0; g < kv_heads; ++g) {
      for (uint32_t d = 0; d < hd; ++d) {
        const size_t kpos = slots[t] + g * layout.head_elems() + d;
        const size_t vpos = slots[t] + (kv_heads + g) * layout.head_elems() + d;
        ASSERT_EQ(bf(cache[kpos]), bf(out[t * width + (heads + g) * hd + d])) << "k " << t;
        ASSERT_EQ(bf(cache[vpos]), bf(to_bf(v_row[g * hd + d]))) << "v " << t;
      }
    }
  }
  // Exactly the real tokens' k and v were written; the padding row wrote nothing.
  size_t written = 0;
  for (const __nv_bfloat16& v : cache) written += std::isnan(bf(v)) ? 0 : 1;
  EXPECT_EQ(written, size_t{T - 1} * 2 * kv_heads * hd);
}

// A few tokens spread each token's heads over several blocks (four heads a block at head_dim 64);
// a long step runs a block per token. With 4 kv heads and 8 rotated heads (2 blocks a token),
// each block also copies the v of a second kv head.
TEST(CudaKernels, RopeKvWriteRotatesAndFillsTheCache) {
  HW_SKIP_WITHOUT_CUDA();
  check_rope_kv({0, 1, 17, 8191, 100000, 0}, 4, 2);
  check_rope_kv({5, 900, 3, 0}, 4, 4);
  std::vector<int32_t> many(300);
  for (size_t t = 0; t < many.size(); ++t) many[t] = static_cast<int32_t>(t * 331 % 50000);
  check_rope_kv(many, 4, 2);
}

// The same layouts with Qwen 2's biases, Qwen 3's per-head norms, and both (Qwen 3 with
// attention_bias). A block's norm prologue gives each warp a head: one each when spread (4 heads a
// block at head_dim 64), two for some warps at a block per token (6 heads, 4 warps).
TEST(CudaKernels, RopeKvWriteAddsBiasesAndNormalizesHeads) {
  HW_SKIP_WITHOUT_CUDA();
  std::vector<int32_t> many(300);
  for (size_t t = 0; t < many.size(); ++t) many[t] = static_cast<int32_t>(t * 331 % 50000);
  for (const BeforeRope before :
       {BeforeRope{true, false}, BeforeRope{false, true}, BeforeRope{true, true}}) {
    SCOPED_TRACE(std::string(before.bias ? "bias " : "") + (before.norm ? "norm" : ""));
    check_rope_kv({0, 1, 17, 8191, 100000, 0}, 4, 2, before);
    check_rope_kv({5, 900, 3, 0}, 4, 4, before);
    check_rope_kv(many, 4, 2, before);
  }
  // Other head widths with both: 16 (a block of 16 heads spread, half of each warp idle in the
  // prologue), 128 (Qwen 3's: 2 heads a block, 4 elements a lane) and 256 (a head a block).
  for (const uint32_t hd : {16u, 128u, 256u}) {
    SCOPED_TRACE("head_dim " + std::to_string(hd));
    check_rope_kv({0, 1, 17, 8191, 100000, 0}, 8, 2, {true, true}, hd);
    check_rope_kv(many, 8, 2, {true, true}, hd);
  }
  // One of the two norms without the other is refused before the launch.
  Dev<float> norm(std::vector<float>(64, 1.0f));
  k::RopeKvArgs half_normed;
  half_normed.tokens = 1;
  half_normed.heads = half_normed.kv_heads = 1;
  half_normed.head_dim = 64;
  half_normed.q_norm = norm.get();
  EXPECT_EQ(k::rope_kv_write(half_normed, nullptr), cudaErrorInvalidValue);
}

struct AttentionCase {
  uint32_t heads, kv_heads, head_dim, block_size;
};

class CudaAttention : public ::testing::TestWithParam<AttentionCase> {};

// A step plan's arrays on the device, with the split-K scratch its units write.
struct DevicePlan {
  DevicePlan(const StepPlan& plan, uint32_t head_dim)
      : bytes(plan.offsets().total),
        acc(std::max<size_t>(1, size_t{plan.partial_records()} * head_dim)),
        ml(std::max<size_t>(1, size_t{plan.partial_records()} * 2)) {
    check(cudaMemcpy(bytes.get(), plan.staging(), plan.offsets().total, cudaMemcpyHostToDevice),
          "plan upload");
    // NaN in every record, so that one a unit fails to write poisons its row: memory a previous
    // plan left there, or zeros (which merge as "no key"), could hide it.
    check(cudaMemset(acc.get(), 0xff, acc.size() * sizeof(float)), "poison acc");
    check(cudaMemset(ml.get(), 0xff, ml.size() * sizeof(float)), "poison ml");
  }
  template <class T>
  const T* at(size_t offset) const {
    return reinterpret_cast<const T*>(reinterpret_cast<const std::byte*>(bytes.get()) + offset);
  }
  Dev<std::byte> bytes;
  Dev<float> acc;
  Dev<float> ml;
};

// Launches every attention unit of `plan` (uploaded as `d`) in the model's order: prefill tiles,
// decodes, then the reduce of split ones. The first error, or cudaSuccess.
cudaError_t run_attention(const k::AttentionArgs& a, const StepPlan& plan, const DevicePlan& d) {
  const StepOffsets& o = plan.offsets();
  cudaError_t err =
      k::paged_attention(a, d.at<k::AttentionUnit>(o.prefill_units), plan.prefill_unit_count(),
                         k::AttentionKind::kPrefill, nullptr);
  if (err == cudaSuccess) {
    err = k::paged_attention(a, d.at<k::AttentionUnit>(o.decode_units), plan.decode_unit_count(),
                             k::AttentionKind::kDecode, nullptr);
  }
  if (err == cudaSuccess) {
    err = k::attention_reduce(a, d.at<k::AttentionReduceUnit>(o.reduce_units),
                              plan.reduce_unit_count(), nullptr);
  }
  return err;
}

// The arguments of one layer's attention over `plan` (uploaded as `d`).
k::AttentionArgs attention_args(const AttentionCase& p, const k::KvLayout& layout,
                                const __nv_bfloat16* qkv, __nv_bfloat16* out,
                                const __nv_bfloat16* layer_cache, const StepPlan& plan,
                                const DevicePlan& d, bool exact) {
  k::AttentionArgs a;
  a.qkv = qkv;
  a.q_stride = (p.heads + 2 * p.kv_heads) * p.head_dim;
  a.out = out;
  a.layer_cache = layer_cache;
  a.block_elems = layout.block_elems();
  a.head_elems = layout.head_elems();
  a.block_size = p.block_size;
  a.block_tables = d.at<int32_t>(plan.offsets().block_tables);
  a.heads = p.heads;
  a.kv_heads = p.kv_heads;
  a.head_dim = p.head_dim;
  a.scale = 1.0f / std::sqrt(static_cast<float>(p.head_dim));
  a.partial_acc = d.acc.get();
  a.partial_ml = d.ml.get();
  a.exact_fp32 = exact;
  a.max_prefill_rows = plan.max_prefill_rows();
  return a;
}

// Prefill chunks over a cached prefix, a chunk from position 0, a short decode and a long decode
// (split-K), all in one step; scrambled block tables; everything past a row's position is random
// garbage that must be masked.
//
// Judged per row and head by the L2 norm of the error against the reference's norm (1%), so that
// one key wrongly in or out fails: twice, with queries in (-1, 1) and in (-8, 8). With the first
// the softmax is nearly flat (scores with a standard deviation of 0.33 whatever the head dim), so
// every key weighs about 1 / n and moving one shifts a row by about 1 / sqrt(n) of its norm: at
// 3,001 keys 1.6-2% for half the heads and under 1% for one in 20 (a simulation of this draw),
// and each key is seen by every head of its group; a 16-key slice of a tile moves a row 4 times as
// far. The kernels' own error, the BF16 rounding of P and of the output, stayed under 0.5% of the
// norm in the same simulation. The second is peaked (a standard deviation of 2.7: a few keys carry
// a row), which tests the online softmax's rescaling across tiles and splits over a wide range of
// maxima. The cache past each context (the masked keys of a request's last block, and the blocks
// no table holds) is 8 times larger in K and V, so that any of its keys let in dominates its row.
TEST_P(CudaAttention, MatchesReference) {
  HW_SKIP_WITHOUT_CUDA();
  const AttentionCase p = GetParam();
  const uint32_t group = p.heads / p.kv_heads;
  k::KvLayout layout{2, p.kv_heads, p.head_dim, p.block_size};
  const uint32_t layer = 1;
  struct Req {
    uint32_t start, tokens;
  };
  // {200, 37}: keys up to 237, so 64-key tiles reuse their double buffers (4 tiles). {955, 6}: with
  // prefill tiles split (below), its last key range is [960, 961), which its first rows, at
  // 955-959, do not reach.
  const std::vector<Req> reqs = {{40, 37},  {1500, 1}, {7, 1},  {0, 5},
                                 {3000, 1}, {200, 37}, {955, 6}};
  uint32_t blocks_needed = 0;
  for (const Req& r : reqs) blocks_needed += (r.start + r.tokens + p.block_size - 1) / p.block_size;
  const uint32_t blocks = blocks_needed + 3;
  std::vector<uint32_t> perm(blocks);
  std::iota(perm.begin(), perm.end(), 0u);
  std::shuffle(perm.begin(), perm.end(), std::mt19937(9));
  std::vector<std::vector<uint32_t>> tables;
  std::vector<std::vector<int32_t>> ids;
  uint32_t next = 0, T = 0;
  std::vector<hw_model_slice> slices;
  for (const Req& r : reqs) {
    const uint32_t n = (r.start + r.tokens + p.block_size - 1) / p.block_size;
    tables.emplace_back(perm.begin() + next, perm.begin() + next + n);
    next += n;
    ids.emplace_back(r.tokens, 1);
    T += r.tokens;
  }
  for (size_t i = 0; i < reqs.size(); ++i) {
    slices.push_back(hw_model_slice{i, reqs[i].start, reqs[i].tokens, ids[i].data(),
                                    tables[i].data(), static_cast<uint32_t>(tables[i].size()), 0,
                                    0.0f, 1.0f, 0, 0, 0, 0.0f, 0});
  }
  hw_model_batch batch{sizeof(hw_model_batch), slices.data(), static_cast<uint32_t>(slices.size()),
                       p.block_size};
  const uint32_t width = (p.heads + 2 * p.kv_heads) * p.head_dim;
  auto cache = random_bf16(layout.block_elems() * blocks, 1.0f, 10);
  {
    // Slots that hold a key some row may see: positions below each request's context end.
    std::vector<bool> seen(size_t{blocks} * p.block_size, false);
    for (size_t i = 0; i < reqs.size(); ++i) {
      for (uint32_t kp = 0; kp < reqs[i].start + reqs[i].tokens; ++kp) {
        seen[size_t{tables[i][kp / p.block_size]} * p.block_size + kp % p.block_size] = true;
      }
    }
    for (uint32_t b = 0; b < blocks; ++b) {
      for (uint32_t slot = 0; slot < p.block_size; ++slot) {
        if (seen[size_t{b} * p.block_size + slot]) continue;
        for (uint32_t l = 0; l < layout.layers; ++l) {
          for (uint32_t h = 0; h < 2 * p.kv_heads; ++h) {  // K heads, then V heads
            const uint64_t at = b * layout.block_elems() + l * layout.layer_elems() +
                                h * layout.head_elems() + uint64_t{slot} * p.head_dim;
            for (uint32_t d = 0; d < p.head_dim; ++d) {
              cache[at + d] = to_bf(bf(cache[at + d]) * 8.0f);
            }
          }
        }
      }
    }
  }
  const auto qkv_unit = random_bf16(size_t{T} * width, 1.0f, 11);
  Dev<__nv_bfloat16> d_cache(cache);
  Dev<__nv_bfloat16> d_qkv(qkv_unit.size());
  Dev<__nv_bfloat16> d_out(size_t{T} * p.heads * p.head_dim);
  for (const float q_scale : {1.0f, 8.0f}) {
    SCOPED_TRACE("queries in (-" + std::to_string(static_cast<int>(q_scale)) + ", " +
                 std::to_string(static_cast<int>(q_scale)) + ")");
    // The queries scaled (by a power of two: exactly), keys and values as drawn.
    std::vector<__nv_bfloat16> qkv = qkv_unit;
    for (uint32_t t = 0; t < T; ++t) {
      for (uint32_t i = 0; i < p.heads * p.head_dim; ++i) {
        __nv_bfloat16& q = qkv[size_t{t} * width + i];
        q = to_bf(bf(q) * q_scale);
      }
    }
    d_qkv.upload(qkv);
    // The reference, in double, once for every kernel below: row by row, each head attends to keys
    // 0 .. its position (its keys' K rows found once, its V rows head_elems x kv_heads further).
    std::vector<double> expected(size_t{T} * p.heads * p.head_dim);
    {
      uint32_t row = 0;
      const double scale = 1.0 / std::sqrt(static_cast<double>(p.head_dim));
      const uint64_t v_shift = uint64_t{p.kv_heads} * layout.head_elems();
      for (size_t i = 0; i < reqs.size(); ++i) {
        for (uint32_t t = 0; t < reqs[i].tokens; ++t, ++row) {
          const uint32_t pos = reqs[i].start + t;
          for (uint32_t h = 0; h < p.heads; ++h) {
            const uint32_t g = h / group;
            std::vector<uint64_t> k_row(pos + 1);
            for (uint32_t kp = 0; kp <= pos; ++kp) {
              k_row[kp] = tables[i][kp / p.block_size] * layout.block_elems() +
                          layer * layout.layer_elems() + g * layout.head_elems() +
                          uint64_t{kp % p.block_size} * p.head_dim;
            }
            const __nv_bfloat16* q = qkv.data() + size_t{row} * width + h * p.head_dim;
            std::vector<double> s(pos + 1);
            double best = -1e300;
            for (uint32_t kp = 0; kp <= pos; ++kp) {
              double dot = 0.0;
              for (uint32_t d = 0; d < p.head_dim; ++d) {
                dot += static_cast<double>(bf(q[d])) * bf(cache[k_row[kp] + d]);
              }
              s[kp] = dot * scale;
              best = std::max(best, s[kp]);
            }
            double sum = 0.0;
            for (double& v : s) sum += (v = std::exp(v - best));
            double* ref = expected.data() + (size_t{row} * p.heads + h) * p.head_dim;
            for (uint32_t kp = 0; kp <= pos; ++kp) {
              const double w = s[kp] / sum;
              for (uint32_t d = 0; d < p.head_dim; ++d) {
                ref[d] += w * bf(cache[k_row[kp] + v_shift + d]);
              }
            }
          }
        }
      }
    }
    // Both kernels, each with the prefill tiles it takes: the exact FP32 one, and tensor cores (the
    // default where the head dim allows) in every tiling of its prefill blocks.
    // And once more on tensor cores with the decodes split as a small batch makes the model split
    // them (StepLimits::decode_blocks_wanted): 16 ranges of 96 and of 192 keys, where ranges of 256
    // give 6 and 12, so that ranges start in the middle of the decode kernel's 64-key tiles.
    // Then with the prefill tiles split too (StepLimits::prefill_split_min_keys of 64: the tiles of
    // the 37-token chunk at 200 in three ranges), in the default tiling, in 128x64, and in every
    // lean tiling (whose split records convert their base-2 maxima for the reduce).
    struct Kernel {
      bool exact;
      k::MmaTiling tiling;
      bool fine_splits = false;
      bool split_prefills = false;
    };
    std::vector<Kernel> kernels = {{true, k::MmaTiling::k64x32}};
    for (const k::MmaTiling t : k::kMmaTilings) kernels.push_back({false, t});
    kernels.push_back({false, k::MmaTiling::k64x32, true});
    kernels.push_back({false, k::MmaTiling::k64x32, true, true});
    kernels.push_back({false, k::MmaTiling::k128x64, true, true});
    for (const k::MmaTiling t : k::kMmaTilings) {
      if (k::mma_tiling_is_lean(t)) kernels.push_back({false, t, true, true});
    }
    for (const Kernel& kernel : kernels) {
      const bool exact = kernel.exact;
      SCOPED_TRACE(exact
                       ? std::string("FP32 kernel")
                       : std::string("tensor cores, tiling ") + k::mma_tiling_name(kernel.tiling) +
                             (kernel.fine_splits ? ", fine splits" : "") +
                             (kernel.split_prefills ? ", split prefills" : ""));
      StepLimits limits{100, 1u << 20, blocks, group, false};
      limits.decode_blocks_wanted = kernel.fine_splits ? 1024 : 0;
      limits.prefill_split_min_keys = kernel.split_prefills ? 64 : 0;
      limits.prefill_tile_rows = k::attention_prefill_tile_rows(p.head_dim, exact, kernel.tiling);
      // As the model orders them for the lean tilings.
      limits.prefill_longest_first =
          k::attention_prefill_longest_first(p.head_dim, exact, kernel.tiling);
      StepPlan plan;
      plan.build(batch, layout, limits);
      ASSERT_GT(plan.reduce_unit_count(), 0u) << "the long decodes should be split";
      ASSERT_GT(plan.prefill_unit_count(), 0u);
      const bool prefill_split =
          std::any_of(plan.reduce_units().begin(), plan.reduce_units().end(),
                      [](const k::AttentionReduceUnit& r) { return r.tokens > 1; });
      ASSERT_EQ(prefill_split, kernel.split_prefills);
      // The 37-token prefills are cut into the tiles of the kernel that runs them (whole tiles, or
      // all 37 tokens in one when a tile holds more).
      const uint32_t tile_rows = k::attention_prefill_tile_rows(p.head_dim, exact, kernel.tiling);
      const uint32_t tile_tokens = group >= tile_rows ? 1 : tile_rows / group;
      EXPECT_EQ(plan.max_prefill_rows(), std::min(tile_tokens, 37u) * group);

      const DevicePlan d(plan, p.head_dim);
      k::AttentionArgs a =
          attention_args(p, layout, d_qkv.get(), d_out.get(),
                         d_cache.get() + layer * layout.layer_elems(), plan, d, exact);
      a.mma_tiling = kernel.tiling;
      check(cudaMemset(d_out.get(), 0xff, size_t{T} * p.heads * p.head_dim * 2), "poison");  // NaN
      ASSERT_EQ(run_attention(a, plan, d), cudaSuccess);
      const auto out = d_out.download();

      // Per row and head: the error's norm against the reference's (NaN, an output left
      // unwritten, fails it too).
      for (uint32_t row = 0; row < T; ++row) {
        for (uint32_t h = 0; h < p.heads; ++h) {
          const size_t first = (size_t{row} * p.heads + h) * p.head_dim;
          double err = 0.0, norm = 0.0;
          for (uint32_t d = 0; d < p.head_dim; ++d) {
            const double diff = bf(out[first + d]) - expected[first + d];
            err += diff * diff;
            norm += expected[first + d] * expected[first + d];
          }
          ASSERT_LE(std::sqrt(err), 1e-2 * std::sqrt(norm))
              << "step row " << row << " head " << h << " (relative error " << std::sqrt(err / norm)
              << ")";
        }
      }
    }
  }
}

// A plan cut into prefill tiles for one attention kernel never runs on the other: the FP32 kernel
// would overrun its 32 rows, the tensor-core one skip rows past 64. Refused before any launch, so
// this runs without a GPU (the attention test checks the plans' max_prefill_rows on one).
TEST(CudaKernels, PrefillTilesCutForAnotherKernelAreRefused) {
  k::AttentionArgs a;
  a.heads = 32;
  a.kv_heads = 8;
  a.head_dim = 128;
  a.max_prefill_rows = k::kAttentionMmaTileRows;  // cut for the tensor-core kernel
  a.exact_fp32 = true;                            // the FP32 kernel takes 32 rows
  EXPECT_EQ(k::paged_attention(a, nullptr, 1, k::AttentionKind::kPrefill, nullptr),
            cudaErrorInvalidValue);
  a.exact_fp32 = false;
  a.max_prefill_rows = k::kAttentionMmaTileRows + 1;
  EXPECT_EQ(k::paged_attention(a, nullptr, 1, k::AttentionKind::kPrefill, nullptr),
            cudaErrorInvalidValue);
  a.max_prefill_rows = 0;  // not said: refused too
  EXPECT_EQ(k::paged_attention(a, nullptr, 1, k::AttentionKind::kPrefill, nullptr),
            cudaErrorInvalidValue);
  // Tiles cut for 128-row blocks never run on 64-row ones.
  a.max_prefill_rows = k::mma_tiling_rows(k::MmaTiling::k128x32);
  a.mma_tiling = k::MmaTiling::k64x64;
  EXPECT_EQ(k::paged_attention(a, nullptr, 1, k::AttentionKind::kPrefill, nullptr),
            cudaErrorInvalidValue);
  // Head dims without the candidate tilings run (and are cut for) the default.
  EXPECT_EQ(k::attention_prefill_tile_rows(256, false, k::MmaTiling::k128x64),
            k::kAttentionMmaTileRows);
  EXPECT_EQ(k::attention_prefill_tile_rows(128, false, k::MmaTiling::k128x64), 128u);
  EXPECT_EQ(k::attention_prefill_tile_rows(128, true, k::MmaTiling::k128x64),
            k::kAttentionTileRows);
}

// A decode-only step laid out for a CUDA graph (StepLimits::graph_max_batch: rows padded to a
// bucket, every row given the split level of the longest context, empty key ranges) computes the
// real rows bit for bit as the plan without padding, on both kernels; the padding rows come out
// finite (zero). Two steps of three rows padded to four: contexts of 3,001 keys (12 splits: level
// 16), 8 (one unit) and 700 (3 splits); and contexts of 8, 41 and 151 keys (level 1: no reduce,
// the padding row's empty unit writes its output directly).
TEST_P(CudaAttention, GraphPaddedDecodesEqualTheUnpaddedPlan) {
  HW_SKIP_WITHOUT_CUDA();
  const AttentionCase p = GetParam();
  const uint32_t group = p.heads / p.kv_heads;
  k::KvLayout layout{1, p.kv_heads, p.head_dim, p.block_size};
  const uint32_t width = (p.heads + 2 * p.kv_heads) * p.head_dim;
  const uint32_t padded_rows = 4;
  const size_t out_elems = size_t{padded_rows} * p.heads * p.head_dim;
  const auto qkv = random_bf16(size_t{padded_rows} * width, 1.0f, 21);
  Dev<__nv_bfloat16> d_qkv(qkv);
  const auto check_step = [&](const std::vector<uint32_t>& starts, uint32_t level) {
    SCOPED_TRACE("split level " + std::to_string(level));
    std::vector<std::vector<uint32_t>> tables;
    std::vector<std::vector<int32_t>> ids;
    std::vector<hw_model_slice> slices;
    uint32_t blocks = 0;
    for (const uint32_t start : starts) {
      const uint32_t n = (start + 1 + p.block_size - 1) / p.block_size;
      std::vector<uint32_t> table(n);
      std::iota(table.begin(), table.end(), blocks);
      std::shuffle(table.begin(), table.end(), std::mt19937(start));
      blocks += n;
      tables.push_back(std::move(table));
      ids.emplace_back(1, 1);
    }
    for (size_t i = 0; i < starts.size(); ++i) {
      slices.push_back(hw_model_slice{i, starts[i], 1, ids[i].data(), tables[i].data(),
                                      static_cast<uint32_t>(tables[i].size()), 1, 0.0f, 1.0f, 0, 0,
                                      0, 0.0f, 0});
    }
    const hw_model_batch batch{sizeof(hw_model_batch), slices.data(),
                               static_cast<uint32_t>(slices.size()), p.block_size};
    const auto cache = random_bf16(layout.block_elems() * blocks, 1.0f, 20);
    Dev<__nv_bfloat16> d_cache(cache);
    // Runs the plan's decode and reduce units; returns the output rows.
    const auto run = [&](const StepPlan& plan, bool exact) {
      const DevicePlan d(plan, p.head_dim);
      Dev<__nv_bfloat16> d_out(out_elems);
      check(cudaMemset(d_out.get(), 0xff, out_elems * 2), "poison");  // NaN
      const k::AttentionArgs a =
          attention_args(p, layout, d_qkv.get(), d_out.get(), d_cache.get(), plan, d, exact);
      EXPECT_EQ(run_attention(a, plan, d), cudaSuccess);
      return d_out.download();
    };
    for (const bool exact : {true, false}) {
      SCOPED_TRACE(exact ? "FP32 kernel" : "tensor cores");
      StepLimits limits{100, 1u << 20, blocks, group, true};
      StepPlan plain;
      plain.build(batch, layout, limits);
      limits.graph_max_batch = 8;
      StepPlan padded;
      padded.build(batch, layout, limits);
      ASSERT_EQ(padded.tokens(), padded_rows);
      ASSERT_EQ(padded.graph_split_level(), level);
      ASSERT_EQ(padded.decode_unit_count(), padded_rows * level);
      ASSERT_EQ(padded.reduce_unit_count(), level > 1 ? padded_rows : 0u);
      const auto want = run(plain, exact);
      const auto got = run(padded, exact);
      const size_t row_elems = size_t{p.heads} * p.head_dim;
      for (size_t e = 0; e < starts.size() * row_elems; ++e) {
        ASSERT_EQ(bf(got[e]), bf(want[e]))
            << "row " << e / row_elems << " element " << e % row_elems;
      }
      for (size_t e = starts.size() * row_elems; e < out_elems; ++e) {
        ASSERT_EQ(bf(got[e]), 0.0f) << "padding row, element " << e % row_elems;
      }
    }
  };
  check_step({3000, 7, 699}, 16);
  check_step({7, 40, 150}, 1);
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, CudaAttention,
    ::testing::Values(AttentionCase{8, 2, 64, 16}, AttentionCase{4, 4, 16, 4},
                      AttentionCase{32, 8, 128, 16}, AttentionCase{64, 2, 256, 32},
                      AttentionCase{28, 4, 32, 8},
                      // Added without a GPU: group 1 on tensor cores, a
                      // group of 7 in 128-row tiles, a group of 32 (both
                      // decode warps) at head_dim 64.
                      AttentionCase{8, 8, 64, 16}, AttentionCase{28, 4, 128, 16},
                      AttentionCase{32, 1, 64, 16},
                      // Added after the 2026-12-04 runs, not run yet: a
                      // group of 16 (a whole fragment of rows) on the
                      // key-split decode kernel at head_dim 256 and 128.
                      AttentionCase{32, 2, 256, 16}, AttentionCase{16, 1, 128, 16},
                      // Added without a GPU: blocks of 24 and 48 keys (the model takes any
                      // block size), so that tiles and split ranges straddle blocks unevenly.
                      AttentionCase{32, 8, 128, 24}, AttentionCase{8, 2, 64, 48}),
    [](const ::testing::TestParamInfo<AttentionCase>& info) {
      const AttentionCase& c = info.param;
      return "heads" + std::to_string(c.heads) + "_kv" + std::to_string(c.kv_heads) + "_dim" +
             std::to_string(c.head_dim) + "_block" + std::to_string(c.block_size);
    });

// Checks out = x * w^T ([m][k] by [n][k]) against the double reference: the FP32 output `f`
// within 1e-4 relative, the BF16 output `b` (when given) within BF16 rounding.
void expect_product(const std::vector<__nv_bfloat16>& x, const std::vector<__nv_bfloat16>& w,
                    const std::vector<float>& f, const std::vector<__nv_bfloat16>* b, uint32_t m,
                    uint32_t n, uint32_t kk) {
  for (uint32_t i = 0; i < m; ++i) {
    for (uint32_t j = 0; j < n; ++j) {
      double ref = 0.0;
      for (uint32_t q = 0; q < kk; ++q) {
        ref += static_cast<double>(bf(x[i * kk + q])) * bf(w[j * kk + q]);
      }
      ASSERT_NEAR(f[i * n + j], ref, 1e-4 + 1e-4 * std::abs(ref)) << m << " " << i << " " << j;
      if (b != nullptr) {
        ASSERT_NEAR(bf((*b)[i * n + j]), ref, 1e-3 + 8e-3 * std::abs(ref))
            << m << " " << i << " " << j;
      }
    }
  }
}

TEST(CudaKernels, GemmMatchesReference) {
  HW_SKIP_WITHOUT_CUDA();
  const uint32_t n = 96, kk = 320;
  Gemm gemm;
  const auto w = random_bf16(size_t{n} * kk, 0.1f, 12);
  Dev<__nv_bfloat16> d_w(w);
  for (uint32_t m : {1u, 7u, 130u}) {
    const auto x = random_bf16(size_t{m} * kk, 1.0f, 13 + m);
    Dev<__nv_bfloat16> d_x(x);
    Dev<__nv_bfloat16> d_b(size_t{m} * n);
    Dev<float> d_f(size_t{m} * n);
    gemm.run(d_x.get(), d_w.get(), d_b.get(), GemmOut::kBF16, m, n, kk, nullptr);
    gemm.run(d_x.get(), d_w.get(), d_f.get(), GemmOut::kF32, m, n, kk, nullptr);
    const auto b = d_b.download();
    const auto f = d_f.download();
    expect_product(x, w, f, &b, m, n, kk);
  }
  EXPECT_EQ(gemm.cached_plans(), 6u);  // 3 shapes x 2 output types, each planned once
}

// Headway's GEMV for decode-sized products: every m from 1 to 8 against the double reference, both
// output types; a row's result is the same bits whatever the other rows (m = 1 vs m = 2, and on
// the tensor cores m = 3 vs m = 8).
TEST(CudaKernels, GemvMatchesReferenceAndIgnoresTheOtherRows) {
  HW_SKIP_WITHOUT_CUDA();
  // n = 101: not a multiple of the 4, 8 or 16 rows a block takes at m = 1, 2 or more (the last
  // block's idle warps, and warps whose last rows are past n); k = 16 and
  // 200 leave most lanes without a piece, 328 ends in a partial round, 4104 takes many rounds;
  // 352 and 4096, multiples of 32, run m >= 3 on tensor cores (a warp's 11 chunks, fewer than the
  // block's 8 warps take in two rounds; and many rounds).
  const uint32_t n = 101;
  for (const uint32_t kk : {16u, 200u, 328u, 4104u, 352u, 4096u}) {
    SCOPED_TRACE("k = " + std::to_string(kk));
    const auto w = random_bf16(size_t{n} * kk, 0.1f, 21);
    Dev<__nv_bfloat16> d_w(w);
    const auto x = random_bf16(size_t{k::kGemvMaxRows} * kk, 1.0f, 22);
    Dev<__nv_bfloat16> d_x(x);
    std::vector<float> first_row;
    for (uint32_t m = 1; m <= k::kGemvMaxRows; ++m) {
      Dev<__nv_bfloat16> d_b(size_t{m} * n);
      Dev<float> d_f(size_t{m} * n);
      check(k::gemv(d_x.get(), d_w.get(), d_b.get(), false, m, n, kk, nullptr), "gemv bf16");
      check(k::gemv(d_x.get(), d_w.get(), d_f.get(), true, m, n, kk, nullptr), "gemv f32");
      const auto b = d_b.download();
      const auto f = d_f.download();
      expect_product(x, w, f, &b, m, n, kk);
      // The tensor-core kernel sums in another order: compare within each kernel's rows.
      if (m == 1 || (m == k::kGemvMmaFromRows && kk % 32 == 0)) {
        first_row.assign(f.begin(), f.begin() + n);
      }
      EXPECT_EQ(std::vector<float>(f.begin(), f.begin() + n), first_row) << "row 0 at m = " << m;
    }
  }
}

// The kernels of a decode layer at one, two, three and eight rows, each reading what the one before
// wrote, 16 rounds on one stream: add_rms_norm, the q|k|v GEMV, RoPE + KV write, the key-split
// decode attention over contexts of 701 keys and more (split over key ranges), attention_reduce,
// the o GEMV, add_rms_norm, then the MLP (the GEMV, SwiGLU, the GEMV). Launched overlapped
// (programmatic dependent launch, kernels/launch.h) they give the same bits as launched one after
// the other: residual, normed rows, outputs, attention rows and KV cache. A kernel that read its
// input before the previous kernel had written it would see the last round's values (the decode
// attention the last round's k and v in the slot RoPE rewrites, the reduce its records), and one
// that wrote before the previous kernel had read would change them. With gate|up and SwiGLU fused
// (gemv_swiglu, the model's fuse_swiglu), plain and overlapped, the same bits again.
TEST(CudaKernels, OverlappedLaunchesGiveTheSameBitsAsPlainOnes) {
  HW_SKIP_WITHOUT_CUDA();
  // The kernels are built for sm_90a, and the check device runs on Hopper: overlap is real here.
  ASSERT_EQ(k::overlapped_launch_problem(0), "");
  const uint32_t hidden = 1024, ffn = 2816;
  // 8 query heads of 128 (q as wide as the residual) over 2 kv heads: a GQA group of 4, which the
  // key-split decode kernel takes, with its overlapped launch.
  const AttentionCase shape{8, 2, 128, 16};
  const uint32_t q_width = shape.heads * shape.head_dim;
  const uint32_t qkv_width = (shape.heads + 2 * shape.kv_heads) * shape.head_dim;
  const k::KvLayout layout{1, shape.kv_heads, shape.head_dim, shape.block_size};
  const auto norm = random_floats(hidden, 0.5f, 1.5f, 71);
  const auto gate_up = random_bf16(size_t{2} * ffn * hidden, 0.03f, 72);
  const auto down = random_bf16(size_t{hidden} * ffn, 0.03f, 73);
  const auto qkv_w = random_bf16(size_t{qkv_width} * hidden, 0.03f, 76);
  const auto o_w = random_bf16(size_t{hidden} * q_width, 0.03f, 77);
  Dev<float> d_norm(norm);
  Dev<__nv_bfloat16> d_gate_up(gate_up);
  Dev<__nv_bfloat16> d_down(down);
  Dev<__nv_bfloat16> d_qkv_w(qkv_w);
  Dev<__nv_bfloat16> d_o_w(o_w);
  models::cpu::LlamaConfig rope_config;
  rope_config.head_dim = shape.head_dim;
  rope_config.rope_theta = 500000.0;
  const models::cpu::Rope rope(rope_config);
  Dev<double> d_freq(rope.inverse_frequencies());
  // 3 and 8 rows: the GEMV on tensor cores (hidden, q_width and ffn are multiples of 32).
  for (const uint32_t m : {1u, 2u, 3u, 8u}) {
    SCOPED_TRACE("m = " + std::to_string(m));
    const auto x0 = random_floats(size_t{m} * hidden, -1.0f, 1.0f, 74);
    const auto out0 = random_bf16(size_t{m} * hidden, 1.0f, 75);
    // Row r decodes position 700 + 193 r over blocks of its own, in a scrambled order.
    std::vector<std::vector<uint32_t>> tables;
    std::vector<std::vector<int32_t>> ids;
    std::vector<hw_model_slice> slices;
    uint32_t blocks = 0;
    for (uint32_t r = 0; r < m; ++r) {
      const uint32_t pos = 700 + 193 * r;
      std::vector<uint32_t> table(pos / shape.block_size + 1);
      std::iota(table.begin(), table.end(), blocks);
      std::shuffle(table.begin(), table.end(), std::mt19937(r));
      blocks += static_cast<uint32_t>(table.size());
      tables.push_back(std::move(table));
      ids.emplace_back(1, 1);
    }
    for (uint32_t r = 0; r < m; ++r) {
      slices.push_back(hw_model_slice{r, 700 + 193 * r, 1, ids[r].data(), tables[r].data(),
                                      static_cast<uint32_t>(tables[r].size()), 1, 0.0f, 1.0f, 0, 0,
                                      0, 0.0f, 0});
    }
    const hw_model_batch batch{sizeof(hw_model_batch), slices.data(), m, shape.block_size};
    StepPlan plan;
    plan.build(batch, layout, StepLimits{100, 1u << 20, blocks, shape.heads / shape.kv_heads});
    ASSERT_EQ(plan.tokens(), m);
    ASSERT_GT(plan.reduce_unit_count(), 0u) << "the decodes should be split";
    const StepOffsets& o = plan.offsets();
    const auto cache0 = random_bf16(layout.block_elems() * blocks, 1.0f, 78);
    struct Result {
      std::vector<float> x;
      std::vector<__nv_bfloat16> h, out, attn, cache;
    };
    const auto run = [&](bool overlap, bool fused) {
      Dev<float> x(x0);
      Dev<__nv_bfloat16> out(out0);
      Dev<__nv_bfloat16> h(size_t{m} * hidden);
      Dev<__nv_bfloat16> qkv(size_t{m} * qkv_width);
      Dev<__nv_bfloat16> attn(size_t{m} * q_width);
      Dev<__nv_bfloat16> cache(cache0);
      Dev<__nv_bfloat16> gu(size_t{m} * 2 * ffn);
      Dev<__nv_bfloat16> act(size_t{m} * ffn);
      const DevicePlan d(plan, shape.head_dim);
      k::RopeKvArgs rope_args;
      rope_args.qkv = qkv.get();
      rope_args.tokens = m;
      rope_args.heads = shape.heads;
      rope_args.kv_heads = shape.kv_heads;
      rope_args.head_dim = shape.head_dim;
      rope_args.positions = d.at<int32_t>(o.positions);
      rope_args.slot_offsets = d.at<int64_t>(o.slot_offsets);
      rope_args.inv_freq = d_freq.get();
      rope_args.layer_cache = cache.get();
      rope_args.head_elems = layout.head_elems();
      const k::AttentionArgs a =
          attention_args(shape, layout, qkv.get(), attn.get(), cache.get(), plan, d, false);
      // The uploads above ran on the legacy stream; the rounds run on a non-blocking one.
      check(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
      cudaStream_t stream = nullptr;
      check(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreate");
      const k::Launch on(stream, overlap);
      for (int round = 0; round < 16; ++round) {
        check(k::add_rms_norm(x.get(), out.get(), nullptr, d_norm.get(), nullptr, m, hidden, 1e-5f,
                              h.get(), on),
              "add_rms_norm (attention)");
        check(k::gemv(h.get(), d_qkv_w.get(), qkv.get(), false, m, qkv_width, hidden, on),
              "gemv qkv");
        check(k::rope_kv_write(rope_args, on), "rope_kv_write");
        check(k::paged_attention(a, d.at<k::AttentionUnit>(o.decode_units),
                                 plan.decode_unit_count(), k::AttentionKind::kDecode, on),
              "paged_attention");
        check(k::attention_reduce(a, d.at<k::AttentionReduceUnit>(o.reduce_units),
                                  plan.reduce_unit_count(), on),
              "attention_reduce");
        check(k::gemv(attn.get(), d_o_w.get(), out.get(), false, m, hidden, q_width, on), "gemv o");
        check(k::add_rms_norm(x.get(), out.get(), nullptr, d_norm.get(), nullptr, m, hidden, 1e-5f,
                              h.get(), on),
              "add_rms_norm (MLP)");
        if (fused) {
          check(k::gemv_swiglu(h.get(), d_gate_up.get(), act.get(), m, ffn, hidden, on),
                "gemv_swiglu");
        } else {
          check(k::gemv(h.get(), d_gate_up.get(), gu.get(), false, m, 2 * ffn, hidden, on),
                "gemv gate_up");
          check(k::swiglu(gu.get(), m, ffn, act.get(), on), "swiglu");
        }
        check(k::gemv(act.get(), d_down.get(), out.get(), false, m, hidden, ffn, on), "gemv down");
      }
      check(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
      cudaStreamDestroy(stream);
      return Result{x.download(), h.download(), out.download(), attn.download(), cache.download()};
    };
    const Result plain = run(false, false);
    const auto same_bits = [](const auto& a, const auto& b) {
      return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(a[0])) == 0;
    };
    for (const auto& [overlap, fused] : {std::pair{true, false}, {false, true}, {true, true}}) {
      SCOPED_TRACE(std::string(overlap ? "overlapped" : "plain") + (fused ? ", fused" : ""));
      const Result other = run(overlap, fused);
      EXPECT_TRUE(same_bits(plain.x, other.x)) << "residual";
      EXPECT_TRUE(same_bits(plain.h, other.h)) << "normed rows";
      EXPECT_TRUE(same_bits(plain.out, other.out)) << "down projection";
      EXPECT_TRUE(same_bits(plain.attn, other.attn)) << "attention rows";
      EXPECT_TRUE(same_bits(plain.cache, other.cache)) << "KV cache";
    }
    // The rounds did move the residual and write the cache (the comparisons are not of untouched
    // buffers), and the attention rows are finite (no split record left unwritten: NaN).
    EXPECT_FALSE(same_bits(plain.x, x0));
    EXPECT_FALSE(same_bits(plain.cache, cache0));
    for (const __nv_bfloat16 v : plain.attn) ASSERT_TRUE(std::isfinite(bf(v)));
  }
}

// gemv_swiglu gives the bits of the GEMV into BF16 followed by swiglu, at every m it takes: ffn =
// 101 is no multiple of the outputs a block takes (4 or 8 with one warp's two weight rows at m = 1
// and 2, 8 on tensor cores); 4,100 puts 8,200 weight rows past kMmaFewRows, where the tensor-core
// kernel splits k over four warps instead of eight; k = 200 keeps every m on the dot-product
// kernel, 352 sends m >= 3 to tensor cores.
TEST(CudaKernels, GemvSwigluGivesTheBitsOfTheGemvThenSwiglu) {
  HW_SKIP_WITHOUT_CUDA();
  // 101 and 4,100 send the unfused SwiGLU to its one-element kernel; 1,792 (a multiple of 8, as
  // the models' ffn sizes are) to its 16-byte kernel, so the fused GEMV is compared with that too.
  for (const uint32_t ffn : {101u, 1792u, 4100u}) {
    for (const uint32_t kk : {200u, 352u}) {
      SCOPED_TRACE("ffn = " + std::to_string(ffn) + ", k = " + std::to_string(kk));
      const auto w = random_bf16(size_t{2} * ffn * kk, 0.1f, 25);
      Dev<__nv_bfloat16> d_w(w);
      const auto x = random_bf16(size_t{k::kGemvMaxRows} * kk, 1.0f, 26);
      Dev<__nv_bfloat16> d_x(x);
      for (uint32_t m = 1; m <= k::kGemvMaxRows; ++m) {
        SCOPED_TRACE("m = " + std::to_string(m));
        Dev<__nv_bfloat16> d_gu(size_t{m} * 2 * ffn);
        Dev<__nv_bfloat16> d_two(size_t{m} * ffn);
        Dev<__nv_bfloat16> d_one(size_t{m} * ffn);
        check(k::gemv(d_x.get(), d_w.get(), d_gu.get(), false, m, 2 * ffn, kk, nullptr), "gemv");
        check(k::swiglu(d_gu.get(), m, ffn, d_two.get(), nullptr), "swiglu");
        check(k::gemv_swiglu(d_x.get(), d_w.get(), d_one.get(), m, ffn, kk, nullptr),
              "gemv_swiglu");
        const auto two = d_two.download();
        const auto one = d_one.download();
        ASSERT_EQ(std::memcmp(two.data(), one.data(), two.size() * sizeof(two[0])), 0);
        // And both are SwiGLU of the product (the comparison is not of two untouched buffers).
        for (uint32_t r = 0; r < m; ++r) {
          for (const uint32_t i : {0u, ffn / 2, ffn - 1}) {
            double g = 0.0, u = 0.0;
            for (uint32_t q = 0; q < kk; ++q) {
              g += static_cast<double>(bf(x[r * kk + q])) * bf(w[size_t{i} * kk + q]);
              u += static_cast<double>(bf(x[r * kk + q])) * bf(w[(size_t{ffn} + i) * kk + q]);
            }
            const double ref = g / (1.0 + std::exp(-g)) * u;
            ASSERT_NEAR(bf(one[size_t{r} * ffn + i]), ref, 2e-2 * std::abs(ref) + 3e-3)
                << r << " " << i;
          }
        }
      }
    }
  }
  alignas(16) static __nv_bfloat16 buffer[64];
  EXPECT_EQ(k::gemv_swiglu(buffer, buffer, buffer, 9, 4, 16, nullptr), cudaErrorInvalidValue);
  EXPECT_EQ(k::gemv_swiglu(buffer, buffer, buffer + 1, 1, 4, 16, nullptr), cudaErrorInvalidValue);
}

// More than 8,192 weight rows: the tensor-core GEMV's four-warp blocks (eight below), at m = 3 and
// 8 against the double reference.
TEST(CudaKernels, GemvOnTensorCoresWithManyRowsMatchesReference) {
  HW_SKIP_WITHOUT_CUDA();
  const uint32_t n = 8200, kk = 4096;
  const auto w = random_bf16(size_t{n} * kk, 0.1f, 23);
  Dev<__nv_bfloat16> d_w(w);
  const auto x = random_bf16(size_t{k::kGemvMaxRows} * kk, 1.0f, 24);
  Dev<__nv_bfloat16> d_x(x);
  for (const uint32_t m : {3u, 8u}) {
    Dev<float> d_f(size_t{m} * n);
    check(k::gemv(d_x.get(), d_w.get(), d_f.get(), true, m, n, kk, nullptr), "gemv f32");
    expect_product(x, w, d_f.download(), nullptr, m, n, kk);
  }
}

// Shapes it does not take are refused before anything reaches a device (runs without a GPU).
TEST(CudaKernels, GemvRefusesWhatItDoesNotTake) {
  alignas(16) static __nv_bfloat16 buffer[64];
  EXPECT_TRUE(k::gemv_applies(1, 16, buffer, buffer, buffer));
  EXPECT_FALSE(k::gemv_applies(0, 16, buffer, buffer, buffer));
  EXPECT_FALSE(k::gemv_applies(k::kGemvMaxRows + 1, 16, buffer, buffer, buffer));
  EXPECT_FALSE(k::gemv_applies(1, 12, buffer, buffer, buffer));      // k not a multiple of 8
  EXPECT_FALSE(k::gemv_applies(1, 16, buffer + 1, buffer, buffer));  // x not 16-byte aligned
  EXPECT_EQ(k::gemv(buffer, buffer, buffer, false, 9, 4, 16, nullptr), cudaErrorInvalidValue);
  EXPECT_EQ(k::gemv(buffer, buffer, buffer + 1, true, 1, 4, 16, nullptr), cudaErrorInvalidValue);
}

// Gemm with small_m_gemv sends m <= kGemvRoutedRows to the GEMV and larger m to cuBLASLt: only
// m = 3 and m = 130 are planned.
TEST(CudaKernels, GemmSendsSmallProductsToTheGemvWhenAsked) {
  HW_SKIP_WITHOUT_CUDA();
  const uint32_t n = 96, kk = 320;
  Gemm gemm(/*deterministic=*/false, /*small_m_gemv=*/true);
  const auto w = random_bf16(size_t{n} * kk, 0.1f, 31);
  Dev<__nv_bfloat16> d_w(w);
  static_assert(models::cuda::kGemvRoutedRows == 2, "the rows below straddle the routing bound");
  for (uint32_t m : {1u, 2u, 3u, 130u}) {
    const auto x = random_bf16(size_t{m} * kk, 1.0f, 32 + m);
    Dev<__nv_bfloat16> d_x(x);
    Dev<float> d_f(size_t{m} * n);
    gemm.run(d_x.get(), d_w.get(), d_f.get(), GemmOut::kF32, m, n, kk, nullptr);
    const auto f = d_f.download();
    expect_product(x, w, f, nullptr, m, n, kk);
    // What the model asks before it fuses SwiGLU into the GEMV (fuse_swiglu).
    EXPECT_EQ(gemm.takes_gemv(m, kk, d_x.get(), d_w.get(), d_f.get()), m <= 2) << m;
  }
  EXPECT_EQ(gemm.cached_plans(), 2u);
  Gemm deterministic(/*deterministic=*/true, /*small_m_gemv=*/true);
  const auto x = random_bf16(kk, 1.0f, 40);
  Dev<__nv_bfloat16> d_x(x);
  Dev<float> d_f(n);
  deterministic.run(d_x.get(), d_w.get(), d_f.get(), GemmOut::kF32, 1, n, kk, nullptr);
  EXPECT_EQ(deterministic.cached_plans(), 1u) << "deterministic mode keeps cuBLASLt";
}

// phase_timing's timer: each marked phase of a step lands in that step size's totals, in
// forward-pass order; a disabled timer records nothing (that part runs without a GPU).
TEST(CudaKernels, PhaseTimerAddsEachPhaseOfAStep) {
  models::cuda::PhaseTimer off(false);
  off.begin_step(4, nullptr);
  off.mark(models::cuda::Phase::kQkvGemm, nullptr);
  off.end_step();
  EXPECT_EQ(off.summary(), "");
  HW_SKIP_WITHOUT_CUDA();
  models::cuda::PhaseTimer timer(true);
  Dev<float> scratch(size_t{1} << 20);
  for (int step = 0; step < 2; ++step) {
    timer.begin_step(4, nullptr);
    check(cudaMemsetAsync(scratch.get(), 0, sizeof(float) << 20, nullptr), "memset");
    timer.mark(models::cuda::Phase::kAttention, nullptr);
    check(cudaMemsetAsync(scratch.get(), 1, sizeof(float) << 20, nullptr), "memset");
    timer.mark(models::cuda::Phase::kQkvGemm, nullptr);
    check(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
    timer.end_step();
  }
  const std::string summary = timer.summary();
  EXPECT_NE(summary.find("steps of 4 tokens (2 steps"), std::string::npos) << summary;
  const size_t qkv = summary.find(" qkv_gemm ");
  const size_t attention = summary.find(" attention ");
  ASSERT_NE(qkv, std::string::npos) << summary;
  ASSERT_NE(attention, std::string::npos) << summary;
  EXPECT_LT(qkv, attention) << "forward-pass order";
  // Each phase's time and the step's are positive (two 4 MB memsets take some microseconds).
  EXPECT_GT(std::stod(summary.substr(qkv + 10)), 0.0) << summary;
  EXPECT_GT(std::stod(summary.substr(attention + 11)), 0.0) << summary;
  const size_t per_step = summary.find(" steps, ");
  ASSERT_NE(per_step, std::string::npos) << summary;
  EXPECT_GT(std::stod(summary.substr(per_step + 8)), 0.0) << summary;
}

// Samples each row of `logits` (one row of `vocab` per entry of `params`) on the device; empty,
// with a failure recorded, when the launch fails.
std::vector<int32_t> sample_on_device(const std::vector<float>& logits, uint32_t vocab,
                                      const std::vector<k::SampleParams>& params) {
  const auto rows = static_cast<uint32_t>(params.size());
  Dev<float> d_logits(logits);
  Dev<k::SampleParams> d_params(params);
  Dev<int32_t> d_out(rows);
  const cudaError_t e =
      k::sample_tokens(d_logits.get(), rows, vocab, d_params.get(), d_out.get(), nullptr);
  if (e != cudaSuccess) {
    ADD_FAILURE() << "sample_tokens: " << cudaGetErrorString(e);
    return {};
  }
  return d_out.download();
}

// Kept set of the device sampler's semantics, computed in double on the host: min-p, then top-k,
// then top-p over what those kept (vLLM's order).
std::vector<bool> kept(const std::vector<float>& logits, const k::SampleParams& p) {
  const size_t v = logits.size();
  const float mx = *std::max_element(logits.begin(), logits.end());
  std::vector<double> w(v);
  for (size_t i = 0; i < v; ++i) w[i] = std::exp((logits[i] - mx) / p.temperature);
  std::vector<size_t> order(v);
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return w[a] > w[b]; });
  std::vector<bool> keep(v, true);
  size_t count = 0;
  while (count < v && w[order[count]] >= p.min_p) ++count;
  if (p.top_k > 0 && p.top_k < count) count = p.top_k;
  if (p.top_p < 1.0f) {
    double total = 0.0;
    for (size_t i = 0; i < count; ++i) total += w[order[i]];
    double mass = 0.0;
    size_t n = 0;
    while (n < count && mass < p.top_p * total) mass += w[order[n++]];
    count = n;
  }
  for (size_t i = count; i < v; ++i) keep[order[i]] = false;
  return keep;
}

// Vocabularies below one token per thread and far above it (not a multiple of the block).
class CudaSampling : public ::testing::TestWithParam<uint32_t> {};

TEST_P(CudaSampling, FollowsTheCoreSemantics) {
  HW_SKIP_WITHOUT_CUDA();
  const uint32_t vocab = GetParam();
  const std::vector<k::SampleParams> kinds = {
      {0.0f, 1.0f, 0.0f, 0, 0, 0, 0},
      {0.8f, 1.0f, 0.0f, 0, 0, 0, 0},
      {1.0f, 1.0f, 0.05f, 0, 0, 0, 0},
      {1.0f, 1.0f, 0.0f, 20, 0, 0, 0},
      {1.0f, 0.9f, 0.0f, 0, 0, 0, 0},
      {1.2f, 0.8f, 0.01f, 50, 0, 0, 0},
      // Top-p weighs what min-p kept (vLLM's order): it cuts within min-p's survivors here.
      {1.0f, 0.9f, 0.05f, 0, 0, 0, 0}};
  const uint32_t per_kind = 64;
  const uint32_t rows = static_cast<uint32_t>(kinds.size()) * per_kind;
  std::mt19937 rng(14);
  std::normal_distribution<float> normal(0.0f, 3.0f);
  std::vector<float> logits(size_t{rows} * vocab);
  for (float& l : logits) l = normal(rng);
  std::vector<k::SampleParams> params(rows);
  for (uint32_t r = 0; r < rows; ++r) {
    params[r] = kinds[r / per_kind];
    params[r].seed = 1000 + r;
    params[r].output_index = r % 7;
  }
  const std::vector<int32_t> out = sample_on_device(logits, vocab, params);
  ASSERT_EQ(out.size(), rows);
  core::Sampler sampler;
  int exact_mismatches = 0;
  for (uint32_t r = 0; r < rows; ++r) {
    const std::vector<float> row(logits.begin() + size_t{r} * vocab,
                                 logits.begin() + size_t{r + 1} * vocab);
    const k::SampleParams& p = params[r];
    ASSERT_GE(out[r], 0);
    ASSERT_LT(out[r], static_cast<int32_t>(vocab));
    if (p.temperature == 0.0f) {
      ASSERT_EQ(out[r], std::max_element(row.begin(), row.end()) - row.begin()) << r;
      continue;
    }
    ASSERT_TRUE(kept(row, p)[out[r]]) << "row " << r << " sampled a token outside the kept set";
    // The same cuts (sampling.hpp) and the same draw in token order, for every filter.
    std::vector<float> copy = row;
    core::SamplingParams sp;
    sp.temperature = p.temperature;
    sp.top_k = p.top_k;
    sp.top_p = p.top_p;
    sp.min_p = p.min_p;
    sp.seed = p.seed;
    exact_mismatches += sampler.sample(copy, sp, p.output_index) != out[r];
  }
  // Only the last bits of exp() putting a weight across a cut or the draw's target could differ.
  EXPECT_LE(exact_mismatches, 1);
}

INSTANTIATE_TEST_SUITE_P(Vocabularies, CudaSampling, ::testing::Values(1000u, 32007u));

// Where a sampling-cut test puts its tokens: three tied heaviest (logit 3), two next (logit 2),
// every other token at `filler`.
struct CutLayout {
  uint32_t vocab;
  std::vector<uint32_t> heaviest;
  std::vector<uint32_t> next;
  float filler;
};

class CudaSamplingCuts : public ::testing::TestWithParam<CutLayout> {};

// The cuts keep exactly the three equal heaviest tokens (a top-k of 3, a top-p whose cut lands on
// the third of three tied weights, which keeps all three, a min-p of 0.5, and top-k with top-p):
// each is drawn a third of the time and nothing else ever is. A cut that kept too few or too many
// would show. The large vocabulary scatters the tokens over the range (the radix search's digits
// differ) and gives its 32,002 fillers about the mass of the small one's 11 (29 against 30 times
// the weight of a logit-0 token), so each cut lands where it does in the small one.
TEST_P(CudaSamplingCuts, FrequenciesFollowTheKeptSet) {
  HW_SKIP_WITHOUT_CUDA();
  const CutLayout& layout = GetParam();
  const uint32_t vocab = layout.vocab, per_kind = 6000;
  std::vector<float> base(vocab, layout.filler);
  for (uint32_t i : layout.heaviest) base.at(i) = 3.0f;
  for (uint32_t i : layout.next) base.at(i) = 2.0f;
  const std::vector<k::SampleParams> kinds = {{1.0f, 1.0f, 0.0f, 3, 0, 0, 0},
                                              {1.0f, 0.5f, 0.0f, 0, 0, 0, 0},
                                              {1.0f, 1.0f, 0.5f, 0, 0, 0, 0},
                                              {1.0f, 0.5f, 0.0f, 4, 0, 0, 0}};
  for (size_t kind = 0; kind < kinds.size(); ++kind) {
    SCOPED_TRACE("kind " + std::to_string(kind));
    std::vector<float> logits;
    logits.reserve(size_t{per_kind} * vocab);
    std::vector<k::SampleParams> params(per_kind, kinds[kind]);
    for (uint32_t r = 0; r < per_kind; ++r) {
      logits.insert(logits.end(), base.begin(), base.end());
      params[r].seed = 500 + kind;
      params[r].output_index = r;
    }
    const std::vector<int32_t> out = sample_on_device(logits, vocab, params);
    ASSERT_EQ(out.size(), per_kind);
    std::vector<uint32_t> draws(vocab, 0);
    for (int32_t t : out) ++draws.at(static_cast<size_t>(t));
    uint32_t heaviest = 0;
    for (uint32_t i : layout.heaviest) {
      EXPECT_NEAR(double(draws[i]) / per_kind, 1.0 / 3, 0.025) << "token " << i;
      heaviest += draws[i];
    }
    EXPECT_EQ(heaviest, per_kind) << "tokens other than the three heaviest were drawn";
  }
}

INSTANTIATE_TEST_SUITE_P(Layouts, CudaSamplingCuts,
                         ::testing::Values(CutLayout{16, {0, 1, 2}, {3, 4}, 1.0f},
                                           CutLayout{32007, {7, 20000, 32006}, {8, 31000}, -7.0f}));

TEST(CudaKernels, SamplingRowsWithNoWeightGiveTheGreedyTokenAsTheCoreDoes) {
  HW_SKIP_WITHOUT_CUDA();
  // A +inf logit, a row of NaN, and a temperature whose inverse overflows: every weight is 0.
  const uint32_t vocab = 4;
  const std::vector<float> logits = {0.5f, INFINITY, 2.0f, -1.0f, NAN,  NAN,
                                     NAN,  NAN,      0.5f, 3.0f,  2.0f, -1.0f};
  const std::vector<float> temperatures = {1.0f, 1.0f, 1e-45f};
  const uint32_t rows = 3;
  std::vector<k::SampleParams> params(rows);
  for (uint32_t r = 0; r < rows; ++r) {
    params[r] = {temperatures[r], 1.0f, 0.0f, 0, 0, 0, 0};
    params[r].seed = 77 + r;
  }
  const std::vector<int32_t> out = sample_on_device(logits, vocab, params);
  ASSERT_EQ(out.size(), rows);
  core::Sampler sampler;
  for (uint32_t r = 0; r < rows; ++r) {
    std::vector<float> row(logits.begin() + r * vocab, logits.begin() + (r + 1) * vocab);
    core::SamplingParams sp;
    sp.temperature = temperatures[r];
    sp.seed = params[r].seed;
    EXPECT_EQ(out[r], sampler.sample(row, sp, 0)) << "row " << r;
  }
}

TEST(CudaKernels, SamplingFrequenciesFollowTheSoftmax) {
  HW_SKIP_WITHOUT_CUDA();
  const std::vector<float> base = {0.0f, 1.0f, 2.0f, 0.5f};
  const uint32_t rows = 8000, vocab = 4;
  std::vector<float> logits;
  std::vector<k::SampleParams> params(rows);
  for (uint32_t r = 0; r < rows; ++r) {
    logits.insert(logits.end(), base.begin(), base.end());
    params[r] = {1.0f, 1.0f, 0.0f, 0, 77, r, 0};
  }
  const std::vector<int32_t> out = sample_on_device(logits, vocab, params);
  ASSERT_EQ(out.size(), rows);
  std::vector<double> freq(vocab, 0.0);
  for (int32_t t : out) freq[t] += 1.0 / rows;
  double z = 0.0;
  for (float l : base) z += std::exp(l);
  for (uint32_t i = 0; i < vocab; ++i) {
    EXPECT_NEAR(freq[i], std::exp(base[i]) / z, 0.02) << "token " << i;
  }
}

}  // namespace
}  // namespace headway::gpu_test
