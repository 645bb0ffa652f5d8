// The CUDA model plugin: a Hugging Face Llama-architecture model (the cpu model's checkpoint
// format, loaded by the same code) with BF16 weights and KV on one GPU, or split over several with
// tensor parallelism (NCCL all-reduce after the row-parallel projections). It samples on the
// device and returns only the sampled ids, or, with sampling = "host", returns float logits for the
// core's sampler (how conformance and tests compare it with the cpu model). See
// docs/cuda_model.md.
//
// Threading: as for every model, one engine thread calls an instance at a time. CUDA's current
// device is per host thread, so every entry point makes the shard's device current itself.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <headway/sdk/export.hpp>
#include <headway/sdk/host.hpp>
#include <headway/sdk/model.hpp>
#include <headway/sdk/options.hpp>
#include <headway/sdk/status.hpp>
#include <memory>
#include <string>
#include <vector>

#include "cuda_check.h"
#include "cuda_model_config.h"
#include "device_buffer.h"
#include "device_weights.h"
#include "gemv.h"
#include "launch.h"
#include "model_shard.h"
#include "rope.h"
#include "safetensors.h"
#include "step_graphs.h"
#include "step_plan.h"
#include "tensor_parallel_group.h"

namespace headway::models::cuda {
namespace {

using sdk::bool_option;
using sdk::double_option;
using sdk::enum_option;
using sdk::int_option;
using sdk::make_str;
using sdk::string_option;

// "config" and named_shapes(), in its order.
constexpr hw_str kShapes[] = {make_str("config"), make_str("llama-3.1-8b"),
                              make_str("llama-3.3-70b"), make_str("qwen2.5-7b"),
                              make_str("qwen3-8b")};
constexpr hw_str kSampling[] = {make_str("device"), make_str("host")};
// kernels::MmaTiling's names, the default first.
constexpr hw_str kAttentionTilings[] = {make_str("64x32"),       make_str("64x64"),
                                        make_str("128x32"),      make_str("128x64"),
                                        make_str("lean-64x32"),  make_str("lean-64x64"),
                                        make_str("lean-128x32"), make_str("lean-128x64")};

constexpr hw_option_spec kOptions[] = {
    string_option("path", "",
                  "Checkpoint directory (config.json + *.safetensors), relative to the deployment "
                  "file's directory. `headway model make-tiny --out DIR` writes one."),
    enum_option("shape", "config", kShapes,
                "Architecture: config = <path>/config.json, or a named shape (needs "
                "random_weights = true)."),
    bool_option("random_weights", false,
                "Build deterministic random BF16 weights on the GPU instead of reading "
                "safetensors (benchmarks without a download)."),
    int_option("seed", 0, 0, int64_t{1} << 62, "Seed of the random weights."),
    int_option("device", 0, 0, 1023, "First GPU; tensor-parallel ranks use the next ones."),
    int_option("tensor_parallel", 1, 1, 64,
               "GPUs the model is split over (heads % tp == 0; kv_heads % tp == 0, or "
               "tp % kv_heads == 0 when tp > kv_heads)."),
    int_option("max_model_len", 0, 0, int64_t{1} << 30,
               "Prompt + output tokens a request may reach; 0 = max_position_embeddings."),
    double_option("kv_cache_gb", 0.0, 0.0, 65536.0,
                  "GPU memory for the KV cache per GPU in GB (1e9 bytes); 0 = "
                  "gpu_memory_fraction of the GPU minus what is already used."),
    double_option("gpu_memory_fraction", 0.9, 0.05, 0.99,
                  "Share of each GPU's memory the model may use in total when kv_cache_gb = 0."),
    enum_option("sampling", "device", kSampling,
                "device: sample on the GPU and return ids; host: return float logits to the "
                "core's sampler."),
    int_option("max_batch_tokens", 8192, 1, int64_t{1} << 20,
               "Tokens per step the activation workspace is preallocated for (it grows if a "
               "step is larger)."),
    bool_option("deterministic", false,
                "Batch- and chunking-invariant arithmetic: no split-K in the GEMMs or the decode "
                "attention (what conformance's invariance checks expect); slower decode."),
    bool_option("phase_timing", false,
                "Diagnostic: time every phase of every step on the GPU with CUDA events (about "
                "13 per layer, which cost some host time) and log the time per step of each phase "
                "by step size when the model is unloaded."),
    bool_option(
        "decode_gemv", true,
        "Projections of steps with at most decode_gemv_max_rows rows (2 by default: decode "
        "batches of 1 or 2) through "
        "Headway's GEMV kernel instead of cuBLASLt, which it matched or beat there on an H200 "
        "(docs/cuda_model.md); ignored with deterministic."),
    int_option("decode_gemv_max_rows", kGemvRoutedRows, 1, kernels::kGemvMaxRows,
               "With decode_gemv: the most rows a projection may have to go through the GEMV. 2 "
               "was the fastest with its dot-product kernel on an H200; from 3 rows it now runs "
               "on tensor cores, not yet run on a GPU (docs/cuda_model.md)."),
    bool_option("fuse_swiglu", true,
                "With decode_gemv: where the GEMV takes a step's gate|up projection, it also "
                "computes SwiGLU, one kernel fewer per layer with the same results; false for "
                "comparison (docs/cuda_model.md)."),
    enum_option("attention_tiling", "128x64", kAttentionTilings,
                "Prefill blocks of the tensor-core attention (head dims 64 and 128): query rows "
                "x keys per tile. 128x64 was the fastest on an H200 at every prompt length "
                "measured (docs/cuda_model.md); the others stay for other GPUs and shapes. The "
                "lean-* tilings (base-2 softmax, masks on diagonal tiles only, three 64-row blocks "
                "an SM) are candidates not yet run on a GPU."),
    bool_option("split_prefill_attention", false,
                "Prefill chunks that give the attention few thread blocks (a short chunk deep in "
                "a long context) split it over key ranges, as long decodes do; off by default: "
                "written after the H200 runs and not yet run on a GPU (docs/cuda_model.md). "
                "Ignored with deterministic."),
    bool_option(
        "programmatic_dependent_launch", false,
        "Headway's kernels in a step (RMSNorm, GEMV, RoPE + KV write, decode attention and its "
        "reduce, SwiGLU) start while the kernel before them finishes and wait on the GPU for its "
        "results; the GEMV loads its first weights meanwhile (Hopper; results unchanged). Off by "
        "default: not yet run on a GPU (docs/cuda_model.md)."),
    int_option("cuda_graph_max_batch", -1, -1, 1024,
               "Decode steps (every slice one token) of up to this many tokens are padded to a "
               "batch size bucket and replayed as a captured CUDA graph, one per bucket and "
               "split-K level; 0 = off. -1 (default): the batch sizes where graphs were "
               "measured faster on an H200 (docs/cuda_model.md), on one GPU without "
               "phase_timing, else off. A value above 0 needs tensor_parallel = 1 and "
               "phase_timing = false."),
};

class CudaModel final : public sdk::Model {
 public:
  CudaModel(const sdk::Host& host, const sdk::Options& options, const std::string& config_dir)
      : host_(host),
        options_(parse_options(options, config_dir)),
        config_(resolve_architecture(options_)),
        tp_(plan_tensor_parallel(config_, options_.tensor_parallel)) {
    check_kernel_limits(config_);
    max_model_len_ = cpu::resolve_max_model_len(config_, options_.max_model_len, "cuda model");
    int count = 0;
    const cudaError_t err = cudaGetDeviceCount(&count);
    if (err != cudaSuccess || count == 0) {
      throw sdk::Error(HW_UNAVAILABLE,
                       std::string("cuda model: no CUDA device visible (cudaGetDeviceCount: ") +
                           (err != cudaSuccess ? cudaGetErrorString(err) : "0 devices") + ")");
    }
    if (options_.device + static_cast<int>(tp_.tp) > count) {
      throw sdk::Error(HW_INVALID_ARGUMENT,
                       "cuda model: device " + std::to_string(options_.device) +
                           " + tensor_parallel " + std::to_string(tp_.tp) + " needs GPUs up to " +
                           std::to_string(options_.device + tp_.tp - 1) + ", " +
                           std::to_string(count) + " are visible");
    }
    const cpu::Rope rope(config_);
    const std::vector<double>& inv_freq = rope.inverse_frequencies();

    // Before the weights load: an overlapped launch of kernels that do not wait would race.
    if (options_.programmatic_dependent_launch) {
      for (uint32_t r = 0; r < tp_.tp; ++r) {
        const std::string problem =
            kernels::overlapped_launch_problem(options_.device + static_cast<int>(r));
        if (!problem.empty()) {
          throw sdk::Error(HW_INVALID_ARGUMENT,
                           "cuda model: programmatic_dependent_launch = true: " + problem);
        }
      }
    }

    std::unique_ptr<cpu::Checkpoint> checkpoint;
    if (!options_.random_weights) checkpoint = std::make_unique<cpu::Checkpoint>(options_.path);
    for (uint32_t r = 0; r < tp_.tp; ++r) {
      const int device = options_.device + static_cast<int>(r);
      HW_CUDA_CHECK(cudaSetDevice(device));
      if (r == 0) {
        int sms = 0;
        HW_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
        decode_blocks_wanted_ = kDecodeBlocksPerSm * static_cast<uint32_t>(sms);
      }
      auto weights = checkpoint ? std::make_unique<DeviceWeights>(*checkpoint, config_, tp_, r)
                                : std::make_unique<DeviceWeights>(config_, tp_, r, options_.seed);
      shards_.push_back(std::make_unique<ModelShard>(device, config_, tp_, std::move(weights),
                                                     inv_freq.data(), options_));
    }
    if (tp_.tp > 1) {
      tp_group_ = std::make_unique<TensorParallelGroup>(shards_);
      // Before the KV cache is sized: NCCL allocates an algorithm's buffers at its first use.
      tp_group_->warm_up(shards_, options_.max_batch_tokens, config_.hidden_size);
    }

    // A graph step makes every row a head row (logits for the whole vocabulary each) and may split
    // every row's keys kMaxSplits ways: size those buffers for the largest graph step now, before
    // the KV cache takes what is left, not at the first such step (525 MB of logits at 1,024 rows
    // of Llama-3's vocabulary, which a tight gpu_memory_fraction would no longer have).
    if (options_.cuda_graph_max_batch > 0) {
      const uint32_t rows = options_.cuda_graph_max_batch;
      for (auto& s : shards_) {
        s->reserve(std::max(options_.max_batch_tokens, rows), rows,
                   rows * StepPlan::kMaxSplits * tp_.heads_per_rank);
      }
    }

    // Split prefill tiles write up to about 2 x decode_blocks_wanted x tile rows records in a step
    // (fill factor x tiles x tile rows, with fewer tiles than the blocks wanted): reserve them
    // now too, before the KV cache takes the rest (35 MB for Llama-3.1-8B on an H200).
    if (options_.split_prefill_attention && !options_.deterministic) {
      const uint32_t tile_rows = kernels::attention_prefill_tile_rows(
          config_.head_dim, options_.deterministic, options_.attention_tiling);
      for (auto& s : shards_) s->reserve(0, 0, 2 * decode_blocks_wanted_ * tile_rows);
    }

    // KV capacity: the smallest any GPU can hold (they all hold every token).
    uint64_t kv_bytes = UINT64_MAX;
    for (const auto& s : shards_) {
      uint64_t b = 0;
      if (options_.kv_cache_gb > 0) {
        b = static_cast<uint64_t>(options_.kv_cache_gb * 1e9);
      } else {
        const double budget = options_.gpu_memory_fraction * static_cast<double>(s->total_bytes());
        const double used = static_cast<double>(s->total_bytes() - s->free_bytes());
        b = budget > used ? static_cast<uint64_t>(budget - used) : 0;
      }
      kv_bytes = std::min(kv_bytes, b);
    }
    const uint64_t per_token = shards_[0]->kv_layout().bytes_per_token();
    kv_capacity_tokens_ = kv_bytes / per_token;

    char line[640];
    std::snprintf(line, sizeof(line),
                  "cuda model: %s%s: %u layers, hidden %u, %u/%u heads, vocab %u, BF16 weights "
                  "%.2f GB per GPU, tensor_parallel %u from GPU %d, KV capacity %llu tokens, "
                  "max_model_len %u, sampling on the %s",
                  options_.random_weights ? "random weights, shape " : "",
                  options_.random_weights ? options_.shape.c_str() : options_.path.c_str(),
                  config_.num_hidden_layers, config_.hidden_size, config_.num_attention_heads,
                  config_.num_key_value_heads, config_.vocab_size, shards_[0]->weight_bytes() / 1e9,
                  tp_.tp, options_.device, static_cast<unsigned long long>(kv_capacity_tokens_),
                  max_model_len_, options_.sample_on_device ? "device" : "host");
    host_.log(HW_LOG_INFO, line);
  }

