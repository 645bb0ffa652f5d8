#include "weights.h"

#include <algorithm>
#include <cstring>
#include <headway/sdk/status.hpp>
#include <string>

#include "half.h"

namespace headway::models::cpu {
namespace {

// Converts n elements of `from` at `src` (possibly unaligned) into `to` at `dst`.
void convert(const std::byte* src, DType from, std::byte* dst, DType to, uint64_t n) {
  if (from == to) {
    std::memcpy(dst, src, n * dtype_size(from));
    return;
  }
  constexpr uint64_t kChunk = 4096;
  float tmp[kChunk];
  for (uint64_t i = 0; i < n; i += kChunk) {
    const uint64_t c = std::min(kChunk, n - i);
    if (from == DType::kF32) {
      std::memcpy(tmp, src + 4 * i, 4 * c);
    } else {
      uint16_t h[kChunk];
      std::memcpy(h, src + 2 * i, 2 * c);
      if (from == DType::kF16) {
        f16_to_f32(h, tmp, c);
      } else {
        bf16_to_f32(h, tmp, c);
      }
    }
    if (to == DType::kF32) {
      std::memcpy(dst + 4 * i, tmp, 4 * c);
    } else {
      for (uint64_t j = 0; j < c; ++j) {
        const uint16_t h = to == DType::kF16 ? f32_to_f16(tmp[j]) : f32_to_bf16(tmp[j]);
        std::memcpy(dst + 2 * (i + j), &h, 2);
      }
    }
  }
}

}  // namespace

LlamaWeights::LlamaWeights(const Checkpoint& checkpoint, const LlamaConfig& c, DType compute,
                           bool map_weights)
    : compute_(compute), map_weights_(map_weights) {
  // In 64 bits: in 32, head_dim 2^30 x 4 heads wrapped to 0 and a checkpoint of that shape passed.
  // parse_llama_config bounds heads x head_dim far below 2^32; a config built otherwise is checked.
  const uint64_t q_out64 = uint64_t{c.num_attention_heads} * c.head_dim;
  const uint64_t kv_out64 = uint64_t{c.num_key_value_heads} * c.head_dim;
  if (q_out64 > UINT32_MAX || kv_out64 > UINT32_MAX) {
    throw sdk::Error(HW_INVALID_ARGUMENT, "config.json: num_attention_heads x head_dim " +
                                              std::to_string(q_out64) + " exceeds 2^32");
  }
  const auto q_out = static_cast<uint32_t>(q_out64);
  const auto kv_out = static_cast<uint32_t>(kv_out64);
  // Before sizing layers_ by config.json: a num_hidden_layers of 2^24 took 4.5 GB and 12 s before
  // the first missing tensor was named, 2^27 ran out of memory (helper-151's fuzzer).
  const std::string last = "model.layers." + std::to_string(c.num_hidden_layers - 1) + ".";
  if (c.num_hidden_layers > 0 && !checkpoint.has(last + "input_layernorm.weight")) {
    uint32_t present = 0;
    while (present < c.num_hidden_layers &&
           checkpoint.has("model.layers." + std::to_string(present) + ".input_layernorm.weight")) {
      ++present;
    }
    throw sdk::Error(HW_INVALID_ARGUMENT, checkpoint.describe_files() +
                                              ": config.json's num_hidden_layers is " +
                                              std::to_string(c.num_hidden_layers) +
                                              " but the checkpoint has " + std::to_string(present) +
                                              " (no tensor '" + last + "input_layernorm.weight')");
  }
  embed_ = matrix(checkpoint, "model.embed_tokens.weight", c.vocab_size, c.hidden_size);
  layers_.resize(c.num_hidden_layers);
  for (uint32_t l = 0; l < c.num_hidden_layers; ++l) {
    const std::string p = "model.layers." + std::to_string(l) + ".";
    LayerWeights& w = layers_[l];
    w.input_norm = vector(checkpoint, p + "input_layernorm.weight", c.hidden_size);
    w.q = matrix(checkpoint, p + "self_attn.q_proj.weight", q_out, c.hidden_size);
    w.k = matrix(checkpoint, p + "self_attn.k_proj.weight", kv_out, c.hidden_size);
    w.v = matrix(checkpoint, p + "self_attn.v_proj.weight", kv_out, c.hidden_size);
    w.o = matrix(checkpoint, p + "self_attn.o_proj.weight", c.hidden_size, q_out);
    if (c.qkv_bias) {
      w.q_bias = vector(checkpoint, p + "self_attn.q_proj.bias", q_out);
      w.k_bias = vector(checkpoint, p + "self_attn.k_proj.bias", kv_out);
      w.v_bias = vector(checkpoint, p + "self_attn.v_proj.bias", kv_out);
    }
    if (c.o_bias) w.o_bias = vector(checkpoint, p + "self_attn.o_proj.bias", c.hidden_size);
    if (c.qk_norm) {
      w.q_norm = vector(checkpoint, p + "self_attn.q_norm.weight", c.head_dim);
      w.k_norm = vector(checkpoint, p + "self_attn.k_norm.weight", c.head_dim);
    }
    w.post_attention_norm =
        vector(checkpoint, p + "post_attention_layernorm.weight", c.hidden_size);
    w.gate = matrix(checkpoint, p + "mlp.gate_proj.weight", c.intermediate_size, c.hidden_size);
    w.up = matrix(checkpoint, p + "mlp.up_proj.weight", c.intermediate_size, c.hidden_size);
    w.down = matrix(checkpoint, p + "mlp.down_proj.weight", c.hidden_size, c.intermediate_size);
  }
  final_norm_ = vector(checkpoint, "model.norm.weight", c.hidden_size);
  // Tied checkpoints usually omit lm_head.weight; some still ship it, and then it wins.
  if (!c.tie_word_embeddings || checkpoint.has("lm_head.weight")) {
    lm_head_ = matrix(checkpoint, "lm_head.weight", c.vocab_size, c.hidden_size);
  } else {
    lm_head_ = embed_;
  }
}

Matrix LlamaWeights::matrix(const Checkpoint& checkpoint, const std::string& name, uint32_t rows,
                            uint32_t cols) {
  const TensorView& t = checkpoint.tensor(name, {rows, cols});
  Matrix m{compute_, rows, cols, t.data};
  const uint64_t n = uint64_t{rows} * cols;
  const bool aligned = reinterpret_cast<uintptr_t>(t.data) % dtype_size(compute_) == 0;
  if (t.dtype != compute_ || !aligned || !map_weights_) {
    std::byte* copy = allocate(n * dtype_size(compute_));
    convert(t.data, t.dtype, copy, compute_, n);
    m.data = copy;
    converted_bytes_ += n * dtype_size(compute_);
  }
  bytes_ += n * dtype_size(compute_);
  return m;
}

const float* LlamaWeights::vector(const Checkpoint& checkpoint, const std::string& name,
                                  uint32_t size) {
  const TensorView& t = checkpoint.tensor(name, {size});
  std::byte* copy = allocate(uint64_t{size} * 4);
  convert(t.data, t.dtype, copy, DType::kF32, size);
  bytes_ += uint64_t{size} * 4;
  return reinterpret_cast<const float*>(copy);
}

std::byte* LlamaWeights::allocate(uint64_t bytes) {
  constexpr uint64_t kChunk = uint64_t{64} << 20;
  constexpr uint64_t kAlign = 64;
  bytes = (bytes + kAlign - 1) / kAlign * kAlign;
  if (owned_.empty() || chunk_used_ + bytes > chunk_size_) {
    chunk_size_ = std::max(kChunk, bytes);
    owned_.emplace_back(chunk_size_);
    chunk_used_ = 0;
  }
  std::byte* p = owned_.back().data() + chunk_used_;
  chunk_used_ += bytes;
  return p;
}

}  // namespace headway::models::cpu
