// `headway serve --config deploy.toml [--host H] [--port P] [--grpc-port P] [--api-key-file F]
// [--served-model-name NAME]`:
// serves a deployment in this process (frontends, router and one thread per engine; the [server]
// table of the deployment, docs/serving.md). Logs one line per listening address; on SIGTERM or
// SIGINT stops admitting, lets in-flight requests finish for up to [server] drain_timeout_s,
// aborts the rest, and exits 0.
#pragma once

#include <CLI/CLI.hpp>
#include <string>
#include <vector>

namespace headway::cmd {

struct ServeArgs {
  std::string config;
  std::string host;          // empty: [server] host
  int port = -1;             // < 0: [server] http_port
  int grpc_port = -1;        // < 0: [server] grpc_port
  std::string api_key_file;  // empty: the variable [server] api_key_env names, if any
  std::vector<std::string> plugin_dirs;
  std::string step_trace;         // empty: none
  std::string served_model_name;  // empty: [server] served_model_name
};

CLI::App* add_serve_command(CLI::App& app, ServeArgs& args);
// Blocks until SIGTERM/SIGINT; returns the exit code. Throws core::Error on bad configuration.
int run_serve(const ServeArgs& args);

}  // namespace headway::cmd
