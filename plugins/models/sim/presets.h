// Named GPUs and models, in datasheet units, and the conversion of a preset pair into a CostConfig.
// The one table of presets: the simulated model plugin's `gpu` and `model` options and
// `headway plan` both read it.
//
// Ownership: the presets are static tables that live as long as the program; the returned pointers
// and spans are never freed. Threading: read-only, safe from any thread.
#pragma once

#include <span>
#include <string_view>

#include "cost_model.h"

namespace headway::models::sim {

struct GpuPreset {
  std::string_view name;
  double peak_tflops;      // dense bf16 tensor-core TFLOP/s (no sparsity)
  double peak_fp8_tflops;  // dense fp8 tensor-core TFLOP/s (no sparsity)
  double hbm_tb_per_s;     // TB/s, 1 TB = 1e12 bytes
  double hbm_gb;           // GB, 1 GB = 1e9 bytes
  double link_gb_per_s;    // NVLink per GPU, both directions together, GB/s
};

// GPUs of one HGX H100 or H200 node, all on NVSwitch: the presets' link_gb_per_s is NVLink inside
// such a node. Tensor parallelism past it runs over the network between nodes, which they do not
// describe.
inline constexpr uint32_t kGpusPerNode = 8;

struct ModelPreset {
  std::string_view name;
  ModelShape shape;
};

// All known presets, in the order the plugin's enum options list them.
std::span<const GpuPreset> gpu_presets();
std::span<const ModelPreset> model_presets();

// The preset with this name, or nullptr.
const GpuPreset* find_gpu_preset(std::string_view name);
const ModelPreset* find_model_preset(std::string_view name);

// Datasheet units to the cost model's SI units.
GpuSpec to_gpu_spec(const GpuPreset& preset);

// A CostConfig for a named GPU and model at the default efficiencies and memory settings. Throws
// std::invalid_argument for an unknown name. Does not validate (CostModel's constructor does).
CostConfig preset_config(std::string_view gpu, std::string_view model, uint32_t tensor_parallel);

}  // namespace headway::models::sim