  ~CudaModel() override {
    if (options_.cuda_graph_max_batch > 0) {
      // Counted once, here: per step they would cost a host-services call (a lock, a string).
      host_.counter_add("cuda_graph_replays", static_cast<double>(graphs_.replays()));
      host_.counter_add("cuda_graph_direct_steps", static_cast<double>(graphs_.direct_steps()));
      host_.counter_add("cuda_graph_captures", static_cast<double>(graphs_.captures()));
      host_.counter_add("cuda_graph_capture_failures",
                        static_cast<double>(graphs_.capture_failures()));
      host_.log(HW_LOG_INFO, "cuda model: CUDA graphs: " + std::to_string(graphs_.replays()) +
                                 " steps replayed, " + std::to_string(graphs_.direct_steps()) +
                                 " graph-shaped steps run launch by launch (a shape's first, or "
                                 "one that could not be captured), " +
                                 std::to_string(graphs_.captures()) + " captures");
    }
    for (size_t r = 0; r < shards_.size(); ++r) {
      const std::string summary = shards_[r]->timing_summary();
      if (!summary.empty()) {
        host_.log(HW_LOG_INFO, "cuda model: GPU " + std::to_string(shards_[r]->device()) +
                                   " phase times (ms per step), " + summary);
      }
    }
    // The graphs belong to the first GPU's context (graphs are never used with more than one).
    if (!shards_.empty() && cudaSetDevice(shards_[0]->device()) == cudaSuccess) graphs_.clear();
  }

