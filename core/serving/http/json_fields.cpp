#include "json_fields.h"

#include <fmt/format.h>

#include <cmath>
#include <limits>

#include "api_error.h"
#include "headway/serving/json_text.h"

namespace headway::serving::http {

namespace {

// nlohmann's what() reads "[json.exception.parse_error.101] parse error at line 1, column 9: ...";
// the bracketed prefix means nothing to an HTTP client.
std::string without_prefix(const nlohmann::json::exception& error) {
  std::string what = error.what();
  if (auto close = what.find("] "); what.starts_with("[json.exception") && close != what.npos) {
    what.erase(0, close + 2);
  }
  return what;
}

// A whole number: an integer, or a float such as 10.0 or 1e1 (pydantic, and so vLLM, accepts
// those for integer fields). An integer beyond 64 bits reaches here as a float too.
bool is_whole(const nlohmann::json& value) {
  if (value.is_number_integer()) return true;
  if (!value.is_number_float()) return false;
  const double number = value.get<double>();
  return std::isfinite(number) && std::floor(number) == number;
}

}  // namespace

nlohmann::json parse_body(std::string_view body) {
  // Refused before it is parsed: a body of 15 million nested arrays in a field nobody reads took
  // 26 s and 0.7 GB to parse (and as long to free) before any check.
  if (json_nests_deeper_than(body, kMaxJsonDepth)) {
    throw ApiError(400,
                   fmt::format("request body nests objects and arrays more than {} levels deep",
                               kMaxJsonDepth));
  }
  nlohmann::json parsed;
  try {
    parsed = nlohmann::json::parse(body.begin(), body.end());
  } catch (const nlohmann::json::parse_error& error) {
    throw ApiError(400, "request body is not valid JSON (byte " + std::to_string(error.byte) +
                            "): " + without_prefix(error));
  } catch (const nlohmann::json::out_of_range& error) {
    // A number beyond a double's range (1e400): vLLM's parser takes it as inf and then validates
    // the field; it cannot be represented here, so the body is refused, not a server error.
    throw ApiError(400, "request body is not valid JSON: " + without_prefix(error));
  }
  if (!parsed.is_object()) {
    throw ApiError(400,
                   std::string("request body must be a JSON object, not ") + json_kind(parsed));
  }
  return parsed;
}

const char* json_kind(const nlohmann::json& value) {
  switch (value.type()) {
    case nlohmann::json::value_t::null:
      return "null";
    case nlohmann::json::value_t::object:
      return "an object";
    case nlohmann::json::value_t::array:
      return "an array";
    case nlohmann::json::value_t::string:
      return "a string";
    case nlohmann::json::value_t::boolean:
      return "a boolean";
    case nlohmann::json::value_t::number_integer:
    case nlohmann::json::value_t::number_unsigned:
      return "an integer";
    case nlohmann::json::value_t::number_float:
      return "a number";
    default:
      return "something else";
  }
}

FieldReader::FieldReader(const nlohmann::json& object, std::string path)
    : object_(object), path_(std::move(path)) {}

std::string FieldReader::name(std::string_view key) const {
  return path_.empty() ? std::string(key) : path_ + "." + std::string(key);
}

const nlohmann::json* FieldReader::find(std::string_view key) const {
  auto it = object_.find(key);
  if (it == object_.end() || it->is_null()) return nullptr;
  return &*it;
}

namespace {

ApiError wrong_type(const std::string& name, const char* wanted, const nlohmann::json& value) {
  return invalid_field(name, name + " must be " + wanted + ", not " + json_kind(value));
}

// A whole number the parser kept only as a double (an integer past 64 bits, or written with a
// fraction or exponent), in digits while it has at most 21 (18446744073709551616 for 2^64, not
// 1.8446744073709552e+19); past 17 digits they are the double's, which may differ from the
// client's last digits.
std::string whole_text(const nlohmann::json& value) {
  const double whole = value.get<double>();
  return std::fabs(whole) < 1e21 ? fmt::format("{:.0f}", whole) : value.dump();
}

}  // namespace

std::optional<std::string> FieldReader::string(std::string_view key) const {
  const nlohmann::json* value = find(key);
  if (value == nullptr) return std::nullopt;
  if (!value->is_string()) throw wrong_type(name(key), "a string", *value);
  return value->get<std::string>();
}

std::optional<bool> FieldReader::boolean(std::string_view key) const {
  const nlohmann::json* value = find(key);
  if (value == nullptr) return std::nullopt;
  if (!value->is_boolean()) throw wrong_type(name(key), "a boolean", *value);
  return value->get<bool>();
}

std::optional<float> FieldReader::number(std::string_view key, bool zero_allowed) const {
  const nlohmann::json* value = find(key);
  if (value == nullptr) return std::nullopt;
  if (!value->is_number()) throw wrong_type(name(key), "a number", *value);
  const double wide = value->get<double>();
  if (!std::isfinite(wide) || std::fabs(wide) > std::numeric_limits<float>::max()) {
    throw invalid_field(name(key),
                        fmt::format("{} is {}: beyond the range of a 32-bit float "
                                    "(magnitude at most {:g})",
                                    name(key), value->dump(), std::numeric_limits<float>::max()));
  }
  const auto narrow = static_cast<float>(wide);
  if (narrow == 0.0f && wide < 0.0) {
    // Too small for a float but negative: the sign is what the range checks judge (a temperature
    // of -1e-50 is refused as negative, as vLLM refuses it; a penalty of -1e-300 is about 0).
    return -std::numeric_limits<float>::denorm_min();
  }
  if (narrow == 0.0f && wide != 0.0 && !zero_allowed) {
    // Taken as 0 where 0 is refused, the refusal said "got 0" of a positive number. Where 0 is
    // allowed it means 0 (a temperature of 1e-50 is greedy), as vLLM takes it.
    throw invalid_field(
        name(key), fmt::format("{} is {}: too small for a 32-bit float, which holds no "
                               "magnitude between 0 and {:g}",
                               name(key), value->dump(), std::numeric_limits<float>::denorm_min()));
  }
  return narrow;
}

std::optional<int64_t> FieldReader::integer(std::string_view key, int64_t min, int64_t max) const {
  const nlohmann::json* value = find(key);
  if (value == nullptr) return std::nullopt;
  if (!is_whole(*value)) throw wrong_type(name(key), "an integer", *value);
  if (value->is_number_float()) {
    const double whole = value->get<double>();
    // Checked against int64's range before the cast (2^63 itself is not an int64).
    if (whole < -0x1p63 || whole >= 0x1p63 || static_cast<int64_t>(whole) < min ||
        static_cast<int64_t>(whole) > max) {
      throw invalid_field(name(key), name(key) + " must be between " + std::to_string(min) +
                                         " and " + std::to_string(max) + ", not " +
                                         whole_text(*value));
    }
    return static_cast<int64_t>(whole);
  }
  const bool too_big = value->is_number_unsigned() &&
                       value->get<uint64_t>() > static_cast<uint64_t>(max < 0 ? 0 : max);
  const int64_t got = too_big ? max : value->get<int64_t>();
  if (too_big || got < min || got > max) {
    throw invalid_field(name(key), name(key) + " must be between " + std::to_string(min) + " and " +
                                       std::to_string(max) + ", not " + value->dump());
  }
  return got;
}

std::optional<uint64_t> FieldReader::bits64(std::string_view key) const {
  const nlohmann::json* value = find(key);
  if (value == nullptr) return std::nullopt;
  if (!is_whole(*value)) throw wrong_type(name(key), "an integer", *value);
  if (value->is_number_float()) {
    // A whole number written as a float, or an integer too large for the parser's 64 bits. -2^63
    // itself is refused here: an integer literal of it fits int64 and never arrives as a float,
    // while one just below it rounds to exactly -2^63 as a double.
    const double whole = value->get<double>();
    if (whole <= -0x1p63 || whole >= 0x1p64) {
      // The parser kept only a double: printed whole (18446744073709551616 for 2^64, not
      // 1.8446744073709552e+19) while it has few enough digits to read as the number sent.
      throw invalid_field(
          name(key),
          name(key) + " must fit in 64 bits (from -2^63 to 2^64 - 1), not " + whole_text(*value));
    }
    return whole < 0 ? static_cast<uint64_t>(static_cast<int64_t>(whole))
                     : static_cast<uint64_t>(whole);
  }
  if (value->is_number_unsigned()) return value->get<uint64_t>();
  return static_cast<uint64_t>(value->get<int64_t>());
}

bool is_set(const nlohmann::json* value) {
  if (value == nullptr || value->is_null()) return false;
  if (value->is_boolean()) return value->get<bool>();
  if (value->is_array() || value->is_object() || value->is_string()) return !value->empty();
  return true;
}

}  // namespace headway::serving::http
