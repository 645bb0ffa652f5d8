#include "model_shard.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "attention.h"
#include "embedding.h"
#include "rms_norm.h"
#include "rope_kv.h"
#include "sampling.h"
#include "swiglu.h"

namespace headway::models::cuda {

ModelShard::ModelShard(int device, const LlamaConfig& config, const TensorParallelLayout& tp,
                       std::unique_ptr<DeviceWeights> weights, const double* inv_freq,
                       const CudaModelOptions& options)
    : device_(device),
      config_(config),
      tp_(tp),
      weights_(std::move(weights)),
      overlap_launches_(options.programmatic_dependent_launch),
      fuse_swiglu_(options.fuse_swiglu),
      exact_attention_(options.deterministic),
      attention_tiling_(options.attention_tiling),
      timer_(options.phase_timing) {
  select();
  HW_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
  try {
    gemm_ = std::make_unique<Gemm>(options.deterministic, options.decode_gemv,
                                   options.decode_gemv_max_rows);
    kv_.layers = config.num_hidden_layers;
    kv_.kv_heads = tp.kv_heads_per_rank;
    kv_.head_dim = config.head_dim;
    q_width_ = tp.heads_per_rank * config.head_dim;
    qkv_width_ = (tp.heads_per_rank + 2 * tp.kv_heads_per_rank) * config.head_dim;
    const uint32_t half = config.head_dim / 2;
    inv_freq_.reserve(half);
    HW_CUDA_CHECK(
        cudaMemcpy(inv_freq_.data(), inv_freq, half * sizeof(double), cudaMemcpyHostToDevice));
    reserve(options.max_batch_tokens, 256, 0);
  } catch (...) {
    // The destructor does not run for a half-built shard (out of memory for a large
    // max_batch_tokens): the stream would leak.
    gemm_.reset();
    cudaStreamDestroy(stream_);
    throw;
  }
}

ModelShard::~ModelShard() {
  // Buffers free themselves; the stream and cuBLASLt need the device current and idle.
  cudaSetDevice(device_);
  if (stream_ != nullptr) cudaStreamSynchronize(stream_);
  gemm_.reset();
  if (stream_ != nullptr) cudaStreamDestroy(stream_);
}

void ModelShard::select() const { HW_CUDA_CHECK(cudaSetDevice(device_)); }

uint64_t ModelShard::free_bytes() const {
  select();
  size_t free = 0, total = 0;
  HW_CUDA_CHECK(cudaMemGetInfo(&free, &total));
  return free;
}

uint64_t ModelShard::total_bytes() const {
  select();
  size_t free = 0, total = 0;
  HW_CUDA_CHECK(cudaMemGetInfo(&free, &total));
  return total;
}

void ModelShard::init_kv(uint32_t block_count, uint32_t block_size) {
  if (block_size == 0) throw sdk::Error(HW_INVALID_ARGUMENT, "cuda model: block_size must be > 0");
  select();
  kv_.block_size = block_size;
  const unsigned __int128 elems = static_cast<unsigned __int128>(kv_.block_elems()) * block_count;
  size_t free = 0, total = 0;
  HW_CUDA_CHECK(cudaMemGetInfo(&free, &total));
  if (elems * 2 > free) {
    throw sdk::Error(HW_RESOURCE_EXHAUSTED,
                     "cuda model: a KV cache of " + std::to_string(block_count) + " blocks of " +
                         std::to_string(block_size) + " tokens needs " +
                         std::to_string(static_cast<double>(elems * 2) / 1e9) + " GB on GPU " +
                         std::to_string(device_) + ", " + std::to_string(free / 1e9) +
                         " GB are free");
  }
  ++buffers_generation_;  // first: a failed allocation has freed the old cache already
  cache_.reserve(static_cast<size_t>(elems));
  // Zeroed so that transports and debuggers never see another process's bytes; the attention
  // never reads a position before writing it.
  HW_CUDA_CHECK(cudaMemsetAsync(cache_.data(), 0, static_cast<size_t>(elems) * 2, stream_));
  HW_CUDA_CHECK(cudaStreamSynchronize(stream_));
  kv_blocks_ = block_count;
}

bool ModelShard::reserve(uint32_t tokens, uint32_t head_rows, uint32_t partial_records) {
  select();
  bool grew = false;
  const size_t hidden = config_.hidden_size;
  if (tokens > token_capacity_) {
    const size_t cap = std::max<size_t>(tokens, token_capacity_ + token_capacity_ / 2);
    // The stream may still read the old buffers: wait before they are freed. Generation and
    // capacity change first: an allocation that fails below has freed its old buffer already, and
    // neither a graph nor the next step may use it.
    HW_CUDA_CHECK(cudaStreamSynchronize(stream_));
    ++buffers_generation_;
    token_capacity_ = 0;
    x_.reserve(cap * hidden);
    h_.reserve(cap * hidden);
    qkv_.reserve(cap * qkv_width_);
    attn_.reserve(cap * q_width_);
    out_.reserve(cap * hidden);
    gate_up_.reserve(cap * 2 * tp_.ffn_per_rank);
    act_.reserve(cap * tp_.ffn_per_rank);
    token_capacity_ = static_cast<uint32_t>(cap);
    grew = true;
  }
  if (head_rows > sample_capacity_) {
    const size_t cap = std::max<size_t>(head_rows, sample_capacity_ + sample_capacity_ / 2);
    HW_CUDA_CHECK(cudaStreamSynchronize(stream_));
    ++buffers_generation_;
    sample_capacity_ = 0;
    last_.reserve(cap * hidden);
    logits_.reserve(cap * config_.vocab_size);
    sampled_.reserve(cap);
    sample_capacity_ = static_cast<uint32_t>(cap);
    grew = true;
  }
  // Both sizes: a failed reserve leaves its buffer empty while the other keeps its size.
  if (partial_records > partial_ml_.size() / 2 ||
      size_t{partial_records} * config_.head_dim > partial_acc_.size()) {
    HW_CUDA_CHECK(cudaStreamSynchronize(stream_));
    ++buffers_generation_;
    const size_t cap = std::max<size_t>(partial_records, partial_ml_.size());
    partial_acc_.reserve(cap * config_.head_dim);
    partial_ml_.reserve(cap * 2);
    grew = true;
  }
  return grew;
}

void ModelShard::upload(const StepPlan& plan) {
  select();
  if (plan_.size() < plan.offsets().total) {
    HW_CUDA_CHECK(cudaStreamSynchronize(stream_));
    ++buffers_generation_;
    plan_.reserve(std::max(plan.offsets().total, plan_.size() + plan_.size() / 2));
  }
  HW_CUDA_CHECK(cudaMemcpyAsync(plan_.data(), plan.staging(), plan.offsets().total,
                                cudaMemcpyHostToDevice, stream_));
  timer_.mark(Phase::kUpload, stream_);
}

void ModelShard::begin_step_timing(uint32_t tokens) {
  if (!timer_.enabled()) return;
  select();
  timer_.begin_step(tokens, stream_);
}

void ModelShard::mark(Phase phase) {
  if (!timer_.enabled()) return;
  select();
  timer_.mark(phase, stream_);
}

void ModelShard::end_step_timing(bool completed) {
  if (!timer_.enabled()) return;
  select();
  if (completed) {
    timer_.end_step();
  } else {
    timer_.abandon_step();
  }
}

void ModelShard::embed(const StepPlan& plan) {
  select();
  HW_CUDA_CHECK(kernels::embedding_gather(weights_->embed(), config_.hidden_size,
                                          staged<int32_t>(plan.offsets().token_ids), plan.tokens(),
                                          x_.data(), stream_));
  timer_.mark(Phase::kEmbed, stream_);
  pending_add_ = false;
}

void ModelShard::attention(const StepPlan& plan, uint32_t layer) {
  select();
  const DeviceLayer& w = weights_->layer(layer);
  const uint32_t T = plan.tokens();
  const uint32_t hidden = config_.hidden_size;
  const float eps = static_cast<float>(config_.rms_norm_eps);
  // What is pending here is the previous layer's MLP output (no bias).
  HW_CUDA_CHECK(kernels::add_rms_norm(x_.data(), pending_add_ ? out_.data() : nullptr, nullptr,
                                      w.input_norm.data(), nullptr, T, hidden, eps, h_.data(),
                                      launch()));
  timer_.mark(Phase::kAttentionNorm, stream_);
  gemm_->run(h_.data(), w.qkv.data(), qkv_.data(), GemmOut::kBF16, T, qkv_width_, hidden, launch());
  timer_.mark(Phase::kQkvGemm, stream_);

  const StepOffsets& o = plan.offsets();
  __nv_bfloat16* layer_cache = cache_.data() + layer * kv_.layer_elems();
  kernels::RopeKvArgs rope;
  rope.qkv = qkv_.data();
  rope.tokens = T;
  rope.heads = tp_.heads_per_rank;
  rope.kv_heads = tp_.kv_heads_per_rank;
  rope.head_dim = config_.head_dim;
  rope.positions = staged<int32_t>(o.positions);
  rope.slot_offsets = staged<int64_t>(o.slot_offsets);
  rope.inv_freq = inv_freq_.data();
  rope.layer_cache = layer_cache;
  rope.head_elems = kv_.head_elems();
  rope.qkv_bias = w.qkv_bias.data();  // null where the checkpoint has none
  rope.q_norm = w.q_norm.data();
  rope.k_norm = w.k_norm.data();
  rope.norm_eps = eps;
  HW_CUDA_CHECK(kernels::rope_kv_write(rope, launch()));
  timer_.mark(Phase::kRopeKvWrite, stream_);

  kernels::AttentionArgs a;
  a.qkv = qkv_.data();
  a.q_stride = qkv_width_;
  a.out = attn_.data();
  a.layer_cache = layer_cache;
  a.block_elems = kv_.block_elems();
  a.head_elems = kv_.head_elems();
  a.block_size = kv_.block_size;
  a.block_tables = staged<int32_t>(o.block_tables);
  a.heads = tp_.heads_per_rank;
  a.kv_heads = tp_.kv_heads_per_rank;
  a.head_dim = config_.head_dim;
  a.scale = 1.0f / std::sqrt(static_cast<float>(config_.head_dim));
  a.partial_acc = partial_acc_.data();
  a.partial_ml = partial_ml_.data();
  a.exact_fp32 = exact_attention_;
  a.mma_tiling = attention_tiling_;
  a.max_prefill_rows = plan.max_prefill_rows();
  HW_CUDA_CHECK(kernels::paged_attention(a, staged<kernels::AttentionUnit>(o.prefill_units),
                                         plan.prefill_unit_count(),
                                         kernels::AttentionKind::kPrefill, launch()));
  HW_CUDA_CHECK(kernels::paged_attention(a, staged<kernels::AttentionUnit>(o.decode_units),
                                         plan.decode_unit_count(), kernels::AttentionKind::kDecode,
                                         launch()));
  HW_CUDA_CHECK(kernels::attention_reduce(a, staged<kernels::AttentionReduceUnit>(o.reduce_units),
                                          plan.reduce_unit_count(), launch()));
  timer_.mark(Phase::kAttention, stream_);
  gemm_->run(attn_.data(), w.o.data(), out_.data(), GemmOut::kBF16, T, hidden, q_width_, launch());
  timer_.mark(Phase::kOGemm, stream_);
  pending_add_ = true;
}

void ModelShard::mlp(const StepPlan& plan, uint32_t layer) {
  select();
  const DeviceLayer& w = weights_->layer(layer);
  const uint32_t T = plan.tokens();
  const uint32_t hidden = config_.hidden_size;
  const uint32_t ffn = tp_.ffn_per_rank;
  // The attention's output, all-reduced under tensor parallelism, takes o_proj's bias here.
  HW_CUDA_CHECK(kernels::add_rms_norm(x_.data(), out_.data(), w.o_bias.data(), w.post_norm.data(),
                                      nullptr, T, hidden, static_cast<float>(config_.rms_norm_eps),
                                      h_.data(), launch()));
  timer_.mark(Phase::kMlpNorm, stream_);
  if (fuse_swiglu_ && gemm_->takes_gemv(T, hidden, h_.data(), w.gate_up.data(), act_.data())) {
    // The same bits as the two kernels below, in one (kernels/gemv.h); the SwiGLU phase is empty.
    HW_CUDA_CHECK(
        kernels::gemv_swiglu(h_.data(), w.gate_up.data(), act_.data(), T, ffn, hidden, launch()));
    timer_.mark(Phase::kGateUpGemm, stream_);
  } else {
    gemm_->run(h_.data(), w.gate_up.data(), gate_up_.data(), GemmOut::kBF16, T, 2 * ffn, hidden,
               launch());
    timer_.mark(Phase::kGateUpGemm, stream_);
    HW_CUDA_CHECK(kernels::swiglu(gate_up_.data(), T, ffn, act_.data(), launch()));
    timer_.mark(Phase::kSwiglu, stream_);
  }
  gemm_->run(act_.data(), w.down.data(), out_.data(), GemmOut::kBF16, T, hidden, ffn, launch());
  timer_.mark(Phase::kDownGemm, stream_);
  pending_add_ = true;
}

void ModelShard::head(const StepPlan& plan, bool sample_on_device) {
  select();
  const uint32_t S = plan.head_rows();
  if (S == 0) return;
  const StepOffsets& o = plan.offsets();
  // The last layer's output is added only on the head rows: nothing reads the others.
  HW_CUDA_CHECK(kernels::add_rms_norm(
      x_.data(), out_.data(), nullptr, weights_->final_norm(), staged<int32_t>(o.sample_rows), S,
      config_.hidden_size, static_cast<float>(config_.rms_norm_eps), last_.data(), launch()));
  timer_.mark(Phase::kHeadNorm, stream_);
  gemm_->run(last_.data(), weights_->lm_head(), logits_.data(), GemmOut::kF32, S,
             config_.vocab_size, config_.hidden_size, launch());
  timer_.mark(Phase::kLmHead, stream_);
  // A graph step samples every head row (its shape is fixed; nobody reads the padding rows' ids);
  // otherwise only the sampled rows, not the extra rows of prompt positions.
  const uint32_t sampled = plan.graph_key() != 0 ? S : plan.sample_count();
  if (sample_on_device && sampled > 0) {
    HW_CUDA_CHECK(kernels::sample_tokens(logits_.data(), sampled, config_.vocab_size,
                                         staged<kernels::SampleParams>(o.sample_params),
                                         sampled_.data(), stream_));
    timer_.mark(Phase::kSample, stream_);
  }
}

}  // namespace headway::models::cuda
