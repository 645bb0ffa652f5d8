// One forward pass of a Llama model over a step's batch of slices (prefill chunks and decode
// tokens of many requests together):
//   embeddings -> per layer [RMSNorm -> Q,K,V -> RoPE -> write K,V into the paged cache ->
//   attention over each request's cached prefix + itself -> O (+ residual) -> RMSNorm ->
//   gate, up -> SwiGLU -> down (+ residual)] -> final RMSNorm -> logits
// Every projection takes all of the step's tokens as one matrix multiply; the final norm and the
// LM head only run on the last token of each slice that samples, and on every token of a slice
// that asks for all its logits (a prompt's log-probabilities).
//
// Ownership: borrows the config and weights (which outlive it); owns the KV cache memory and the
// activation buffers, which grow to the largest step seen and are then reused, so that a steady
// stream of steps allocates nothing.
// Threading: one caller at a time (the engine thread); each call fans out over `threads` OpenMP
// threads, shared with oneDNN.
#pragma once

#include <headway/abi.h>

#include <cstdint>
#include <vector>

#include "aligned_buffer.h"
#include "attention.h"
#include "kv_cache.h"
#include "linear.h"
#include "llama_config.h"
#include "rope.h"
#include "weights.h"

namespace headway::models::cpu {

class LlamaForward {
 public:
  LlamaForward(const LlamaConfig& config, const LlamaWeights& weights, int threads,
               uint32_t max_model_len);

  KvCache& kv() { return kv_; }
  const KvCache& kv() const { return kv_; }

  // Runs one step. Writes one row of `vocab` logits per sampling slice, in slice order, to
  // `logits` (caller-owned, at least that many rows). Throws sdk::Error(HW_INVALID_ARGUMENT) when a
  // slice is malformed (positions beyond max_model_len or its block table, token ids out of range,
  // block ids beyond the cache) before touching the cache.
  void run(const hw_model_batch& batch, float* logits);

  // Rows `run` will write for this batch.
  static uint32_t sampling_rows(const hw_model_batch& batch);

 private:
  void validate(const hw_model_batch& batch) const;
  void reserve(uint32_t tokens, uint32_t sample_rows);

  const LlamaConfig& config_;
  const LlamaWeights& weights_;
  int threads_;
  uint32_t max_model_len_;
  KvCache kv_;
  Rope rope_;
  Linear linear_;
  Attention attention_;

  uint32_t token_capacity_ = 0;
  uint32_t sample_capacity_ = 0;
  AlignedBuffer<float> x_;       // residual stream [T x hidden]
  AlignedBuffer<float> h_;       // normed [T x hidden]
  AlignedBuffer<float> q_;       // [T x heads*head_dim]
  AlignedBuffer<float> k_;       // [T x kv_heads*head_dim]
  AlignedBuffer<float> v_;       // [T x kv_heads*head_dim]
  AlignedBuffer<float> attn_;    // [T x heads*head_dim]
  AlignedBuffer<float> gate_;    // [T x intermediate]
  AlignedBuffer<float> up_;      // [T x intermediate]
  AlignedBuffer<float> cos_;     // [T x head_dim/2]
  AlignedBuffer<float> sin_;     // [T x head_dim/2]
  AlignedBuffer<float> last_;    // [S x hidden] last tokens of sampling slices
  AlignedBuffer<int32_t> ids_;   // [T]
  AlignedBuffer<uint32_t> pos_;  // [T]
  std::vector<SliceSpan> spans_;
  std::vector<uint32_t> sample_rows_;
};

}  // namespace headway::models::cpu
