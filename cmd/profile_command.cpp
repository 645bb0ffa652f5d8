#include "profile_command.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <headway/core/clock.h>
#include <headway/core/deployment_config.h>
#include <headway/core/error.h>
#include <headway/core/host_services.h>
#include <headway/core/plugin_instances.h>
#include <headway/core/step_profiler.h>
#include <headway/core/step_trace_reader.h>

#include <algorithm>
#include <filesystem>
#include <headway/sdk/options.hpp>
#include <iostream>
#include <thread>

#include "output_path.h"
#include "trace_check.h"

namespace headway::cmd {

CLI::App* add_profile_command(CLI::App& app, ProfileArgs& args) {
  CLI::App* cmd = app.add_subcommand(
      "profile",
      "Fit the sim model's cost file: time the deployment's model on a grid of step shapes, or "
      "fit the steps of a recorded run");
  CLI::Option* config =
      cmd->add_option("--config", args.config,
                      "Deployment TOML whose first engine's model (or --engine's) is timed");
  CLI::Option* trace = cmd->add_option(
      "--from-step-trace", args.from_step_trace,
      "Fit the steps of this trace (serve or simulate --step-trace) instead of timing a grid; "
      "no model is loaded, so a trace recorded on a GPU machine can be fitted anywhere");
  config->excludes(trace);
  cmd->add_option("--engine", args.engine,
                  "With --config: time this engine's model (its group's model_options over "
                  "[model]'s; default: the first engine's). With --from-step-trace: fit only this "
                  "engine's steps (default: every engine's, which must have run the same model)");
  CLI::Option* out =
      cmd->add_option("--out", args.out, "Cost file to write (TOML); required unless --check");
  cmd->add_option("--check", args.check_config,
                  "With --from-step-trace: instead of fitting, replay every traced step on this "
                  "deployment's simulated model (its twin) and print the per-step errors")
      ->needs(trace)
      ->excludes(out)
      ->check(CLI::ExistingFile);  // before a trace of hundreds of MB is read
  cmd->add_flag("--quick", args.quick, "A reduced grid (seconds on a small model), for tests")
      ->excludes(trace);
  cmd->add_option("--max-context", args.max_context,
                  "Also time prefill chunks and decodes at contexts 8192, 16384, ... below N "
                  "(for workloads with long prompts; default: contexts up to 4096)")
      ->check(CLI::Range(uint32_t{1}, uint32_t{1} << 30))
      ->excludes(trace);
  cmd->add_option("--repetitions", args.repetitions, "Timed runs per shape (median kept)")
      ->check(CLI::Range(1, 100))
      ->excludes(trace);
  cmd->add_option("--plugin-dir", args.plugin_dirs, "Extra plugin directory (searched first)")
      ->check(CLI::ExistingDirectory);
  cmd->add_flag("--quiet", args.quiet, "Print only the fitted coefficients and the file written");
  return cmd;
}

namespace {

// Threads the model runs with, when its plugin has the cpu model's `threads` option (0: all
// cores); 0 when it does not say.
int model_threads(const core::PluginChoice& model) {
  const sdk::Options options(model.options->view());
  if (!options.has("threads")) return 0;
  const int64_t threads = options.get_int("threads");
  return threads > 0 ? static_cast<int>(threads)
                     : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
}

// Fits, writes the cost file and prints the coefficients: the end of both ways to profile.
core::CostFit fit_and_write(const ProfileArgs& args,
                            std::vector<core::ProfileMeasurement>& measurements,
                            const hw_model_info& info, const core::CostFileInfo& about) {
  const core::CostFit fit = core::fit_cost(measurements);
  core::write_cost_file(args.out, fit, measurements, info, about);
  const core::CostCoefficients& c = fit.coefficients;
  std::cout << fmt::format(
      "fit: overhead {:.3f} ms, {:.3f} us/token, {:.3f} us/sampled token, {:.3f} ns/attention "
      "pair, {:.3f} ns/KV token; relative error median {:.1f}%, max {:.1f}%\nwrote {}\n",
      c.overhead_s * 1e3, c.per_token_s * 1e6, c.per_sampled_token_s * 1e6,
      c.per_attention_pair_s * 1e9, c.per_kv_token_s * 1e9, 100 * fit.median_relative_error,
      100 * fit.max_relative_error, args.out);
  return fit;
}

void profile_from_step_trace(const ProfileArgs& args) {
  core::TracedSteps traced = core::read_step_trace(args.from_step_trace, args.engine);
  // One step per coefficient at the very least; a useful fit needs steps of many shapes.
  if (traced.steps.size() < 5) {
    throw core::Error(fmt::format(
        "{}: {} steps to fit (after {} warm-up steps); five coefficients need at least 5: "
        "record a longer run",
        args.from_step_trace, traced.steps.size(), traced.warmup_steps));
  }
  const core::TraceCoverage& range = traced.coverage;
  const std::string covered = fmt::format(
      "batches up to {} requests, steps up to {} tokens, contexts up to {}, {} of {} steps with "
      "a prefill",
      range.max_batch, range.max_step_tokens, range.max_context, range.steps_with_prefill,
      traced.steps.size());
  if (!args.quiet) {
    std::cout << fmt::format(
        "fitting {} steps of engine{} {} ({}) from {}{}; left out: the first step of each engine "
        "and run (warm-up: {} in all) and {} steps without a forward pass\ncovered: {}\n",
        traced.steps.size(), traced.engines.size() > 1 ? "s" : "", fmt::join(traced.engines, ", "),
        traced.model.plugin, args.from_step_trace,
        traced.runs > 1 ? fmt::format(" ({} runs)", traced.runs) : "", traced.warmup_steps,
        traced.empty_steps, covered);
  }
  if (traced.dropped_partial_last_line) {
    std::cout << "note: the trace ends in half a line (its writer was killed or its disk filled); "
                 "that line is left out\n";
  }
  if (traced.limits_differ) {
    std::cout << fmt::format(
        "note: the engines or runs had different max_model_len or KV capacity; the cost file "
        "takes the smallest (max_model_len {}, {} KV tokens)\n",
        traced.model.info.max_model_len, traced.model.info.kv_capacity_tokens);
  }
  core::CostFileInfo about;
  about.source = args.from_step_trace;
  about.model_name = traced.model.plugin;
  about.from_step_trace = true;  // the machine it was recorded on is not known here
  about.date = core::utc_now_iso8601();
  about.coverage = covered;
  const core::CostFit fit = fit_and_write(args, traced.steps, traced.model.info, about);
  // NNLS sets a term to zero when the data does not ask for it, which a trace whose steps barely
  // vary (decodes of one or two requests, say) cannot tell from a term that really costs nothing.
  const core::CostCoefficients& c = fit.coefficients;
  std::vector<std::string> zero;
  const std::pair<const char*, double> terms[] = {{"overhead_s", c.overhead_s},
                                                  {"per_token_s", c.per_token_s},
                                                  {"per_sampled_token_s", c.per_sampled_token_s},
                                                  {"per_attention_pair_s", c.per_attention_pair_s},
                                                  {"per_kv_token_s", c.per_kv_token_s}};
  for (const auto& [name, value] : terms) {
    if (value == 0.0) zero.emplace_back(name);
  }
  if (!zero.empty()) {
    std::cout << fmt::format(
        "note: the fit charges nothing for {}; the steps may not vary enough to tell (covered: "
        "{}). The cost file is trustworthy only within that range\n",
        fmt::join(zero, ", "), covered);
  }
}

}  // namespace

int run_profile(const ProfileArgs& args) {
  if (args.config.empty() && args.from_step_trace.empty()) {
    throw core::Error(
        "profile: give --config (time the deployment's model on a grid) or "
        "--from-step-trace (fit the steps of a recorded run)");
  }
  if (!args.check_config.empty()) {
    check_trace_against(args.from_step_trace, args.engine, args.check_config, args.plugin_dirs);
    return 0;
  }
  if (args.out.empty()) throw core::Error("profile: --out is required (the cost file to write)");
  check_output_path(args.out, "--out");
  check_distinct(args.out, "--out",
                 {{"--config", &args.config}, {"--from-step-trace", &args.from_step_trace}});
  if (!args.from_step_trace.empty()) {
    profile_from_step_trace(args);
    return 0;
  }
  core::PluginRegistry& registry = core::PluginRegistry::global();
  for (const std::string& dir : args.plugin_dirs) registry.add_search_directory(dir);
  const core::DeploymentConfig deployment = core::load_deployment(args.config, registry);
  if (deployment.engines.empty()) throw core::Error(args.config + ": the deployment has no engine");
  const uint32_t engine_index = args.engine.value_or(0);
  if (engine_index >= deployment.engines.size()) {
    throw core::Error(fmt::format("--engine {}: {} has {} engine{} (engine0 to engine{})",
                                  engine_index, args.config, deployment.engines.size(),
                                  deployment.engines.size() == 1 ? "" : "s",
                                  deployment.engines.size() - 1));
  }
  const core::EngineConfig& engine = deployment.engines[engine_index];

  // The model instance exactly as the engine builds it: same options, same config_dir.
  core::WallClock clock;
  core::HostServices host("profile", &clock);
  const std::string config_dir =
      deployment.file.has_parent_path() ? deployment.file.parent_path().string() : std::string(".");
  core::ModelInstance model(core::model_of(deployment, engine), config_dir, host);
  const hw_model_info info = model.info();
  const uint32_t max_model_len = engine.max_model_len ? engine.max_model_len : info.max_model_len;
  const uint64_t kv_tokens = engine.kv_blocks
                                 ? static_cast<uint64_t>(engine.kv_blocks) * engine.block_size
                                 : info.kv_capacity_tokens;
  const std::vector<core::ProfileShape> grid =
      core::profile_grid(args.quick, max_model_len, kv_tokens, engine.block_size, args.max_context);

  core::ProfileOptions options;
  options.block_size = engine.block_size;
  options.repetitions = args.quick ? std::min(args.repetitions, 3) : args.repetitions;
  if (!args.quiet) {
    std::cout << fmt::format("profiling model '{}' of {} on {} step shapes{}\n", model.name(),
                             args.config, grid.size(), args.quick ? " (quick)" : "");
    options.on_shape = [](const core::ProfileMeasurement& m) {
      std::cout << fmt::format("  {:<36} {:>10.3f} ms\n", m.shape.label, m.median_s * 1e3)
                << std::flush;
    };
  }
  std::vector<core::ProfileMeasurement> measurements = core::profile_model(model, grid, options);

  core::CostFileInfo about;
  about.source = args.config;
  about.model_name = model.name();
  about.cpu = core::cpu_model_name();
  about.threads = model_threads(core::model_of(deployment, engine));
  about.cores = std::thread::hardware_concurrency();
  about.date = core::utc_now_iso8601();
  about.quick = args.quick;
  fit_and_write(args, measurements, info, about);
  return 0;
}

}  // namespace headway::cmd
