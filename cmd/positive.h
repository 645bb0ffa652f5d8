// A CLI11 check that a number is greater than zero, with a message a user can read: CLI11's own
// PositiveNumber reports "Value 0 not in range 0.000000 to <a 309-digit number>".
// Threading: used while parsing, on the main thread.
#pragma once

#include <CLI/CLI.hpp>
#include <cstdlib>
#include <string>

namespace headway::cmd {

inline const CLI::Validator kPositive(
    [](std::string& text) -> std::string {
      char* end = nullptr;
      const double value = std::strtod(text.c_str(), &end);
      if (end == text.c_str() || *end != '\0') return "expected a number, got '" + text + "'";
      if (!(value > 0.0)) return "must be greater than 0, got " + text;
      return {};
    },
    "> 0", "POSITIVE");

}  // namespace headway::cmd