  hw_model_info info() const override {
    hw_model_info info = cpu::model_info_of(config_, max_model_len_);
    // The model's KV per token: a kv head replicated on several GPUs counts once (abi.h).
    info.kv_bytes_per_token = tp_.model_kv_bytes(shards_[0]->kv_layout().bytes_per_token());
    info.kv_capacity_tokens = kv_capacity_tokens_;
    info.needs_token_ids = 1;
    info.reports_duration = 0;
    info.returns_logits = options_.sample_on_device ? 0 : 1;
    // With device sampling, the rows of the requests the host samples itself (logprobs, penalties,
    // guided output, ...) come back too; every other request's token is sampled here.
    info.returns_logits_on_request = options_.sample_on_device ? 1 : 0;
    info.returns_prompt_logits = 1;
    return info;
  }

  void init_kv(uint32_t block_count, uint32_t block_size) override {
    for (auto& s : shards_) s->init_kv(block_count, block_size);
  }

  hw_memory_desc kv_memory() const override {
    const ModelShard& s = *shards_[0];
    // Under tensor parallelism a block lives on several GPUs: no single descriptor covers it.
    if (tp_.tp > 1 || s.kv_blocks() == 0) return sdk::Model::kv_memory();
    const uint64_t block_bytes = s.kv_layout().block_elems() * 2;
    return hw_memory_desc{s.kv_base(),      block_bytes * s.kv_blocks(),
                          HW_MEMORY_DEVICE, s.device(),
                          block_bytes,      block_bytes};
  }

