#include "llama_forward.h"

#include <omp.h>

#include <algorithm>
#include <cstring>
#include <headway/sdk/model.hpp>
#include <headway/sdk/status.hpp>
#include <string>

#include "ops.h"

namespace headway::models::cpu {
namespace {

[[noreturn]] void bad_slice(uint32_t index, const hw_model_slice& s, const std::string& what) {
  throw sdk::Error(HW_INVALID_ARGUMENT, "cpu model: slice " + std::to_string(index) + " (request " +
                                            std::to_string(s.request_id) + "): " + what);
}

}  // namespace

LlamaForward::LlamaForward(const LlamaConfig& config, const LlamaWeights& weights, int threads,
                           uint32_t max_model_len)
    : config_(config),
      weights_(weights),
      threads_(threads),
      max_model_len_(max_model_len),
      kv_(config.num_hidden_layers, config.num_key_value_heads, config.head_dim),
      rope_(config),
      linear_(threads, std::max({config.hidden_size, config.intermediate_size,
                                 config.num_attention_heads * config.head_dim})),
      attention_({config.num_attention_heads, config.num_key_value_heads, config.head_dim},
                 threads) {}

uint32_t LlamaForward::sampling_rows(const hw_model_batch& batch) {
  uint32_t rows = 0;
  for (uint32_t i = 0; i < batch.slice_count; ++i) rows += sdk::logits_rows(batch.slices[i]);
  return rows;
}

void LlamaForward::validate(const hw_model_batch& batch) const {
  if (!kv_.initialised()) {
    throw sdk::Error(HW_FAILED_PRECONDITION, "cpu model: forward() before init_kv()");
  }
  if (batch.block_size != kv_.block_size()) {
    throw sdk::Error(HW_INVALID_ARGUMENT,
                     "cpu model: batch block_size " + std::to_string(batch.block_size) +
                         " differs from init_kv's " + std::to_string(kv_.block_size()));
  }
  const uint32_t bs = kv_.block_size();
  for (uint32_t i = 0; i < batch.slice_count; ++i) {
    const hw_model_slice& s = batch.slices[i];
    if (s.tokens == 0) bad_slice(i, s, "has no tokens");
    const uint64_t end = uint64_t{s.start} + s.tokens;
    if (end > max_model_len_) {
      bad_slice(i, s,
                "positions up to " + std::to_string(end) + " exceed max_model_len " +
                    std::to_string(max_model_len_));
    }
    if (s.token_ids == nullptr) bad_slice(i, s, "token_ids is NULL (the model needs ids)");
    if (s.block_table == nullptr || uint64_t{s.block_count} * bs < end) {
      bad_slice(i, s,
                "block table of " + std::to_string(s.block_count) + " blocks of " +
                    std::to_string(bs) + " does not cover position " + std::to_string(end - 1));
    }
    const uint32_t needed = static_cast<uint32_t>((end + bs - 1) / bs);
    for (uint32_t b = 0; b < needed; ++b) {
      if (s.block_table[b] >= kv_.block_count()) {
        bad_slice(i, s,
                  "block id " + std::to_string(s.block_table[b]) + " is beyond the " +
                      std::to_string(kv_.block_count()) + " blocks of the cache");
      }
    }
    for (uint32_t t = 0; t < s.tokens; ++t) {
      if (s.token_ids[t] < 0 || static_cast<uint32_t>(s.token_ids[t]) >= config_.vocab_size) {
        bad_slice(i, s,
                  "token id " + std::to_string(s.token_ids[t]) + " at position " +
                      std::to_string(s.start + t) + " is outside the vocabulary of " +
                      std::to_string(config_.vocab_size));
      }
    }
  }
}

void LlamaForward::reserve(uint32_t tokens, uint32_t sample_rows) {
  if (tokens > token_capacity_) {
    // Grow by at least 1.5x so that a slowly rising step size reallocates only a few times.
    const uint32_t cap = std::max(tokens, token_capacity_ + token_capacity_ / 2);
    const size_t hidden = config_.hidden_size;
    const size_t qw = static_cast<size_t>(config_.num_attention_heads) * config_.head_dim;
    const size_t kvw = static_cast<size_t>(config_.num_key_value_heads) * config_.head_dim;
    x_.reserve(cap * hidden);
    h_.reserve(cap * hidden);
    q_.reserve(cap * qw);
    k_.reserve(cap * kvw);
    v_.reserve(cap * kvw);
    attn_.reserve(cap * qw);
    gate_.reserve(static_cast<size_t>(cap) * config_.intermediate_size);
    up_.reserve(static_cast<size_t>(cap) * config_.intermediate_size);
    cos_.reserve(static_cast<size_t>(cap) * rope_.half());
    sin_.reserve(static_cast<size_t>(cap) * rope_.half());
    ids_.reserve(cap);
    pos_.reserve(cap);
    token_capacity_ = cap;
  }
  if (sample_rows > sample_capacity_) {
    const uint32_t cap = std::max(sample_rows, sample_capacity_ + sample_capacity_ / 2);
    last_.reserve(static_cast<size_t>(cap) * config_.hidden_size);
    sample_capacity_ = cap;
  }
}

void LlamaForward::run(const hw_model_batch& batch, float* logits) {
  validate(batch);
  uint32_t total = 0;
  for (uint32_t i = 0; i < batch.slice_count; ++i) total += batch.slices[i].tokens;
  const uint32_t sample_count = sampling_rows(batch);
  reserve(total, sample_count);
  if (sample_count > 0 && logits == nullptr) {
    throw sdk::Error(HW_INVALID_ARGUMENT,
                     "cpu model: output.logits is NULL but the batch asks for logits");
  }

  // Token-major layout of the step: slice after slice, position order inside a slice.
  spans_.clear();
  sample_rows_.clear();
  uint32_t row = 0;
  for (uint32_t i = 0; i < batch.slice_count; ++i) {
    const hw_model_slice& s = batch.slices[i];
    spans_.push_back({row, s.start, s.tokens, s.block_table});
    std::memcpy(ids_.data() + row, s.token_ids, s.tokens * sizeof(int32_t));
    for (uint32_t t = 0; t < s.tokens; ++t) pos_.data()[row + t] = s.start + t;
    row += s.tokens;
    // The slice's last positions: all of them, its last alone, or none.
    for (uint32_t t = row - sdk::logits_rows(s); t < row; ++t) sample_rows_.push_back(t);
  }

  const uint32_t hidden = config_.hidden_size;
  const uint32_t hd = config_.head_dim;
  const uint32_t heads = config_.num_attention_heads;
  const uint32_t kv_heads = config_.num_key_value_heads;
  const uint32_t qw = heads * hd;
  const uint32_t kvw = kv_heads * hd;
  const uint32_t ffn = config_.intermediate_size;
  const uint32_t half = rope_.half();
  const float eps = static_cast<float>(config_.rms_norm_eps);
  const uint32_t bs = kv_.block_size();
  float* x = x_.data();
  float* h = h_.data();
  float* q = q_.data();
  float* k = k_.data();
  float* v = v_.data();

  embed(weights_.embed(), ids_.data(), total, x, threads_);
  rope_.table(pos_.data(), total, cos_.data(), sin_.data());

  for (uint32_t l = 0; l < config_.num_hidden_layers; ++l) {
    const LayerWeights& w = weights_.layer(l);
    rms_norm(x, total, hidden, w.input_norm, eps, h, threads_);
    linear_.run_fused(h, total, {{&w.q, q, qw}, {&w.k, k, kvw}, {&w.v, v, kvw}});

    // Biases and norms of q and k where the architecture has them, RoPE on q and k, and K/V into
    // the cache at each token's (block, slot).
    for (const SliceSpan& span : spans_) {
#pragma omp parallel for num_threads(threads_) schedule(static) if (span.tokens > 16)
      for (uint32_t t = 0; t < span.tokens; ++t) {
        const uint32_t r = span.first_row + t;
        const float* c = cos_.data() + static_cast<size_t>(r) * half;
        const float* sn = sin_.data() + static_cast<size_t>(r) * half;
        float* qr = q + static_cast<size_t>(r) * qw;
        float* kr = k + static_cast<size_t>(r) * kvw;
        float* vr = v + static_cast<size_t>(r) * kvw;
        // Serial helpers: this loop is the parallel one.
        if (w.q_bias != nullptr) {  // Qwen 2's biases (attention_bias), on this token's row
          add_bias_row(qr, qw, w.q_bias);
          add_bias_row(kr, kvw, w.k_bias);
          add_bias_row(vr, kvw, w.v_bias);
        }
        if (w.q_norm != nullptr) {  // Qwen 3: each head of q and k normalized before RoPE
          for (uint32_t head = 0; head < heads; ++head) {
            float* qh = qr + static_cast<size_t>(head) * hd;
            rms_norm_row(qh, hd, w.q_norm, eps, qh);
          }
          for (uint32_t g = 0; g < kv_heads; ++g) {
            float* kh = kr + static_cast<size_t>(g) * hd;
            rms_norm_row(kh, hd, w.k_norm, eps, kh);
          }
        }
        Rope::apply(qr, heads, hd, c, sn);
        Rope::apply(kr, kv_heads, hd, c, sn);
        const uint32_t pos = span.start + t;
        const uint32_t block = span.block_table[pos / bs];
        const uint32_t slot = pos % bs;
        for (uint32_t g = 0; g < kv_heads; ++g) {
          float* kc = kv_.keys(block, l, g);
          const float* kg = kr + static_cast<size_t>(g) * hd;
          for (uint32_t d = 0; d < hd; ++d) kc[static_cast<size_t>(d) * bs + slot] = kg[d];
          std::memcpy(kv_.values(block, l, g) + static_cast<size_t>(slot) * hd,
                      vr + static_cast<size_t>(g) * hd, hd * sizeof(float));
        }
      }
    }

    attention_.run(kv_, l, spans_, q, attn_.data());
    linear_.run(attn_.data(), total, w.o, x, hidden, true);
    if (w.o_bias != nullptr) add_bias(x, total, hidden, w.o_bias, threads_);

    rms_norm(x, total, hidden, w.post_attention_norm, eps, h, threads_);
    linear_.run_fused(h, total, {{&w.gate, gate_.data(), ffn}, {&w.up, up_.data(), ffn}});
    swiglu(gate_.data(), up_.data(), total, ffn, threads_);
    linear_.run(gate_.data(), total, w.down, x, hidden, true);
  }

  if (sample_count == 0) return;
  float* last = last_.data();
  for (uint32_t i = 0; i < sample_count; ++i) {
    std::memcpy(last + static_cast<size_t>(i) * hidden,
                x + static_cast<size_t>(sample_rows_[i]) * hidden, hidden * sizeof(float));
  }
  rms_norm(last, sample_count, hidden, weights_.final_norm(), eps, last, threads_);
  linear_.run(last, sample_count, weights_.lm_head(), logits, config_.vocab_size, false);
}

}  // namespace headway::models::cpu
