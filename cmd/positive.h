// CLI11 checks: that a number is greater than zero, with a message a user can read: CLI11's own
// PositiveNumber reports "Value 0 not in range 0.000000 to <a 309-digit number>".
// Threading: used while parsing, on the main thread.
#pragma once

#include <CLI/CLI.hpp>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

namespace headway::cmd {

inline const CLI::Validator kPositive(
    [](std::string& text) -> std::string {
      char* end = nullptr;
      const double value = std::strtod(text.c_str(), &end);
      if (end == text.c_str() || *end != '\0') return "expected a number, got '" + text + "'";
      if (!(value > 0.0)) return "must be greater than 0, got " + text;
      if (!std::isfinite(value)) return "must be a finite number, got " + text;
      return {};
    },
    "> 0", "POSITIVE");

// kPositive for a double that must be exactly the one the text names, as strtod reads it: a
// transform that rewrites the text as that double's hexadecimal form. CLI11 reads a double
// through long double and rounds twice, and "0.002877" came out one double off, so a capacity
// search's printed factor given back to --rate-scale ran another experiment.
inline const CLI::Validator kPositiveExact(
    [](std::string& text) -> std::string {
      std::string error = kPositive(text);
      if (!error.empty()) return error;
      char hex[64];
      std::snprintf(hex, sizeof hex, "%a", std::strtod(text.c_str(), nullptr));
      text = hex;
      return {};
    },
    "> 0", "POSITIVE");

// The same for a count or seed that may be 0: digits only, and within 64 bits, so that "-1" is not
// wrapped around to 2^64 - 1, nor a larger number clamped to it, by CLI11's conversion.
inline const CLI::Validator kNonNegativeInteger(
    [](std::string& text) -> std::string {
      if (text.empty() || text.find_first_not_of("0123456789") != std::string::npos) {
        return "expected an integer >= 0, got '" + text + "'";
      }
      uint64_t value = 0;
      const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
      if (error != std::errc() || end != text.data() + text.size()) {
        return "must be at most 18446744073709551615, got " + text;
      }
      return {};
    },
    ">= 0", "NON-NEGATIVE");

// A token count as context lengths are spoken of: digits, optionally followed by k or K for 1,024
// ("8k" is 8,192; Llama 3.1's 131,072 positions are its "128k"). A transform: the option then
// receives the number of tokens, and its own range check applies to that.
inline const CLI::Validator kTokenCount(
    [](std::string& text) -> std::string {
      std::string digits = text;
      uint64_t factor = 1;
      if (!digits.empty() && (digits.back() == 'k' || digits.back() == 'K')) {
        digits.pop_back();
        factor = 1024;
      }
      if (digits.empty() || digits.size() > 12 ||
          digits.find_first_not_of("0123456789") != std::string::npos) {
        return "expected a number of tokens such as 4096 or 8k, got '" + text + "'";
      }
      text = std::to_string(std::stoull(digits) * factor);
      return {};
    },
    "N or Nk", "TOKENS");

}  // namespace headway::cmd
