#include <fmt/format.h>
#include <headway/core/error.h>
#include <headway/core/option_values.h>
#include <headway/core/plugin_options.h>
#include <toml++/toml.h>

#include <algorithm>
#include <cmath>
#include <sstream>

#include "int_option_bounds.h"
#include "toml_line.h"

namespace headway::core {
namespace {

std::string str(hw_str s) { return s.data ? std::string(s.data, s.size) : std::string(); }

std::string type_name(int32_t type) {
  switch (type) {
    case HW_OPTION_BOOL:
      return "bool";
    case HW_OPTION_INT:
      return "integer";
    case HW_OPTION_DOUBLE:
      return "number";
    case HW_OPTION_STRING:
    case HW_OPTION_ENUM:  // a string restricted to a list
      return "string";
    default:
      return "?";
  }
}

std::string format_number(double v) {
  // Whole numbers in int64's range print as integers: an integer option's bound of 2^62 as
  // 4611686018427387904, not 4.611686018427388e+18.
  if (std::floor(v) == v && std::fabs(v) < 9.2e18) {
    return fmt::format("{}", static_cast<int64_t>(v));
  }
  return fmt::format("{}", v);
}

// A TOML bare key: ASCII letters, digits, '_' and '-' (anything else is written quoted).
bool is_bare_key(std::string_view key) {
  return !key.empty() && std::all_of(key.begin(), key.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
           c == '-';
  });
}

// A TOML basic string: quotes, backslashes and control characters escaped.
std::string quoted(std::string_view text) {
  std::string out = "\"";
  for (char c : text) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\t':
        out += "\\t";
        break;
      default:
        if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) {
          out += fmt::format("\\u{:04X}", static_cast<unsigned>(static_cast<unsigned char>(c)));
        } else {
          out += c;
        }
    }
  }
  return out + "\"";
}

// An option key as a TOML file writes it: bare, or quoted when it must be (a space, a dot).
std::string toml_key(const std::string& key) { return is_bare_key(key) ? key : quoted(key); }

// The value as written, for "got …" in messages.
std::string value_text(const toml::node& node) {
  std::ostringstream out;
  node.visit([&](const auto& v) { out << v; });
  return out.str();
}

std::string default_text(const hw_option_spec& spec) {
  switch (spec.type) {
    case HW_OPTION_BOOL:
      return spec.default_int ? "true" : "false";
    case HW_OPTION_INT:
      return std::to_string(spec.default_int);
    case HW_OPTION_DOUBLE: {
      // Always with a decimal point, so the template shows the option takes a float.
      std::string text = fmt::format("{}", spec.default_double);
      if (text.find_first_of(".eEn") == std::string::npos) text += ".0";
      return text;
    }
    default:
      return quoted(str(spec.default_string));
  }
}

}  // namespace

std::vector<std::string> enum_values(const hw_plugin_descriptor& descriptor, std::string_view key) {
  std::vector<std::string> values;
  for (uint32_t i = 0; i < descriptor.option_count; ++i) {
    const hw_option_spec& spec = descriptor.options[i];
    if (spec.type != HW_OPTION_ENUM || str(spec.key) != key) continue;
    for (uint32_t v = 0; v < spec.allowed_count; ++v)
      values.emplace_back(str(spec.allowed_values[v]));
  }
  return values;
}

std::string describe_allowed(const hw_option_spec& spec) {
  if (spec.type == HW_OPTION_ENUM) {
    std::string values;
    for (uint32_t i = 0; i < spec.allowed_count; ++i) {
      values += (i ? ", " : "") + str(spec.allowed_values[i]);
    }
    return "one of " + values;
  }
  std::string text = type_name(spec.type);
  if ((spec.type == HW_OPTION_INT || spec.type == HW_OPTION_DOUBLE) &&
      (spec.has_min || spec.has_max)) {
    text += " in [" + (spec.has_min ? format_number(spec.min_value) : std::string("-inf")) + ", " +
            (spec.has_max ? format_number(spec.max_value) : std::string("inf")) + "]";
  }
  return text;
}

toml::table parse_inline_table_body(const std::string& text, const std::string& where) {
  try {
    toml::table doc = toml::parse("options = {" + text + "}", std::string_view(where));
    return *doc["options"].as_table();
  } catch (const toml::parse_error& e) {
    throw Error(where +
                ": not a TOML inline-table body (key = value, …): " + std::string(e.description()));
  }
}

