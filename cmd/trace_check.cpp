#include "trace_check.h"

#include <fmt/format.h>
#include <headway/core/clock.h>
#include <headway/core/deployment_config.h>
#include <headway/core/error.h>
#include <headway/core/host_services.h>
#include <headway/core/model_architecture.h>
#include <headway/core/percentiles.h>
#include <headway/core/plugin_instances.h>
#include <headway/core/plugin_registry.h>
#include <headway/core/step_profiler.h>
#include <headway/core/step_trace_reader.h>

#include <cmath>
#include <iostream>
#include <optional>

namespace headway::cmd {
namespace {

struct ErrorRow {
  std::vector<double> errors;  // predicted / traced - 1, per step
  double traced_s = 0;
  double predicted_s = 0;
};

void print_row(const char* name, const ErrorRow& row) {
  if (row.errors.empty()) {
    std::cout << fmt::format("{:<16} {:>8}\n", name, 0);
    return;
  }
  std::vector<double> magnitude;
  for (double e : row.errors) magnitude.push_back(std::abs(e));
  std::cout << fmt::format(
      "{:<16} {:>8} {:>+9.1f}% {:>+9.1f}% {:>+9.1f}% {:>9.1f}% {:>12.3f} {:>12.3f} {:>+7.1f}%\n",
      name, row.errors.size(), 100 * core::percentile(row.errors, 10),
      100 * core::percentile(row.errors, 50), 100 * core::percentile(row.errors, 90),
      100 * core::percentile(magnitude, 50), row.traced_s, row.predicted_s,
      100 * (row.predicted_s / row.traced_s - 1));
}

}  // namespace

void check_trace_against(const std::string& trace, std::optional<uint32_t> engine,
                         const std::string& config, const std::vector<std::string>& plugin_dirs) {
  core::TracedSteps traced = core::read_step_trace(trace, engine, /*keep_slices=*/true);

  core::PluginRegistry& registry = core::PluginRegistry::global();
  for (const std::string& dir : plugin_dirs) registry.add_search_directory(dir);
  const core::DeploymentConfig deployment = core::load_deployment(config, registry);
  if (deployment.engines.empty()) throw core::Error(config + ": the deployment has no engine");
  core::VirtualClock clock;
  core::HostServices host("profile", &clock);
  const std::string config_dir =
      deployment.file.has_parent_path() ? deployment.file.parent_path().string() : std::string(".");
  const char* const needs_sim =
      "--check predicts the traced steps with a simulated model (plugin \"sim\", e.g. the "
      "deployment's twin)";
  std::optional<core::ModelInstance> loaded;
  try {
    // The first engine's, as `profile` profiles it.
    loaded.emplace(core::model_of(deployment, deployment.engines.front()), config_dir, host);
  } catch (const core::Error& e) {  // e.g. a real GPU model where no GPU is visible
    throw core::Error(fmt::format("{} ({})", e.what(), needs_sim), e.code());
  }
  core::ModelInstance& model = *loaded;
  const hw_model_info& info = model.info();
  if (!info.reports_duration) {
    throw core::Error(
        fmt::format("{}: model '{}' runs for real; {}", config, model.name(), needs_sim));
  }
  // Steps the twin could not have run tell nothing about it: say so rather than replay quietly.
  const core::EngineConfig& twin_engine = deployment.engines.front();
  const uint32_t twin_len = twin_engine.max_model_len
                                ? std::min(twin_engine.max_model_len, info.max_model_len)
                                : info.max_model_len;
  const hw_model_info& ran = traced.model.info;
  if (core::architecture_difference(ran, info)) {
    std::cout << fmt::format(
        "note: the twin's model ({} layers, hidden {}, {}/{} heads of {}, vocab {}) is not the "
        "traced one ({} layers, hidden {}, {}/{} heads of {}, vocab {})\n",
        info.layers, info.hidden, info.heads, info.kv_heads, info.head_dim, info.vocab, ran.layers,
        ran.hidden, ran.heads, ran.kv_heads, ran.head_dim, ran.vocab);
  }
  if (traced.coverage.max_context > twin_len) {
    std::cout << fmt::format(
        "note: the trace reaches position {}, past the twin's max_model_len {}: the twin would "
        "have refused some of these requests\n",
        traced.coverage.max_context, twin_len);
  }

  // The model reports each step's duration: one run per step (after a warm-up run) is exact.
  std::vector<core::ProfileShape> shapes;
  shapes.reserve(traced.steps.size());
  for (core::ProfileMeasurement& m : traced.steps) shapes.push_back(std::move(m.shape));
  core::ProfileOptions options;
  options.block_size = deployment.engines.front().block_size;
  options.repetitions = 1;
  const std::vector<core::ProfileMeasurement> predicted =
      core::profile_model(model, shapes, options);

  ErrorRow all, decodes, prefills;
  for (size_t i = 0; i < predicted.size(); ++i) {
    const double measured = traced.steps[i].median_s;
    const double guess = predicted[i].median_s;
    for (ErrorRow* row : {&all, predicted[i].features.decode_only() ? &decodes : &prefills}) {
      row->errors.push_back(guess / measured - 1);
      row->traced_s += measured;
      row->predicted_s += guess;
    }
  }
  std::cout << fmt::format(
      "{} steps of {} ({}) replayed on the model of {} ({}); error = predicted / traced - 1\n",
      predicted.size(), trace, traced.model.plugin, config, model.name());
  std::cout << fmt::format("{:<16} {:>8} {:>10} {:>10} {:>10} {:>10} {:>12} {:>12} {:>8}\n",
                           "steps", "n", "p10", "p50", "p90", "p50 |err|", "traced s",
                           "predicted s", "sum");
  print_row("all", all);
  print_row("decode only", decodes);
  print_row("with a prefill", prefills);
}

}  // namespace headway::cmd
