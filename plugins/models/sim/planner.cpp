#include "planner.h"

#include <cmath>
#include <stdexcept>
#include <string>

namespace headway::models::sim {
namespace {

// Runtime memory outside the weights, KV cache and activations, per GPU. Estimates, in decimal
// bytes, of what a CUDA serving process holds on a Hopper GPU:
// - the CUDA context with the kernel images of cuBLAS, attention and NCCL loaded: commonly 0.5 to
//   1 GB as nvidia-smi shows for a process that holds no tensors; the upper end, to be safe.
constexpr double kCudaContextBytes = 1.0e9;
// - cuBLAS and cuBLASLt workspaces, 32 MiB each (cuBLAS's recommended size on Hopper).
constexpr double kCublasWorkspaceBytes = 2 * 32.0 * 1024 * 1024;
// - NCCL's communication buffers for the tensor-parallel group (NCCL_BUFFSIZE, 4 MiB, per channel
//   and peer and protocol, plus a custom all-reduce's staging buffers); only when tp > 1.
constexpr double kNcclBufferBytes = 0.5e9;
// - the memory pool of the CUDA graphs captured for decode batch sizes (vLLM logs 0.2 to 1 GiB).
constexpr double kCudaGraphBytes = 0.5e9;
// Logits of a sampled row are fp32 over the whole vocabulary, and sampling keeps a second buffer of
// the same size (probabilities).
constexpr double kLogitBytesPerVocabEntry = 2 * 4;

void require(bool ok, const char* field) {
  if (!ok) throw std::invalid_argument(std::string("plan: ") + field + " must be > 0");
}

void validate(const PlanInput& in) {
  require(in.hbm_bytes > 0 && std::isfinite(in.hbm_bytes), "GPU memory (hbm)");
  if (!(in.gpu_memory_utilization > 0 && in.gpu_memory_utilization <= 1)) {
    throw std::invalid_argument("plan: gpu_memory_utilization must be in (0, 1]");
  }
  require(in.context > 0, "context");
  require(in.concurrency > 0, "concurrency");
  require(in.block_size > 0, "block_size");
  require(in.max_num_batched_tokens > 0, "max_num_batched_tokens");
  require(in.max_num_seqs > 0, "max_num_seqs");
  const ModelShape& m = in.model;
  require(m.layers > 0, "layers");
  require(m.hidden > 0, "hidden");
  require(m.heads > 0, "heads");
  require(m.kv_heads > 0, "kv_heads");
  require(m.head_dim > 0, "head_dim");
  require(m.intermediate > 0, "intermediate");
  require(m.vocab > 0, "vocab");
  if (in.weight_bytes != 1 && in.weight_bytes != 2) {
    throw std::invalid_argument("plan: weight bytes must be 1 (fp8) or 2 (bf16)");
  }
  if (in.kv_bytes != 1 && in.kv_bytes != 2) {
    throw std::invalid_argument("plan: KV bytes must be 1 (fp8) or 2 (bf16)");
  }
}

uint64_t tokens_per_request(const PlanInput& in) {
  const uint64_t blocks = (static_cast<uint64_t>(in.context) + in.block_size - 1) / in.block_size;
  return blocks * in.block_size;
}

// Peak activation memory of one step of max_num_batched_tokens rows, bf16: per row the residual
// stream, its normalised copy and the all-reduce output (3 * hidden), this GPU's q, k and v, the
// attention output, and the gate, up and activated MLP rows (3 * intermediate / tp); plus the
// logits of max_num_seqs sampled rows.
double activation_bytes(const PlanInput& in, uint32_t tp) {
  const ModelShape& m = in.model;
  const double q_width = static_cast<double>(m.heads) / tp * m.head_dim;
  const double kv_width = 2.0 * kv_heads_per_gpu(m, tp) * m.head_dim;
  const double per_row = 3.0 * m.hidden + q_width + kv_width + q_width +
                         3.0 * static_cast<double>(m.intermediate) / tp;
  return per_row * kActivationBytes * in.max_num_batched_tokens +
         static_cast<double>(in.max_num_seqs) * m.vocab * kLogitBytesPerVocabEntry;
}

}  // namespace

double usable_bytes(const PlanInput& in) { return in.hbm_bytes * in.gpu_memory_utilization; }

MemoryBreakdown memory_per_gpu(const PlanInput& in, uint32_t tp) {
  validate(in);
  require(tp > 0, "tensor_parallel");
  MemoryBreakdown memory;
  memory.weights = weight_bytes_per_gpu(in.model, tp, in.weight_bytes);
  memory.kv_cache = static_cast<double>(tokens_per_request(in)) * in.concurrency *
                    static_cast<double>(kv_bytes_per_token_per_gpu(in.model, tp, in.kv_bytes));
  memory.activations = activation_bytes(in, tp);
  memory.cuda_context = kCudaContextBytes;
  memory.cublas_workspace = kCublasWorkspaceBytes;
  memory.nccl_buffers = tp > 1 ? kNcclBufferBytes : 0.0;
  memory.cuda_graphs = kCudaGraphBytes;
  return memory;
}

Plan plan_tensor_parallel(const PlanInput& in) {
  validate(in);
  Plan plan;
  for (const uint32_t tp : kPlanDegrees) {
    DegreeVerdict verdict;
    verdict.tensor_parallel = tp;
    verdict.head_problem = tensor_parallel_problem(in.model, tp);
    if (verdict.legal()) {
      verdict.memory = memory_per_gpu(in, tp);
      verdict.kv_bytes_per_token = kv_bytes_per_token_per_gpu(in.model, tp, in.kv_bytes);
      verdict.tokens_per_request = tokens_per_request(in);
      verdict.fits = verdict.memory.total() <= usable_bytes(in);
      const double free_for_kv = usable_bytes(in) - verdict.memory.weights -
                                 verdict.memory.activations - verdict.memory.runtime_reserve();
      const double per_request =
          static_cast<double>(verdict.tokens_per_request) * verdict.kv_bytes_per_token;
      verdict.max_concurrency =
          free_for_kv > 0 ? static_cast<uint64_t>(std::floor(free_for_kv / per_request)) : 0;
      if (verdict.fits && plan.chosen < 0) plan.chosen = static_cast<int>(plan.degrees.size());
    }
    plan.degrees.push_back(std::move(verdict));
  }
  return plan;
}

}  // namespace headway::models::sim
