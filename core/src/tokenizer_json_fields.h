// Reading tokenizer.json: field access that names the file and the field path in every error
// (private to the tokenizer readers in core/src).
#pragma once

#include <headway/core/error.h>

#include <climits>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>

namespace headway::core {

// Field access that names the file and the field path in every error.
class JsonFields {
  using json = nlohmann::json;

 public:
  explicit JsonFields(std::string file) : file_(std::move(file)) {}
  const std::string& file() const { return file_; }

  [[noreturn]] void fail(const std::string& field, const std::string& what) const {
    throw Error(file_ + ": field '" + field + "' " + what);
  }
  const json& at(const json& object, const std::string& key, const std::string& field) const {
    if (!object.is_object() || !object.contains(key)) fail(field, "is missing");
    return object[key];
  }
  std::string string(const json& value, const std::string& field) const {
    if (!value.is_string()) fail(field, "must be a string");
    return value.get<std::string>();
  }
  bool flag(const json& object, const std::string& key, bool fallback,
            const std::string& field) const {
    if (!object.contains(key) || object[key].is_null()) return fallback;
    if (!object[key].is_boolean()) fail(field, "must be true or false");
    return object[key].get<bool>();
  }
  int32_t id(const json& value, const std::string& field) const {
    if (!value.is_number_integer() || value.get<int64_t>() < 0 ||
        value.get<int64_t>() > INT32_MAX) {
      fail(field, "must be a non-negative token id");
    }
    return value.get<int32_t>();
  }
  // A field that must be absent, null, or equal to `allowed` (e.g. false, "").
  void must_be_unset(const json& object, const std::string& key, const json& allowed,
                     const std::string& field, const std::string& why) const {
    if (object.contains(key) && !object[key].is_null() && object[key] != allowed) {
      fail(field, "= " + object[key].dump() + " is not supported (" + why + ")");
    }
  }

 private:
  std::string file_;
};

}  // namespace headway::core
