#include "plugin_command.h"

#include <fmt/format.h>
#include <headway/core/error.h>
#include <headway/core/plugin_instances.h>
#include <headway/core/plugin_options.h>
#include <headway/core/plugin_registry.h>
#include <toml++/toml.h>

#include <filesystem>
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

// Creates (and destroys) an instance of `choice` as an engine would, with neutral engine facts for
// a scheduler. Returns what was done, for the report line. A router is not created: whether its
// options fit depends on the engines of a deployment (pools, roles), checked when one loads.
std::string create_instance(const core::PluginChoice& choice, const std::string& config_dir) {
  core::WallClock clock;
  core::HostServices host("validate", &clock);
  switch (choice.plugin->kind()) {
    case HW_KIND_STEP_SCHEDULER: {
      const hw_engine_facts facts{sizeof(hw_engine_facts), 16, 4096, 8192, HW_ENGINE_ROLE_MIXED};
      const core::SchedulerInstance scheduler(choice, facts, host);
      return fmt::format("created an instance (limits: {} tokens a step, {} requests running)",
                         scheduler.limits().max_num_batched_tokens,
                         scheduler.limits().max_num_seqs);
    }
    case HW_KIND_KV_TRANSPORT: {
      const core::KvTransportInstance transport(choice, host);
      return std::string("created an instance") +
             (transport.has_peer_links() ? " (with peer links)" : "");
    }
    case HW_KIND_MODEL: {
      const core::ModelInstance model(choice, config_dir, host);
      return fmt::format("created an instance (max_model_len {}, vocab {})",
                         model.info().max_model_len, model.info().vocab);
    }
    default:
      return "no instance created: a router's options are checked against a deployment's engines "
             "when it loads";
  }
}

}  // namespace

CLI::App* add_plugin_command(CLI::App& app, PluginArgs& args) {
  CLI::App* plugin = app.add_subcommand("plugin", "Inspect plugins");
  plugin->require_subcommand(1);
  args.describe = plugin->add_subcommand(
      "describe", "Print a plugin's descriptor and a commented TOML template of its options");
  args.describe->add_option("plugin", args.target, "Path to a .so, or a plugin name")->required();
  args.describe->add_option("--plugin-dir", args.plugin_dirs, "Extra plugin directory")
      ->check(CLI::ExistingDirectory);
  args.validate = plugin->add_subcommand(
      "validate",
      "Check that a plugin loads and accepts these options: its descriptor, the options against "
      "its schema, and (schedulers, KV transports, models) an instance created with them");
  args.validate->add_option("plugin", args.target, "Path to a .so, or a plugin name")->required();
  args.validate->add_option("--options", args.options,
                            "The options as a TOML inline-table body: 'key = value, ...'");
  args.validate
      ->add_option("--config-dir", args.config_dir,
                   "Directory a model resolves relative option paths against")
      ->capture_default_str();
  args.validate->add_option("--plugin-dir", args.plugin_dirs, "Extra plugin directory")
      ->check(CLI::ExistingDirectory);
  args.list = plugin->add_subcommand("list", "List the plugins found in the plugin directories");
  args.list->add_option("--plugin-dir", args.plugin_dirs, "Extra plugin directory")
      ->check(CLI::ExistingDirectory);
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
    // On stderr, so that stdout stays one plugin per line: where it looked, and what it could not
    // (a directory in HEADWAY_PLUGIN_PATH that does not exist was skipped without a word).
    for (const std::filesystem::path& dir : registry.search_directories()) {
      std::error_code error;
      const bool usable = std::filesystem::is_directory(dir, error);
      std::cerr << fmt::format("searched {}{}\n", dir.string(),
                               usable ? "" : ": not a directory (skipped)");
    }
    return 0;
  }
  const LoadedPlugin& p = resolve(registry, args.target);
  if (*args.validate) {
    const toml::table table = core::parse_inline_table_body(args.options, "--options");
    // `where` prefixes create()'s failures too, which are not all the options' fault.
    core::PluginChoice choice{
        "plugin validate", &p,
        std::make_shared<const core::PluginOptions>(
            core::PluginOptions::from_toml(*p.descriptor, &table, "--options"))};
    const std::string created = create_instance(choice, args.config_dir);
    std::cout << fmt::format("ok: {} {} ({}, ABI {}.{}) from {}: {} option(s) set, {}\n", p.name(),
                             p.version(), core::kind_name(p.kind()), p.descriptor->abi_major,
                             p.descriptor->abi_minor, p.path.string(), table.size(), created);
    return 0;
  }
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
