// Capacity planner behind `headway plan`: the smallest tensor-parallel degree (1, 2, 4, 8) at
// which a model's weights, the KV cache of `concurrency` requests of `context` tokens, the
// activation workspace of one step and the runtime's own memory fit in the share of each GPU's
// HBM a serving process may use (gpu_memory_utilization, as in vLLM); and why every smaller degree
// does not.
//
// Sizes come from model_memory.h, the arithmetic the sim model's cost model uses, and GPUs from
// presets.h. The activation workspace and the runtime reserve are estimates (the numbers and their
// reasons are next to the constants in planner.cpp and in docs/planner.md); weights and KV cache
// are exact for the shapes given, up to norms and biases.
//
// Threading: pure functions of their arguments; safe from any thread.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "model_memory.h"

namespace headway::models::sim {

struct PlanInput {
  ModelShape model;
  double hbm_bytes = 0;  // per GPU
  // Share of hbm_bytes the serving process may use in all, in (0, 1].
  double gpu_memory_utilization = kDefaultGpuMemoryUtilization;
  uint32_t context = 0;       // tokens per request (prompt + output)
  uint32_t concurrency = 1;   // requests whose KV is resident at once
  uint32_t weight_bytes = 2;  // 2 = bf16, 1 = fp8 (embedding and LM head stay bf16)
  uint32_t kv_bytes = 2;      // 2 = bf16, 1 = fp8
  uint32_t block_size = 16;   // KV is allocated in blocks: a request's tokens round up to one
  uint32_t max_num_batched_tokens = 8192;  // rows of one step: sizes the activation workspace
  uint32_t max_num_seqs = 256;             // sampled rows of one step: sizes the logits buffer
};

// Per GPU, bytes.
struct MemoryBreakdown {
  double weights = 0;
  double kv_cache = 0;
  double activations = 0;
  double cuda_context = 0;
  double cublas_workspace = 0;
  double nccl_buffers = 0;
  double cuda_graphs = 0;
  double runtime_reserve() const {
    return cuda_context + cublas_workspace + nccl_buffers + cuda_graphs;
  }
  double total() const { return weights + kv_cache + activations + runtime_reserve(); }
};

struct DegreeVerdict {
  uint32_t tensor_parallel = 0;
  std::string head_problem;         // why heads do not split over this degree; "" when they do
  MemoryBreakdown memory;           // filled for legal degrees only
  uint64_t kv_bytes_per_token = 0;  // per GPU
  uint64_t tokens_per_request = 0;  // context rounded up to whole blocks
  bool fits = false;                // legal and memory.total() <= usable_bytes()
  uint64_t max_concurrency = 0;     // requests of `context` tokens the free memory holds
  bool legal() const { return head_problem.empty(); }
};

// The memory per GPU a plan may fill: hbm_bytes * gpu_memory_utilization.
double usable_bytes(const PlanInput& input);

struct Plan {
  std::vector<DegreeVerdict> degrees;  // 1, 2, 4, 8 in order
  int chosen = -1;                     // index into degrees of the smallest that fits; -1: none
};

// The degrees the planner considers: one node of up to eight GPUs.
inline constexpr uint32_t kPlanDegrees[] = {1, 2, 4, 8};

// Throws std::invalid_argument naming the field when context, concurrency, block_size,
// max_num_batched_tokens, max_num_seqs or hbm_bytes is 0, gpu_memory_utilization is outside
// (0, 1], a byte width is not 1 or 2, or a shape field is 0.
MemoryBreakdown memory_per_gpu(const PlanInput& input, uint32_t tensor_parallel);
Plan plan_tensor_parallel(const PlanInput& input);

}  // namespace headway::models::sim
