// `headway simulate`: runs deployments on the virtual clock over one workload and reports
// latencies; with several deployments, compares them in one table (comparison_table.h), and on
// request finds each one's capacity within an SLO (capacity_search.h) and plots the runs (plot.h).
//
// Output: with one --config, the full report of the deployment; with several, one summary line
// per deployment, then the comparison table (--details prints the full reports as well; --quiet
// shortens a single deployment's report to its summary line too). With --seeds N, one summary line
// per deployment and seed (none with --quiet; --details adds each seed's comparison table), then
// the spread of the comparison over the seeds (seed_sweep.h).
#pragma once

#include <CLI/CLI.hpp>
#include <cstddef>
#include <cstdint>
#include <optional>
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
  // "ttft=2s,tpot=100ms"; unset: core::default_slo(); set but empty is refused (parse_slo).
  std::optional<std::string> slo;
  std::string plot;  // PNG path; empty: no plot
  bool find_capacity = false;
  size_t capacity_limit = 0;           // requests per capacity probe; 0: the whole workload
  std::string capacity_scope = "all";  // all | short: whose p99 the capacity SLO judges
  bool quiet = false;
  bool details = false;
  size_t num_requests = 0;       // 0: all (as `headway bench --num-requests`)
  double duration = 0;           // seconds of arrivals; 0: all (as `headway bench --duration`)
  std::optional<uint64_t> seed;  // replaces the workload file's seed
  double rate_scale = 1;         // arrival rate times this (core::with_rate_factor)
  size_t seeds = 0;              // > 0: a seed sweep of that many draws (seed_sweep.h)
};

CLI::App* add_simulate_command(CLI::App& app, SimulateArgs& args);
int run_simulate(const SimulateArgs& args);

}  // namespace headway::cmd
