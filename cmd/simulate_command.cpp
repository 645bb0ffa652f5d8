#include "simulate_command.h"

#include <fmt/format.h>
#include <headway/core/deployment_config.h>
#include <headway/core/error.h>
#include <headway/core/report.h>
#include <headway/core/simulator.h>
#include <headway/core/step_trace.h>
#include <headway/core/workload.h>

#include <fstream>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>

#include "builtin_defaults.h"

namespace headway::cmd {

CLI::App* add_simulate_command(CLI::App& app, SimulateArgs& args) {
  CLI::App* cmd = app.add_subcommand(
      "simulate", "Run deployments on the virtual clock over a workload and report latencies");
  cmd->add_option(
      "--config", args.configs,
      "Deployment TOML (repeat to compare); default: the built-in simulated deployment");
  cmd->add_option("--workload", args.workload, "Workload TOML; default: the built-in workload");
  cmd->add_option("--out", args.out, "Write the report as JSON to this file");
  cmd->add_option("--step-trace", args.step_trace, "Write one JSON line per engine step");
  cmd->add_option("--plugin-dir", args.plugin_dirs, "Extra plugin directory (searched first)");
  cmd->add_flag("--no-baseline", args.no_baseline,
                "Skip the second run without long requests (no HOL or stall factor)");
  return cmd;
}

int run_simulate(const SimulateArgs& args) {
  core::PluginRegistry& registry = core::PluginRegistry::global();
  for (const std::string& dir : args.plugin_dirs) registry.add_search_directory(dir);
  if (!args.step_trace.empty() && args.configs.size() > 1) {
    throw core::Error("--step-trace records one deployment; give a single --config with it");
  }

  const core::Workload workload =
      args.workload.empty() ? core::parse_workload(kDefaultWorkload, "<built-in workload>")
                            : core::load_workload(args.workload);
  const bool with_baseline = !args.no_baseline && workload.has_long_class();
  const core::Workload without_long =
      with_baseline ? workload.without_long_classes() : core::Workload{};

  std::vector<std::string> configs = args.configs;
  if (configs.empty()) configs.push_back("");
  nlohmann::json all = nlohmann::json::array();
  for (const std::string& file : configs) {
    const core::DeploymentConfig deployment =
        file.empty() ? core::parse_deployment(kDefaultDeployment, "<built-in deployment>", registry)
                     : core::load_deployment(file, registry);
    std::unique_ptr<core::StepTraceWriter> trace;
    if (!args.step_trace.empty()) trace = std::make_unique<core::StepTraceWriter>(args.step_trace);

    core::SimulationOptions options;
    options.step_trace = trace.get();
    core::SimulationResult run = core::simulate(deployment, workload, options);
    core::SimulationResult baseline;
    if (with_baseline) baseline = core::simulate(deployment, without_long);

    core::Report report =
        core::build_report(workload, run.records, run.steps, run.simulated_seconds,
                           run.wall_seconds, with_baseline ? &baseline.records : nullptr);
    report.preemptions = run.preemptions;
    report.step_summary = core::summarize_steps(run.step_records, run.kv_blocks_total);

    std::cout << fmt::format("== {}  ({} engine(s), workload {}: {} requests)\n", deployment.name,
                             deployment.engines.size(), workload.source, workload.requests.size());
    core::print_report(std::cout, report);
    if (with_baseline) {
      std::cout << fmt::format("baseline without long requests took {:.3f} s of wall time\n",
                               baseline.wall_seconds);
    }
    if (run.rejected > 0) {
      std::cout << fmt::format("rejected: {} requests could not be served (see the warning)\n",
                               run.rejected);
    }
    std::cout << "\n";
    nlohmann::json j = core::report_to_json(report);
    j["deployment"] = deployment.name;
    j["deployment_file"] = deployment.file.string();
    j["rejected"] = run.rejected;
    all.push_back(std::move(j));
  }
  if (!args.out.empty()) {
    std::ofstream out(args.out);
    if (!out) throw core::Error(args.out + ": cannot open the report file for writing");
    out << (all.size() == 1 ? all[0] : all).dump(2) << "\n";
  }
  return 0;
}

}  // namespace headway::cmd
