// The reference CPU model: a Hugging Face Llama-architecture checkpoint run on the host's cores.
// Every other model plugin is checked against it (conformance), and it is what the default
// deployment serves. See docs/cpu_model.md for the design, its options and measured performance.
//
// Threading: as for every model, one engine thread calls an instance at a time; forward() fans out
// over `threads` OpenMP threads (oneDNN's GEMMs share the same pool).
#include <omp.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <headway/sdk/export.hpp>
#include <headway/sdk/host.hpp>
#include <headway/sdk/model.hpp>
#include <headway/sdk/options.hpp>
#include <headway/sdk/status.hpp>
#include <memory>
#include <string>
#include <thread>

#include "llama_config.h"
#include "llama_forward.h"
#include "safetensors.h"
#include "weights.h"

namespace headway::models::cpu {
namespace {

using sdk::bool_option;
using sdk::double_option;
using sdk::enum_option;
using sdk::int_option;
using sdk::make_str;
using sdk::string_option;

constexpr hw_str kDtypes[] = {make_str("auto"), make_str("f32"), make_str("f16"), make_str("bf16")};

constexpr hw_option_spec kOptions[] = {
    string_option("path", "",
                  "Checkpoint directory (config.json + *.safetensors), relative to the deployment "
                  "file's directory. `headway model make-tiny --out DIR` writes one."),
    int_option("threads", 0, 0, 1024,
               "Worker threads for the forward pass; 0 = all cores. Fewer when OpenMP grants "
               "fewer (OMP_THREAD_LIMIT), with a warning."),
    enum_option("dtype", "auto", kDtypes,
                "Weight dtype to compute with (activations and KV are always f32): auto = as "
                "stored; f16/bf16 halve the weight bytes that decode reads."),
    bool_option("mmap", true,
                "Use weights in place from the memory-mapped checkpoint when their dtype allows. "
                "false copies them into transparent huge pages at load, as llama.cpp's --no-mmap "
                "does: single-stream decode reads them faster (fewer TLB misses), for the RAM of "
                "a private copy."),
    int_option("max_model_len", 0, 0, int64_t{1} << 30,
               "Prompt + output tokens a request may reach; 0 = max_position_embeddings."),
    double_option("kv_cache_gb", 1.0, 0.001, 65536.0,
                  "Host memory for the KV cache in GB (1e9 bytes); sets kv_capacity_tokens."),
};

DType resolve_dtype(const std::string& name, const Checkpoint& checkpoint) {
  if (name == "f32") return DType::kF32;
  if (name == "f16") return DType::kF16;
  if (name == "bf16") return DType::kBF16;
  return checkpoint.storage_dtype();
}

int resolve_threads(int64_t option) {
  if (option > 0) return static_cast<int>(option);
  const unsigned cores = std::thread::hardware_concurrency();
  return cores == 0 ? 1 : static_cast<int>(cores);
}

// The size of the team OpenMP actually gives the calling thread when it asks for `wanted`.
// OMP_THREAD_LIMIT, OMP_MAX_ACTIVE_LEVELS=0 or a caller already inside a parallel region all give
// fewer threads, without an error.
int granted_team_size(int wanted) {
  int granted = 1;
#pragma omp parallel num_threads(wanted)
  {
#pragma omp single
    granted = omp_get_num_threads();
  }
  return granted;
}

std::filesystem::path resolve_path(const std::string& path, const std::string& config_dir) {
  if (path.empty()) {
    throw sdk::Error(HW_INVALID_ARGUMENT,
                     "cpu model: option 'path' (the checkpoint directory) is required");
  }
  std::filesystem::path p(path);
  if (p.is_relative() && !config_dir.empty()) p = std::filesystem::path(config_dir) / p;
  return p.lexically_normal();
}

class CpuModel final : public sdk::Model {
 public:
  CpuModel(const sdk::Host& host, const sdk::Options& options, const std::string& config_dir)
      : host_(host),
        dir_(resolve_path(options.get_string("path"), config_dir)),
        config_(load_llama_config(dir_)),
        checkpoint_(dir_),
        weights_(checkpoint_, config_, resolve_dtype(options.get_string("dtype"), checkpoint_),
                 options.get_bool("mmap")),
        threads_(resolve_threads(options.get_int("threads"))),
        max_model_len_(
            resolve_max_model_len(config_, options.get_int("max_model_len"), "cpu model")),
        kv_cache_bytes_(options.get_double("kv_cache_gb") * 1e9),
        forward_(config_, weights_, threads_, max_model_len_) {
    char line[512];
    std::snprintf(line, sizeof(line),
                  "cpu model: %s: %u layers, hidden %u, %u/%u heads, vocab %u, %s weights "
                  "(%.1f MB, %.1f MB copied or converted at load), %d threads, max_model_len %u",
                  dir_.string().c_str(), config_.num_hidden_layers, config_.hidden_size,
                  config_.num_attention_heads, config_.num_key_value_heads, config_.vocab_size,
                  dtype_name(weights_.compute_dtype()), weights_.bytes() / 1e6,
                  weights_.converted_bytes() / 1e6, threads_, max_model_len_);
    host_.log(HW_LOG_INFO, line);
  }

