#include "simulate_command.h"

#include <fmt/format.h>
#include <headway/core/capacity_search.h>
#include <headway/core/comparison_table.h>
#include <headway/core/deployment_config.h>
#include <headway/core/engine_usage.h>
#include <headway/core/error.h>
#include <headway/core/file_output.h>
#include <headway/core/host_services.h>
#include <headway/core/record_memory.h>
#include <headway/core/report.h>
#include <headway/core/seed_sweep.h>
#include <headway/core/simulator.h>
#include <headway/core/slo.h>
#include <headway/core/step_trace.h>
#include <headway/core/workload.h>
#include <headway/core/workload_scaling.h>
#include <headway/serving/bench/workload_limits.h>
#include <spdlog/spdlog.h>

#include <cmath>
#include <filesystem>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <system_error>

#include "builtin_defaults.h"
#include "output_path.h"
#include "plot.h"
#include "positive.h"

namespace headway::cmd {

CLI::App* add_simulate_command(CLI::App& app, SimulateArgs& args) {
  CLI::App* cmd = app.add_subcommand(
      "simulate", "Run deployments on the virtual clock over a workload and report latencies");
  cmd->add_option(
      "--config", args.configs,
      "Deployment TOML (repeat to compare; the first is the baseline of the comparison); "
      "default: the built-in simulated deployment");
  cmd->add_option("--workload", args.workload, "Workload TOML; default: the built-in workload");
  cmd->add_option("--out", args.out,
                  "Write the report as JSON to this file (with several --config: an object with "
                  "the per-deployment reports and the comparison)");
  cmd->add_option("--step-trace", args.step_trace, "Write one JSON line per engine step");
  cmd->add_option("--plugin-dir", args.plugin_dirs, "Extra plugin directory (searched first)")
      ->check(CLI::ExistingDirectory);
  cmd->add_flag("--no-baseline", args.no_baseline,
                "Skip the second run without long requests (no HOL or stall factor)");
  cmd->add_option("--slo", args.slo,
                  "SLO for goodput (per request) and --find-capacity (p99 over all requests): "
                  "terms ttft, tpot, e2e with units s/ms/us; default ttft=2s,tpot=100ms");
  cmd->add_option("--plot", args.plot,
                  "Draw TTFT CDFs and stalls around a long prefill to this PNG (needs gnuplot)");
  CLI::Option* find_capacity =
      cmd->add_flag("--find-capacity", args.find_capacity,
                    "Find each deployment's highest request rate within the SLO, judged on the p99 "
                    "of all requests, by scaling the workload's arrival times");
  cmd->add_option("--capacity-limit", args.capacity_limit,
                  "Capacity probes replay only the first N requests of the workload (faster); "
                  "0 or omitted: all of them")
      ->needs(find_capacity);
  cmd->add_option("--capacity-scope", args.capacity_scope,
                  "Whose p99 --find-capacity judges: all requests (default) or only the short "
                  "(non-long) classes' requests")
      ->check(CLI::IsMember({"all", "short"}))
      ->needs(find_capacity);
  // The same prefix of the workload as `headway bench` sends with these options, so that a
  // measurement and its prediction cover the same requests.
  cmd->add_option("--num-requests", args.num_requests,
                  "Simulate only the first N requests of the workload")
      ->check(kPositive);
  cmd->add_option("--duration", args.duration,
                  "Simulate only the requests arriving in the first S seconds of the workload")
      ->check(kPositive);
  cmd->add_option("--seed", args.seed,
                  "Draw the workload with this seed instead of its file's `seed` (arrivals and "
                  "lengths drawn at random change; a trace's own rows do not)")
      ->check(kNonNegativeInteger);
  cmd->add_option("--rate-scale", args.rate_scale,
                  "Arrival rate times F: every arrival time divided by F (2 = twice the load, 0.5 "
                  "= half), before --num-requests and --duration; as --find-capacity's factor, and "
                  "the inverse of a workload's time_scale")
      ->transform(kPositiveExact);
  cmd->add_option("--seeds", args.seeds,
                  "Run every deployment over N draws of the workload (seeds S..S+N-1, S = --seed "
                  "or the file's seed) and report each figure's median and range, and in how many "
                  "seeds each deployment beat the first by more than 1%: one draw can mislead")
      ->check(CLI::Range(size_t{2}, size_t{10000}));
  cmd->add_flag("--quiet", args.quiet,
                "One summary line per deployment instead of its report (with --seeds: no line per "
                "seed, only the spread over the seeds)");
  cmd->add_flag("--details", args.details,
                "Print every deployment's full report even when comparing several (with --seeds: "
                "each seed's comparison table)");
  return cmd;
}

namespace {

struct DeploymentRun {
  core::DeploymentConfig deployment;
  core::SimulationResult run;
  double baseline_wall_seconds = 0;  // of the run without the long classes, when there was one
  core::Report report;
  std::vector<core::EngineUsage> engines;  // for the report's per-engine lines and --out
  std::optional<core::Capacity> capacity;
};

std::string summary_line(const DeploymentRun& d) {
  const core::Report& r = d.report;
  return fmt::format(
      "== {}: {} of {} requests finished; short p99 TTFT {}, long p99 TTFT {}; {:.1f} output "
      "tok/s; goodput {:.2f} req/s; HOL {} stall {}; {:.2f} s wall",
      d.deployment.name, r.overall.finished, r.overall.requests,
      core::duration_text(r.short_group.ttft.p99), core::duration_text(r.long_group.ttft.p99),
      r.overall.output_tokens_per_s, r.goodput ? r.goodput->requests_per_s : 0.0,
      r.hol_factor ? fmt::format("{:.2f}", *r.hol_factor) : "-",
      r.stall_factor ? fmt::format("{:.2f}", *r.stall_factor) : "-", d.run.wall_seconds);
}

// The most requests of `workload` that arrive at one instant (scaling the rate cannot spread them).
size_t largest_burst(const core::Workload& workload) {
  size_t best = workload.requests.empty() ? 0 : 1, run = 1;
  for (size_t i = 1; i < workload.requests.size(); ++i) {
    run = workload.requests[i].arrival == workload.requests[i - 1].arrival ? run + 1 : 1;
    best = std::max(best, run);
  }
  return best;
}

void print_capacities(const std::vector<DeploymentRun>& runs, const core::Slo& slo,
                      const core::Workload& probed, bool limited, bool short_only) {
  const size_t requests = probed.requests.size();
  size_t width = std::string_view("deployment").size();
  for (const DeploymentRun& d : runs) width = std::max(width, d.deployment.name.size());
  width += 2;
  std::cout << fmt::format(
      "capacity within {} (p99 over {}; {} requests per probe{}; rate = (requests - 1) / arrival "
      "span of the scaled workload; factor: the scale of the workload's arrival rate where the "
      "SLO held, fails at: the lowest scale that failed; --rate-scale with either replays that "
      "probe)\n",
      slo.text(), short_only ? "the short classes' requests" : "all requests", requests,
      limited ? ", --capacity-limit" : "");
  std::cout << fmt::format("{:<{}}{:>10}{:>9}{:>10}{:>8}{:>11}{:>11}\n", "deployment", width,
                           "req/s", "factor", "fails at", "probes", "p99 TTFT", "p99 TPOT");
  for (const DeploymentRun& d : runs) {
    const core::Capacity& c = *d.capacity;
    // The p99 figures at the capacity, or, when no rate met the SLO, at the lowest that failed.
    const double shown = c.factor > 0 ? c.factor : c.failing_factor;
    const core::CapacityProbe* at = nullptr;
    for (const core::CapacityProbe& p : c.probes) {
      if (p.factor == shown) at = &p;
    }
    // ">=": the SLO held at every factor probed, so the capacity is at least that.
    const std::string at_least = c.lower_bound() ? ">=" : "";
    std::cout << fmt::format(
        "{:<{}}{:>10}{:>9}{:>10}{:>8}{:>11}{:>11}\n", d.deployment.name, width,
        fmt::format("{}{:.2f}", at_least, c.requests_per_s),
        c.factor > 0 ? at_least + core::capacity_factor_text(c.factor) : "none",
        std::isfinite(c.failing_factor) ? core::capacity_factor_text(c.failing_factor) : "-",
        c.probes.size(), core::duration_text(at ? at->p99.ttft : NAN),
        core::duration_text(at ? at->p99.tpot : NAN));
  }
  const size_t burst = largest_burst(probed);
  for (const DeploymentRun& d : runs) {
    const core::Capacity& c = *d.capacity;
    if (c.lower_bound()) {
      std::cout << fmt::format(
          "{}: the SLO held at every rate probed, up to {}x the workload's: the capacity is at "
          "least {:.2f} req/s\n",
          d.deployment.name, core::capacity_factor_text(c.factor), c.requests_per_s);
    }
    if (c.factor > 0) continue;
    // Even a trickle fails: the load is not the problem, the requests themselves are (or requests
    // that arrive together, which a slower rate does not spread).
    std::cout << fmt::format(
        "{}: the SLO fails even at {}x the workload's rate (p99 figures above are that "
        "probe's): {}{}\n",
        d.deployment.name, core::capacity_factor_text(c.failing_factor),
        burst > 1 ? fmt::format("single requests miss it, or the {} that arrive at one instant "
                                "(a slower rate does not spread them)",
                                burst)
                  : "single requests miss it",
        short_only ? ""
                   : "; if long prompts are what misses it, --capacity-scope short judges the "
                     "short classes alone");
  }
}

// Which plugin files ran, so that a report says what produced it even when a name resolves to
// another file elsewhere (search order, a rebuilt plugin).
nlohmann::json plugins_json(const core::DeploymentConfig& deployment) {
  nlohmann::json out = nlohmann::json::array();
  const auto add = [&](const std::string& role, const core::PluginChoice& choice) {
    if (choice.plugin == nullptr) return;
    out.push_back({{"role", role},
                   {"name", choice.plugin->name()},
                   {"version", choice.plugin->version()},
                   {"file", choice.plugin->path.string()}});
  };
  add("model", deployment.model);
  add("router", deployment.router);
  if (deployment.kv_transport) add("kv_transport", *deployment.kv_transport);
  for (const core::EngineConfig& engine : deployment.engines) {
    add(engine.name + ".scheduler", engine.scheduler);
  }
  return out;
}

// The workload file (or the built-in one), drawn with `seed` when given.
core::Workload drawn_workload(const SimulateArgs& args, std::optional<uint64_t> seed) {
  return args.workload.empty() ? core::parse_workload(kDefaultWorkload, "<built-in workload>", seed)
                               : core::load_workload(args.workload, seed);
}

// The workload to simulate: drawn with `seed` when given, its arrival rate times --rate-scale, cut
// to the same prefix as `headway bench` sends with --num-requests / --duration.
core::Workload workload_for(const SimulateArgs& args, std::optional<uint64_t> seed) {
  return serving::bench::limit_workload(drawn_workload(args, seed), args.num_requests,
                                        args.duration, args.rate_scale);
}

// Why drawing the workload with another seed would simulate the same requests (for --seeds's
// refusal and --seed's warning); empty when another draw changes them.
std::string why_every_draw_is_the_same(const SimulateArgs& args, uint64_t seed) {
  const core::Workload a = drawn_workload(args, seed);
  const core::Workload b = drawn_workload(args, seed + 1);
  if (core::same_requests(a, b)) {
    return fmt::format(
        "the workload {} draws nothing at random (a trace replay without mixed-in classes, or "
        "fixed lengths at fixed times), so every seed gives the same requests",
        a.source);
  }
  // Cut as workload_for() cuts: --duration counts in the arrivals as --rate-scale moved them.
  const auto cut = [&](const core::Workload& w) {
    return serving::bench::limit_workload(w, args.num_requests, args.duration, args.rate_scale);
  };
  if (core::same_requests(cut(a), cut(b))) {
    const std::string kept = args.num_requests > 0
                                 ? fmt::format("--num-requests {}", args.num_requests)
                                 : fmt::format("--duration {}", args.duration);
    return fmt::format(
        "the requests {} keeps of {} are the same in every draw (what is drawn at random comes "
        "later in the workload): keep more of it",
        kept, a.source);
  }
  return {};
}

// Runs one deployment over the workload, and over `without_long` for the HOL and stall factors
// when it is given, and builds its report; the request records stay in `run.records` (the plot and
// the capacity search read them), the per-step records are summarised and dropped.
DeploymentRun simulate_deployment(core::DeploymentConfig deployment, const core::Workload& workload,
                                  const core::Workload* without_long, const core::Slo& slo,
                                  const std::string& step_trace_path) {
  DeploymentRun d;
  d.deployment = std::move(deployment);
  std::unique_ptr<core::StepTraceWriter> trace;
  if (!step_trace_path.empty()) trace = std::make_unique<core::StepTraceWriter>(step_trace_path);

  core::SimulationOptions options;
  options.step_trace = trace.get();
  d.run = core::simulate(d.deployment, workload, options);
  if (trace != nullptr) {
    trace->close();  // throws if the last lines could not be written; the size is final
    // One line per step: a long trace is hundreds of MB, which the operator should hear of.
    std::error_code error;
    const uintmax_t bytes = std::filesystem::file_size(step_trace_path, error);
    if (!error) {
      std::cerr << fmt::format("step trace written to {} ({} steps, {:.1f} MB)\n", step_trace_path,
                               d.run.steps, static_cast<double>(bytes) / 1e6);
    }
  }
  core::SimulationResult baseline;
  if (without_long != nullptr) {
    core::SimulationOptions baseline_options;
    baseline_options.run_label =
        " (the run without the long classes, for the HOL and stall factors)";
    baseline = core::simulate(d.deployment, *without_long, baseline_options);
  }

  d.report =
      core::build_report(workload, d.run.records, d.run.steps, d.run.simulated_seconds,
                         d.run.wall_seconds, without_long != nullptr ? &baseline.records : nullptr);
  d.report.preemptions = d.run.preemptions;
  d.report.step_summary = core::summarize_steps(d.run.step_records, d.run.kv_blocks_total);
  d.engines = core::engine_usage(d.deployment, d.run);
  core::add_goodput(d.report, slo, d.run.records);
  d.run.step_records = {};
  d.baseline_wall_seconds = baseline.wall_seconds;
  return d;
}

core::DeploymentConfig load_deployment_or_default(const std::string& file,
                                                  core::PluginRegistry& registry) {
  return file.empty()
             ? core::parse_deployment(kDefaultDeployment, "<built-in deployment>", registry)
             : core::load_deployment(file, registry);
}

// A deployment that served nothing is misconfigured for this workload (prompts longer than its
// max_model_len, a router with no engine of the role it needs): not a result to exit 0 on.
void require_some_served(const DeploymentRun& d, const core::Workload& workload) {
  if (workload.requests.empty() || d.run.rejected < workload.requests.size()) return;
  throw core::Error(fmt::format(
      "{}: deployment '{}' refused every one of the {} requests (the warning above says why)",
      d.deployment.file.empty() ? std::string("<built-in deployment>") : d.deployment.file.string(),
      d.deployment.name, workload.requests.size()));
}

std::vector<std::string> configs_or_default(const SimulateArgs& args) {
  return args.configs.empty() ? std::vector<std::string>{""} : args.configs;
}

// `--seeds N`: every deployment over N draws of the workload; one summary line per deployment and
// seed, then the spread of the comparison figures over the seeds (seed_sweep.h).
int run_seed_sweep(const SimulateArgs& args, const core::Slo& slo, core::PluginRegistry& registry) {
  const uint64_t first_seed = workload_for(args, args.seed).seed;  // the file's unless --seed
  if (first_seed > UINT64_MAX - (args.seeds - 1)) {
    throw core::Error(
        fmt::format("--seeds {} from seed {} runs past the largest seed", args.seeds, first_seed));
  }
  if (const std::string same = why_every_draw_is_the_same(args, first_seed); !same.empty()) {
    throw core::Error("--seeds: " + same);
  }

  std::vector<core::DeploymentConfig> deployments;
  for (const std::string& file : configs_or_default(args)) {
    deployments.push_back(load_deployment_or_default(file, registry));
  }
  std::vector<uint64_t> seeds;
  std::vector<core::Comparison> per_seed;
  std::vector<nlohmann::json> rejected_per_seed;
  for (size_t i = 0; i < args.seeds; ++i) {
    const uint64_t seed = first_seed + i;
    const core::Workload workload = workload_for(args, seed);
    const bool with_baseline = !args.no_baseline && workload.has_long_requests();
    const core::Workload without_long =
        with_baseline ? workload.without_long_classes() : core::Workload{};
    // One deployment's records at a time: each run is summarised into its report, then dropped.
    core::check_record_memory(
        workload,
        core::estimated_record_bytes(workload) + core::estimated_record_bytes(without_long),
        core::memory_limit_bytes());
    if (i == 0) {
      for (const std::string& warning : workload.warnings) spdlog::warn("{}", warning);
    }
    std::vector<core::Report> reports;
    std::vector<core::NamedReport> named;
    nlohmann::json rejected = nlohmann::json::object();
    reports.reserve(deployments.size());
    for (const core::DeploymentConfig& deployment : deployments) {
      DeploymentRun d = simulate_deployment(deployment, workload,
                                            with_baseline ? &without_long : nullptr, slo, "");
      if (!args.quiet) std::cout << fmt::format("seed {}: {}\n", seed, summary_line(d));
      // Even with --quiet: the latencies of a deployment that refused requests are over fewer.
      if (d.run.rejected > 0) {
        std::cout << fmt::format(
            "seed {}: rejected: {} requests could not be served by '{}' (see the warning)\n", seed,
            d.run.rejected, deployment.name);
      }
      require_some_served(d, workload);
      rejected[deployment.name] = d.run.rejected;
      reports.push_back(std::move(d.report));
      named.push_back({deployment.name, &reports.back()});
    }
    per_seed.push_back(core::compare_reports(named));
    rejected_per_seed.push_back(std::move(rejected));
    if (args.details) {
      std::cout << fmt::format("\ncomparison over {}, seed {} ({} requests):\n", workload.source,
                               seed, workload.requests.size());
      core::print_comparison(std::cout, per_seed.back());
      std::cout << "\n";
    }
    seeds.push_back(seed);
  }

  core::SeedSweep sweep = core::summarize_seeds(seeds, per_seed);
  sweep.workload = args.workload.empty() ? "<built-in workload>" : args.workload;
  std::cout << "\n";
  core::print_seed_sweep(std::cout, sweep);
  if (!args.out.empty()) {
    nlohmann::json runs = nlohmann::json::array();
    for (size_t i = 0; i < seeds.size(); ++i) {
      runs.push_back({{"seed", seeds[i]},
                      {"rejected", std::move(rejected_per_seed[i])},
                      {"comparison", core::comparison_to_json(per_seed[i])}});
    }
    const nlohmann::json doc = {{"rate_scale", args.rate_scale},
                                {"per_seed", std::move(runs)},
                                {"sweep", core::seed_sweep_to_json(sweep)}};
    core::write_output_file(args.out, doc.dump(2) + "\n", "the report");
  }
  return 0;
}

}  // namespace

int run_simulate(const SimulateArgs& args) {
  // Each deployment is built once per run (with and without the long classes, per seed, per
  // capacity probe): what its plugins say at create() is said once.
  const core::RepeatedCreateLinesAtDebug said_once;
  core::PluginRegistry& registry = core::PluginRegistry::global();
  for (const std::string& dir : args.plugin_dirs) registry.add_search_directory(dir);
  if (!args.step_trace.empty() && args.configs.size() > 1) {
    throw core::Error("--step-trace records one deployment; give a single --config with it");
  }
  if (args.seeds > 0) {
    // Each seed's runs are summarised and dropped: nothing is left to trace, plot or probe.
    for (const auto& [flag, given] :
         {std::pair<std::string_view, bool>{"--step-trace", !args.step_trace.empty()},
          {"--plot", !args.plot.empty()},
          {"--find-capacity", args.find_capacity}}) {
      if (given) {
        throw core::Error(fmt::format(
            "{} works on one draw of the workload, not with --seeds (use --seed S for the draw "
            "you want)",
            flag));
      }
    }
  }
  // Cheap checks first, so that a typo does not cost the simulations.
  const core::Slo slo = args.slo ? core::parse_slo(*args.slo) : core::default_slo();
  if (!args.plot.empty()) {
    require_gnuplot();
    check_output_path(args.plot, "--plot", ".png");
  }
  if (!args.out.empty()) check_output_path(args.out, "--out");
  if (!args.step_trace.empty()) check_output_path(args.step_trace, "--step-trace");
  // No output may overwrite an input or another output.
  for (const auto& [flag, path] :
       {std::pair<std::string_view, const std::string*>{"--out", &args.out},
        {"--step-trace", &args.step_trace},
        {"--plot", &args.plot}}) {
    check_distinct(*path, flag, {{"--workload", &args.workload}});
    for (const std::string& config : args.configs)
      check_distinct(*path, flag, {{"--config", &config}});
  }
  check_distinct(args.out, "--out", {{"--step-trace", &args.step_trace}, {"--plot", &args.plot}});
  check_distinct(args.step_trace, "--step-trace", {{"--plot", &args.plot}});
  if (args.seeds > 0) return run_seed_sweep(args, slo, registry);

  const core::Workload workload = workload_for(args, args.seed);
  for (const std::string& warning : workload.warnings) spdlog::warn("{}", warning);
  if (args.seed) {
    if (const std::string same = why_every_draw_is_the_same(args, *args.seed); !same.empty()) {
      spdlog::warn("--seed {}: {}", *args.seed, same);
    }
  }
  if (args.find_capacity) {
    core::check_capacity_searchable(core::first_requests(workload, args.capacity_limit));
  }
  const bool with_baseline = !args.no_baseline && workload.has_long_requests();
  const core::Workload without_long =
      with_baseline ? workload.without_long_classes() : core::Workload{};

  const std::vector<std::string> configs = configs_or_default(args);
  // Every deployment's records stay until the end (the comparison and the plot read them), the
  // baseline's only for its own deployment's report, a capacity probe's (at most the workload)
  // beside all of them.
  const uint64_t one_run = core::estimated_record_bytes(workload);
  core::check_record_memory(workload,
                            one_run * configs.size() + core::estimated_record_bytes(without_long) +
                                (args.find_capacity ? one_run : 0),
                            core::memory_limit_bytes());
  const bool comparing = configs.size() > 1;
  const bool full_reports = args.details || (!comparing && !args.quiet);

  std::vector<DeploymentRun> runs;
  runs.reserve(configs.size());
  for (const std::string& file : configs) {
    DeploymentRun& d = runs.emplace_back(
        simulate_deployment(load_deployment_or_default(file, registry), workload,
                            with_baseline ? &without_long : nullptr, slo, args.step_trace));
    if (full_reports) {
      std::cout << fmt::format(
          "== {}  ({} engine(s), workload {}{}: {} requests, seed {})\n", d.deployment.name,
          d.deployment.engines.size(), workload.source,
          args.rate_scale != 1 ? fmt::format(" at {}x its rate", args.rate_scale) : "",
          workload.requests.size(), workload.seed);
      core::print_engine_models(std::cout, d.engines);
      core::print_report(std::cout, d.report);
      std::cout << "\nper engine (busy: share of the run's simulated time spent in steps):\n";
      core::print_engine_usage(std::cout, d.engines);
      core::print_plugin_metrics(std::cout, d.run.plugin_metrics);
      if (with_baseline) {
        std::cerr << fmt::format("baseline without long requests took {:.3f} s of wall time\n",
                                 d.baseline_wall_seconds);
      }
    } else {
      std::cout << summary_line(d) << "\n";
    }
    if (d.run.rejected > 0) {
      std::cout << fmt::format("rejected: {} requests could not be served (see the warning)\n",
                               d.run.rejected);
    }
    if (d.run.unsent_turns > 0) {
      std::cout << fmt::format(
          "unsent: {} conversation turns followed a turn without an answer (see the warning)\n",
          d.run.unsent_turns);
    }
    if (full_reports) std::cout << "\n";
  }

  std::optional<core::Comparison> comparison;
  if (comparing) {
    std::vector<core::NamedReport> named;
    for (const DeploymentRun& d : runs) named.push_back({d.deployment.name, &d.report});
    comparison = core::compare_reports(named);
    std::cout << fmt::format("\ncomparison over {} ({} requests), baseline {}:\n", workload.source,
                             workload.requests.size(), runs.front().deployment.name);
    core::print_comparison(std::cout, *comparison);
  }

  if (args.find_capacity) {
    const core::Workload probe_workload = core::first_requests(workload, args.capacity_limit);
    core::CapacityOptions options;
    options.short_classes_only = args.capacity_scope == "short";
    for (DeploymentRun& d : runs) {
      d.capacity = core::find_capacity(d.deployment, probe_workload, slo, options);
    }
    std::cout << "\n";
    print_capacities(runs, slo, probe_workload,
                     probe_workload.requests.size() < workload.requests.size(),
                     options.short_classes_only);
  }

  if (!args.plot.empty()) {
    std::vector<PlotRun> plot_runs;
    for (const DeploymentRun& d : runs) plot_runs.push_back({d.deployment.name, &d.run.records});
    write_plot(args.plot, workload, plot_runs);
    std::cerr << fmt::format("plot written to {}\n", args.plot);
  }

  if (!args.out.empty()) {
    nlohmann::json reports = nlohmann::json::array();
    for (const DeploymentRun& d : runs) {
      nlohmann::json j = core::report_to_json(d.report);
      j["deployment"] = d.deployment.name;
      j["deployment_file"] = d.deployment.file.string();
      j["workload_seed"] = workload.seed;
      j["rate_scale"] = args.rate_scale;
      j["plugins"] = plugins_json(d.deployment);
      j["rejected"] = d.run.rejected;
      j["unsent_turns"] = d.run.unsent_turns;
      j["engines"] = core::engine_usage_to_json(d.engines);
      j["plugin_metrics"] = core::plugin_metrics_to_json(d.run.plugin_metrics);
      j["capacity"] = d.capacity ? core::capacity_to_json(*d.capacity) : nlohmann::json(nullptr);
      reports.push_back(std::move(j));
    }
    // One deployment keeps the report object itself (the format before comparisons existed).
    nlohmann::json doc =
        reports.size() == 1 ? reports[0]
                            : nlohmann::json{{"workload", workload.source},
                                             {"workload_seed", workload.seed},
                                             {"rate_scale", args.rate_scale},
                                             {"slo", slo.text()},
                                             {"deployments", std::move(reports)},
                                             {"comparison", core::comparison_to_json(*comparison)}};
    core::write_output_file(args.out, doc.dump(2) + "\n", "the report");
  }
  for (const DeploymentRun& d : runs) require_some_served(d, workload);
  return 0;
}

}  // namespace headway::cmd
