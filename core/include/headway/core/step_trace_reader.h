// Reads a step trace (core/step_trace.h) back as measurements for the cost-model fit of
// core/step_profiler.h: every traced step is one measured shape, its slices as the engine ran them
// and its duration as the engine's clock took it. `headway profile --from-step-trace` fits the sim
// model's cost file from a served or wall-clock run this way, with no grid to time and no model to
// load (the trace's model lines say what the engines ran). Stateless functions; thread-safe.
#pragma once

#include <headway/abi.h>
#include <headway/core/step_profiler.h>

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace headway::core {

// The model as a traced engine ran it: its shape, and the engine's own max_model_len and KV
// capacity (which a deployment may set below the model's).
struct TracedModel {
  std::string plugin;  // the model plugin's short name
  hw_model_info info{};
  uint32_t block_size = 0;
};

struct TracedSteps {
  TracedModel model;
  std::vector<uint32_t> engines;  // the engines whose steps were kept, ascending
  // Label "engine E step S", the features of its slices (shape.slices is left empty: a long
  // trace has millions of steps), median_s = the step's duration.
  std::vector<ProfileMeasurement> steps;
  uint64_t warmup_steps = 0;  // each engine's first step, left out (buffers grow, pages fault in)
  uint64_t empty_steps = 0;   // steps that only preempted (no forward pass), left out
};

// Reads `file`; with `engine`, only that engine's steps, otherwise every engine's, which must then
// all have run the same model with the same limits. Throws Error naming the file and the line for
// a line that is not JSON or lacks a field, a step of an engine without a model line (a trace from
// before model lines were written), engines whose models differ (the message suggests --engine),
// an engine the trace does not have, and a trace with no step left to fit.
TracedSteps read_step_trace(const std::filesystem::path& file, std::optional<uint32_t> engine);

}  // namespace headway::core