  hw_model_info info() const override {
    hw_model_info info = model_info_of(config_, max_model_len_);
    info.kv_bytes_per_token = forward_.kv().bytes_per_token();
    info.kv_capacity_tokens =
        static_cast<uint64_t>(kv_cache_bytes_ / static_cast<double>(info.kv_bytes_per_token));
    info.needs_token_ids = 1;
    info.reports_duration = 0;
    info.returns_logits = 1;
    info.returns_prompt_logits = 1;
    return info;
  }

  void init_kv(uint32_t block_count, uint32_t block_size) override {
    forward_.kv().init(block_count, block_size);
  }

  hw_memory_desc kv_memory() const override {
    // The descriptor hands out a writable pointer: transports write received blocks into it.
    auto& kv = const_cast<LlamaForward&>(forward_).kv();
    if (!kv.initialised()) return sdk::Model::kv_memory();
    return hw_memory_desc{kv.base(), kv.total_bytes(), HW_MEMORY_HOST,
                          -1,        kv.block_bytes(), kv.block_bytes()};
  }

  void forward(const hw_model_batch& batch, hw_model_output& output) override {
    const uint32_t rows = LlamaForward::sampling_rows(batch);
    if (output.vocab != 0 && output.vocab != config_.vocab_size) {
      throw sdk::Error(HW_INVALID_ARGUMENT,
                       "cpu model: output.vocab " + std::to_string(output.vocab) +
                           " differs from the model's " + std::to_string(config_.vocab_size));
    }
    // oneDNN's sgemm splits each GEMM for omp_get_max_threads() threads and computes only the
    // shares of the threads its team really has: asking for more than OpenMP grants gives wrong
    // logits, silently. So the calling thread (the engine's, not the one that created the model)
    // asks for exactly the team it is granted. Dynamic teams (OMP_DYNAMIC) could shrink any one
    // region, so they are off; the granted size is probed once per calling thread.
    if (std::this_thread::get_id() != probed_thread_) {
      omp_set_dynamic(0);
      team_ = granted_team_size(threads_);
      probed_thread_ = std::this_thread::get_id();
      if (team_ < threads_) {
        host_.log(HW_LOG_WARN, "cpu model: " + std::to_string(threads_) +
                                   " threads configured, but OpenMP grants this thread " +
                                   std::to_string(team_) +
                                   " (OMP_THREAD_LIMIT or "
                                   "OMP_MAX_ACTIVE_LEVELS?); the forward pass uses " +
                                   std::to_string(team_));
      }
    }
    omp_set_num_threads(team_);
    forward_.run(batch, output.logits);
    output.logits_rows = rows;
    output.vocab = config_.vocab_size;
  }

 private:
  sdk::Host host_;
  std::filesystem::path dir_;
  LlamaConfig config_;
  Checkpoint checkpoint_;
  LlamaWeights weights_;
  int threads_;
  // The team OpenMP grants the thread that last called forward(), and that thread.
  int team_ = 1;
  std::thread::id probed_thread_;
  uint32_t max_model_len_;
  double kv_cache_bytes_;
  LlamaForward forward_;
};

}  // namespace
}  // namespace headway::models::cpu

HEADWAY_EXPORT_MODEL(headway::models::cpu::CpuModel, "org.headway.model.cpu", "cpu", "0.1.0",
                     "Reference CPU model: Hugging Face Llama checkpoints (F32/F16/BF16) over "
                     "paged KV, oneDNN GEMMs",
                     headway::models::cpu::kOptions)