  void forward(const hw_model_batch& batch, hw_model_output& output) override {
    ModelShard& lead = *shards_[0];
    if (lead.kv_blocks() == 0) {
      throw sdk::Error(HW_FAILED_PRECONDITION, "cuda model: forward() before init_kv()");
    }
    // forward() runs on the engine's thread, not the one that loaded the model: the lead device is
    // made current before plan_.build(), whose pinned staging (cudaMallocHost) would otherwise
    // create a context on device 0 (hundreds of MB there, or a failure when device 0 is full or
    // held in exclusive mode by another process).
    HW_CUDA_CHECK(cudaSetDevice(lead.device()));
    StepLimits limits;
    limits.vocab = config_.vocab_size;
    limits.max_model_len = max_model_len_;
    limits.kv_blocks = lead.kv_blocks();
    limits.group = tp_.heads_per_rank / tp_.kv_heads_per_rank;
    limits.sample_on_device = options_.sample_on_device;
    limits.split_decode = !options_.deterministic;
    limits.prefill_tile_rows = kernels::attention_prefill_tile_rows(
        config_.head_dim, options_.deterministic, options_.attention_tiling);
    limits.graph_max_batch = options_.cuda_graph_max_batch;  // 0 under tensor parallelism
    limits.decode_blocks_wanted = decode_blocks_wanted_;
    limits.prefill_split_min_keys = options_.split_prefill_attention ? kPrefillSplitMinKeys : 0;
    limits.prefill_longest_first = kernels::attention_prefill_longest_first(
        config_.head_dim, options_.deterministic, options_.attention_tiling);
    plan_.build(batch, lead.kv_layout(), limits);
    const uint32_t rows = plan_.sample_count();
    const uint32_t logits_rows = plan_.logits_rows();
    if (options_.sample_on_device && rows > 0 && output.sampled == nullptr) {
      throw sdk::Error(HW_INVALID_ARGUMENT,
                       "cuda model: output.sampled is NULL but the batch has sampling slices");
    }
    if (logits_rows > 0) {
      if (output.logits == nullptr || output.logits_rows < logits_rows) {
        throw sdk::Error(HW_INVALID_ARGUMENT,
                         "cuda model: the batch asks for " + std::to_string(logits_rows) +
                             " logits rows but output.logits holds " +
                             std::to_string(output.logits == nullptr ? 0 : output.logits_rows));
      }
      if (output.vocab != 0 && output.vocab != config_.vocab_size) {
        throw sdk::Error(HW_INVALID_ARGUMENT,
                         "cuda model: output.vocab " + std::to_string(output.vocab) +
                             " differs from the model's " + std::to_string(config_.vocab_size));
      }
    }
    // Once upload() queued its copies, the streams read plan_'s pinned staging buffer and write the
    // shards' workspaces: if anything below throws, drain them before the next forward() repacks.
    try {
      for (auto& s : shards_) {
        if (s->reserve(plan_.tokens(), plan_.head_rows(), plan_.partial_records())) {
          host_.log(HW_LOG_INFO, "cuda model: activation workspace grown for a step of " +
                                     std::to_string(plan_.tokens()) + " tokens, " +
                                     std::to_string(rows) + " sampled rows");
        }
        s->begin_step_timing(plan_.tokens());
        s->upload(plan_);
      }
      if (plan_.graph_key() != 0) {
        graphs_.run(plan_.graph_key(), lead.buffers_generation(), lead.stream(),
                    [this] { enqueue_step(); });
        log_new_capture_failure();
      } else {
        enqueue_step();
      }

      // The step's only synchronisation: the sampled ids and the logits rows the host asked for
      // come back to the host (one copy per run of adjacent rows; with host sampling and no
      // prompt rows, one in all).
      HW_CUDA_CHECK(cudaSetDevice(lead.device()));
      if (rows > 0 && options_.sample_on_device) {
        ids_.reserve(rows);
        HW_CUDA_CHECK(cudaMemcpyAsync(ids_.data(), lead.sampled(), rows * sizeof(int32_t),
                                      cudaMemcpyDeviceToHost, lead.stream()));
      }
      const size_t row_bytes = size_t{config_.vocab_size} * sizeof(float);
      for (const LogitsCopy& copy : plan_.logits_copies()) {
        HW_CUDA_CHECK(cudaMemcpyAsync(output.logits + size_t{copy.out_row} * config_.vocab_size,
                                      lead.logits() + size_t{copy.head_row} * config_.vocab_size,
                                      copy.rows * row_bytes, cudaMemcpyDeviceToHost,
                                      lead.stream()));
      }
      if (tp_group_) {
        tp_group_->wait(shards_);  // never hangs on a GPU that failed (tensor_parallel_group.h)
      } else {
        HW_CUDA_CHECK(cudaStreamSynchronize(lead.stream()));
      }
      for (auto& s : shards_) s->end_step_timing(true);
    } catch (...) {
      // Under tensor parallelism a failed GPU is often first reported by a launch or a copy:
      // the other ranks' all-reduces then wait for it, and only the group's wait (which aborts
      // the communicators at the error) lets their streams drain.
      if (tp_group_ && tp_group_->broken().empty()) {
        try {
          tp_group_->wait(shards_);
        } catch (...) {  // the step's own error is the one to report
        }
      }
      drain_streams();
      for (auto& s : shards_) s->end_step_timing(false);
      throw;
    }
    if (options_.sample_on_device) {
      const std::vector<uint32_t>& slices = plan_.sample_slices();
      for (uint32_t i = 0; i < rows; ++i) output.sampled[slices[i]] = ids_.data()[i];
    }
    if (logits_rows > 0 || !options_.sample_on_device) {
      output.logits_rows = logits_rows;
      output.vocab = config_.vocab_size;
    }
  }

