// The plugin under test and its options: parsed as TOML, validated by core::PluginOptions exactly
// as a deployment file's options table would be.
#include <headway/conformance/suite.h>
#include <headway/core/error.h>
#include <toml++/toml.h>

#include <headway/sdk/status.hpp>

namespace headway::conformance {
namespace {

toml::table parse_table(const std::string& text, const std::string& where) {
  try {
    toml::table doc = toml::parse("options = {" + text + "}", std::string_view(where));
    return *doc["options"].as_table();
  } catch (const toml::parse_error& e) {
    throw core::Error(
        where + ": not a TOML inline-table body (key = value, …): " + std::string(e.description()));
  }
}

}  // namespace

std::shared_ptr<const core::PluginOptions> parse_options(const hw_plugin_descriptor& descriptor,
                                                         const std::string& text) {
  toml::table table = parse_table(text, "--options");
  return std::make_shared<const core::PluginOptions>(
      core::PluginOptions::from_toml(descriptor, &table, "--options"));
}

core::PluginChoice PluginUnderTest::choice() const {
  return core::PluginChoice{"plugin under test", plugin, options};
}

core::PluginChoice PluginUnderTest::choice_with(const std::string& defaults) const {
  toml::table merged = parse_table(defaults, "suite defaults");
  toml::table user = parse_table(options_text, "--options");
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
  toml::table user = parse_table(options_text, "--options");
  return user.contains(key);
}

}  // namespace headway::conformance
