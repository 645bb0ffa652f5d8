// The plugin registry tests load the in-tree plugins through: the build's plugin directory
// (HEADWAY_PLUGIN_DIR) searched first. Never destroyed, like the host's own registry: plugin
// libraries must outlive every instance a test creates. Threading: as core::PluginRegistry.
#pragma once

#include <headway/core/plugin_registry.h>

namespace headway::test {

inline core::PluginRegistry& built_plugins() {
  static core::PluginRegistry* registry = [] {
    auto* r = new core::PluginRegistry();
    r->add_search_directory(HEADWAY_PLUGIN_DIR);
    return r;
  }();
  return *registry;
}

}  // namespace headway::test
