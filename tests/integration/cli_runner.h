// Runs the `headway` binary (HEADWAY_CLI), or another of the project's programs, as a user would,
// capturing exit code, stdout and stderr.
// Threading: one call at a time per process (stderr goes through a per-process temp file).
#pragma once

#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

namespace headway::test {

struct CliRun {
  int exit_code;
  std::string out;
  std::string err;
};

inline CliRun run_program(const std::string& program, const std::string& args) {
  namespace fs = std::filesystem;
  const fs::path err_file =
      fs::temp_directory_path() / ("headway_cli_stderr_" + std::to_string(::getpid()));
  const std::string command = program + " " + args + " 2>" + err_file.string();
  CliRun result{};
  FILE* pipe = ::popen(command.c_str(), "r");
  std::array<char, 4096> buffer{};
  size_t n;
  while ((n = std::fread(buffer.data(), 1, buffer.size(), pipe)) > 0) {
    result.out.append(buffer.data(), n);
  }
  const int status = ::pclose(pipe);
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  std::ifstream in(err_file);
  result.err.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  fs::remove(err_file);
  return result;
}

inline CliRun run_cli(const std::string& args) { return run_program(HEADWAY_CLI, args); }

}  // namespace headway::test
