#include "serve_command.h"

#include <fmt/format.h>
#include <headway/core/deployment_config.h>
#include <headway/core/error.h>
#include <headway/core/input_file.h>
#include <headway/core/plugin_registry.h>
#include <headway/core/step_trace.h>
#include <headway/serving/listen_failure.h>
#include <headway/serving/local_generation_service.h>
#include <headway/serving/remote_generation_service.h>
#include <signal.h>
#include <spdlog/spdlog.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <optional>

#if HEADWAY_SERVE_HTTP
#include <headway/serving/http_frontend.h>
#endif
#if HEADWAY_SERVE_GRPC
#include <headway/serving/grpc_frontend.h>
#endif

#include "output_path.h"
#include "shutdown_watch.h"
#include "stats_logger.h"

namespace headway::cmd {
namespace {

// The key from --api-key-file (its first line, trimmed), else from the environment variable
// [server] api_key_env names; empty when neither is configured. The key is never logged.
std::string read_api_key(const ServeArgs& args, const core::ServerConfig& server,
                         const std::string& config) {
  if (!args.api_key_file.empty()) {
    return core::read_api_key_file(args.api_key_file);
  }
  if (server.api_key_env.empty()) return {};
  const char* value = std::getenv(server.api_key_env.c_str());
  if (value == nullptr || *value == '\0') {
    throw core::Error(
        fmt::format("{}: server.api_key_env names the environment variable {}, "
                    "which is not set (or empty)",
                    config, server.api_key_env));
  }
  return value;
}

// The flag's port, or the configured one when the flag was not given (ServeArgs' -1; a given
// value was checked against [0, 65535] by the parser).
uint16_t port_of(int flag, uint16_t configured) {
  return flag < 0 ? configured : static_cast<uint16_t>(flag);
}

// "127.0.0.1:8000", with brackets around an IPv6 address.
std::string address(const std::string& host, uint16_t port) {
  return host.find(':') != std::string::npos ? fmt::format("[{}]:{}", host, port)
                                             : fmt::format("{}:{}", host, port);
}

// Refuses a port another process listens on before the service starts, which loads the model or
// waits for engine processes (minutes for a large checkpoint): the frontend would find out only
// then. vLLM binds its API socket before starting its engine for the same reason. (A check, not a
// reservation: the frontend's own bind later still reports a port taken in between.)
void refuse_busy_port(const char* frontend, const std::string& host, uint16_t port) {
  if (port == 0) return;  // any free port
  if (const std::string why = serving::why_cannot_listen(host, port); !why.empty()) {
    throw core::Error(serving::cannot_listen_message(frontend, address(host, port), why),
                      HW_UNAVAILABLE);
  }
}

// The service of this process's role: "all" (engines and frontends here), "engine" (the engines
// behind the gRPC worker API only; a router process fronts the clients) or "router" (the frontends
// before engine processes). Loads the model or waits for the engine processes: the long part of
// start-up, which `stop` (set by a signal) may end early with an error.
std::unique_ptr<serving::GenerationService> start_service(const ServeArgs& args,
                                                          const core::DeploymentConfig& deployment,
                                                          const std::string& api_key,
                                                          const std::atomic<bool>& stop) {
  if (deployment.server.role == "router") {
    if (!args.step_trace.empty()) {
      throw core::Error(args.config +
                        ": --step-trace records the steps of this process's engines, and a "
                        "[server] role = \"router\" process has none: give it to the engine "
                        "processes");
    }
    serving::RemoteServiceOptions options;
    options.api_key = api_key;
    options.connect_timeout_s = deployment.server.engine_connect_timeout_s;
    options.stop_connecting = &stop;
    return std::make_unique<serving::RemoteGenerationService>(deployment, options);
  }
  serving::LocalServiceOptions options;
  if (!args.step_trace.empty()) {
    options.step_trace = std::make_shared<core::StepTraceWriter>(args.step_trace);
  }
#if HEADWAY_SERVE_GRPC
  // Engine processes pull KV that other engine processes hold for peer links over gRPC.
  if (deployment.server.role == "engine")
    options.kv_link_peers = serving::make_grpc_kv_link_peers(api_key);
#endif
  return std::make_unique<serving::LocalGenerationService>(deployment, std::move(options));
}

}  // namespace

CLI::App* add_serve_command(CLI::App& app, ServeArgs& args) {
  CLI::App* cmd = app.add_subcommand(
      "serve",
      "Serve a deployment over the OpenAI-compatible HTTP API and gRPC until SIGTERM/SIGINT");
  cmd->add_option("--config", args.config, "Deployment TOML (with an optional [server] table)")
      ->required();
  cmd->add_option("--host", args.host, "Address to bind (default: [server] host, 127.0.0.1)");
  cmd->add_option(
         "--port", args.port,
         "HTTP port (0: ephemeral; default: [server] http_port; not for an engine process)")
      ->check(CLI::Range(0, 65535));
  cmd->add_option("--grpc-port", args.grpc_port,
                  "gRPC port (0: ephemeral; default: [server] grpc_port)")
      ->check(CLI::Range(0, 65535));
  cmd->add_option("--api-key-file", args.api_key_file,
                  "File holding the API key clients must send (default: the environment "
                  "variable [server] api_key_env names; none: no key)");
  cmd->add_option("--plugin-dir", args.plugin_dirs, "Extra plugin directory (searched first)")
      ->check(CLI::ExistingDirectory);
  cmd->add_option("--served-model-name", args.served_model_name,
                  "The model name clients send and answers carry (as vLLM's; default: [server] "
                  "served_model_name, else the checkpoint directory's name)");
  cmd->add_option("--step-trace", args.step_trace,
                  "Write one JSON line per step of this process's engines (as simulate "
                  "--step-trace does)");
  return cmd;
}

int run_serve(const ServeArgs& args) {
  // Signals are taken by the shutdown watch's thread, never by a handler: blocked here, before any
  // thread starts, so that every thread inherits the mask and none is interrupted.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGTERM);
  sigaddset(&stop_signals, SIGINT);
  if (pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr) != 0) {
    throw core::Error("serve: cannot block SIGTERM/SIGINT", HW_INTERNAL);
  }
  // Declared before the service and the frontends, so that it outlives their teardown; it takes
  // the signals from here on, start-up included.
  ShutdownWatch watch(stop_signals);

