#include "device_weights.h"

#include <cmath>
#include <cstring>
#include <string>

#include "half.h"
#include "random_fill.h"

namespace headway::models::cuda {
namespace {

using cpu::DType;
using cpu::TensorView;

float element(const TensorView& t, uint64_t index) {
  switch (t.dtype) {
    case DType::kF32: {
      float f;
      std::memcpy(&f, t.data + 4 * index, 4);
      return f;
    }
    case DType::kF16: {
      uint16_t h;
      std::memcpy(&h, t.data + 2 * index, 2);
      return cpu::f16_to_f32(h);
    }
    case DType::kBF16: {
      uint16_t h;
      std::memcpy(&h, t.data + 2 * index, 2);
      return cpu::bf16_to_f32(h);
    }
  }
  return 0.0f;
}

// Host staging of one upload: rows [row0, row0 + rows) and columns [col0, col0 + cols) of a
// row-major tensor with `width` columns, converted to BF16 and copied to `dst` (device).
class Uploader {
 public:
  void matrix(const TensorView& t, uint64_t width, uint64_t row0, uint64_t rows, uint64_t col0,
              uint64_t cols, __nv_bfloat16* dst) {
    staging_.resize(rows * cols);
    for (uint64_t r = 0; r < rows; ++r) {
      const uint64_t base = (row0 + r) * width + col0;
      uint16_t* out = staging_.data() + r * cols;
      if (t.dtype == DType::kBF16) {
        std::memcpy(out, t.data + 2 * base, 2 * cols);
      } else {
        for (uint64_t c = 0; c < cols; ++c) out[c] = cpu::f32_to_bf16(element(t, base + c));
      }
    }
    HW_CUDA_CHECK(cudaMemcpy(dst, staging_.data(), 2 * rows * cols, cudaMemcpyHostToDevice));
  }
  // Elements [first, first + size) of a vector, as floats.
  void vector(const TensorView& t, uint64_t first, uint64_t size, float* dst) {
    floats_.resize(size);
    for (uint64_t i = 0; i < size; ++i) floats_[i] = element(t, first + i);
    HW_CUDA_CHECK(cudaMemcpy(dst, floats_.data(), 4 * size, cudaMemcpyHostToDevice));
  }
  void vector(const TensorView& t, uint64_t size, float* dst) { vector(t, 0, size, dst); }

