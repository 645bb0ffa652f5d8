// The `headway` command line: simulate, serve, bench, plan, profile, plugin
// describe|validate|list, model make-tiny. Every failure ends in one line on stderr naming what is
// wrong, and a non-zero exit code: 2 for a command line the parser refuses or an internal error
// (an exception that is not a core::Error: a bug), 1 for everything else.
#include <headway/core/error.h>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>

#include "bench_command.h"
#include "builtin_defaults.h"
#ifdef HEADWAY_SERVE_HTTP
#include "chat_template_command.h"
#endif
#include "model_command.h"
#include "plan_command.h"
#include "plugin_command.h"
#include "plugin_crash_report.h"
#include "profile_command.h"
#include "serve_command.h"
#include "simulate_command.h"

namespace {

// OpenMP (the cpu model's oneDNN and its own loops) spins for about 300,000 iterations at every
// barrier by default. When anything else keeps the cores busy, the spinning threads are preempted
// at each of the hundreds of barriers of a step: a decode step of the default deployment took
// 316 ms with it and 6.9 ms with a spin of 1,000 on a 2-core machine beside two busy processes;
// idle, the two are within run-to-run noise (docs/performance.md). libgomp reads the setting once,
// when a plugin first loads it: hence here, before any plugin loads, and only when the operator
// chose neither a wait policy nor a spin count.
void prefer_short_openmp_spins() {
  if (std::getenv("OMP_WAIT_POLICY") == nullptr && std::getenv("GOMP_SPINCOUNT") == nullptr) {
    ::setenv("GOMP_SPINCOUNT", "1000", 0);
  }
}

// Set when the command has finished and main returns: an exit() before that is not Headway's.
std::atomic<bool> command_finished{false};

// A plugin (or a library it uses) that calls exit() ends the process with its own status, 0
// included, and without the command's output: a run that looks successful. Headway itself never
// calls exit(). Registered with atexit(); async-signal-safe calls only.
void refuse_an_exit_during_the_command() {
  if (command_finished.load()) return;
  // atexit handlers run on the thread that called exit(): its plugin call mark names the plugin.
  if (!headway::cmd::write_running_plugin_call(
          {"headway: error: exit() was called during "},
          " (the plugin, or a library it uses, ended the process); the command's results are "
          "missing\n")) {
    static constexpr char kMessage[] =
        "headway: error: exit() was called before the command finished (by a plugin or a "
        "library it uses); the command's results are missing\n";
    (void)!::write(STDERR_FILENO, kMessage, sizeof(kMessage) - 1);
  }
  std::_Exit(70);  // EX_SOFTWARE
}

int run_cli(int argc, char** argv) {
  CLI::App app{"Headway: LLM serving that keeps short requests fast while long prompts are served"};
  app.require_subcommand(1);
  app.set_version_flag("--version", std::string("headway ") + headway::cmd::kVersion);
  std::string log_level = "warn";
  // The last one given wins: a wrapper's default before the subcommand, the user's after it.
  app.add_option("--log-level", log_level, "trace, debug, info, warn, error")
      ->check(CLI::IsMember({"trace", "debug", "info", "warn", "error"}))
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  // Subcommands inherit this: an option a subcommand does not know is tried on the app, so
  // `headway simulate --log-level debug` works as `headway --log-level debug simulate` does.
  app.fallthrough();

  headway::cmd::BenchArgs bench_args;
  CLI::App* bench = headway::cmd::add_bench_command(app, bench_args);
  headway::cmd::SimulateArgs simulate_args;
  CLI::App* simulate = headway::cmd::add_simulate_command(app, simulate_args);
  headway::cmd::PluginArgs plugin_args;
  CLI::App* plugin = headway::cmd::add_plugin_command(app, plugin_args);
  headway::cmd::ModelArgs model_args;
  CLI::App* model = headway::cmd::add_model_command(app, model_args);
  headway::cmd::ProfileArgs profile_args;
  CLI::App* profile = headway::cmd::add_profile_command(app, profile_args);
  headway::cmd::ServeArgs serve_args;
  CLI::App* serve = headway::cmd::add_serve_command(app, serve_args);
  headway::cmd::PlanArgs plan_args;
  CLI::App* plan = headway::cmd::add_plan_command(app, plan_args);
#ifdef HEADWAY_SERVE_HTTP
  headway::cmd::ChatTemplateArgs chat_template_args;
  CLI::App* chat_template = headway::cmd::add_chat_template_command(app, chat_template_args);
#endif

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // --help and --version exit 0; every refused flag 2, the usual code for a usage error (and
    // headway-conformance's), rather than CLI11's 100-odd codes per kind of mistake.
    return app.exit(e) == 0 ? 0 : 2;
  }
  // Log lines go to stderr, as every command's errors do: stdout carries only what a command
  // produces (a report, a table, JSON), so that it can be piped; spdlog's default is stdout.
  spdlog::set_default_logger(spdlog::stderr_color_mt("headway"));
  spdlog::set_level(spdlog::level::from_str(log_level));
  spdlog::set_pattern("%^%l%$: %v");
  // Registered last before the command runs, so that at an exit() during it this handler runs
  // before the handlers and static destructors of everything set up so far (a crash in those would
  // hide its message); only what the command itself registers runs earlier.
  std::atexit(refuse_an_exit_during_the_command);
  try {
    if (*bench) return headway::cmd::run_bench(bench_args);
    if (*simulate) return headway::cmd::run_simulate(simulate_args);
    if (*plugin) return headway::cmd::run_plugin(plugin_args);
    if (*model) return headway::cmd::run_model(model_args);
    if (*profile) return headway::cmd::run_profile(profile_args);
    if (*serve) return headway::cmd::run_serve(serve_args);
    if (*plan) return headway::cmd::run_plan(plan_args);
#ifdef HEADWAY_SERVE_HTTP
    if (*chat_template) return headway::cmd::run_chat_template(chat_template_args);
#endif
  } catch (const headway::core::Error& e) {
    std::fprintf(stderr, "headway: error: %s\n", e.what());
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "headway: internal error: %s\n", e.what());
    return 2;
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  prefer_short_openmp_spins();
  headway::cmd::install_plugin_crash_reports();
  int code = 2;
  try {
    code = run_cli(argc, argv);
  } catch (const std::exception& e) {
    // Setting up the command line itself failed (out of memory, say): still a message, not abort().
    std::fprintf(stderr, "headway: internal error: %s\n", e.what());
  }
  command_finished.store(true);
  return code;
}
