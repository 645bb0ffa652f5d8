#include "plugin_command.h"

#include <fmt/format.h>
#include <headway/core/error.h>
#include <headway/core/plugin_options.h>
#include <headway/core/plugin_registry.h>

#include <iostream>

namespace headway::cmd {
namespace {

using core::LoadedPlugin;
using core::PluginRegistry;

// Where a plugin of this kind sits in a deployment file, so the template can be pasted as is.
std::string deployment_snippet(const LoadedPlugin& plugin) {
  const std::string name = plugin.short_name();
  switch (plugin.kind()) {
    case HW_KIND_STEP_SCHEDULER:
      return "[[engines]]\n[engines.scheduler]\nplugin = \"" + name + "\"\n\n" +
             core::options_template(*plugin.descriptor, "engines.scheduler.options");
    case HW_KIND_ROUTER:
      return "[router]\nplugin = \"" + name + "\"\n\n" +
             core::options_template(*plugin.descriptor, "router.options");
    case HW_KIND_KV_TRANSPORT:
      return "[kv_transport]\nplugin = \"" + name + "\"\n\n" +
             core::options_template(*plugin.descriptor, "kv_transport.options");
    default:
      return "[model]\nplugin = \"" + name + "\"\n\n" +
             core::options_template(*plugin.descriptor, "model.options");
  }
}

const LoadedPlugin& resolve(PluginRegistry& registry, const std::string& target) {
  return registry.find(target, 0);
}

}  // namespace

CLI::App* add_plugin_command(CLI::App& app, PluginArgs& args) {
  CLI::App* plugin = app.add_subcommand("plugin", "Inspect plugins");
  plugin->require_subcommand(1);
  args.describe = plugin->add_subcommand(
      "describe", "Print a plugin's descriptor and a commented TOML template of its options");
  args.describe->add_option("plugin", args.target, "Path to a .so, or a plugin name")->required();
  args.describe->add_option("--plugin-dir", args.plugin_dirs, "Extra plugin directory");
  args.list = plugin->add_subcommand("list", "List the plugins found in the plugin directories");
  args.list->add_option("--plugin-dir", args.plugin_dirs, "Extra plugin directory");
  return plugin;
}

int run_plugin(const PluginArgs& args) {
  PluginRegistry& registry = PluginRegistry::global();
  for (const std::string& dir : args.plugin_dirs) registry.add_search_directory(dir);
  if (*args.list) {
    for (const LoadedPlugin* p : registry.discover()) {
      std::cout << fmt::format("{:<16} {:<14} {:<8} {}\n", p->short_name(),
                               core::kind_name(p->kind()), p->version(), p->path.string());
    }
    return 0;
  }
  const LoadedPlugin& p = resolve(registry, args.target);
  const hw_plugin_descriptor& d = *p.descriptor;
  std::cout << fmt::format(
      "name:        {}\nshort name:  {}\nkind:        {}\nversion:     {}\nabi:         {}.{} "
      "(host {}.{})\nfile:        {}\ndescription: {}\noptions:     {}\n\n",
      p.name(), p.short_name(), core::kind_name(p.kind()), p.version(), d.abi_major, d.abi_minor,
      HW_ABI_MAJOR, HW_ABI_MINOR, p.path.string(),
      std::string(d.description.data, d.description.size), d.option_count);
  std::cout << "# Template for a deployment file:\n" << deployment_snippet(p);
  return 0;
}

}  // namespace headway::cmd