 private:
  std::vector<uint16_t> staging_;
  std::vector<float> floats_;
};

uint64_t mix(uint64_t seed, uint64_t a, uint64_t b) {
  uint64_t x = seed ^ (a * 0x9e3779b97f4a7c15ULL) ^ (b * 0xc2b2ae3d27d4eb4fULL);
  x ^= x >> 31;
  return x * 0xbf58476d1ce4e5b9ULL;
}

}  // namespace

void DeviceWeights::allocate(const LlamaConfig& c, const TensorParallelLayout& tp, bool tied) {
  const uint64_t hidden = c.hidden_size;
  const uint64_t hd = c.head_dim;
  const uint64_t q_w = uint64_t{tp.heads_per_rank} * hd;
  const uint64_t kv_w = uint64_t{tp.kv_heads_per_rank} * hd;
  const uint64_t ffn = tp.ffn_per_rank;
  embed_.reserve(uint64_t{c.vocab_size} * hidden);
  if (!tied) lm_head_.reserve(uint64_t{c.vocab_size} * hidden);
  final_norm_.reserve(hidden);
  layers_.resize(c.num_hidden_layers);
  for (DeviceLayer& l : layers_) {
    l.input_norm.reserve(hidden);
    l.post_norm.reserve(hidden);
    l.qkv.reserve((q_w + 2 * kv_w) * hidden);
    l.o.reserve(hidden * q_w);
    l.gate_up.reserve(2 * ffn * hidden);
    l.down.reserve(hidden * ffn);
    bytes_ += 8 * hidden + 2 * ((q_w + 2 * kv_w) * hidden + hidden * q_w + 3 * ffn * hidden);
    if (c.qkv_bias) l.qkv_bias.reserve(q_w + 2 * kv_w);
    if (c.o_bias) l.o_bias.reserve(hidden);
    if (c.qk_norm) {
      l.q_norm.reserve(hd);
      l.k_norm.reserve(hd);
    }
    bytes_ += l.qkv_bias.bytes() + l.o_bias.bytes() + l.q_norm.bytes() + l.k_norm.bytes();
  }
  bytes_ += 2 * (embed_.size() + lm_head_.size()) + 4 * hidden;
}

DeviceWeights::DeviceWeights(const cpu::Checkpoint& ck, const LlamaConfig& c,
                             const TensorParallelLayout& tp, uint32_t rank) {
  // Tied checkpoints usually omit lm_head.weight; some still ship it, and then it wins (as in the
  // cpu model).
  const bool tied = c.tie_word_embeddings && !ck.has("lm_head.weight");
  allocate(c, tp, tied);
  const uint64_t hidden = c.hidden_size;
  const uint64_t hd = c.head_dim;
  const uint64_t heads_l = tp.heads_per_rank;
  const uint64_t kv_l = tp.kv_heads_per_rank;
  const uint64_t ffn_l = tp.ffn_per_rank;
  const uint64_t q_out = uint64_t{c.num_attention_heads} * hd;
  const uint64_t kv_out = uint64_t{c.num_key_value_heads} * hd;
  const uint64_t ffn = c.intermediate_size;
  Uploader up;
  up.matrix(ck.tensor("model.embed_tokens.weight", {c.vocab_size, hidden}), hidden, 0, c.vocab_size,
            0, hidden, embed_.data());
  if (!tied) {
    up.matrix(ck.tensor("lm_head.weight", {c.vocab_size, hidden}), hidden, 0, c.vocab_size, 0,
              hidden, lm_head_.data());
  }
  up.vector(ck.tensor("model.norm.weight", {hidden}), hidden, final_norm_.data());
  const uint64_t h0 = tp.first_head(rank);
  const uint64_t g0 = tp.first_kv_head(rank);
  const uint64_t f0 = tp.first_ffn(rank);
  for (uint32_t i = 0; i < c.num_hidden_layers; ++i) {
    const std::string p = "model.layers." + std::to_string(i) + ".";
    DeviceLayer& l = layers_[i];
    up.vector(ck.tensor(p + "input_layernorm.weight", {hidden}), hidden, l.input_norm.data());
    up.vector(ck.tensor(p + "post_attention_layernorm.weight", {hidden}), hidden,
              l.post_norm.data());
    __nv_bfloat16* qkv = l.qkv.data();
    up.matrix(ck.tensor(p + "self_attn.q_proj.weight", {q_out, hidden}), hidden, h0 * hd,
              heads_l * hd, 0, hidden, qkv);
    up.matrix(ck.tensor(p + "self_attn.k_proj.weight", {kv_out, hidden}), hidden, g0 * hd,
              kv_l * hd, 0, hidden, qkv + heads_l * hd * hidden);
    up.matrix(ck.tensor(p + "self_attn.v_proj.weight", {kv_out, hidden}), hidden, g0 * hd,
              kv_l * hd, 0, hidden, qkv + (heads_l + kv_l) * hd * hidden);
    up.matrix(ck.tensor(p + "self_attn.o_proj.weight", {hidden, q_out}), q_out, 0, hidden, h0 * hd,
              heads_l * hd, l.o.data());
    up.matrix(ck.tensor(p + "mlp.gate_proj.weight", {ffn, hidden}), hidden, f0, ffn_l, 0, hidden,
              l.gate_up.data());
    up.matrix(ck.tensor(p + "mlp.up_proj.weight", {ffn, hidden}), hidden, f0, ffn_l, 0, hidden,
              l.gate_up.data() + ffn_l * hidden);
    up.matrix(ck.tensor(p + "mlp.down_proj.weight", {hidden, ffn}), ffn, 0, hidden, f0, ffn_l,
              l.down.data());
    if (c.qkv_bias) {  // this rank's columns, in the fused [q|k|v] order
      float* b = l.qkv_bias.data();
      up.vector(ck.tensor(p + "self_attn.q_proj.bias", {q_out}), h0 * hd, heads_l * hd, b);
      up.vector(ck.tensor(p + "self_attn.k_proj.bias", {kv_out}), g0 * hd, kv_l * hd,
                b + heads_l * hd);
      up.vector(ck.tensor(p + "self_attn.v_proj.bias", {kv_out}), g0 * hd, kv_l * hd,
                b + (heads_l + kv_l) * hd);
    }
    if (c.o_bias) {
      up.vector(ck.tensor(p + "self_attn.o_proj.bias", {hidden}), hidden, l.o_bias.data());
    }
    if (c.qk_norm) {
      up.vector(ck.tensor(p + "self_attn.q_norm.weight", {hd}), hd, l.q_norm.data());
      up.vector(ck.tensor(p + "self_attn.k_norm.weight", {hd}), hd, l.k_norm.data());
    }
  }
}

DeviceWeights::DeviceWeights(const LlamaConfig& c, const TensorParallelLayout& tp, uint32_t rank,
                             uint64_t seed) {
  allocate(c, tp, c.tie_word_embeddings);
  // Each tensor's fill is seeded by (seed, a rank, the tensor's number), the same sequence of
  // numbers on every rank. What every rank holds (embeddings, LM head; a kv head replicated on
  // several ranks) takes the seed of the first rank holding it, so that the copies are equal:
  // ranks whose embeddings differed would add all-reduced outputs to different residual streams.
  uint64_t tensor = 0;
  const auto fill_part = [&](__nv_bfloat16* first_element, uint64_t count, uint64_t first,
                             uint64_t fan_in, uint32_t seed_rank) {
    const float scale = 1.0f / std::sqrt(static_cast<float>(fan_in));
    HW_CUDA_CHECK(kernels::fill_uniform_bf16(first_element, count, scale,
                                             mix(seed, seed_rank, tensor), nullptr, first));
  };
  const auto fill_as = [&](DeviceBuffer<__nv_bfloat16>& b, uint64_t fan_in, uint32_t seed_rank) {
    fill_part(b.data(), b.size(), 0, fan_in, seed_rank);
    ++tensor;
  };
  const auto fill = [&](DeviceBuffer<__nv_bfloat16>& b, uint64_t fan_in) {
    fill_as(b, fan_in, rank);
  };
  // [q|k|v]: q is this rank's; k and v are the kv head's first holder's (with tp > kv_heads a kv
  // head lives on kv_replication ranks). On one GPU this is one fill of the whole buffer.
  const uint32_t kv_holder =
      tp.kv_replication > 1 ? tp.first_kv_head(rank) * tp.kv_replication : rank;
  const uint64_t q_elems = uint64_t{tp.heads_per_rank} * c.head_dim * c.hidden_size;
  const auto fill_qkv = [&](DeviceBuffer<__nv_bfloat16>& b) {
    fill_part(b.data(), q_elems, 0, c.hidden_size, rank);
    fill_part(b.data() + q_elems, b.size() - q_elems, q_elems, c.hidden_size, kv_holder);
    ++tensor;
  };
  const auto set = [&](DeviceBuffer<float>& b, float value) {
    HW_CUDA_CHECK(kernels::fill_float(b.data(), b.size(), value, nullptr));
  };
  const auto ones = [&](DeviceBuffer<float>& b) { set(b, 1.0f); };
  fill_as(embed_, c.hidden_size, 0);
  if (lm_head_.size() > 0) fill_as(lm_head_, c.hidden_size, 0);
  ones(final_norm_);
  for (DeviceLayer& l : layers_) {
    ones(l.input_norm);
    ones(l.post_norm);
    fill_qkv(l.qkv);
    fill(l.o, uint64_t{c.num_attention_heads} * c.head_dim);
    fill(l.gate_up, c.hidden_size);
    fill(l.down, c.intermediate_size);
    set(l.qkv_bias, 0.0f);
    set(l.o_bias, 0.0f);
    ones(l.q_norm);
    ones(l.k_norm);
  }
  HW_CUDA_CHECK(cudaDeviceSynchronize());
}

}  // namespace headway::models::cuda
