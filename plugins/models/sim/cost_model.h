// Roofline cost model of one engine step of a dense decoder-only transformer (Llama-style: GQA
// attention, gated MLP, untied LM head) running with tensor parallelism on identical GPUs.
//
// Why a roofline and not a fitted table: the simulator must answer for batch shapes nobody profiled
// (a 3k-token chunk next to 200 decodes at 40k context), and a roofline extrapolates in the right
// direction for every shape: decode is bound by reading the weights and the KV cache, prefill by
// tensor-core FLOPs, attention grows with the context it reads. Measured kernels are slower than
// peak; the efficiency factors absorb that and are the knobs to calibrate against a real engine.
//
// The model of one step, per GPU (all figures are divided over tensor_parallel GPUs):
//   linear    = max(linear FLOPs / (peak * gemm_efficiency), weight bytes / (hbm * hbm_efficiency))
//               (peak and efficiency of fp8 when the weights are fp8; the LM head stays bf16)
//               linear FLOPs = 2 * (q,k,v,o + gated-MLP params) * tokens + 2 * hidden * vocab per
//               sampling slice (the LM head only runs where a token is sampled); the weights are
//               read once per step whatever the batch, the LM head only when some slice samples.
//   attention = max(4 * layers * heads * head_dim * causal (query, key) pairs / (peak * attn_eff),
//                   KV bytes read + written / (hbm * hbm_efficiency))
//   allreduce = 2 per layer (after attention and after the MLP) of tokens * hidden * 2 (bf16)
//   bytes,
//               ring algorithm: 2 (tp - 1) / tp * bytes / link bandwidth + a fixed latency each.
//   overhead  = a fixed per-step cost: kernel launches, the scheduler, sampling and the host-device
//               round trip that every engine step pays regardless of its size.
//   step      = linear + attention + allreduce + overhead (the phases run one after the other).
//
// Units are SI throughout (seconds, bytes, FLOP/s, bytes/s); presets.h converts from datasheet
// units.
//
// Threading: a CostModel is immutable after construction; any number of threads may call its const
// functions concurrently. StepLoad is a plain value owned by its caller.
#pragma once

#include <cstdint>
#include <span>

#include "model_memory.h"

namespace headway::models::sim {

// One GPU. All identical under tensor parallelism.
struct GpuSpec {
  double peak_flops = 0;        // dense bf16 tensor-core FLOP/s
  double peak_fp8_flops = 0;    // dense fp8 tensor-core FLOP/s (0: no fp8 tensor cores)
  double hbm_bytes_per_s = 0;   // HBM bandwidth
  double hbm_bytes = 0;         // HBM capacity
  double link_bytes_per_s = 0;  // GPU-to-GPU (NVLink) bandwidth per GPU, both directions together
};

// Everything the cost model depends on. The defaults of the tunables are the plugin's defaults.
struct CostConfig {
  ModelShape model;
  GpuSpec gpu;
  uint32_t tensor_parallel = 1;
  // Bytes per parameter of the layers' linear weights: 2 = bf16, 1 = fp8. With fp8 weights the
  // linear layers run on fp8 tensor cores (W8A8, as TensorRT-LLM and vLLM do on Hopper); embedding
  // and LM head stay bf16 (model_memory.h), activations are bf16.
  uint32_t weight_bytes = 2;
  // Bytes per KV cache element: 2 = bf16, 1 = fp8.
  uint32_t kv_bytes = 2;
  // Fraction of peak FLOP/s that large bf16 GEMMs reach (well-tuned cuBLAS/CUTLASS at scale).
  double gemm_efficiency = 0.7;
  // The same for fp8 GEMMs, a fraction of the fp8 peak (twice bf16's on Hopper). Lower than bf16's:
  // the fp8 peak is only reached at sizes and clocks that serving rarely sees (see
  // docs/performance.md, "The cost model").
  double fp8_gemm_efficiency = 0.65;
  // Fraction of peak FLOP/s that attention kernels reach (FlashAttention-2/3 class on Hopper).
  double attention_efficiency = 0.5;
  // Fraction of HBM bandwidth that weight and KV reads reach. Calibrated (docs/performance.md, "The
  // cost model"): decode GEMMs stream each layer's weights in a few short kernels, which ramp up
  // and drain, so they see less than a STREAM-style copy (~90% of peak on Hopper).
  double hbm_efficiency = 0.8;
  // Fixed latency of one all-reduce (launch + synchronisation), paid 2 * layers times per step.
  double allreduce_latency_s = 10e-6;
  // Host-side cost of one engine step, independent of the batch: scheduling, input preparation,
  // sampling, output processing and the host-device round trip between steps. Calibrated on
  // vLLM's batch-8 decode (docs/performance.md, "The cost model").
  double step_overhead_s = 2.5e-3;
  // Share of HBM the engine may use (weights + activations + KV), as in vLLM.
  double gpu_memory_utilization = kDefaultGpuMemoryUtilization;
  // Per-GPU memory kept for activations, workspaces and CUDA graphs; not available to the KV cache.
  double activation_reserve_bytes = 2e9;
};

// Shape of one slice as the cost model needs it: positions [start, start + tokens) of one request,
// and whether the slice samples a token (runs the LM head on its last position).
struct SliceShape {
  uint32_t start = 0;
  uint32_t tokens = 0;
  bool sample = false;
};

// Sums over the slices of one step, accumulated in a single pass with add(). A plain value: no
// allocation, trivially copyable; reset by assigning StepLoad{}.
struct StepLoad {
  uint64_t tokens = 0;         // positions computed (rows through every linear layer)
  uint64_t sampled = 0;        // slices that sample a token (rows through the LM head)
  uint64_t kv_tokens = 0;      // KV positions read or written: start + tokens per slice
  double attention_pairs = 0;  // causal (query, key) pairs: tokens * (start + (tokens + 1) / 2)

