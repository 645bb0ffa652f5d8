// `headway profile --config deploy.toml --out cost.toml [--quick]`: times the deployment's model on
// a grid of step shapes and writes the fitted step-time model that the sim model reads with
// `cost_file` (core/step_profiler.h, docs/profiling.md). `headway profile --from-step-trace
// steps.jsonl --out cost.toml`: fits the same model to the steps of a recorded run instead
// (core/step_trace_reader.h); with `--check twin.toml`, replays them on a simulated model and
// prints its per-step errors instead (trace_check.h).
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace headway::cmd {

struct ProfileArgs {
  std::string config;
  std::string from_step_trace;  // fit this trace's steps instead of timing a grid
  // With config: this engine's model is timed (default the first); with from_step_trace: only
  // this engine's steps are fitted.
  std::optional<uint32_t> engine;
  std::string check_config;  // with from_step_trace: replay the steps on this deployment's model
  std::string out;
  bool quick = false;
  uint32_t max_context = 0;  // > 4096: also time shapes at deeper contexts (profile_grid)
  int repetitions = 5;
  std::vector<std::string> plugin_dirs;
  bool quiet = false;
};

// Registers `profile` on `app`; `args` must outlive parsing. Main thread only.
CLI::App* add_profile_command(CLI::App& app, ProfileArgs& args);

// Runs the profile. Throws core::Error naming the file or the plugin on failure; returns the exit
// code otherwise.
int run_profile(const ProfileArgs& args);

}  // namespace headway::cmd
