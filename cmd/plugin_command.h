// `headway plugin describe PATH|NAME`, `headway plugin validate PATH|NAME [--options '…']` and
// `headway plugin list`.
#pragma once

#include <CLI/CLI.hpp>
#include <string>
#include <vector>

namespace headway::cmd {

struct PluginArgs {
  std::string target;            // path or name, for describe and validate
  std::string options;           // validate: the options as a TOML inline-table body
  std::string config_dir = ".";  // validate: where a model resolves relative paths
  std::vector<std::string> plugin_dirs;
  CLI::App* describe = nullptr;
  CLI::App* validate = nullptr;
  CLI::App* list = nullptr;
};

CLI::App* add_plugin_command(CLI::App& app, PluginArgs& args);
int run_plugin(const PluginArgs& args);

}  // namespace headway::cmd
