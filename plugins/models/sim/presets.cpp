#include "presets.h"

#include <stdexcept>
#include <string>

namespace headway::models::sim {
namespace {

// SXM parts, from NVIDIA's datasheets. H100 and H200 share the GH100 die, hence the same FLOP/s;
// the H200's HBM3e is what makes it faster on memory-bound decode. Capacities are decimal GB as
// marketed (nvidia-smi shows slightly more), which keeps the KV capacity on the safe side.
constexpr GpuPreset kGpus[] = {
    {"h100", 989.0, 1979.0, 3.35, 80.0, 900.0},
    {"h200", 989.0, 1979.0, 4.8, 141.0, 900.0},
};

// Shapes from the models' Hugging Face config.json files.
constexpr ModelPreset kModels[] = {
    {"llama-3.1-8b", ModelShape{.layers = 32,
                                .hidden = 4096,
                                .heads = 32,
                                .kv_heads = 8,
                                .head_dim = 128,
                                .intermediate = 14336,
                                .vocab = 128256,
                                .max_model_len = 131072}},
    {"llama-3.3-70b", ModelShape{.layers = 80,
                                 .hidden = 8192,
                                 .heads = 64,
                                 .kv_heads = 8,
                                 .head_dim = 128,
                                 .intermediate = 28672,
                                 .vocab = 128256,
                                 .max_model_len = 131072}},
    // The MLPerf Inference llama2-70b benchmark's model (Llama-2-70b-chat-hf): the 70B shape of
    // Llama 3.3 with Llama 2's 32k vocabulary and 4k context.
    {"llama-2-70b", ModelShape{.layers = 80,
                               .hidden = 8192,
                               .heads = 64,
                               .kv_heads = 8,
                               .head_dim = 128,
                               .intermediate = 28672,
                               .vocab = 32000,
                               .max_model_len = 4096}},
    // Qwen 2.5-7B(-Instruct): a GQA group of 7 (its q/k/v biases add no measurable cost).
    {"qwen2.5-7b", ModelShape{.layers = 28,
                              .hidden = 3584,
                              .heads = 28,
                              .kv_heads = 4,
                              .head_dim = 128,
                              .intermediate = 18944,
                              .vocab = 152064,
                              .max_model_len = 32768}},
    // Qwen 3-8B: heads of 128 (q/k norms per head, also negligible in cost).
    {"qwen3-8b", ModelShape{.layers = 36,
                            .hidden = 4096,
                            .heads = 32,
                            .kv_heads = 8,
                            .head_dim = 128,
                            .intermediate = 12288,
                            .vocab = 151936,
                            .max_model_len = 40960}},
};

}  // namespace

std::span<const GpuPreset> gpu_presets() { return kGpus; }
std::span<const ModelPreset> model_presets() { return kModels; }

const GpuPreset* find_gpu_preset(std::string_view name) {
  for (const GpuPreset& gpu : kGpus) {
    if (gpu.name == name) return &gpu;
  }
  return nullptr;
}

const ModelPreset* find_model_preset(std::string_view name) {
  for (const ModelPreset& model : kModels) {
    if (model.name == name) return &model;
  }
  return nullptr;
}

GpuSpec to_gpu_spec(const GpuPreset& preset) {
  return GpuSpec{.peak_flops = preset.peak_tflops * 1e12,
                 .peak_fp8_flops = preset.peak_fp8_tflops * 1e12,
                 .hbm_bytes_per_s = preset.hbm_tb_per_s * 1e12,
                 .hbm_bytes = preset.hbm_gb * 1e9,
                 .link_bytes_per_s = preset.link_gb_per_s * 1e9};
}

CostConfig preset_config(std::string_view gpu, std::string_view model, uint32_t tensor_parallel) {
  const GpuPreset* gpu_preset = find_gpu_preset(gpu);
  if (gpu_preset == nullptr)
    throw std::invalid_argument("unknown gpu preset '" + std::string(gpu) + "'");
  const ModelPreset* model_preset = find_model_preset(model);
  if (model_preset == nullptr) {
    throw std::invalid_argument("unknown model preset '" + std::string(model) + "'");
  }
  CostConfig config;
  config.model = model_preset->shape;
  config.gpu = to_gpu_spec(*gpu_preset);
  config.tensor_parallel = tensor_parallel;
  return config;
}

}  // namespace headway::models::sim
