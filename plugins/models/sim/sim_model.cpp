// The simulated model: a Headway model plugin with no weights and no KV memory. forward() returns
// the step's duration from the roofline cost model (cost_model.h), or from a linear model fitted to
// a real machine when `cost_file` is set (fitted_cost.h), so that the engine runs on a virtual
// clock; and deterministic pseudo-random token ids so that outputs are reproducible.
//
// Threading: as for every model, one engine thread calls an instance at a time.
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <headway/sdk/export.hpp>
#include <headway/sdk/host.hpp>
#include <headway/sdk/model.hpp>
#include <headway/sdk/options.hpp>
#include <headway/sdk/status.hpp>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "cost_model.h"
#include "fitted_cost.h"
#include "presets.h"

namespace headway::models::sim {
namespace {

using sdk::double_option;
using sdk::enum_option;
using sdk::int_option;
using sdk::make_str;
using sdk::string_option;

constexpr hw_str kGpuNames[] = {make_str("h100"), make_str("h200"), make_str("custom")};
constexpr hw_str kModelNames[] = {make_str("llama-3.1-8b"), make_str("llama-3.3-70b"),
                                  make_str("llama-2-70b"),  make_str("qwen2.5-7b"),
                                  make_str("qwen3-8b"),     make_str("custom")};
constexpr hw_str kDtypeNames[] = {make_str("bf16"), make_str("fp8")};
constexpr hw_str kKvDtypeNames[] = {make_str("auto"), make_str("bf16"), make_str("fp8")};
constexpr CostConfig kDefaults{};
constexpr int64_t kMaxShape = int64_t{1} << 24;
constexpr uint32_t kMaxTensorParallel = 64;

// Overrides are doubles or ints where 0 means "take it from the preset"; with gpu or model set to
// "custom" there is no preset and the corresponding keys are required.
constexpr hw_option_spec kOptions[] = {
    string_option("cost_file", "",
                  "Cost file written by `headway profile` (path relative to the deployment "
                  "file's directory): step times from its fitted coefficients, shape, "
                  "max_model_len and KV capacity from the file. Every other option except seed is "
                  "then replaced, and refused when set away from its default. \"\" = the "
                  "roofline model of the gpu and model presets."),
    enum_option("gpu", "h100", kGpuNames,
                "GPU preset: h100 / h200 (SXM), or custom (set peak_tflops, hbm_tb_per_s, hbm_gb, "
                "and link_gb_per_s when tensor_parallel > 1)."),
    enum_option("model", "llama-3.1-8b", kModelNames,
                "Model preset, or custom (set layers, hidden, heads, kv_heads, head_dim, "
                "intermediate, vocab and max_model_len)."),
    int_option("tensor_parallel", 1, 1, kMaxTensorParallel,
               "GPUs the model is split over (Megatron-style); at most 8 (one node) with the gpu "
               "presets, whose link is NVLink."),
    enum_option("dtype", "bf16", kDtypeNames,
                "Weights of the linear layers: bf16, or fp8 (1 byte, run on fp8 tensor cores at "
                "peak_fp8_tflops * fp8_gemm_efficiency). Embedding and LM head stay bf16."),
    enum_option("kv_dtype", "auto", kKvDtypeNames,
                "KV cache elements: bf16, fp8, or auto (= dtype)."),
    double_option("peak_tflops", 0, 0, 1e5, "Dense tensor-core TFLOP/s per GPU; 0 = preset."),
    double_option("peak_fp8_tflops", 0, 0, 1e5,
                  "Dense fp8 tensor-core TFLOP/s per GPU; 0 = preset (custom gpu: required with "
                  "dtype = \"fp8\")."),
    double_option("hbm_tb_per_s", 0, 0, 1e3, "HBM bandwidth per GPU in TB/s; 0 = preset."),
    // At most 2,000: the largest GPUs hold 288 GB, and a card of 2 GB or more given in MB by
    // mistake lands past it (80000 was taken, and the error that followed named kv_blocks).
    double_option("hbm_gb", 0, 0, 2000,
                  "HBM capacity per GPU in GB (1e9 bytes), at most 2000; 0 = preset."),
    double_option("link_gb_per_s", 0, 0, 1e5,
                  "GPU-to-GPU bandwidth per GPU in GB/s, both directions together (NVLink "
                  "datasheet figure); 0 = preset."),
    double_option("allreduce_latency_us", kDefaults.allreduce_latency_s * 1e6, 0, 1e5,
                  "Fixed latency of one all-reduce in microseconds (2 per layer per step)."),
    double_option("gemm_efficiency", kDefaults.gemm_efficiency, 0.01, 1,
                  "Fraction of peak FLOP/s reached by the linear layers."),
    double_option("fp8_gemm_efficiency", kDefaults.fp8_gemm_efficiency, 0.01, 1,
                  "Fraction of peak fp8 FLOP/s reached by the linear layers with dtype = fp8."),
    double_option("attention_efficiency", kDefaults.attention_efficiency, 0.01, 1,
                  "Fraction of peak FLOP/s reached by attention kernels."),
    double_option("hbm_efficiency", kDefaults.hbm_efficiency, 0.01, 1,
                  "Fraction of HBM bandwidth reached by weight and KV reads."),
    double_option("step_overhead_ms", kDefaults.step_overhead_s * 1e3, 0, 1e4,
                  "Fixed cost of every step in milliseconds: kernel launches, scheduling, "
                  "sampling and the host-device round trip."),
    double_option("gpu_memory_utilization", kDefaults.gpu_memory_utilization, 0.05, 1,
                  "Share of HBM the engine may use for weights, activations and KV cache."),
    double_option("activation_reserve_gb", kDefaults.activation_reserve_bytes / 1e9, 0, 1e4,
                  "Per-GPU memory in GB kept for activations and workspaces, not for KV."),
    int_option("layers", 0, 0, kMaxShape, "Transformer layers; 0 = preset."),
    int_option("hidden", 0, 0, kMaxShape, "Hidden size; 0 = preset."),
    int_option("heads", 0, 0, kMaxShape, "Query heads; 0 = preset."),
    int_option("kv_heads", 0, 0, kMaxShape, "Key/value heads; 0 = preset."),
    int_option("head_dim", 0, 0, kMaxShape, "Head dimension; 0 = preset."),
    int_option("intermediate", 0, 0, kMaxShape, "MLP intermediate size; 0 = preset."),
    int_option("vocab", 0, 0, kMaxShape, "Vocabulary size; 0 = preset."),
    int_option("max_model_len", 0, 0, int64_t{1} << 31,
               "Prompt + output tokens a request may reach: at most the preset's (its "
               "max_position_embeddings); 0 = the preset's."),
    int_option("seed", 0, 0, int64_t{1} << 62, "Mixed into the generated token ids."),
};

// splitmix64 finaliser: a cheap bijective mixer with good avalanche, enough for token ids that only
// have to look random and be reproducible.
constexpr uint64_t mix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

// The preset value unless the operator set a non-zero override.
uint32_t shape_value(const sdk::Options& options, const char* key, uint32_t preset, bool custom,
                     const char* what) {
  const int64_t value = options.get_int(key);
  if (value > 0) return static_cast<uint32_t>(value);
  if (custom) {
    throw std::invalid_argument(std::string(what) + " = \"custom\" requires " + key + " (> 0)");
  }
  return preset;
}

// `floor`: the smallest override that still describes hardware. A value like 1e-300 would pass
// "> 0" yet make every step last longer than the universe, in reports with 300-digit figures.
double gpu_value(const sdk::Options& options, const char* key, double scale, double floor,
                 double preset, bool custom, bool required) {
  const double value = options.get_double(key);
  if (value > 0 && value < floor) {
    char message[192];
    std::snprintf(message, sizeof message,
                  "%s = %g is below %g, too small for any GPU (0 means the gpu preset's value)",
                  key, value, floor);
    throw std::invalid_argument(message);
  }
  if (value > 0) return value * scale;
  if (custom && required) {
    throw std::invalid_argument(std::string("gpu = \"custom\" requires ") + key + " (> 0)");
  }
  return preset;
}

CostConfig resolve_config(const sdk::Options& options) {
  const std::string gpu_name = options.get_string("gpu");
  const std::string model_name = options.get_string("model");
  const bool custom_gpu = gpu_name == "custom";
  const bool custom_model = model_name == "custom";

  CostConfig config;
  config.tensor_parallel = static_cast<uint32_t>(options.get_int("tensor_parallel"));
  const std::string dtype = options.get_string("dtype");
  const std::string kv_dtype = options.get_string("kv_dtype");
  config.weight_bytes = dtype == "fp8" ? 1 : 2;
  config.kv_bytes = kv_dtype == "auto" ? config.weight_bytes : (kv_dtype == "fp8" ? 1 : 2);

  GpuSpec preset_gpu;
  if (!custom_gpu) {
    const GpuPreset* preset = find_gpu_preset(gpu_name);
    if (preset == nullptr) throw std::invalid_argument("unknown gpu '" + gpu_name + "'");
    preset_gpu = to_gpu_spec(*preset);
  }
  if (!custom_gpu && config.tensor_parallel > kGpusPerNode) {
    throw std::invalid_argument("tensor_parallel = " + std::to_string(config.tensor_parallel) +
                                " spans more than one " + std::to_string(kGpusPerNode) +
                                "-GPU node: the preset's link is NVLink inside a node, and "
                                "the network between nodes is not modelled; use at most " +
                                std::to_string(kGpusPerNode) +
                                " (and more replicas), or gpu = \"custom\" with the "
                                "network's link_gb_per_s and allreduce_latency_us");
  }
  const bool needs_link = config.tensor_parallel > 1;
  // Floors: 1 GFLOP/s, 100 MB/s of HBM, 1 MB of HBM, 1 MB/s of link.
  config.gpu.peak_flops =
      gpu_value(options, "peak_tflops", 1e12, 1e-3, preset_gpu.peak_flops, custom_gpu, true);
  config.gpu.peak_fp8_flops =
      gpu_value(options, "peak_fp8_tflops", 1e12, 1e-3, preset_gpu.peak_fp8_flops, custom_gpu,
                config.weight_bytes == 1);
  config.gpu.hbm_bytes_per_s =
      gpu_value(options, "hbm_tb_per_s", 1e12, 1e-4, preset_gpu.hbm_bytes_per_s, custom_gpu, true);
  config.gpu.hbm_bytes =
      gpu_value(options, "hbm_gb", 1e9, 1e-3, preset_gpu.hbm_bytes, custom_gpu, true);
  config.gpu.link_bytes_per_s = gpu_value(options, "link_gb_per_s", 1e9, 1e-3,
                                          preset_gpu.link_bytes_per_s, custom_gpu, needs_link);

  ModelShape preset_shape;
  if (!custom_model) {
    const ModelPreset* preset = find_model_preset(model_name);
    if (preset == nullptr) throw std::invalid_argument("unknown model '" + model_name + "'");
    preset_shape = preset->shape;
  }
  const auto shape = [&](const char* key, uint32_t preset) {
    return shape_value(options, key, preset, custom_model, "model");
  };
  config.model.layers = shape("layers", preset_shape.layers);
  config.model.hidden = shape("hidden", preset_shape.hidden);
  config.model.heads = shape("heads", preset_shape.heads);
  config.model.kv_heads = shape("kv_heads", preset_shape.kv_heads);
  config.model.head_dim = shape("head_dim", preset_shape.head_dim);
  config.model.intermediate = shape("intermediate", preset_shape.intermediate);
  config.model.vocab = shape("vocab", preset_shape.vocab);
  config.model.max_model_len = shape("max_model_len", preset_shape.max_model_len);
  // A preset's positions end where its checkpoint's do (max_position_embeddings): past them a real
  // server refuses to load (vLLM: a max_model_len above the derived maximum), so the simulation of
  // such a request would answer for a deployment that cannot exist.
  if (!custom_model && config.model.max_model_len > preset_shape.max_model_len) {
    throw std::invalid_argument(
        "max_model_len = " + std::to_string(config.model.max_model_len) + " exceeds the " +
        model_name + " preset's " + std::to_string(preset_shape.max_model_len) +
        " positions (its max_position_embeddings): set at most that (0 = all of it), or "
        "model = \"custom\" with the shape of a longer-context model");
  }
  // Here rather than in the cost model, which does not know the node: the legal degrees it lists
  // stop where the gpu presets do.
  if (const std::string problem = tensor_parallel_problem(config.model, config.tensor_parallel);
      !problem.empty()) {
    const uint32_t most = custom_gpu ? kMaxTensorParallel : kGpusPerNode;
    std::string legal;
    for (uint32_t tp = 1; tp <= most; ++tp) {
      if (tensor_parallel_problem(config.model, tp).empty()) {
        legal += (legal.empty() ? "" : ", ") + std::to_string(tp);
      }
    }
    throw std::invalid_argument("tensor_parallel = " + std::to_string(config.tensor_parallel) +
                                " cannot split the model: " + problem +
                                "; the degrees that split it (up to " + std::to_string(most) +
                                "): " + legal);
  }

  config.allreduce_latency_s = options.get_double("allreduce_latency_us") * 1e-6;
  config.gemm_efficiency = options.get_double("gemm_efficiency");
  config.fp8_gemm_efficiency = options.get_double("fp8_gemm_efficiency");
  config.attention_efficiency = options.get_double("attention_efficiency");
  config.hbm_efficiency = options.get_double("hbm_efficiency");
  config.step_overhead_s = options.get_double("step_overhead_ms") * 1e-3;
  config.gpu_memory_utilization = options.get_double("gpu_memory_utilization");
  config.activation_reserve_bytes = options.get_double("activation_reserve_gb") * 1e9;
  return config;
}

// Turns the cost model's validation errors into the SDK's invalid-argument status, with the preset
// names for context.
CostModel build_cost_model(const sdk::Options& options) {
  try {
    return CostModel(resolve_config(options));
  } catch (const std::invalid_argument& e) {
    throw sdk::Error(HW_INVALID_ARGUMENT, "sim model (model = \"" + options.get_string("model") +
                                              "\", gpu = \"" + options.get_string("gpu") +
                                              "\"): " + e.what());
  }
}

// The options set away from their defaults that a cost file replaces (all but cost_file and seed).
// The host hands every option, defaults filled in, so one set to its default cannot be told apart.
std::vector<std::string> options_the_cost_file_replaces(const sdk::Options& options) {
  std::vector<std::string> set;
  for (const hw_option_spec& spec : kOptions) {
    const std::string_view key = sdk::view(spec.key);
    if (key == "cost_file" || key == "seed") continue;
    bool differs = false;
    switch (spec.type) {
      case HW_OPTION_BOOL:
        differs = options.get_bool(key) != (spec.default_int != 0);
        break;
      case HW_OPTION_INT:
        differs = options.get_int(key) != spec.default_int;
        break;
      case HW_OPTION_DOUBLE:
        differs = options.get_double(key) != spec.default_double;
        break;
      default:  // string and enum
        differs = options.get_string(key) != sdk::view(spec.default_string);
        break;
    }
    if (differs) set.emplace_back(key);
  }
  return set;
}

std::optional<FittedCost> load_cost_file(const sdk::Options& options,
                                         const std::string& config_dir) {
  const std::string name = options.get_string("cost_file");
  if (name.empty()) return std::nullopt;
  if (const std::vector<std::string> set = options_the_cost_file_replaces(options); !set.empty()) {
    // Silently ignoring them would report a deployment other than the one the operator wrote.
    std::string keys;
    for (const std::string& key : set) keys += (keys.empty() ? "" : ", ") + key;
    throw sdk::Error(
        HW_INVALID_ARGUMENT,
        "sim model: cost_file = \"" + name +
            "\" gives the shape, the step times and "
            "the KV capacity of the machine it was profiled on, so " +
            keys + (set.size() == 1 ? " is" : " are") + " not used: remove " +
            (set.size() == 1 ? "it" : "them") +
            ", or profile the deployment you want (headway profile) and use that file");
  }
  std::filesystem::path path(name);
  if (path.is_relative() && !config_dir.empty()) path = std::filesystem::path(config_dir) / path;
  try {
    return load_fitted_cost(path.lexically_normal());
  } catch (const std::invalid_argument& e) {
    throw sdk::Error(HW_INVALID_ARGUMENT, std::string("sim model: cost_file: ") + e.what());
  }
}

class SimModel final : public sdk::Model {
 public:
  SimModel(const sdk::Host& host, const sdk::Options& options, const std::string& config_dir)
      : host_(host),
        fitted_(load_cost_file(options, config_dir)),
        seed_(mix64(static_cast<uint64_t>(options.get_int("seed")))) {
    char line[384];
    if (fitted_) {
      // The presets are not even resolved: a fitted file replaces them wholesale.
      std::snprintf(line, sizeof(line),
                    "sim model: fitted costs from %s%s%s%s, KV capacity %llu tokens",
                    options.get_string("cost_file").c_str(), fitted_->machine.empty() ? "" : " (",
                    fitted_->machine.c_str(), fitted_->machine.empty() ? "" : ")",
                    static_cast<unsigned long long>(fitted_->kv_capacity_tokens));
    } else {
      roofline_.emplace(build_cost_model(options));
      const CostConfig& c = roofline_->config();
      std::snprintf(line, sizeof(line),
                    "sim model: %.2fB parameters (%s weights, %s KV) on %u GPU(s), %.1f GB "
                    "weights and %.1f GB KV per GPU, KV capacity %llu tokens",
                    roofline_->parameters() / 1e9, c.weight_bytes == 1 ? "fp8" : "bf16",
                    c.kv_bytes == 1 ? "fp8" : "bf16", c.tensor_parallel,
                    roofline_->weight_bytes_per_gpu() / 1e9,
                    roofline_->kv_memory_bytes_per_gpu() / 1e9,
                    static_cast<unsigned long long>(roofline_->kv_capacity_tokens()));
    }
    host_.log(HW_LOG_INFO, line);
  }

