#include "bench_command.h"

#include <fmt/format.h>
#include <headway/core/deployment_config.h>
#include <headway/core/error.h>
#include <headway/core/file_output.h>
#include <headway/core/input_file.h>
#include <headway/core/plugin_registry.h>
#include <headway/core/report.h>
#include <headway/core/simulator.h>
#include <headway/core/slo.h>
#include <headway/core/workload.h>
#include <headway/core/workload_scaling.h>
#include <headway/serving/bench/bench_runner.h>
#include <headway/serving/bench/bench_summary.h>
#include <headway/serving/bench/prediction_comparison.h>
#include <headway/serving/bench/progress_reporter.h>
#include <headway/serving/bench/server_endpoint.h>
#include <headway/serving/bench/workload_limits.h>
#include <signal.h>
#include <spdlog/spdlog.h>

#include <atomic>
#include <csignal>
#include <filesystem>
#include <iostream>
#include <nlohmann/json.hpp>
#include <optional>

#include "output_path.h"
#include "plot.h"
#include "positive.h"

namespace headway::cmd {

namespace bench = serving::bench;

CLI::App* add_bench_command(CLI::App& app, BenchArgs& args) {
  CLI::App* cmd = app.add_subcommand(
      "bench",
      "Measure a running OpenAI-compatible server with a workload, as simulate predicts it");
  cmd->add_option("--url", args.url, "Server base URL, e.g. http://127.0.0.1:8000")->required();
  cmd->add_option("--workload", args.workload, "Workload TOML (docs/workloads.md)")->required();
  cmd->add_option("--model", args.model,
                  "Model name to send; default: the first one GET /v1/models lists");
  cmd->add_option("--api-key-file", args.api_key_file,
                  "File whose first line is the API key (sent as a bearer token)");
  cmd->add_option("--out", args.out, "Write the report as JSON to this file");
  cmd->add_option("--plot", args.plot,
                  "Draw TTFT CDFs and stalls (measured, and predicted with --predict-config) to "
                  "this PNG, or to bench.png in this directory (needs gnuplot)");
  cmd->add_option("--slo", args.slo,
                  "SLO for goodput: terms ttft, tpot, e2e with units s/ms/us; default "
                  "ttft=2s,tpot=100ms");
  cmd->add_option("--predict-config", args.predict_config,
                  "Also simulate the workload on this deployment TOML and print the prediction "
                  "beside the measurement");
  cmd->add_option("--plugin-dir", args.plugin_dirs,
                  "Extra plugin directory for --predict-config (searched first)")
      ->check(CLI::ExistingDirectory);
  cmd->add_option("--max-concurrency", args.max_concurrency,
                  "Most requests in flight at once; a request due beyond it waits (its lateness "
                  "is reported)")
      ->check(CLI::Range(size_t{1}, size_t{4096}))
      ->capture_default_str();
  cmd->add_option("--num-requests", args.num_requests,
                  "Send only the first N requests of the workload")
      ->check(kPositive);
  cmd->add_option("--duration", args.duration,
                  "Send only the requests arriving in the first S seconds of the workload")
      ->check(kPositive);
  cmd->add_option("--seed", args.seed,
                  "Draw the workload with this seed instead of its file's (as `headway simulate "
                  "--seed`, so that a draw a seed sweep singled out can be measured)")
      ->check(kNonNegativeInteger);
  cmd->add_option("--rate-scale", args.rate_scale,
                  "Arrival rate times F: every arrival time divided by F (2 = twice the load, 0.5 "
                  "= half), before --num-requests and --duration; as --find-capacity's factor, and "
                  "the inverse of a workload's time_scale")
      ->check(kPositive);
  cmd->add_option("--vocab", args.vocab,
                  "Vocabulary size of the served model (prompt token ids are drawn below it); "
                  "default: what GET /v1/models says, else ids 32-127")
      ->check(kPositive);
  cmd->add_option("--timeout", args.timeout,
                  "Seconds a stream may stay silent before the request counts as failed")
      ->check(kPositive);
  cmd->add_flag("--hol-baseline", args.hol_baseline,
                "Run the workload a second time without its long classes, for the HOL and stall "
                "factors (doubles the run)");
  cmd->add_flag("--quiet", args.quiet, "No progress on stderr");
  return cmd;
}

namespace {

// What the server serves, as the requests need it.
struct Target {
  bench::ServerEndpoint endpoint;
  std::string model;
  bench::TokenIdRange token_ids;
  std::optional<uint32_t> max_model_len;
};

Target find_target(const BenchArgs& args) {
  Target target;
  target.endpoint = bench::parse_server_url(args.url);
  target.endpoint.read_timeout_s = args.timeout;
  if (!args.api_key_file.empty()) {
    target.endpoint.api_key = core::read_api_key_file(args.api_key_file);
  }
  std::vector<bench::ServedModel> models;
  try {
    models = bench::list_models(target.endpoint);
  } catch (const core::Error& e) {
    // A server that cannot be reached would fail every request: stop now, --model or not.
    if (e.code() == HW_UNAVAILABLE) throw;
    // A refused key: the message already says how to give one, and --model would not help.
    if (args.model.empty() && e.code() == HW_FAILED_PRECONDITION) throw;
    if (args.model.empty()) {
      throw core::Error(fmt::format("{} (give --model to run without the model list)", e.what()),
                        e.code());
    }
    std::cerr << fmt::format("headway bench: warning: {}; sending model '{}' anyway\n", e.what(),
                             args.model);
  }
  const bench::ServedModel* served = nullptr;
  if (!models.empty()) {
    served = &models.front();
    if (!args.model.empty()) {
      served = nullptr;
      std::string names;
      for (const bench::ServedModel& m : models) {
        if (m.id == args.model) served = &m;
        names += (names.empty() ? "" : ", ") + m.id;
      }
      if (!served) {
        throw core::Error(fmt::format("--model {}: {} does not serve it (it serves: {})",
                                      args.model, args.url, names));
      }
    }
  } else if (args.model.empty()) {
    throw core::Error(fmt::format("GET {}{}/v1/models lists no model; give --model",
                                  target.endpoint.origin, target.endpoint.base_path));
  }
  target.model = served ? served->id : args.model;
  std::optional<uint32_t> vocab;
  if (args.vocab > 0) {
    vocab = args.vocab;
  } else if (served) {
    vocab = served->vocab_size;
  }
  target.token_ids = bench::token_id_range(vocab);
  if (served) target.max_model_len = served->max_model_len;
  return target;
}

// Set by the first SIGINT or SIGTERM during a run: it stops sending, closes its streams and reports
// what it measured. The handler then gives both signals their default action back, so a second
// one of either ends the process at once, as an impatient operator (or `timeout`, escalating from
// SIGINT to SIGTERM) expects. It replaces an inherited SIG_IGN too: a bench started in the
// background of a script can still be stopped with SIGINT.
std::atomic<bool> g_stop{false};
volatile std::sig_atomic_t g_stop_signal = 0;
extern "C" void on_stop_signal(int signal) {
  g_stop_signal = signal;
  g_stop.store(true);
  struct sigaction fallback {};
  fallback.sa_handler = SIG_DFL;
  sigemptyset(&fallback.sa_mask);
  sigaction(SIGINT, &fallback, nullptr);  // async-signal-safe
  sigaction(SIGTERM, &fallback, nullptr);
}

// Installs on_stop_signal for SIGINT and SIGTERM for its lifetime.
class StopOnSignals {
 public:
  StopOnSignals() {
    struct sigaction action {};
    action.sa_handler = on_stop_signal;
    sigemptyset(&action.sa_mask);
    action.sa_flags = 0;
    sigaction(SIGINT, &action, &old_int_);
    sigaction(SIGTERM, &action, &old_term_);
  }
  ~StopOnSignals() {
    sigaction(SIGINT, &old_int_, nullptr);
    sigaction(SIGTERM, &old_term_, nullptr);
  }
  StopOnSignals(const StopOnSignals&) = delete;
  StopOnSignals& operator=(const StopOnSignals&) = delete;

