// What an HTTP error answer says, for an error line: "HTTP 404: <message>" from an OpenAI error
// body ({"error": {"message": ...}} or {"error": "..."}), else the start of the body. Private to
// headway_bench. Stateless.
#pragma once

#include <fmt/format.h>

#include <nlohmann/json.hpp>
#include <string>

namespace headway::serving::bench {

inline std::string http_error_text(int status, const std::string& body) {
  const nlohmann::json doc = nlohmann::json::parse(body, nullptr, false);
  if (doc.is_object() && doc.contains("error")) {
    const nlohmann::json& error = doc["error"];
    if (error.is_object() && error.contains("message") && error["message"].is_string()) {
      return fmt::format("HTTP {}: {}", status, error["message"].get<std::string>());
    }
    if (error.is_string()) return fmt::format("HTTP {}: {}", status, error.get<std::string>());
  }
  // Not JSON we know: its start, whole lines of it when it is long.
  std::string text = body.substr(0, 200);
  while (!text.empty() && (text.back() == '\n' || text.back() == '\r' || text.back() == ' ')) {
    text.pop_back();
  }
  return fmt::format("HTTP {}: {}{}", status, text, body.size() > 200 ? " ..." : "");
}

}  // namespace headway::serving::bench
