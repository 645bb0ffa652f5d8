#include "headway/core/input_file.h"

#include <fmt/format.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <headway/sdk/json_depth.hpp>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string_view>
#include <system_error>

#include "headway/core/error.h"

namespace headway::core {

std::string unreadable_reason(const std::filesystem::path& path, int open_errno) {
  std::error_code error;
  const std::filesystem::file_status status = std::filesystem::status(path, error);
  if (status.type() == std::filesystem::file_type::not_found) return "no such file";
  if (error) return error.message();  // e.g. a folder on the way that may not be read
  if (std::filesystem::is_directory(status)) return "a directory, not a file";
  if (!std::filesystem::is_regular_file(status)) return "not a regular file";
  return open_errno != 0 ? std::strerror(open_errno) : "cannot be read";
}

bool exists_but_not_regular(const std::filesystem::path& file) {
  std::error_code ignored;
  return std::filesystem::exists(file, ignored) && !std::filesystem::is_regular_file(file, ignored);
}

std::string read_api_key_file(const std::filesystem::path& file) {
  std::ifstream in(file);
  const int open_errno = errno;
  // A directory opens as a stream and fails only at the first read.
  if (!in || std::filesystem::is_directory(file)) {
    throw Error(fmt::format("--api-key-file {}: cannot read the file: {}", file.string(),
                            unreadable_reason(file, in ? 0 : open_errno)));
  }
  std::string line;
  std::getline(in, line);
  std::string_view key = line;
  const auto blank = [](char c) { return c == ' ' || c == '\t' || c == '\r'; };
  while (!key.empty() && blank(key.front())) key.remove_prefix(1);
  while (!key.empty() && blank(key.back())) key.remove_suffix(1);
  if (key.empty()) {
    throw Error(fmt::format("--api-key-file {}: the first line holds no key", file.string()));
  }
  return std::string(key);
}

std::string read_text_file(const std::filesystem::path& file) {
  // Only a regular file is read, checked before opening: a FIFO blocks open() until a writer comes
  // (for ever, helper-151's fuzzer), and a directory opens as a stream and fails only at the first
  // read.
  if (exists_but_not_regular(file)) {
    throw Error(fmt::format("{}: cannot open: {}", file.string(), unreadable_reason(file)));
  }
  std::ifstream in(file, std::ios::binary);
  const int open_errno = errno;
  if (!in) {
    throw Error(fmt::format("{}: cannot open: {}", file.string(),
                            unreadable_reason(file, in ? 0 : open_errno)));
  }
  std::ostringstream text;
  text << in.rdbuf();
  return std::move(text).str();
}

nlohmann::json read_json_file(const std::filesystem::path& file) {
  const std::string text = read_text_file(file);
  // Before parsing: reading a value that nests a million levels (an error message's dump(), a
  // copy) would overflow the stack.
  if (const std::string problem = sdk::json_depth_problem(text); !problem.empty()) {
    throw Error(fmt::format("{}: invalid JSON: {}", file.string(), problem));
  }
  try {
    return nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    // Not only parse_error: a number past a double's range (1e400) is out_of_range.
    throw Error(fmt::format("{}: invalid JSON: {}", file.string(), e.what()));
  }
}

}  // namespace headway::core
