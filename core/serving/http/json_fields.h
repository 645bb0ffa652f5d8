// Typed access to the fields of one JSON object of a request body, where every refusal names the
// field by its path ("stream_options.include_usage", "messages[2].role") and says what was wanted.
// A field that is absent or null reads as "not given", as OpenAI clients send explicit nulls.
//
// Ownership: borrows the object, which must outlive the reader. Threading: one thread at a time.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

namespace headway::serving::http {

// Parses a request body; throws ApiError 400 saying where the JSON is malformed (line, column and
// byte offset), including invalid UTF-8 in a string, or that the body is not a JSON object.
nlohmann::json parse_body(std::string_view body);

class FieldReader {
 public:
  // `path`: where `object` sits in the body ("" for the body itself, "messages[1]" ...).
  FieldReader(const nlohmann::json& object, std::string path);

  // The field's path, for messages.
  std::string name(std::string_view key) const;
  // Present and not null.
  const nlohmann::json* find(std::string_view key) const;

  std::optional<std::string> string(std::string_view key) const;
  std::optional<bool> boolean(std::string_view key) const;
  // Any JSON number that is finite as a float. One too small for a float is 0 when positive (or
  // refused naming the value when `zero_allowed` is false: a field that must be positive), and
  // the smallest negative float when negative (so that a sign check still sees it).
  std::optional<float> number(std::string_view key, bool zero_allowed = true) const;
  // A JSON integer in [min, max].
  std::optional<int64_t> integer(std::string_view key, int64_t min, int64_t max) const;
  // Any JSON integer that fits 64 bits, signed or not, as its two's-complement bits (seeds).
  std::optional<uint64_t> bits64(std::string_view key) const;

 private:
  const nlohmann::json& object_;
  std::string path_;
};

// Whether an optional field asks for something: present and not null, false or empty.
bool is_set(const nlohmann::json* value);

// "string", "number", "object" ... for "must be X, not Y" messages.
const char* json_kind(const nlohmann::json& value);

}  // namespace headway::serving::http