 private:
  // The step's kernels on every shard's stream after upload(), up to the head (and sampling).
  void enqueue_step() {
    for (auto& s : shards_) s->embed(plan_);
    for (uint32_t l = 0; l < config_.num_hidden_layers; ++l) {
      for (auto& s : shards_) s->attention(plan_, l);
      all_reduce();
      for (auto& s : shards_) s->mlp(plan_, l);
      all_reduce();
    }
    shards_[0]->head(plan_, options_.sample_on_device);
  }

  // Each failed capture (the step then ran launch by launch); rare: a shape is tried three times.
  void log_new_capture_failure() {
    if (graphs_.capture_failures() == logged_capture_failures_) return;
    logged_capture_failures_ = graphs_.capture_failures();
    host_.log(HW_LOG_WARN, "cuda model: a decode step of " + std::to_string(plan_.tokens()) +
                               " rows (split level " + std::to_string(plan_.graph_split_level()) +
                               ") could not be captured as a CUDA graph and ran launch by "
                               "launch: " +
                               graphs_.last_capture_failure());
  }

  // Waits for whatever the shards' streams still run, ignoring errors (a failed step's clean-up).
  void drain_streams() noexcept {
    for (auto& s : shards_) {
      if (cudaSetDevice(s->device()) == cudaSuccess) (void)cudaStreamSynchronize(s->stream());
    }
  }