  void add(uint32_t start, uint32_t slice_tokens, bool sample) noexcept {
    tokens += slice_tokens;
    sampled += sample ? 1u : 0u;
    kv_tokens += static_cast<uint64_t>(start) + slice_tokens;
    // Query i of the slice (position start + i) attends to start + i + 1 keys; the sum over the
    // slice is exact in double for any realistic length.
    attention_pairs += static_cast<double>(slice_tokens) *
                       (static_cast<double>(start) + 0.5 * (static_cast<double>(slice_tokens) + 1));
  }
  void add(const SliceShape& slice) noexcept { add(slice.start, slice.tokens, slice.sample); }
};

// Where a step's time goes. total() is what the engine's virtual clock advances by.
struct StepCost {
  double linear_s = 0;
  double attention_s = 0;
  double allreduce_s = 0;
  double overhead_s = 0;
  double total() const noexcept { return linear_s + attention_s + allreduce_s + overhead_s; }
};

class CostModel {
 public:
  // Validates the configuration and precomputes the per-step constants. Throws
  // std::invalid_argument naming the offending key and the numbers when the shape is inconsistent,
  // tensor_parallel does not divide the heads, the weights do not fit in each GPU's usable memory,
  // or the KV cache left over cannot hold one request of max_model_len tokens.
  explicit CostModel(const CostConfig& config);

  // Time of one step with the given load. Allocation-free and O(1): the per-slice work is in
  // StepLoad::add, so a step of n slices costs n additions and one call here.
  StepCost step_cost(const StepLoad& load) const noexcept;
  double step_seconds(const StepLoad& load) const noexcept { return step_cost(load).total(); }
  // Convenience for callers that already hold the slices in an array (tests, planners).
  double step_seconds(std::span<const SliceShape> slices) const noexcept;

  const CostConfig& config() const noexcept { return config_; }

  // Parameters of the whole model: embedding + layers + LM head.
  double parameters() const noexcept { return parameters_; }
  // Bytes of all weights, whole model (all GPUs together), and the share one GPU holds.
  double weight_bytes() const noexcept { return weight_bytes_; }
  double weight_bytes_per_gpu() const noexcept { return weight_bytes_per_gpu_; }
  // KV bytes of one token, whole model: layers * 2 (K and V) * kv_heads * head_dim * kv_bytes.
  uint64_t kv_bytes_per_token() const noexcept { return kv_bytes_per_token_; }
  // KV bytes of one token on one GPU: kv heads are split over the GPUs, and replicated (one per
  // GPU) when tensor_parallel exceeds kv_heads.
  uint64_t kv_bytes_per_token_per_gpu() const noexcept { return kv_bytes_per_token_per_gpu_; }
  // Usable HBM per GPU (hbm * gpu_memory_utilization) minus weights and the activation reserve.
  double kv_memory_bytes_per_gpu() const noexcept { return kv_memory_bytes_per_gpu_; }
  // Tokens of KV cache that fit in kv_memory_bytes_per_gpu() on every GPU.
  uint64_t kv_capacity_tokens() const noexcept { return kv_capacity_tokens_; }

 private:
  CostConfig config_;
  double parameters_ = 0;
  double weight_bytes_ = 0;
  double weight_bytes_per_gpu_ = 0;
  uint64_t kv_bytes_per_token_ = 0;
  uint64_t kv_bytes_per_token_per_gpu_ = 0;
  double kv_memory_bytes_per_gpu_ = 0;
  uint64_t kv_capacity_tokens_ = 0;

  // Per-GPU constants of the step formula, precomputed so step_cost is a handful of FMAs.
  double linear_seconds_per_token_ = 0;     // compute time of the layers' GEMMs per row
  double lm_head_seconds_per_sample_ = 0;   // compute time of the LM head per sampled row
  double layer_weight_read_s_ = 0;          // reading every layer's weights once
  double lm_head_weight_read_s_ = 0;        // reading the LM head once
  double attention_seconds_per_pair_ = 0;   // compute time of one (query, key) pair, all layers
  double kv_seconds_per_token_ = 0;         // reading or writing one token's KV, all layers
  double allreduce_seconds_per_token_ = 0;  // bandwidth term of all all-reduces per row
  double allreduce_fixed_s_ = 0;            // latency term of all all-reduces of a step
};

}  // namespace headway::models::sim
