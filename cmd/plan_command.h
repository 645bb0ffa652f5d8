// `headway plan --model NAME|path/to/config.json --gpu h100|h200 --context N [--dtype bf16|fp8]
//  [--kv-dtype auto|bf16|fp8] [--concurrency N] [--gpu-memory-utilization F]`: the smallest
// tensor-parallel degree that fits the model and the KV cache of `concurrency` requests of
// `context` tokens on one node, its memory per GPU, why every smaller degree fails, and how many
// such requests the chosen degree holds.
// The arithmetic is plugins/models/sim/planner.h; docs/planner.md explains the output.
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <string>

#include "model_memory.h"

namespace headway::cmd {

struct PlanArgs {
  std::string model;  // preset name, or a path to a Hugging Face config.json
  std::string gpu;
  uint32_t context = 0;
  uint32_t concurrency = 1;
  std::string dtype = "bf16";
  std::string kv_dtype = "auto";  // auto: as --dtype
  uint32_t max_num_batched_tokens = 8192;
  uint32_t max_num_seqs = 256;
  double gpu_memory_utilization = models::sim::kDefaultGpuMemoryUtilization;
  double gpu_memory_gb = 0;  // each GPU's memory in place of the preset's; 0: the preset's
};

// Registers `plan` on `app`; `args` must outlive parsing. Main thread only.
CLI::App* add_plan_command(CLI::App& app, PlanArgs& args);

// Prints the plan on stdout. Returns 0 when some degree fits, 1 (after one line on stderr) when
// none up to 8 does. Throws core::Error naming the flag or file on invalid input (unknown model or
// GPU, unreadable or malformed config.json). Main thread only.
int run_plan(const PlanArgs& args);

}  // namespace headway::cmd