  // Sums every shard's partial() over the ranks (row-parallel projections). No-op on one GPU.
  void all_reduce() {
    if (!tp_group_) return;
    tp_group_->all_reduce(shards_, plan_.tokens(), config_.hidden_size);
    for (auto& s : shards_) s->mark(Phase::kAllReduce);
  }

  sdk::Host host_;
  CudaModelOptions options_;
  LlamaConfig config_;
  TensorParallelLayout tp_;
  uint32_t max_model_len_ = 0;
  uint64_t kv_capacity_tokens_ = 0;
  std::vector<std::unique_ptr<ModelShard>> shards_;
  std::unique_ptr<TensorParallelGroup> tp_group_;  // tp > 1; declared after the shards: goes first
  StepGraphs graphs_;  // declared after the shards: destroyed before them
  uint64_t logged_capture_failures_ = 0;
  StepPlan plan_;
  uint32_t decode_blocks_wanted_ = 0;  // StepLimits::decode_blocks_wanted, from the lead GPU
  PinnedBuffer<int32_t> ids_;
};

}  // namespace
}  // namespace headway::models::cuda

HEADWAY_EXPORT_MODEL(headway::models::cuda::CudaModel, "org.headway.model.cuda", "cuda", "0.1.0",
                     "CUDA model: Hugging Face Llama checkpoints in BF16 on NVIDIA GPUs (sm_90a), "
                     "paged KV, cuBLASLt, device sampling, tensor parallelism over NCCL",
                     headway::models::cuda::kOptions)
