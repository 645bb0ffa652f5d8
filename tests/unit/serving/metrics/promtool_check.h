// Runs `promtool check metrics` (Debian's prometheus package) on exposition text, for tests.
// Threading: one call at a time per process (the text goes through a per-process temp file).
#pragma once

#include <unistd.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>

namespace headway::test {

struct PromtoolResult {
  int exit_code = -1;
  std::string output;  // what promtool printed (problems found)
};

// nullopt when promtool is not installed.
inline std::optional<PromtoolResult> promtool_check_metrics(const std::string& text) {
  if (std::system("command -v promtool >/dev/null 2>&1") != 0) return std::nullopt;
  namespace fs = std::filesystem;
  const fs::path file =
      fs::temp_directory_path() / ("headway_metrics_" + std::to_string(::getpid()) + ".prom");
  std::ofstream(file, std::ios::binary) << text;
  const std::string command = "promtool check metrics < " + file.string() + " 2>&1";
  PromtoolResult result;
  FILE* pipe = ::popen(command.c_str(), "r");
  std::array<char, 4096> buffer{};
  size_t n;
  while ((n = std::fread(buffer.data(), 1, buffer.size(), pipe)) > 0) {
    result.output.append(buffer.data(), n);
  }
  const int status = ::pclose(pipe);
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  fs::remove(file);
  return result;
}

}  // namespace headway::test