PluginOptions PluginOptions::from_toml(const hw_plugin_descriptor& descriptor,
                                       const toml::table* table, const std::string& where) {
  PluginOptions out;
  std::string known;
  for (uint32_t i = 0; i < descriptor.option_count; ++i) {
    known += (i ? ", " : "") + toml_key(str(descriptor.options[i].key));
  }
  if (table != nullptr) {
    for (const auto& [key, node] : *table) {
      bool found = false;
      for (uint32_t i = 0; i < descriptor.option_count && !found; ++i) {
        found = str(descriptor.options[i].key) == key.str();
      }
      if (!found) {
        const std::string unknown(key.str());
        throw Error(fmt::format("{}: unknown key {}{} for plugin {} (allowed: {})", where,
                                is_bare_key(unknown) ? "'" + unknown + "'" : quoted(unknown),
                                line_of(node), str(descriptor.name),
                                known.empty() ? "none" : known));
      }
    }
  }

  out.values_.reserve(descriptor.option_count);
  for (uint32_t i = 0; i < descriptor.option_count; ++i) {
    const hw_option_spec& spec = descriptor.options[i];
    const std::string key = str(spec.key);
    const std::string at = where + "." + toml_key(key);
    hw_option_value value{};
    value.type = spec.type;
    value.int_value = spec.default_int;
    value.double_value = spec.default_double;
    std::string string_value = str(spec.default_string);

    const toml::node* node = table != nullptr ? table->get(key) : nullptr;
    if (node != nullptr) {
      auto wrong = [&]() {
        return Error(fmt::format("{}: expected {}{}, got {}", at, describe_allowed(spec),
                                 line_of(*node), value_text(*node)));
      };
      switch (spec.type) {
        case HW_OPTION_BOOL:
          if (!node->is_boolean()) throw wrong();
          value.int_value = node->as_boolean()->get() ? 1 : 0;
          break;
        case HW_OPTION_INT: {
          if (!node->is_integer()) throw wrong();
          value.int_value = node->as_integer()->get();
          if ((spec.has_min && int_below(value.int_value, spec.min_value)) ||
              (spec.has_max && int_above(value.int_value, spec.max_value))) {
            throw wrong();
          }
          break;
        }
        case HW_OPTION_DOUBLE: {
          if (node->is_integer()) {
            value.double_value = static_cast<double>(node->as_integer()->get());
          } else if (node->is_floating_point()) {
            value.double_value = node->as_floating_point()->get();
          } else {
            throw wrong();
          }
          double v = value.double_value;
          if (std::isnan(v) || (spec.has_min && v < spec.min_value) ||
              (spec.has_max && v > spec.max_value)) {
            throw wrong();
          }
          break;
        }
        case HW_OPTION_STRING:
        case HW_OPTION_ENUM: {
          if (!node->is_string()) throw wrong();
          string_value = node->as_string()->get();
          if (spec.type == HW_OPTION_ENUM) {
            bool allowed = false;
            for (uint32_t a = 0; a < spec.allowed_count; ++a) {
              allowed = allowed || str(spec.allowed_values[a]) == string_value;
            }
            if (!allowed) throw wrong();
          }
          break;
        }
        default:
          throw wrong();
      }
    }
    const std::string& key_storage = out.strings_.emplace_back(key);
    value.key = hw_str{key_storage.data(), key_storage.size()};
    const std::string& string_storage = out.strings_.emplace_back(string_value);
    value.string_value = hw_str{string_storage.data(), string_storage.size()};
    out.values_.push_back(value);
  }
  out.view_ = hw_options{out.values_.data(), static_cast<uint32_t>(out.values_.size())};
  return out;
}

std::string options_template(const hw_plugin_descriptor& descriptor,
                             const std::string& table_path) {
  std::ostringstream out;
  out << "[" << table_path << "]\n";
  if (descriptor.option_count == 0) out << "# (this plugin has no options)\n";
  for (uint32_t i = 0; i < descriptor.option_count; ++i) {
    const hw_option_spec& spec = descriptor.options[i];
    out << "# " << str(spec.doc) << "\n";
    out << "# " << describe_allowed(spec) << "\n";
    // A key that is not a bare key (a space, a dot) is quoted, as a deployment file must write it.
    out << toml_key(str(spec.key)) << " = " << default_text(spec) << "\n";
    if (i + 1 < descriptor.option_count) out << "\n";
  }
  return out.str();
}

}  // namespace headway::core

namespace headway::core {
namespace {

// An option's value as TOML writes it.
std::string value_toml(const hw_option_value& v) {
  switch (v.type) {
    case HW_OPTION_BOOL:
      return v.int_value ? "true" : "false";
    case HW_OPTION_INT:
      return std::to_string(v.int_value);
    case HW_OPTION_DOUBLE:
      return format_number(v.double_value);
    default:
      return quoted(str(v.string_value));
  }
}

bool at_default(const hw_option_spec& spec, const hw_option_value& v) {
  switch (v.type) {
    case HW_OPTION_BOOL:
    case HW_OPTION_INT:
      return v.int_value == spec.default_int;
    case HW_OPTION_DOUBLE:
      return v.double_value == spec.default_double;
    default:
      return str(v.string_value) == str(spec.default_string);
  }
}

}  // namespace

std::string options_summary_text(const hw_plugin_descriptor& descriptor,
                                 const hw_options& options) {
  std::string out;
  for (uint32_t i = 0; i < options.count; ++i) {
    const hw_option_value& v = options.values[i];
    for (uint32_t s = 0; s < descriptor.option_count; ++s) {
      const hw_option_spec& spec = descriptor.options[s];
      if (str(spec.key) != str(v.key)) continue;
      if (spec.type != HW_OPTION_ENUM && at_default(spec, v)) continue;
      out += (out.empty() ? "" : ", ") + toml_key(str(v.key)) + " = " + value_toml(v);
    }
  }
  return out;
}

}  // namespace headway::core
