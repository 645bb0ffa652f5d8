// A plugin's options as an operator wrote them in TOML, checked against the plugin's schema.
//
// Ownership: a PluginOptions owns the strings its hw_options view points into; the view is valid as
// long as the object lives (moves keep it valid, copies are not allowed).
// Threading: immutable after construction; safe to read from any thread.
#pragma once

#include <headway/abi.h>

#include <deque>
#include <string>
#include <string_view>
#include <vector>

namespace toml {
inline namespace v3 {
class table;
}
}  // namespace toml

namespace headway::core {

class PluginOptions {
 public:
  // Validates `table` (may be null: all defaults) against the descriptor's schema. `where` names
  // the place for messages, e.g. "deploy.toml: engines[0].scheduler.options". Throws Error on an
  // unknown key, a wrong type or a value outside the allowed range or set.
  static PluginOptions from_toml(const hw_plugin_descriptor& descriptor, const toml::table* table,
                                 const std::string& where);

  PluginOptions(PluginOptions&&) = default;
  PluginOptions& operator=(PluginOptions&&) = default;
  PluginOptions(const PluginOptions&) = delete;
  PluginOptions& operator=(const PluginOptions&) = delete;

  const hw_options* view() const { return &view_; }
  const std::vector<hw_option_value>& values() const { return values_; }

 private:
  PluginOptions() = default;
  std::deque<std::string> strings_;  // deque: element addresses survive growth
  std::vector<hw_option_value> values_;
  hw_options view_{nullptr, 0};
};

// Parses `text`, the body of a TOML inline table ("key = value, …", as given on a command line),
// into a table. Throws Error naming `where` when it is not one.
toml::table parse_inline_table_body(const std::string& text, const std::string& where);

// "int in [1, 65536]", "one of fcfs, priority", … for messages and templates.
std::string describe_allowed(const hw_option_spec& spec);

// The allowed values of the descriptor's enum option `key`, in its order; empty when it has no
// enum option of that name.
std::vector<std::string> enum_values(const hw_plugin_descriptor& descriptor, std::string_view key);

// A commented TOML template of every option with its default, for `headway plugin describe`.
std::string options_template(const hw_plugin_descriptor& descriptor, const std::string& table_path);

}  // namespace headway::core
