// Rotary embedding (Hugging Face rotate_half pairing, llama3 frequency scaling folded into the
// inverse frequencies) fused with the paged KV write: one pass rotates q and k in the fused QKV
// activation and stores k and v into each token's cache slot. What some architectures do between
// the projection and RoPE happens in the same pass: Qwen 2's biases on q, k and v (and Llama's
// with attention_bias), and Qwen 3's RMSNorm of each head of q and k. Plain C++ header; kernel in
// rope_kv.cu.
//
// Ownership: device pointers borrowed for the launch. Threading: enqueues on `on.stream`.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "launch.h"

namespace headway::models::cuda::kernels {

struct RopeKvArgs {
  __nv_bfloat16* qkv = nullptr;  // [tokens][(heads + 2 * kv_heads) * head_dim]: q | k | v
  uint32_t tokens = 0;
  uint32_t heads = 0;
  uint32_t kv_heads = 0;
  uint32_t head_dim = 0;
  const int32_t* positions = nullptr;  // [tokens]
  // [tokens]: block * block_elems + slot * head_dim, or -1: rotate but write no KV (the padding
  // rows of a step replayed as a CUDA graph).
  const int64_t* slot_offsets = nullptr;
  const double* inv_freq = nullptr;      // [head_dim / 2], llama3 scaling applied
  __nv_bfloat16* layer_cache = nullptr;  // the cache base + layer * layer_elems
  uint64_t head_elems = 0;               // KvLayout::head_elems()
  // [(heads + 2 * kv_heads) * head_dim], the biases of this rank's q | k | v columns, added before
  // anything else; null: none.
  const float* qkv_bias = nullptr;
  // [head_dim] each: every head of q (k) is RMS-normalized with these weights and `norm_eps`
  // (the checkpoint's rms_norm_eps; 0 would turn an all-zero head into NaN) after the bias and
  // before RoPE; both null (none) or both set.
  const float* q_norm = nullptr;
  const float* k_norm = nullptr;
  float norm_eps = 0.0f;
};

// Angles are position * inv_freq in double (sin/cos of angles up to ~1e5 radians keep full float
// accuracy only that way; H100/H200 have the FP64 rate for it), bias, norm and rotation in float.
// Returns cudaErrorInvalidValue for a head_dim the kernel does not take or one of the two norms
// without the other. on.overlap: an overlapped launch (launch.h).
cudaError_t rope_kv_write(const RopeKvArgs& args, const Launch& on);

}  // namespace headway::models::cuda::kernels
