// `headway simulate`: runs deployments on the virtual clock over one workload and reports
// latencies.
#pragma once

#include <CLI/CLI.hpp>
#include <string>
#include <vector>

namespace headway::cmd {

struct SimulateArgs {
  std::vector<std::string> configs;  // empty: the built-in default deployment
  std::string workload;              // empty: the built-in default workload
  std::string out;                   // report JSON
  std::string step_trace;            // JSONL, one line per step
  std::vector<std::string> plugin_dirs;
  bool no_baseline = false;  // skip the run without long classes (no HOL/stall factors)
};

CLI::App* add_simulate_command(CLI::App& app, SimulateArgs& args);
int run_simulate(const SimulateArgs& args);

}  // namespace headway::cmd