  hw_model_info info() const override {
    const ModelShape& m = shape();
    hw_model_info info{};
    info.struct_size = sizeof(hw_model_info);
    info.layers = m.layers;
    info.hidden = m.hidden;
    info.heads = m.heads;
    info.kv_heads = m.kv_heads;
    info.head_dim = m.head_dim;
    info.vocab = m.vocab;
    info.max_model_len = m.max_model_len;
    // Never stops by itself: output lengths come from the requests' max_output_tokens, which is
    // what a trace replay wants.
    info.eos_token = UINT32_MAX;
    info.kv_bytes_per_token = kv_bytes_per_token();
    info.kv_capacity_tokens = kv_capacity_tokens();
    info.needs_token_ids = 0;
    info.reports_duration = 1;
    return info;
  }

  // No memory behind the blocks: the engine's block manager does all the accounting.
  void init_kv(uint32_t block_count, uint32_t block_size) override {
    if (block_size == 0) throw sdk::Error(HW_INVALID_ARGUMENT, "sim model: block_size must be > 0");
    block_count_ = block_count;
    block_size_ = block_size;
    const uint64_t tokens = static_cast<uint64_t>(block_count) * block_size;
    if (tokens > kv_capacity_tokens()) {
      char line[256];
      std::snprintf(line, sizeof(line),
                    "sim model: KV pool of %llu tokens exceeds the %llu that fit in GPU memory; "
                    "simulating it anyway",
                    static_cast<unsigned long long>(tokens),
                    static_cast<unsigned long long>(kv_capacity_tokens()));
      host_.log(HW_LOG_WARN, line);
    }
  }

