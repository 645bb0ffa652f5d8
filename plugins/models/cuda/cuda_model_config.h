// What the cuda model is asked to build, checked before any device memory is touched: its options,
// the architecture (a checkpoint's config.json or a named shape), and the tensor-parallel split.
// Pure C++ (no CUDA), so that these rules are tested on machines without a GPU.
//
// Threading: plain data and reentrant functions.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "kernels/mma_tiling.h"
#include "llama_config.h"

namespace headway::sdk {
class Options;
}

namespace headway::models::cuda {

using cpu::LlamaConfig;

struct CudaModelOptions {
  std::filesystem::path path;    // checkpoint directory (empty with a named shape)
  std::string shape = "config";  // "config" = <path>/config.json, or a named shape
  bool random_weights = false;   // build weights on the device instead of reading safetensors
  uint64_t seed = 0;             // of the random weights
  int device = 0;                // first GPU; tensor-parallel ranks use device .. device + tp - 1
  uint32_t tensor_parallel = 1;
  uint32_t max_model_len = 0;  // 0 = max_position_embeddings
  double kv_cache_gb = 0.0;    // per GPU; 0 = gpu_memory_fraction of what the weights leave
  double gpu_memory_fraction = 0.9;
  bool sample_on_device = true;      // false: return logits and let the core sample
  uint32_t max_batch_tokens = 8192;  // activation workspace preallocated at load
  bool deterministic = false;        // batch/chunking-invariant arithmetic (no split-K anywhere)
  bool decode_gemv = true;  // projections of <= decode_gemv_max_rows rows by kernels/gemv.h
  uint32_t decode_gemv_max_rows = 2;  // kGemvRoutedRows (gemm.h) unless the operator sets it
  bool fuse_swiglu = true;    // with the GEMV: gate|up and SwiGLU in one kernel (gemv_swiglu)
  bool phase_timing = false;  // diagnostic: per-phase GPU time of every step (phase_timer.h)
  kernels::MmaTiling attention_tiling = kernels::MmaTiling::k128x64;  // prefill attention blocks
  bool split_prefill_attention = false;  // StepLimits::prefill_split_min_keys (step_plan.h)
  // The step's kernels start while the previous one finishes, where they can (kernels/launch.h).
  bool programmatic_dependent_launch = false;
  // Decode steps of at most this many tokens replay a captured CUDA graph (step_graphs.h); 0 = off.
  // The option's -1 (auto) resolves to kAutoCudaGraphMaxBatch or 0 in parse_options.
  uint32_t cuda_graph_max_batch = 0;
};

// cuda_graph_max_batch when the operator leaves it at auto (one GPU, no phase timing): the batch
// sizes at which replaying a graph was faster than launching on an H200 (docs/cuda_model.md).
inline constexpr uint32_t kAutoCudaGraphMaxBatch = 16;

// Reads the validated option values (see kCudaModelOptions in cuda_model.cpp). Throws
// sdk::Error(HW_INVALID_ARGUMENT) naming the option when a combination is wrong (no path and no
// named shape, a named shape without random_weights, CUDA graphs asked for with tensor
// parallelism or with phase timing).
CudaModelOptions parse_options(const sdk::Options& options, const std::string& config_dir);

// Names accepted by the `shape` option besides "config".
const std::vector<std::string>& named_shapes();

// The architecture of a named shape (Hugging Face config values of the released models). Throws
// sdk::Error(HW_INVALID_ARGUMENT) listing the known names.
LlamaConfig named_shape(std::string_view name);

// config.json under options.path, or the named shape.
LlamaConfig resolve_architecture(const CudaModelOptions& options);

// Limits of the kernels (head_dim <= 256 and even, heads / kv_heads <= 32). Throws
// sdk::Error(HW_INVALID_ARGUMENT) naming the value.
void check_kernel_limits(const LlamaConfig& config);

// How heads and the feed-forward width are split over `tp` GPUs. Column-parallel: q/k/v (by head)
// and gate/up (by feed-forward column); row-parallel: o and down, followed by an all-reduce.
// Embeddings, norms and the LM head are replicated.
struct TensorParallelLayout {
  uint32_t tp = 1;
  uint32_t heads_per_rank = 0;
  uint32_t kv_heads_per_rank = 0;  // 1 when kv heads are replicated (tp > kv_heads)
  uint32_t ffn_per_rank = 0;
  uint32_t kv_replication = 1;  // ranks sharing one kv head (tp / kv_heads when tp > kv_heads)

  uint32_t first_head(uint32_t rank) const { return rank * heads_per_rank; }
  uint32_t first_kv_head(uint32_t rank) const {
    return kv_replication > 1 ? rank / kv_replication : rank * kv_heads_per_rank;
  }
  uint32_t first_ffn(uint32_t rank) const { return rank * ffn_per_rank; }
  // The model's KV bytes of one token from one rank's: each kv head counted once, however many
  // ranks hold a copy, so that engines of one model under different tp agree (the cluster holds
  // every engine's kv_bytes_per_token to the first's before KV may move between them).
  uint64_t model_kv_bytes(uint64_t rank_kv_bytes) const {
    return rank_kv_bytes * tp / kv_replication;
  }
};

// Legality: tp >= 1, heads % tp == 0, and kv_heads % tp == 0 (or, when tp > kv_heads,
// tp % kv_heads == 0: each kv head is replicated on tp / kv_heads ranks), and
// intermediate_size % tp == 0. Throws sdk::Error(HW_INVALID_ARGUMENT) stating the rule broken and
// the values.
TensorParallelLayout plan_tensor_parallel(const LlamaConfig& config, uint32_t tp);

}  // namespace headway::models::cuda
