// headway-conformance: loads one plugin through the same registry (and the same checks) as the
// server, runs the conformance profile of its kind and reports. Exit status 0 only when the plugin
// is conformant; 1 when it is not (a plugin that crashes the suite is not); 2 on a usage or loading
// error.
#include <fcntl.h>
#include <fmt/format.h>
#include <headway/conformance/child_process.h>
#include <headway/conformance/isolated_run.h>
#include <headway/conformance/report.h>
#include <headway/conformance/suite.h>
#include <headway/core/error.h>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cstdlib>
#include <iostream>
#include <sstream>

namespace {

using namespace headway;

std::set<std::string> split_features(const std::string& text) {
  std::set<std::string> features;
  std::stringstream in(text);
  std::string item;
  while (std::getline(in, item, ',')) {
    if (!item.empty()) features.insert(item);
  }
  return features;
}

int run(int argc, char** argv) {
  conformance::SuiteOptions options;
  std::string features, report_path, junit_path;
  CLI::App app{"Headway plugin conformance suite"};
  app.add_option("--plugin", options.plugin, "Plugin shared library (.so) to test")->required();
  app.add_option("--profile", options.profile,
                 "Profile to run (default: the core profile of the plugin's kind)");
  app.add_option("--features", features,
                 "Optional features the plugin declares, comma-separated (routers: pools, "
                 "disaggregation)");
  app.add_option("--options", options.options,
                 "The plugin's options as a TOML inline-table body: 'key = value, ...'");
  app.add_option("--report", report_path, "Write the JSON report here");
  app.add_option("--junit", junit_path, "Write JUnit XML here");
  app.add_option("--seed", options.seed, "Seed of the generated traces and data")->default_val(1);
  app.add_option("--mustpass", options.mustpass,
                 "The list of core tests to judge against, e.g. model-core-v1 (default: the "
                 "profile's newest): a plugin conformant to a list stays so");
  double timeout_s = 1800;
  app.add_option("--timeout", timeout_s,
                 "Seconds the profile may run before it is killed and reported as a FAIL")
      ->default_val(1800)
      // CLI::Range lets NaN through (every comparison with it is false); "nan" would then read as
      // a plugin that hangs.
      ->check(CLI::Validator(
          [](std::string& text) -> std::string {
            char* end = nullptr;
            const double value = std::strtod(text.c_str(), &end);
            if (end == text.c_str() || *end != '\0' || !(value >= 1.0 && value <= 86400.0)) {
              return "must be a number of seconds in [1, 86400], got " + text;
            }
            return {};
          },
          "[1, 86400]", "SECONDS"));
  app.add_option("--config-dir", options.config_dir,
                 "Directory a model resolves relative option paths against")
      ->default_val(".");
  // For the suite itself: a test runs this program again, as another process, to compute what it
  // compares (conformance::replay()); the JSON goes to stdout, nothing else.
  std::string replay;
  app.add_option("--replay", replay)->group("");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;
  }
  options.features = split_features(features);
  // In replay mode stdout carries the JSON alone: what the plugin prints goes to stderr.
  int replay_out = -1;
  if (!replay.empty()) {
    // Close-on-exec: a process the plugin starts must not hold the JSON's pipe open.
    replay_out = ::fcntl(STDOUT_FILENO, F_DUPFD_CLOEXEC, 3);
    if (replay_out < 0 || ::dup2(STDERR_FILENO, STDOUT_FILENO) < 0) {
      std::cerr << "headway-conformance: --replay: cannot set stdout aside\n";
      return 2;
    }
  }
  // Plugins log through the host; per-engine info lines would drown the results. To stderr:
  // stdout is the results (the tests that provoke failures make the host warn).
  spdlog::set_default_logger(spdlog::stderr_color_mt("conformance"));
  spdlog::set_level(spdlog::level::warn);

  conformance::SuiteContext context;
  context.options = options;
  // Run again through /proc/self/exe, which names this process's file even after it was replaced
  // on disk (a rebuild during a run).
  context.suite_executable = "/proc/self/exe";
  context.plugin.registry = &core::PluginRegistry::global();
  context.plugin.plugin = &context.plugin.registry->load_path(options.plugin);
  context.plugin.options_text = options.options;
  context.plugin.options =
      conformance::parse_options(*context.plugin.plugin->descriptor, options.options);
  const core::LoadedPlugin& plugin = *context.plugin.plugin;
  if (!replay.empty()) {
    const std::string json = conformance::replay(context, replay).dump() + "\n";
    std::cout << std::flush;  // the plugin's output, on stderr
    return conformance::write_all(replay_out, json) ? 0 : 2;
  }
  conformance::check_features(plugin.kind(), options.features);
  const std::string profile =
      options.profile.empty() ? conformance::default_profile(plugin.kind()) : options.profile;
  conformance::check_profile(profile, plugin);
  const std::string mustpass = conformance::mustpass_for(options, profile);

  conformance::RunInfo info;
  info.plugin_path = plugin.path.string();
  info.plugin_name = plugin.name();
  info.plugin_short_name = plugin.short_name();
  info.plugin_version = plugin.version();
  info.plugin_kind = std::string(core::kind_name(plugin.kind()));
  info.plugin_abi =
      fmt::format("{}.{}", plugin.descriptor->abi_major, plugin.descriptor->abi_minor);
  info.host_version = HEADWAY_VERSION;
  info.host_abi = fmt::format("{}.{}", HW_ABI_MAJOR, HW_ABI_MINOR);
  info.options = options.options;
  info.seed = options.seed;
  info.machine = conformance::machine_info();
  std::cout << fmt::format("plugin   {} {} ({}, ABI {}) from {}\n", info.plugin_name,
                           info.plugin_version, info.plugin_kind, info.plugin_abi, info.plugin_path)
            << fmt::format("host     headway {} (ABI {}) on {}, {} CPUs\n", info.host_version,
                           info.host_abi, info.machine.system, info.machine.cpus)
            << fmt::format("profile  {} ({}), seed {}\n\n", profile, mustpass, options.seed);

  // In a child process: a plugin that crashes still gets a report (a FAIL saying so).
  std::cout << std::flush;
  const conformance::ProfileResult result =
      conformance::run_profile_isolated(context, profile, timeout_s);
  for (const conformance::TestResult& t : result.tests) {
    std::cout << fmt::format("{:<16} {:<8} {:<34} {:7.2f}s  {}\n",
                             conformance::outcome_name(t.outcome), t.core ? "core" : "extended",
                             t.id, t.seconds, t.message);
  }
  for (const std::string& id : result.missing_core) {
    std::cout << fmt::format("{:<16} {:<8} {:<34} {:7.2f}s  {}\n", "FAIL", "core", id, 0.0,
                             "listed in the mustpass file but not run");
  }
  std::cout << "\n" << result.summary_line() << "\n";
  if (!report_path.empty()) {
    // Bytes that are not UTF-8 (from a plugin's messages) are replaced, never a reason to lose the
    // report.
    conformance::write_file(report_path,
                            conformance::report_json(info, result)
                                    .dump(2, ' ', false, nlohmann::json::error_handler_t::replace) +
                                "\n");
  }
  if (!junit_path.empty())
    conformance::write_file(junit_path, conformance::junit_xml(info, result));
  return result.conformant() ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const std::exception& e) {
    std::cerr << "headway-conformance: " << e.what() << "\n";
    return 2;
  }
}
