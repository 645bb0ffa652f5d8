// Declaring a plugin's TOML options and reading them back typed. Header-only; plugin side.
#pragma once

#include <headway/abi.h>

#include <cstdint>
#include <headway/sdk/status.hpp>
#include <string>
#include <string_view>

namespace headway::sdk {

// Schema builders, usable in a static constexpr array:
//   static constexpr hw_option_spec kOptions[] = {
//       int_option("max_num_seqs", 256, 1, 65536, "Requests running at once."), ...};
constexpr hw_option_spec int_option(const char* key, int64_t def, int64_t min, int64_t max,
                                    const char* doc) {
  return hw_option_spec{make_str(key),
                        HW_OPTION_INT,
                        make_str(doc),
                        def,
                        0.0,
                        hw_str{nullptr, 0},
                        1,
                        1,
                        static_cast<double>(min),
                        static_cast<double>(max),
                        nullptr,
                        0};
}
constexpr hw_option_spec double_option(const char* key, double def, double min, double max,
                                       const char* doc) {
  return hw_option_spec{make_str(key),
                        HW_OPTION_DOUBLE,
                        make_str(doc),
                        0,
                        def,
                        hw_str{nullptr, 0},
                        1,
                        1,
                        min,
                        max,
                        nullptr,
                        0};
}
constexpr hw_option_spec bool_option(const char* key, bool def, const char* doc) {
  return hw_option_spec{make_str(key),
                        HW_OPTION_BOOL,
                        make_str(doc),
                        def ? 1 : 0,
                        0.0,
                        hw_str{nullptr, 0},
                        0,
                        0,
                        0.0,
                        0.0,
                        nullptr,
                        0};
}
constexpr hw_option_spec string_option(const char* key, const char* def, const char* doc) {
  return hw_option_spec{make_str(key),
                        HW_OPTION_STRING,
                        make_str(doc),
                        0,
                        0.0,
                        make_str(def),
                        0,
                        0,
                        0.0,
                        0.0,
                        nullptr,
                        0};
}
template <uint32_t N>
constexpr hw_option_spec enum_option(const char* key, const char* def, const hw_str (&allowed)[N],
                                     const char* doc) {
  return hw_option_spec{make_str(key),
                        HW_OPTION_ENUM,
                        make_str(doc),
                        0,
                        0.0,
                        make_str(def),
                        0,
                        0,
                        0.0,
                        0.0,
                        allowed,
                        N};
}

// Typed, read-only access to the validated values the host passed to create(). Borrowed: copy what
// you keep (strings especially) before create() returns.
class Options {
 public:
  explicit Options(const hw_options* options) : options_(options) {}

  int64_t get_int(std::string_view key) const { return find(key, HW_OPTION_INT).int_value; }
  double get_double(std::string_view key) const { return find(key, HW_OPTION_DOUBLE).double_value; }
  bool get_bool(std::string_view key) const { return find(key, HW_OPTION_BOOL).int_value != 0; }
  std::string get_string(std::string_view key) const {
    const hw_option_value& v = find(key, -1);
    if (v.type != HW_OPTION_STRING && v.type != HW_OPTION_ENUM) {
      throw Error(HW_INTERNAL, "option '" + std::string(key) + "' is declared as " +
                                   type_name(v.type) + " but the plugin reads it as a string");
    }
    return std::string(view(v.string_value));
  }
  // Whether the schema declares `key`. The host hands every declared option to create(), its
  // default filled in where the operator set none, so this does not say whether it was set.
  bool has(std::string_view key) const { return lookup(key) != nullptr; }

 private:
  const hw_option_value* lookup(std::string_view key) const {
    if (options_ == nullptr) return nullptr;
    for (uint32_t i = 0; i < options_->count; ++i) {
      if (view(options_->values[i].key) == key) return &options_->values[i];
    }
    return nullptr;
  }
  // The host passes every option the schema declares, with its declared type, so a key missing
  // or read with another getter is the plugin's bug, not the operator's: HW_INTERNAL, which
  // headway-conformance reports as a failure rather than as options to give.
  const hw_option_value& find(std::string_view key, int32_t type) const {
    const hw_option_value* v = lookup(key);
    if (v == nullptr) {
      throw Error(HW_INTERNAL, "option '" + std::string(key) +
                                   "' is not in the plugin's schema (its descriptor's options); "
                                   "the plugin reads a key it does not declare");
    }
    if (type >= 0 && v->type != type) {
      throw Error(HW_INTERNAL, "option '" + std::string(key) + "' is declared as " +
                                   type_name(v->type) + " but the plugin reads it as " +
                                   type_name(type));
    }
    return *v;
  }
  static std::string type_name(int32_t type) {
    switch (type) {
      case HW_OPTION_INT:
        return "an integer";
      case HW_OPTION_DOUBLE:
        return "a number";
      case HW_OPTION_BOOL:
        return "a boolean";
      case HW_OPTION_STRING:
        return "a string";
      case HW_OPTION_ENUM:
        return "an enum";
      default:
        return "type " + std::to_string(type);
    }
  }
  const hw_options* options_;
};

}  // namespace headway::sdk
