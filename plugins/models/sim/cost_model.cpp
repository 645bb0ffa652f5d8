#include "cost_model.h"

#include <algorithm>
#include <cmath>
#include <cstdarg>
#include <cstdio>
#include <stdexcept>
#include <string>

namespace headway::models::sim {
namespace {

[[noreturn]] void fail(const char* format, ...) __attribute__((format(printf, 1, 2)));

void fail(const char* format, ...) {
  char buffer[512];
  va_list args;
  va_start(args, format);
  std::vsnprintf(buffer, sizeof(buffer), format, args);
  va_end(args);
  throw std::invalid_argument(buffer);
}

void require_positive(uint32_t value, const char* key) {
  if (value == 0) fail("%s must be > 0", key);
}

void require_positive(double value, const char* key) {
  if (!(value > 0) || !std::isfinite(value)) fail("%s must be > 0 (got %g)", key, value);
}

void require_fraction(double value, const char* key) {
  if (!(value > 0 && value <= 1)) fail("%s must be in (0, 1] (got %g)", key, value);
}

void require_non_negative(double value, const char* key) {
  if (!(value >= 0) || !std::isfinite(value)) fail("%s must be >= 0 (got %g)", key, value);
}

constexpr double kGB = 1e9;

}  // namespace

CostModel::CostModel(const CostConfig& config) : config_(config) {
  const ModelShape& m = config.model;
  const GpuSpec& gpu = config.gpu;
  const uint32_t tp = config.tensor_parallel;

  require_positive(m.layers, "layers");
  require_positive(m.hidden, "hidden");
  require_positive(m.heads, "heads");
  require_positive(m.kv_heads, "kv_heads");
  require_positive(m.head_dim, "head_dim");
  require_positive(m.intermediate, "intermediate");
  require_positive(m.vocab, "vocab");
  require_positive(m.max_model_len, "max_model_len");
  require_positive(tp, "tensor_parallel");
  if (config.weight_bytes != 1 && config.weight_bytes != 2) {
    fail("weight bytes must be 1 (fp8) or 2 (bf16) (got %u)", config.weight_bytes);
  }
  if (config.kv_bytes != 1 && config.kv_bytes != 2) {
    fail("kv bytes must be 1 (fp8) or 2 (bf16) (got %u)", config.kv_bytes);
  }
  if (m.heads % m.kv_heads != 0) {
    fail("kv_heads=%u must divide heads=%u (grouped-query attention)", m.kv_heads, m.heads);
  }
  // Megatron-style tensor parallelism splits attention by heads.
  if (const std::string problem = tensor_parallel_problem(m, tp); !problem.empty()) {
    fail("tensor_parallel=%u cannot split the model: %s", tp, problem.c_str());
  }
  require_positive(gpu.peak_flops, "peak_tflops");
  if (config.weight_bytes == 1) require_positive(gpu.peak_fp8_flops, "peak_fp8_tflops");
  require_positive(gpu.hbm_bytes_per_s, "hbm_tb_per_s");
  require_positive(gpu.hbm_bytes, "hbm_gb");
  if (tp > 1) require_positive(gpu.link_bytes_per_s, "link_gb_per_s");
  require_fraction(config.gemm_efficiency, "gemm_efficiency");
  require_fraction(config.fp8_gemm_efficiency, "fp8_gemm_efficiency");
  require_fraction(config.attention_efficiency, "attention_efficiency");
  require_fraction(config.hbm_efficiency, "hbm_efficiency");
  require_fraction(config.gpu_memory_utilization, "gpu_memory_utilization");
  require_non_negative(config.allreduce_latency_s, "allreduce_latency_us");
  require_non_negative(config.step_overhead_s, "step_overhead_ms");
  require_non_negative(config.activation_reserve_bytes, "activation_reserve_gb");

  const double hidden = m.hidden;
  const ParameterCounts counts = parameter_counts(m);
  parameters_ = counts.total(m.layers);
  const double layer_params_per_gpu = layer_parameters_per_gpu(m, tp);
  const double lm_head_per_gpu = counts.lm_head / tp;
  weight_bytes_ = (parameters_ - counts.embedding - counts.lm_head) * config.weight_bytes +
                  (counts.embedding + counts.lm_head) * kEmbeddingBytes;
  weight_bytes_per_gpu_ = sim::weight_bytes_per_gpu(m, tp, config.weight_bytes);
  const double weight_bytes_per_gpu = weight_bytes_per_gpu_;

  kv_bytes_per_token_ =
      static_cast<uint64_t>(m.layers) * 2 * m.kv_heads * m.head_dim * config.kv_bytes;
  kv_bytes_per_token_per_gpu_ = sim::kv_bytes_per_token_per_gpu(m, tp, config.kv_bytes);

  const double usable = gpu.hbm_bytes * config.gpu_memory_utilization;
  kv_memory_bytes_per_gpu_ = usable - weight_bytes_per_gpu - config.activation_reserve_bytes;
  if (kv_memory_bytes_per_gpu_ <= 0) {
    // The share that would leave any KV at all, when one exists: Llama-3.3-70B bf16 on two H100s
    // needs 0.91 where vLLM's default (and this one's) is 0.9, and its users pass 0.95.
    const double needed = (weight_bytes_per_gpu + config.activation_reserve_bytes) / gpu.hbm_bytes;
    char remedy[160];
    if (needed < 1) {
      std::snprintf(remedy, sizeof remedy,
                    "raise gpu_memory_utilization above %.3f, raise tensor_parallel, or use a GPU "
                    "with more memory",
                    needed);
    } else {
      std::snprintf(remedy, sizeof remedy,
                    "raise tensor_parallel or use a GPU with more memory (no "
                    "gpu_memory_utilization is enough)");
    }
    fail(
        "weights need %.1f GB per GPU (%.2fB parameters / tensor_parallel=%u) plus "
        "activation_reserve_gb=%.1f, but hbm_gb=%.1f * gpu_memory_utilization=%.2f leaves only "
        "%.1f GB: %s",
        weight_bytes_per_gpu / kGB, parameters_ / 1e9, tp, config.activation_reserve_bytes / kGB,
        gpu.hbm_bytes / kGB, config.gpu_memory_utilization, usable / kGB, remedy);
  }
  kv_capacity_tokens_ = static_cast<uint64_t>(kv_memory_bytes_per_gpu_ /
                                              static_cast<double>(kv_bytes_per_token_per_gpu_));
  // An engine that cannot hold one full-length request would deadlock on it; refuse up front, as
  // vLLM does, rather than fail mid-simulation.
  if (kv_capacity_tokens_ < m.max_model_len) {
    fail(
        "KV cache holds %llu tokens (%.1f GB per GPU left after weights, %llu bytes per token per "
        "GPU), fewer than max_model_len=%u: lower max_model_len or raise tensor_parallel or "
        "gpu_memory_utilization",
        static_cast<unsigned long long>(kv_capacity_tokens_), kv_memory_bytes_per_gpu_ / kGB,
        static_cast<unsigned long long>(kv_bytes_per_token_per_gpu_), m.max_model_len);
  }

  const bool fp8 = config.weight_bytes == 1;
  const double gemm_rate = fp8 ? gpu.peak_fp8_flops * config.fp8_gemm_efficiency
                               : gpu.peak_flops * config.gemm_efficiency;
  const double lm_head_rate = gpu.peak_flops * config.gemm_efficiency;  // bf16 whatever the layers
  const double attention_rate = gpu.peak_flops * config.attention_efficiency;
  const double hbm_rate = gpu.hbm_bytes_per_s * config.hbm_efficiency;

  linear_seconds_per_token_ = 2 * layer_params_per_gpu / gemm_rate;
  lm_head_seconds_per_sample_ = 2 * lm_head_per_gpu / lm_head_rate;
  layer_weight_read_s_ = layer_params_per_gpu * config.weight_bytes / hbm_rate;
  lm_head_weight_read_s_ = lm_head_per_gpu * kEmbeddingBytes / hbm_rate;
  // QK^T and PV: 2 FLOPs per multiply-add, 2 matmuls, per head and head dimension.
  attention_seconds_per_pair_ =
      4.0 * m.layers * (static_cast<double>(m.heads) / tp) * m.head_dim / attention_rate;
  kv_seconds_per_token_ = static_cast<double>(kv_bytes_per_token_per_gpu_) / hbm_rate;

  if (tp > 1) {
    // Two all-reduces per layer of the residual stream. A ring all-reduce sends and receives
    // 2 (tp - 1) / tp of the buffer per GPU; link_bytes_per_s is the datasheet figure for both
    // directions together, so each direction runs at half of it (what nccl-tests reports as bus
    // bandwidth on NVLink).
    const double allreduces = 2.0 * m.layers;
    const double ring_factor = 2.0 * (tp - 1) / tp;
    allreduce_seconds_per_token_ =
        allreduces * ring_factor * hidden * kActivationBytes / (gpu.link_bytes_per_s / 2);
    allreduce_fixed_s_ = allreduces * config.allreduce_latency_s;
  }
}

StepCost CostModel::step_cost(const StepLoad& load) const noexcept {
  StepCost cost;
  cost.overhead_s = config_.step_overhead_s;
  if (load.tokens == 0) return cost;

  const double tokens = static_cast<double>(load.tokens);
  const double sampled = static_cast<double>(load.sampled);
  const double compute = tokens * linear_seconds_per_token_ + sampled * lm_head_seconds_per_sample_;
  const double weights = layer_weight_read_s_ + (load.sampled > 0 ? lm_head_weight_read_s_ : 0.0);
  cost.linear_s = std::max(compute, weights);

  // KV traffic: every slice reads the context it attends to and writes its own new positions;
  // kv_tokens (start + tokens per slice) counts both once.
  const double attention_compute = load.attention_pairs * attention_seconds_per_pair_;
  const double kv_traffic = static_cast<double>(load.kv_tokens) * kv_seconds_per_token_;
  cost.attention_s = std::max(attention_compute, kv_traffic);

  cost.allreduce_s = tokens * allreduce_seconds_per_token_ + allreduce_fixed_s_;
  return cost;
}

double CostModel::step_seconds(std::span<const SliceShape> slices) const noexcept {
  StepLoad load;
  for (const SliceShape& slice : slices) load.add(slice);
  return step_seconds(load);
}

}  // namespace headway::models::sim
