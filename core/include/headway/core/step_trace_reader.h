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

// The range of the kept steps, which is the range a fit of them can be trusted over.
struct TraceCoverage {
  uint32_t max_batch = 0;        // slices in one step
  uint64_t max_step_tokens = 0;  // tokens computed in one step (slices of up to 2^32 - 1 each)
  uint32_t max_context = 0;      // a slice's last position + 1
  uint64_t steps_with_prefill = 0;
};

struct TracedSteps {
  // The shape every kept engine ran; max_model_len and kv_capacity_tokens are the smallest any
  // model line gave (limits_differ says whether they differed).
  TracedModel model;
  bool limits_differ = false;
  std::vector<uint32_t> engines;  // the engines whose steps were kept, ascending
  uint32_t runs = 1;              // model lines of one engine: runs concatenated into the file
  // Label "e<engine> s<step>" ("r<run> e<engine> s<step>" from an engine's second run on), the
  // features of its slices (shape.slices only when asked for: a long trace has millions of
  // steps), median_s = the step's duration.
  std::vector<ProfileMeasurement> steps;
  TraceCoverage coverage;
  uint64_t warmup_steps = 0;  // each run's first step of each engine, left out (buffers grow)
  uint64_t empty_steps = 0;   // steps that only preempted (no forward pass), left out
  bool dropped_partial_last_line = false;  // the file ended in half a line (a killed writer)
};

// Reads `file`; with `engine`, only that engine's steps, otherwise every engine's, which must then
// all have run the same model shape. A model line of an engine that already had one starts a new
// run (traces of several runs concatenated), whose first step is warm-up again. Throws Error
// naming the file and the line for a line that is not JSON (except a last line cut short, which
// is dropped) or lacks a field, a step of an engine without a model line (a trace from before
// model lines were written), engines whose model shapes differ (the message suggests --engine);
// naming the file for an engine the trace does not have and a trace with no step left to fit.
// keep_slices: also keep each step's slices (shape.slices), to replay the steps on a model.
TracedSteps read_step_trace(const std::filesystem::path& file, std::optional<uint32_t> engine,
                            bool keep_slices = false);

}  // namespace headway::core
