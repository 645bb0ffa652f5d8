// The plugin under test and its options: parsed as TOML, validated by core::PluginOptions exactly
// as a deployment file's options table would be.
#include <headway/conformance/suite.h>
#include <headway/core/error.h>
#include <headway/core/plugin_options.h>
#include <toml++/toml.h>

#include <headway/sdk/status.hpp>

namespace headway::conformance {

std::shared_ptr<const core::PluginOptions> parse_options(const hw_plugin_descriptor& descriptor,
                                                         const std::string& text) {
  toml::table table = core::parse_inline_table_body(text, "--options");
  return std::make_shared<const core::PluginOptions>(
      core::PluginOptions::from_toml(descriptor, &table, "--options"));
}

core::PluginChoice PluginUnderTest::choice() const {
  return core::PluginChoice{"plugin under test", plugin, options};
}

core::PluginChoice PluginUnderTest::choice_with(const std::string& defaults) const {
  toml::table merged = core::parse_inline_table_body(defaults, "suite defaults");
  toml::table user = core::parse_inline_table_body(options_text, "--options");
  for (auto&& [key, value] : user) merged.insert_or_assign(key, value);
  auto options = std::make_shared<const core::PluginOptions>(
      core::PluginOptions::from_toml(*plugin->descriptor, &merged, "--options + suite defaults"));
  return core::PluginChoice{"plugin under test", plugin, options};
}

bool PluginUnderTest::has_option(std::string_view key, int32_t type) const {
  const hw_plugin_descriptor& d = *plugin->descriptor;
  for (uint32_t i = 0; i < d.option_count; ++i) {
    if (sdk::view(d.options[i].key) == key && d.options[i].type == type) return true;
  }
  return false;
}

bool PluginUnderTest::user_set(std::string_view key) const {
  toml::table user = core::parse_inline_table_body(options_text, "--options");
  return user.contains(key);
}

}  // namespace headway::conformance