  // Hot path: one pass over the slices, no allocation.
  void forward(const hw_model_batch& batch, hw_model_output& output) override {
    const uint32_t vocab = shape().vocab;
    StepLoad load;
    for (uint32_t i = 0; i < batch.slice_count; ++i) {
      const hw_model_slice& slice = batch.slices[i];
      const bool sample = slice.sample != 0;
      load.add(slice.start, slice.tokens, sample);
      if (sample) {
        if (output.sampled == nullptr) {
          throw sdk::Error(HW_INVALID_ARGUMENT, "sim model: output.sampled is NULL");
        }
        const uint64_t h = mix64(mix64(seed_ ^ slice.request_id) ^ slice.output_index);
        output.sampled[i] = static_cast<int32_t>(h % vocab);
      }
    }
    output.seconds = fitted_ ? fitted_->step_seconds(load) : roofline_->step_seconds(load);
  }

 private:
  // Exactly one of fitted_ and roofline_ is set.
  const ModelShape& shape() const { return fitted_ ? fitted_->model : roofline_->config().model; }
  uint64_t kv_capacity_tokens() const {
    return fitted_ ? fitted_->kv_capacity_tokens : roofline_->kv_capacity_tokens();
  }
  uint64_t kv_bytes_per_token() const {
    return fitted_ ? fitted_->kv_bytes_per_token : roofline_->kv_bytes_per_token();
  }

  sdk::Host host_;
  std::optional<FittedCost> fitted_;
  std::optional<CostModel> roofline_;
  uint64_t seed_;
  uint32_t block_count_ = 0;
  uint32_t block_size_ = 0;
};

}  // namespace
}  // namespace headway::models::sim

HEADWAY_EXPORT_MODEL(
    headway::models::sim::SimModel, "org.headway.model.sim", "sim", "0.1.0",
    "Simulated model: roofline step times of H100/H200 GPUs, or step times fitted to "
    "a profiled machine, on a virtual clock",
    headway::models::sim::kOptions)
