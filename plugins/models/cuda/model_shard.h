// One GPU's part of the cuda model: its weights, its KV cache, its activation workspace, its
// cuBLASLt instance and its stream, and the phases of a step on it. With tensor parallelism the
// model owns one shard per GPU and interleaves their phases with all-reduces (cuda_model.cpp);
// with one GPU it simply runs them in order.
//
// Phases of a step, all enqueued on the shard's stream, no host synchronisation inside:
//   upload(plan)                 the step's plan, one host-to-device copy
//   embed()                      token ids -> float residual stream x
//   attention(l)                 [add previous mlp output +] RMSNorm, QKV GEMM, [q/k/v biases,
//                                q/k head norms +] RoPE + KV write, paged attention (+ split-K
//                                reduce), O GEMM -> partial()
//   mlp(l)                       add attention output [+ o's bias] + RMSNorm, gate|up GEMM,
//                                SwiGLU, down GEMM -> partial()
//   head(sample_on_device)       add last mlp output + final RMSNorm on the head rows (the sampled
//                                ones, then every position of a slice that asks for all its
//                                logits, or all rows in a graph step), LM head GEMM (float
//                                logits), device sampling of the sampled rows when asked
// partial() is the layer output to add to the residual; under tensor parallelism it is this rank's
// share, summed over ranks by the caller's all-reduce between phases.
//
// Ownership: owns all its device memory, the stream and the cuBLASLt handle; frees them with its
// device current. Threading: one thread at a time; every method makes its device current first.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <memory>

#include "cuda_model_config.h"
#include "device_buffer.h"
#include "device_weights.h"
#include "gemm.h"
#include "kv_layout.h"
#include "phase_timer.h"
#include "step_plan.h"

namespace headway::models::cuda {

class ModelShard {
 public:
  // Makes `device` current, creates the stream and cuBLASLt, preallocates the workspace for
  // options.max_batch_tokens tokens and takes ownership of `weights` (built with the device
  // current). Of `options` it reads: deterministic and decode_gemv (Gemm's modes, gemm.h),
  // fuse_swiglu (the GEMV's gate|up with SwiGLU, kernels/gemv.h), phase_timing (phase_timer.h),
  // attention_tiling (the prefill blocks of the tensor-core attention; the plan's tiles must be cut
  // for it) and programmatic_dependent_launch (the kernels' overlapped launches, kernels/launch.h).
  ModelShard(int device, const LlamaConfig& config, const TensorParallelLayout& tp,
             std::unique_ptr<DeviceWeights> weights, const double* inv_freq,
             const CudaModelOptions& options);
  ~ModelShard();
  ModelShard(const ModelShard&) = delete;
  ModelShard& operator=(const ModelShard&) = delete;

  int device() const { return device_; }
  cudaStream_t stream() const { return stream_; }
  const kernels::KvLayout& kv_layout() const { return kv_; }
  uint32_t kv_blocks() const { return kv_blocks_; }
  __nv_bfloat16* kv_base() const { return cache_.data(); }
  uint64_t weight_bytes() const { return weights_->bytes(); }

  // Bytes of device memory free now (after weights and workspace), for sizing the cache.
  uint64_t free_bytes() const;
  uint64_t total_bytes() const;

  void init_kv(uint32_t block_count, uint32_t block_size);

  // Grows the workspace when the step is larger than any before (rare; logged by the caller).
  bool reserve(uint32_t tokens, uint32_t head_rows, uint32_t partial_records);
  // Changes whenever a buffer the step's kernels use moves (workspace growth, the plan's device
  // copy growing, init_kv): a captured graph of an earlier generation must not be replayed.
  uint64_t buffers_generation() const { return buffers_generation_; }
  void upload(const StepPlan& plan);
  void embed(const StepPlan& plan);
  void attention(const StepPlan& plan, uint32_t layer);
  void mlp(const StepPlan& plan, uint32_t layer);
  void head(const StepPlan& plan, bool sample_on_device);

  // Phase timing (no-ops unless enabled): a step begins, `phase` ended on this shard's stream, the
  // synchronised step is added up (or dropped after a failure); the summary so far.
  void begin_step_timing(uint32_t tokens);
  void mark(Phase phase);
  void end_step_timing(bool completed);
  std::string timing_summary() const { return timer_.summary(); }

  // The layer output awaiting its add to the residual: [tokens][hidden] bf16.
  __nv_bfloat16* partial() const { return out_.data(); }
  const float* logits() const { return logits_.data(); }
  const int32_t* sampled() const { return sampled_.data(); }

 private:
  template <class T>
  const T* staged(size_t offset) const {
    return reinterpret_cast<const T*>(plan_.data() + offset);
  }
  void select() const;

  int device_;
  LlamaConfig config_;
  TensorParallelLayout tp_;
  std::unique_ptr<DeviceWeights> weights_;
  cudaStream_t stream_ = nullptr;
  // How the step's kernels go on stream_: overlapped where their launchers allow (the
  // programmatic_dependent_launch option); the embedding and the sampling are launched plainly.
  kernels::Launch launch() const { return {stream_, overlap_launches_}; }
  bool overlap_launches_;
  std::unique_ptr<Gemm> gemm_;
  // Deterministic mode: the FP32 attention kernel for every unit (a row's arithmetic is the same
  // in prefill and decode); otherwise tensor cores where the head dim allows.
  bool fuse_swiglu_;  // gate|up + SwiGLU in one kernel where the GEMV takes gate|up
  bool exact_attention_;
  kernels::MmaTiling attention_tiling_;
  kernels::KvLayout kv_;
  uint32_t kv_blocks_ = 0;
  uint32_t q_width_ = 0;      // heads_l * head_dim
  uint32_t qkv_width_ = 0;    // (heads_l + 2 kv_heads_l) * head_dim
  bool pending_add_ = false;  // partial() holds a layer output not yet added to x
  uint64_t buffers_generation_ = 0;
  PhaseTimer timer_;

  uint32_t token_capacity_ = 0;
  uint32_t sample_capacity_ = 0;
  DeviceBuffer<__nv_bfloat16> cache_;
  DeviceBuffer<double> inv_freq_;
  DeviceBuffer<std::byte> plan_;
  DeviceBuffer<float> x_;                // residual [T][hidden]
  DeviceBuffer<__nv_bfloat16> h_;        // normed [T][hidden]
  DeviceBuffer<__nv_bfloat16> qkv_;      // [T][qkv_width]
  DeviceBuffer<__nv_bfloat16> attn_;     // [T][q_width]
  DeviceBuffer<__nv_bfloat16> out_;      // [T][hidden] layer output (partial under TP)
  DeviceBuffer<__nv_bfloat16> gate_up_;  // [T][2 ffn_l]
  DeviceBuffer<__nv_bfloat16> act_;      // [T][ffn_l]
  DeviceBuffer<float> partial_acc_;      // [records][head_dim]
  DeviceBuffer<float> partial_ml_;       // [records][2]
  DeviceBuffer<__nv_bfloat16> last_;     // [S][hidden]
  DeviceBuffer<float> logits_;           // [S][vocab]
  DeviceBuffer<int32_t> sampled_;        // [S]
};

}  // namespace headway::models::cuda