 private:
  struct sigaction old_int_ {};
  struct sigaction old_term_ {};
};

// The run of one workload, with progress on stderr unless quiet.
bench::BenchRun measure(const core::Workload& workload, const Target& target,
                        const BenchArgs& args) {
  bench::BenchOptions options;
  options.stop = &g_stop;
  options.endpoint = target.endpoint;
  options.model = target.model;
  options.token_ids = target.token_ids;
  options.max_concurrency = args.max_concurrency;
  bench::ProgressCounters counters;
  std::optional<bench::ProgressReporter> progress;
  const bench::RunClock clock;
  if (!args.quiet) {
    const bool terminal = bench::is_terminal(stderr);
    progress.emplace(stderr, terminal, workload.requests.size(), counters, clock,
                     terminal ? 0.2 : 10.0);
    options.progress = &counters;
  }
  bench::BenchRun run = bench::run_bench(workload, options);
  if (progress) progress->stop();
  return run;
}

struct Prediction {
  core::DeploymentConfig deployment;
  core::SimulationResult run;
  core::Report report;
};

// What `headway simulate --config <deployment>` reports for the same workload, as bench sends it:
// each request asking for its output as max_tokens (a class's max_tokens is for simulate alone).
Prediction predict(core::DeploymentConfig deployment, core::Workload workload,
                   const core::Slo& slo) {
  for (core::WorkloadRequest& r : workload.requests) r.max_tokens = 0;
  Prediction p;
  p.deployment = std::move(deployment);
  core::SimulationOptions options;
  options.run_label = " (the prediction)";
  p.run = core::simulate(p.deployment, workload, options);
  const bool with_baseline = workload.has_long_requests();
  core::SimulationResult baseline;
  if (with_baseline) {
    options.run_label = " (the prediction without the long classes)";
    baseline = core::simulate(p.deployment, workload.without_long_classes(), options);
  }
  p.report = core::build_report(workload, p.run.records, p.run.steps, p.run.simulated_seconds,
                                p.run.wall_seconds, with_baseline ? &baseline.records : nullptr);
  p.report.preemptions = p.run.preemptions;
  p.report.step_summary = core::summarize_steps(p.run.step_records, p.run.kv_blocks_total);
  core::add_goodput(p.report, slo, p.run.records);
  return p;
}

std::filesystem::path plot_file(const std::string& plot) {
  std::filesystem::path path(plot);
  if (path.extension() == ".png") return path;
  std::error_code ec;
  std::filesystem::create_directories(path, ec);
  if (ec)
    throw core::Error(
        fmt::format("--plot {}: cannot create the directory: {}", plot, ec.message()));
  return path / "bench.png";
}

size_t too_long_requests(const core::Workload& workload, std::optional<uint32_t> max_model_len) {
  if (!max_model_len) return 0;
  size_t count = 0;
  for (const core::WorkloadRequest& r : workload.requests) {
    count += uint64_t{r.prompt_tokens} + r.output_tokens > *max_model_len;
  }
  return count;
}

}  // namespace

int run_bench(const BenchArgs& args) {
  // Everything that can be checked without the server first, then the server, then the run.
  const core::Slo slo = args.slo ? core::parse_slo(*args.slo) : core::default_slo();
  std::error_code ec;
  if (!args.plot.empty() && !args.out.empty() &&
      std::filesystem::weakly_canonical(std::filesystem::absolute(args.plot), ec) ==
          std::filesystem::weakly_canonical(std::filesystem::absolute(args.out), ec)) {
    // Before plot_file(), which makes a directory of a --plot without .png.
    throw core::Error(fmt::format("--out and --plot name the same path, {}", args.out));
  }
  if (args.plot == "-") check_output_path(args.plot, "--plot");  // refuses "-" before plot_file()
  if (!args.plot.empty()) {
    require_gnuplot();
    check_output_path(plot_file(args.plot).string(), "--plot", ".png");
  }
  if (!args.out.empty()) check_output_path(args.out, "--out");
  const std::string plot = args.plot.empty() ? std::string() : plot_file(args.plot).string();
  for (const auto& [flag, path] :
       {std::pair<std::string_view, const std::string*>{"--out", &args.out}, {"--plot", &plot}}) {
    check_distinct(*path, flag,
                   {{"--workload", &args.workload}, {"--predict-config", &args.predict_config}});
  }
  check_distinct(args.out, "--out", {{"--plot", &plot}});
  const core::Workload workload =
      bench::limit_workload(core::load_workload(args.workload, args.seed), args.num_requests,
                            args.duration, args.rate_scale);
  for (const std::string& warning : workload.warnings) spdlog::warn("{}", warning);
  std::optional<core::DeploymentConfig> deployment;
  if (!args.predict_config.empty()) {
    core::PluginRegistry& registry = core::PluginRegistry::global();
    for (const std::string& dir : args.plugin_dirs) registry.add_search_directory(dir);
    deployment = core::load_deployment(args.predict_config, registry);
    // A prediction is a simulation: a real model would run the whole workload again here, beside
    // the server being measured, and its "prediction" would be this machine's speed.
    if (const std::string model = deployment->model.plugin->short_name(); model != "sim") {
      spdlog::warn(
          "--predict-config {}: its model '{}' is not the simulated one, so the prediction "
          "runs the whole workload for real on this machine, beside the server being measured; "
          "give a deployment whose model is 'sim' (with a cost file from `headway profile`)",
          args.predict_config, model);
    }
  }
  const Target target = find_target(args);
  if (const size_t n = too_long_requests(workload, target.max_model_len); n > 0) {
    std::cerr << fmt::format(
        "headway bench: warning: {} requests need more than max_model_len {} tokens; the server "
        "will refuse them\n",
        n, *target.max_model_len);
  }

  std::cout << fmt::format(
      "== bench {} (model {}): workload {}{}: {} requests, prompt token ids {}-{}, at most {} in "
      "flight\n",
      args.url, target.model.empty() ? "-" : target.model, workload.source,
      args.rate_scale != 1 ? fmt::format(" at {}x its rate", args.rate_scale) : "",
      workload.requests.size(), target.token_ids.first, target.token_ids.end - 1,
      args.max_concurrency);
  const StopOnSignals stop_on_signals;
  bench::BenchRun run = measure(workload, target, args);
  // Interrupted: the report covers the requests sent (the first ones in arrival order, and turns
  // released by their conversations' answers); those cut in flight count as failed
  // ("interrupted"), and nothing more is run.
  const bool interrupted = run.interrupted;
  if (interrupted && run.requests_sent == 0) {
    const char* name = g_stop_signal == SIGTERM ? "SIGTERM" : "SIGINT";
    std::cerr << fmt::format("headway bench: {}: stopped before any request was sent\n", name);
    return 128 + static_cast<int>(g_stop_signal);
  }
  const core::Workload sent_part = interrupted ? bench::keep_sent(workload, run) : core::Workload{};
  const core::Workload& measured = interrupted ? sent_part : workload;
  if (interrupted) {
    const char* name = g_stop_signal == SIGTERM ? "SIGTERM" : "SIGINT";
    std::cerr << fmt::format(
        "headway bench: {}: stopped after sending {} of {} requests; the report below covers "
        "those, the streams cut counted as failed (interrupted); no baseline or prediction run\n",
        name, run.requests_sent, workload.requests.size());
  }
  std::optional<bench::BenchRun> baseline;
  const bool with_baseline = !interrupted && args.hol_baseline && workload.has_long_requests();
  if (with_baseline) {
    if (!args.quiet) std::cerr << "bench: baseline run without the long classes\n";
    baseline = measure(workload.without_long_classes(), target, args);
    if (baseline->interrupted) {
      baseline.reset();
      std::cerr << "headway bench: the baseline run was interrupted: no HOL or stall factor\n";
    }
  }

  core::Report report = core::build_report(measured, run.records, 0, 0, run.wall_seconds,
                                           baseline ? &baseline->records : nullptr);
  report.measured = true;
  // A server says what it found cached in each usage's prompt_tokens_details (Headway does).
  report.cached_prompt_tokens_known = run.cached_tokens_reported;
  core::add_goodput(report, slo, run.records);
  core::print_report(std::cout, report);
  const bench::BenchSummary summary = bench::summarize_bench(measured, run, args.max_concurrency);
  std::cout << "\n";
  bench::print_bench_summary(std::cout, summary);

  std::optional<Prediction> prediction;
  std::vector<bench::PredictionRow> rows;
  if (deployment && !interrupted && !g_stop.load()) {
    prediction = predict(std::move(*deployment), workload, slo);
    rows = bench::compare_prediction(report, prediction->report);
    std::cout << "\n";
    bench::print_prediction(std::cout, prediction->deployment.name, rows);
    // The measured latencies start at each send, the prediction's at the arrival: sends that a
    // full --max-concurrency held back make the two disagree by that wait, which is no error of
    // the prediction (a walk saw +880% on a burst of 12 at --max-concurrency 2).
    if (summary.lateness.count > 0 && summary.lateness.p90 > 0.05) {
      std::cout << fmt::format(
          "note: sends were late by p50 {} / p90 {} (at most {} in flight, --max-concurrency): "
          "the measured TTFT starts at the send, the predicted one at the arrival, so the "
          "prediction includes a wait the measurement leaves out\n",
          core::duration_text(summary.lateness.p50), core::duration_text(summary.lateness.p90),
          args.max_concurrency);
    }
  }

  if (!args.plot.empty()) {
    const std::filesystem::path png = plot_file(args.plot);
    std::vector<PlotRun> runs{{"measured", &run.records}};
    if (prediction)
      runs.push_back({"predicted: " + prediction->deployment.name, &prediction->run.records});
    write_plot(png, measured, runs);
    std::cerr << fmt::format("plot written to {}\n", png.string());
  }

  if (!args.out.empty()) {
    nlohmann::json doc = core::report_to_json(report);
    doc["bench"] = bench::bench_summary_to_json(summary);
    doc["bench"]["url"] = args.url;
    doc["bench"]["model"] = target.model;
    doc["bench"]["workload"] = workload.source;
    doc["bench"]["rate_scale"] = args.rate_scale;
    doc["bench"]["hol_baseline"] = baseline.has_value();
    doc["bench"]["interrupted"] = g_stop.load();
    doc["bench"]["requests_in_workload"] = workload.requests.size();
    doc["bench"]["answers_without_ids"] = run.answers_without_ids;
    if (prediction) {
      nlohmann::json predicted = core::report_to_json(prediction->report);
      predicted["deployment"] = prediction->deployment.name;
      predicted["deployment_file"] = prediction->deployment.file.string();
      predicted["rejected"] = prediction->run.rejected;
      doc["prediction"] = {{"report", std::move(predicted)},
                           {"comparison", bench::prediction_to_json(rows)}};
    }
    core::write_output_file(args.out, doc.dump(2) + "\n", "the report");
  }

  // A signal during the baseline run or the prediction also ends with its status.
  if (g_stop.load()) return 128 + static_cast<int>(g_stop_signal);
  if (summary.overall.succeeded == 0 && summary.overall.sent > 0) {
    throw core::Error(fmt::format("no request succeeded ({} failed); first failure: {}",
                                  summary.overall.failed, summary.overall.first_failure),
                      HW_UNAVAILABLE);
  }
  if (summary.overall.failed > 0) {
    // The run's figures stand (exit 0, as vLLM's benchmark), but a script reading only the
    // status and stderr should still hear that part of the load failed.
    std::cerr << fmt::format(
        "headway bench: warning: {} of {} requests failed (their latencies and tokens are left "
        "out of the figures); first failure: {}\n",
        summary.overall.failed, summary.overall.succeeded + summary.overall.failed,
        summary.overall.first_failure);
  }
  if (run.answers_without_ids > 0) {
    // The closed loop then resends stand-ins, not the answers, and what the cache finds of them
    // is not a real chat's.
    std::cerr << fmt::format(
        "headway bench: warning: {} answers of conversations that wait for answers came without "
        "their token ids (does the server ignore return_token_ids?); their next turns resent "
        "stand-in ids of the nominal answer's length instead\n",
        run.answers_without_ids);
  }
  return 0;
}

}  // namespace headway::cmd