  core::PluginRegistry& registry = core::PluginRegistry::global();
  for (const std::string& dir : args.plugin_dirs) registry.add_search_directory(dir);
  if (!args.step_trace.empty()) check_output_path(args.step_trace, "--step-trace");
  check_distinct(args.step_trace, "--step-trace", {{"--config", &args.config}});
  core::DeploymentConfig deployment = core::load_deployment(args.config, registry);
  if (!args.served_model_name.empty()) {
    core::check_served_model_name(args.served_model_name, "--served-model-name");
    deployment.server.served_model_name = args.served_model_name;
  }
  const core::ServerConfig& server = deployment.server;
  const std::string host = args.host.empty() ? server.host : args.host;
  [[maybe_unused]] const uint16_t http_port = port_of(args.port, server.http_port);
  [[maybe_unused]] const uint16_t grpc_port = port_of(args.grpc_port, server.grpc_port);
  [[maybe_unused]] const std::string api_key = read_api_key(args, server, args.config);

#if !HEADWAY_SERVE_HTTP && !HEADWAY_SERVE_GRPC
  throw core::Error("serve: this headway was built without the HTTP and gRPC frontends");
#endif

  // role "all": engines and frontends here; "engine": the engines behind the gRPC worker API only
  // (a router process fronts the clients); "router": the frontends before engine processes.
  const bool engine_role = server.role == "engine";
  if (engine_role && args.port >= 0) {
    throw core::Error("serve: --port: an engine process ([server] role = \"engine\" in " +
                      args.config +
                      ") has no HTTP frontend; its clients reach it through the "
                      "router process");
  }
#if HEADWAY_SERVE_HTTP
  if (!engine_role) refuse_busy_port("HTTP", host, http_port);
#endif
#if HEADWAY_SERVE_GRPC
  refuse_busy_port("gRPC", host, grpc_port);
#endif
  std::unique_ptr<serving::GenerationService> owned;
  try {
    owned = start_service(args, deployment, api_key, watch.stop_requested());
  } catch (const core::Error& e) {
    // A wait that a signal ended (a router's for its engine processes) ends in an error.
    if (!watch.stop_requested().load()) throw;
    std::fprintf(stderr, "headway serve: start-up stopped: %s\n", e.what());
    watch.start_teardown();
    return watch.stop_status();
  }
  if (!watch.begin_serving()) {
    std::fprintf(stderr, "headway serve: stopped during start-up, before serving\n");
    watch.start_teardown();  // the service, its engines and plugins go at return
    return watch.stop_status();
  }
  serving::GenerationService& service = *owned;
  const serving::ModelSummary model = service.model_info();
  const size_t engines = service.cluster_info().engines.size();
  std::fprintf(stderr,
               "headway serve: deployment '%s' (role %s), model '%s' (max_model_len %u), %zu "
               "engine%s\n",
               deployment.name.c_str(), server.role.c_str(), model.name.c_str(),
               model.max_model_len, engines, engines == 1 ? "" : "s");

#if HEADWAY_SERVE_HTTP
  std::optional<serving::HttpFrontend> http;
  if (!engine_role) {
    serving::HttpOptions http_options;
    http_options.host = host;
    http_options.port = http_port;
    http_options.api_key = api_key;
    http_options.tool_call_parser = server.tool_call_parser;
    http_options.reasoning_parser = server.reasoning_parser;
    http_options.responses_store_bytes = size_t{server.responses_store_mb} << 20;
    http_options.cors_allowed_origins = server.cors_allowed_origins;
    http_options.cors_allow_credentials = server.cors_allow_credentials;
    http.emplace(service, std::move(http_options));
    http->start();
    std::fprintf(stderr, "headway serve: HTTP listening on http://%s\n",
                 address(host, http->port()).c_str());
  }
#endif
#if HEADWAY_SERVE_GRPC
  serving::GrpcOptions grpc_options{host, grpc_port, api_key};
  grpc_options.engine_process = engine_role;
  grpc_options.kv_stage_always_fetch = server.kv_stage_transport == "socket";
  grpc_options.kv_stage_checksums = server.kv_stage_checksums;
  serving::GrpcFrontend grpc(service, std::move(grpc_options));
  grpc.start();
  std::fprintf(stderr, "headway serve: gRPC listening on %s\n", address(host, grpc.port()).c_str());
#else
  if (engine_role) throw core::Error("serve: role \"engine\" needs the gRPC frontend");
#endif
  std::fflush(stderr);
  // Stopped (and joined) when run_serve returns, before the service goes.
  std::optional<StatsLogger> stats;
  if (server.log_stats_interval_s > 0.0) stats.emplace(service, server.log_stats_interval_s);

  const int signal_number = watch.wait_for_stop();
  std::fprintf(stderr, "headway serve: %s: draining (up to %.1f s)\n",
               signal_number == SIGTERM ? "SIGTERM" : "SIGINT", server.drain_timeout_s);
  std::fflush(stderr);
  // Later signals, and a shutdown that cannot end by itself: shutdown_watch.h.
  watch.start_drain(server.drain_timeout_s, [&service] { service.end_drain_now(); });
  // Stop admitting first (new requests get 503 / UNAVAILABLE, /health reports not serving) while
  // the frontends keep streaming what is in flight; then close the frontends.
  const size_t aborted = service.drain(server.drain_timeout_s);
  watch.start_teardown();  // the frontends, then (at return) the service, its engines and plugins
#if HEADWAY_SERVE_GRPC
  grpc.stop();
#endif
#if HEADWAY_SERVE_HTTP
  if (http) http->stop();
#endif
  std::fprintf(stderr, "headway serve: stopped (%zu requests aborted %s)\n", aborted,
               watch.cut_short() ? "when the drain was cut short" : "at the drain timeout");
  return 0;
}

}  // namespace headway::cmd
