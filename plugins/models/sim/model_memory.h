// Sizes of a dense Llama-style transformer split over GPUs by Megatron-style tensor parallelism:
// parameters, weight bytes and KV bytes per GPU, and which tensor-parallel degrees are legal.
// The one definition of this arithmetic, used by the roofline cost model (cost_model.h) and by the
// capacity planner (planner.h), so that `headway plan` and `headway simulate` never disagree on
// what fits.
//
// Header-only, pure functions of their arguments: safe from any thread, nothing to own.
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>

namespace headway::models::sim {

// Shape of the transformer. Field names match the plugin's option keys so that validation messages
// name what the operator wrote.
struct ModelShape {
  uint32_t layers = 0;
  uint32_t hidden = 0;
  uint32_t heads = 0;     // query heads
  uint32_t kv_heads = 0;  // key/value heads (GQA); equal to heads for plain multi-head attention
  uint32_t head_dim = 0;
  uint32_t intermediate = 0;  // gated MLP width (gate, up and down projections)
  uint32_t vocab = 0;
  uint32_t max_model_len = 0;  // prompt + output tokens one request may reach
  // The LM head reuses the input embedding's matrix (Hugging Face tie_word_embeddings): one matrix
  // in memory, still read and multiplied for every sampled token.
  bool tied_embeddings = false;
};

// Embedding and LM head stay 16-bit in fp8 checkpoints (NVIDIA ModelOpt / TensorRT-LLM and vLLM's
// fp8 quantisation leave lm_head unquantised); only the layers' linear weights take weight_bytes.
inline constexpr uint32_t kEmbeddingBytes = 2;
// Activations (and so the all-reduce payload) are bf16 whatever the weights' dtype.
inline constexpr uint32_t kActivationBytes = 2;
// Share of a GPU's memory a serving process may use in all, by default: vLLM's
// gpu_memory_utilization, the cuda model's gpu_memory_fraction. The planner and the sim model's KV
// sizing both hold to it, so that a plan that fits also loads.
inline constexpr double kDefaultGpuMemoryUtilization = 0.9;

// Why `tp` cannot split this model's attention, or "" when it can. Every GPU needs whole query
// heads (heads % tp == 0) and either a share of the kv heads (kv_heads % tp == 0) or, beyond their
// count, one replicated kv head (tp % kv_heads == 0).
inline std::string tensor_parallel_problem(const ModelShape& m, uint32_t tp) {
  if (tp == 0) return "tensor_parallel must be > 0";
  if (m.heads % tp != 0) {
    return "heads=" + std::to_string(m.heads) + " % tp=" + std::to_string(tp) + " = " +
           std::to_string(m.heads % tp) + ": query heads do not split evenly";
  }
  if (m.kv_heads == 0) return "kv_heads must be > 0";
  if (tp <= m.kv_heads && m.kv_heads % tp != 0) {
    return "kv_heads=" + std::to_string(m.kv_heads) + " % tp=" + std::to_string(tp) + " = " +
           std::to_string(m.kv_heads % tp) + ": kv heads do not split evenly";
  }
  if (tp > m.kv_heads && tp % m.kv_heads != 0) {
    return "tp=" + std::to_string(tp) + " % kv_heads=" + std::to_string(m.kv_heads) + " = " +
           std::to_string(tp % m.kv_heads) + ": kv heads cannot be replicated evenly";
  }
  return "";
}

// KV heads one GPU holds: its share, or one replicated head when tp exceeds kv_heads.
inline uint32_t kv_heads_per_gpu(const ModelShape& m, uint32_t tp) {
  return std::max(1u, m.kv_heads / tp);
}

// Parameters by role; norms and biases are negligible and left out.
struct ParameterCounts {
  double attention_split = 0;  // q and o projections of one layer (split over GPUs)
  double kv_projection = 0;    // k and v projections of one layer (split, or replicated)
  double mlp = 0;              // gate, up and down of one layer (split)
  double embedding = 0;        // input embedding (0 when tied to the LM head)
  double lm_head = 0;          // untied output projection
  double total(uint32_t layers) const {
    return embedding + layers * (attention_split + kv_projection + mlp) + lm_head;
  }
};

inline ParameterCounts parameter_counts(const ModelShape& m) {
  const double hidden = m.hidden;
  ParameterCounts p;
  p.attention_split = 2 * hidden * static_cast<double>(m.heads) * m.head_dim;
  p.kv_projection = 2 * hidden * static_cast<double>(m.kv_heads) * m.head_dim;
  p.mlp = 3 * hidden * static_cast<double>(m.intermediate);
  p.lm_head = hidden * m.vocab;
  p.embedding = m.tied_embeddings ? 0.0 : hidden * m.vocab;
  return p;
}

// Parameters of all layers that one GPU holds (the k and v projections replicated past kv_heads).
inline double layer_parameters_per_gpu(const ModelShape& m, uint32_t tp) {
  const ParameterCounts p = parameter_counts(m);
  const double kv_per_gpu = 2.0 * m.hidden * kv_heads_per_gpu(m, tp) * m.head_dim;
  return m.layers * ((p.attention_split + p.mlp) / tp + kv_per_gpu);
}

// Weight bytes one GPU holds: its layers at weight_bytes per parameter, plus 1/tp of the 16-bit
// embedding and LM head.
inline double weight_bytes_per_gpu(const ModelShape& m, uint32_t tp, uint32_t weight_bytes) {
  const ParameterCounts p = parameter_counts(m);
  return layer_parameters_per_gpu(m, tp) * weight_bytes +
         (p.embedding + p.lm_head) / tp * kEmbeddingBytes;
}

// KV bytes of one token on one GPU: layers * 2 (K and V) * kv heads it holds * head_dim * bytes.
inline uint64_t kv_bytes_per_token_per_gpu(const ModelShape& m, uint32_t tp, uint32_t kv_bytes) {
  return static_cast<uint64_t>(m.layers) * 2 * kv_heads_per_gpu(m, tp) * m.head_dim * kv_bytes;
}

}  // namespace headway::models::sim
